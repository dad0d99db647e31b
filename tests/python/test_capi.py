"""The package's ctypes layer over libmemcoord_capi.so, on host memory: allocation, statistics under memcoord's
and PyTorch's names, empty_cache, snapshots, and the errors a caller gets."""

import ctypes
import ctypes.util
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import unittest

from support import MIB, require

import memcoord
from memcoord import _capi


class LibraryTest(unittest.TestCase):
    def test_library_is_found_and_initializes(self):
        self.assertTrue(os.path.isfile(memcoord.library_path()), memcoord.library_path())
        memcoord.init()
        memcoord.init()  # idempotent
        self.assertGreaterEqual(memcoord.step_count(), 0)

    def test_missing_function_names_itself_and_the_library(self):
        libc = _capi.Library(ctypes.util.find_library("c") or "libc.so.6")
        with self.assertRaises(memcoord.MissingSymbolError) as caught:
            libc.memcoord_init()
        self.assertIn("memcoord_init", str(caught.exception))
        self.assertIn("libc", str(caught.exception))

    def test_unknown_function_is_an_attribute_error(self):
        with self.assertRaises(AttributeError):
            _capi.library().function("memcoord_no_such_function")

    def test_bad_library_path_says_what_is_accepted(self):
        old = os.environ.get("MEMCOORD_CAPI_LIB")
        os.environ["MEMCOORD_CAPI_LIB"] = "/nonexistent/libmemcoord_capi.so"
        try:
            with self.assertRaises(FileNotFoundError) as caught:
                _capi.find_library()
            self.assertIn("MEMCOORD_CAPI_LIB=/nonexistent", str(caught.exception))
        finally:
            if old is None:
                del os.environ["MEMCOORD_CAPI_LIB"]
            else:
                os.environ["MEMCOORD_CAPI_LIB"] = old


class AllocConfTest(unittest.TestCase):
    """MEMCOORD_ALLOC_CONF reaches the pools (here the large arena's mapping unit on the virtual backend: 30 MiB
    grows the pool on to 40 MiB, the 20 MiB step: one 40 MiB unit by default, two with large_map_unit:20MiB,
    twenty with large_map_unit:2MiB), and a bad
    conf makes init() raise naming the variable and the entry. One fresh process per conf: the worker is
    process-wide."""

    SCRIPT = ("import memcoord; memcoord.init(); p = memcoord.alloc(30 << 20); "
              "print(memcoord.stats()['backend_allocations'], repr(memcoord.initialized_alloc_conf()))")

    def run_with(self, conf):
        env = dict(os.environ, MEMCOORD_BACKEND="virtual", MEMCOORD_ALLOC_CONF=conf)
        return subprocess.run([sys.executable, "-c", self.SCRIPT], env=env, capture_output=True, text=True,
                              timeout=60)

    def test_the_conf_sets_the_pools_options(self):
        require(self, "memcoord_device_alloc", "memcoord_device_stats_get")
        for conf, maps in (("", 1), ("large_map_unit:2MiB", 20), ("thread_cache:0, large_map_unit:20MiB", 2)):
            done = self.run_with(conf)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(done.stdout.strip().split(maxsplit=1), [str(maps), repr(conf)], conf)

    def test_a_bad_conf_fails_init_naming_the_entry(self):
        done = self.run_with("large_map_unit:20MiB,expandable_segments:True")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("MemcoordError", done.stderr)
        self.assertIn("MEMCOORD_ALLOC_CONF: alloc conf entry 'expandable_segments:True': unknown key", done.stderr)
        self.assertIn("accepted keys: large_map_unit, thread_cache", done.stderr)


class InitErrorTest(unittest.TestCase):
    """A bad value in the environment fails init() with a message naming the variable the user set."""

    def setUp(self):
        names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MEMCOORD_RANK", "MEMCOORD_WORLD_SIZE", "MEMCOORD_LOCAL_RANK")
        self.saved = {name: os.environ.get(name) for name in names}
        for name in self.saved:
            os.environ.pop(name, None)
        self.addCleanup(self.restore)
        memcoord.shutdown()  # init() reads the environment only when it makes the worker

    def restore(self):
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        memcoord.init()

    def test_a_bad_torchrun_rank_names_rank_and_leaves_no_copy(self):
        os.environ.update(RANK="abc", WORLD_SIZE="2")
        with self.assertRaises(memcoord.MemcoordError) as caught:
            memcoord.init()
        message = str(caught.exception)
        self.assertIn("RANK='abc' is not a non-negative integer", message)
        self.assertNotIn("MEMCOORD_RANK='abc'", message)
        self.assertIn("reads the launcher's RANK as MEMCOORD_RANK", message)
        self.assertEqual(caught.exception.code, _capi.INVALID_ARGUMENT)
        for copy in ("MEMCOORD_RANK", "MEMCOORD_WORLD_SIZE"):
            self.assertNotIn(copy, os.environ)
        os.environ["WORLD_SIZE"] = "x1"
        os.environ["RANK"] = "0"
        with self.assertRaises(memcoord.MemcoordError) as caught:
            memcoord.init()
        self.assertIn("WORLD_SIZE='x1'", str(caught.exception))
        self.assertNotIn("MEMCOORD_WORLD_SIZE='x1'", str(caught.exception))
        self.assertNotIn("MEMCOORD_RANK", os.environ)

    def test_good_torchrun_ranks_are_copied(self):
        os.environ.update(RANK="0", WORLD_SIZE="1")
        memcoord.init()
        self.assertEqual(os.environ.get("MEMCOORD_RANK"), "0")

    def test_a_malformed_coordinator_address_fails_init(self):
        # memcoord_init rejects what cannot be an address (it used to run unattached, saying so only at debug
        # level); init() surfaces its error.
        done = subprocess.run([sys.executable, "-c", "import memcoord; memcoord.init(); print('accepted')"],
                              env=dict(os.environ, MEMCOORD_COORDINATOR="garbage"), capture_output=True, text=True,
                              timeout=60)
        self.assertNotEqual(done.returncode, 0, done.stdout)
        self.assertIn("MemcoordError", done.stderr)
        self.assertIn("MEMCOORD_COORDINATOR 'garbage' is not a coordinator address", done.stderr)


class ArgumentCheckTest(unittest.TestCase):
    """Integers too wide for their C type were wrapped by ctypes (alloc(2**64 + 4096) gave a 4096-byte block,
    stats(2**40) read device 0): each is refused in Python, naming the argument and what is accepted."""

    def setUp(self):
        require(self, "memcoord_device_alloc", "memcoord_device_free", "memcoord_device_stats_get",
                "memcoord_empty_cache", "memcoord_record_stream", "memcoord_reset_peak_stats")
        memcoord.init()

    def assertRefused(self, error, call, *says):
        before = memcoord.stats(0)["allocations"]
        with self.assertRaises(error) as caught:
            call()
        for text in says:
            self.assertIn(text, str(caught.exception))
        self.assertEqual(memcoord.stats(0)["allocations"], before, "the library was called")
        return caught.exception

    def test_sizes(self):
        self.assertRefused(ValueError, lambda: memcoord.alloc(2**64 + 4096), "alloc: nbytes 18446744073709555712 "
                           "is out of range; accepted: an int from 1 to 2**64-1")
        self.assertRefused(ValueError, lambda: memcoord.alloc(0), "nbytes 0 is out of range")
        self.assertRefused(ValueError, lambda: memcoord.alloc(-MIB), "nbytes -1048576 is out of range")
        self.assertRefused(TypeError, lambda: memcoord.alloc("10"), "alloc: nbytes must be an integer, got '10' (str)")
        self.assertRefused(TypeError, lambda: memcoord.alloc(True), "nbytes must be an integer, got True (bool)")
        self.assertRefused(TypeError, lambda: memcoord.alloc(1.5 * MIB), "nbytes must be an integer")

    def test_devices(self):
        self.assertRefused(ValueError, lambda: memcoord.alloc(MIB, device=2**32), "alloc: device 4294967296 is out "
                           "of range; accepted: an int from -1 (the primary device) to 2**31-1")
        self.assertRefused(ValueError, lambda: memcoord.stats(2**40), "stats: device 1099511627776 is out of range")
        self.assertRefused(ValueError, lambda: memcoord.empty_cache(device=2**32 + 7),
                           "empty_cache: device 4294967303 is out of range")
        self.assertRefused(ValueError, lambda: memcoord.reset_peak_stats(-2), "reset_peak_stats: device -2")
        self.assertRefused(ValueError, lambda: memcoord.memory_stats(2**31), "memory_stats: device 2147483648")
        self.assertRefused(ValueError, lambda: memcoord.reset_accumulated_stats(2**33), "reset_accumulated_stats")
        self.assertRefused(ValueError, lambda: memcoord.snapshot(device=-5), "snapshot: device -5")
        self.assertRefused(TypeError, lambda: memcoord.stats("0"), "stats: device must be an integer, got '0'")
        if memcoord._lib().has("memcoord_record_history"):
            self.assertRefused(ValueError, lambda: memcoord.record_history(True, device=2**32),
                               "record_history: device")
            self.assertRefused(TypeError, lambda: memcoord.record_history(True, max_entries="10"),
                               "record_history: max_entries must be an integer")
            self.assertRefused(ValueError, lambda: memcoord.record_history(True, max_entries=2**64 + 5),
                               "max_entries 18446744073709551621 is out of range")
            # Not its truth value: "no" would start recording.
            self.assertRefused(TypeError, lambda: memcoord.record_history("no"),
                               "record_history(enabled='no'): accepted: True or False")
        if memcoord._lib().has("memcoord_set_memory_fraction"):
            self.assertRefused(ValueError, lambda: memcoord.set_memory_fraction(0.5, device=2**32),
                               "set_memory_fraction: device")
            self.assertRefused(TypeError, lambda: memcoord.set_memory_fraction("0.5"),
                               "set_memory_fraction: fraction must be a number, got '0.5'")
            self.assertRefused(ValueError, lambda: memcoord.memory_fraction(2**32), "memory_fraction: device")

    def test_streams_and_pointers(self):
        ptr = memcoord.alloc(MIB, device=0)
        try:
            self.assertRefused(ValueError, lambda: memcoord.alloc(MIB, stream=2**64), "alloc: stream "
                               "18446744073709551616 is out of range; accepted: an int from 0 to 2**64-1")
            self.assertRefused(ValueError, lambda: memcoord.alloc(MIB, stream=-1), "alloc: stream -1")
            self.assertRefused(ValueError, lambda: memcoord.free(ptr, device=0, stream=-1), "free: stream -1")
            self.assertRefused(ValueError, lambda: memcoord.free(ptr + 2**64, device=0), "free: ptr")
            self.assertRefused(ValueError, lambda: memcoord.record_stream(ptr, 2**64), "record_stream: stream")
            self.assertRefused(TypeError, lambda: memcoord.record_stream(ptr, None), "record_stream: stream must be")
            self.assertGreater(memcoord.stats(0)["live_blocks"], 0)  # none of those freed the block
        finally:
            memcoord.free(ptr, device=0)

    def test_integers_of_other_types_are_accepted(self):
        class Index:  # as numpy's integers: an __index__, no int subclass
            def __init__(self, value):
                self.value = value

            def __index__(self):
                return self.value

        ptr = memcoord.alloc(Index(MIB), device=Index(0), stream=Index(0))
        memcoord.free(Index(ptr), device=Index(0))
        self.assertEqual(memcoord.stats(Index(0))["device"], 0)


class AbortInfoTest(unittest.TestCase):
    def test_none_before_init_and_when_no_abort_came(self):
        memcoord.shutdown()
        self.addCleanup(memcoord.init)
        self.assertIsNone(memcoord.abort_info())  # no worker, no group to abort: not an error
        memcoord.init()
        self.assertIsNone(memcoord.abort_info())


class EnableWithoutTorchTest(unittest.TestCase):
    def test_enable_names_torch_when_it_is_missing(self):
        try:
            import torch  # noqa: F401

            self.skipTest("torch is installed here")
        except ImportError:
            pass
        with self.assertRaises(ImportError) as caught:
            memcoord.enable()
        self.assertIn("needs torch", str(caught.exception))
        self.assertFalse(memcoord.is_enabled())


class AllocationTest(unittest.TestCase):
    def setUp(self):
        require(self, "memcoord_device_alloc", "memcoord_device_free", "memcoord_device_stats_get")
        memcoord.init()

    def test_blocks_are_real_memory_and_counted(self):
        before = memcoord.stats()
        blocks = [memcoord.alloc(MIB * (i + 1)) for i in range(3)]
        for i, ptr in enumerate(blocks):
            ctypes.memset(ptr, 0x41 + i, MIB * (i + 1))
        for i, ptr in enumerate(blocks):
            self.assertEqual(ctypes.string_at(ptr + MIB * (i + 1) - 1, 1), bytes([0x41 + i]))
        during = memcoord.stats()
        self.assertGreaterEqual(during["allocated_bytes"] - before["allocated_bytes"], 6 * MIB)
        self.assertEqual(during["live_blocks"] - before["live_blocks"], 3)
        self.assertEqual(during["allocations"] - before["allocations"], 3)
        self.assertGreaterEqual(during["reserved_bytes"], during["allocated_bytes"])
        for ptr in blocks:
            memcoord.free(ptr)
        after = memcoord.stats()
        self.assertEqual(after["allocated_bytes"], before["allocated_bytes"])
        self.assertEqual(after["frees"] - before["frees"], 3)
        self.assertGreaterEqual(after["peak_allocated_bytes"], during["allocated_bytes"])

    def test_freeing_an_unknown_pointer_is_not_found(self):
        with self.assertRaises(memcoord.MemcoordError) as caught:
            memcoord.free(0x1000)
        self.assertEqual(caught.exception.code, _capi.NOT_FOUND)
        self.assertTrue(caught.exception.message)
        # The code's name once, not again at the start of the library's message.
        self.assertEqual(str(caught.exception).count("NOT_FOUND"), 1, str(caught.exception))
        self.assertIn("not a live block", str(caught.exception))

    def test_non_positive_size_is_refused_before_the_library(self):
        with self.assertRaises(ValueError):
            memcoord.alloc(0)

    def test_reset_peak_brings_peak_to_current(self):
        require(self, "memcoord_reset_peak_stats")
        ptr = memcoord.alloc(8 * MIB)
        memcoord.free(ptr)
        self.assertGreater(memcoord.stats()["peak_allocated_bytes"], memcoord.stats()["allocated_bytes"])
        memcoord.reset_peak_stats()  # the pool resets its peaks itself (CachingPool::reset_peak_stats)
        s = memcoord.stats()
        self.assertEqual(s["peak_allocated_bytes"], s["allocated_bytes"])
        self.assertEqual(s["peak_reserved_bytes"], s["reserved_bytes"])

    def test_block_count_peaks_are_kept_and_reset(self):
        # The peak of live blocks was never kept: memory_summary's count peaks read 0 with blocks live.
        require(self, "memcoord_reset_peak_stats")
        memcoord.reset_peak_stats()
        before = memcoord.stats()
        self.assertEqual(before["peak_live_blocks"], before["live_blocks"])
        for _ in range(2):  # the second round comes from the thread cache (64 KiB blocks are kept there)
            blocks = [memcoord.alloc(64 << 10) for _ in range(3)]
            during = memcoord.stats()
            self.assertEqual(during["live_blocks"], before["live_blocks"] + 3)
            self.assertEqual(during["peak_live_blocks"], before["live_blocks"] + 3)
            for ptr in blocks:
                memcoord.free(ptr)
        after = memcoord.stats()
        self.assertEqual(after["live_blocks"], before["live_blocks"])
        self.assertEqual(after["peak_live_blocks"], before["live_blocks"] + 3)  # cached blocks are not live
        flat = memcoord.memory_stats()
        self.assertEqual(flat["allocation.all.peak"], before["live_blocks"] + 3)
        self.assertEqual(flat["active.all.peak"], before["live_blocks"] + 3)
        self.assertGreaterEqual(flat["segment.all.peak"], flat["segment.all.current"])
        memcoord.reset_peak_stats()
        reset = memcoord.stats()
        self.assertEqual(reset["peak_live_blocks"], reset["live_blocks"])

    def test_a_struct_of_an_earlier_version_gets_its_fields_only(self):
        # Version 4 added peak_live_blocks at the end; a caller of version 3 gets no byte past its struct.
        self.assertEqual(ctypes.sizeof(_capi.DeviceStats), 272)  # MEMCOORD_DEVICE_STATS_V7_SIZE
        self.assertEqual(_capi.DeviceStats.other_thread_frees.offset, 264)  # MEMCOORD_DEVICE_STATS_V6_SIZE
        self.assertEqual(_capi.DeviceStats.peak_sums.offset, 256)  # MEMCOORD_DEVICE_STATS_V5_SIZE
        self.assertEqual(_capi.DeviceStats.peak_live_blocks.offset, 232)  # MEMCOORD_DEVICE_STATS_V3_SIZE
        self.assertEqual(_capi.DeviceStats.allocated_bytes_total.offset, 240)  # MEMCOORD_DEVICE_STATS_V4_SIZE
        blocks = [memcoord.alloc(MIB) for _ in range(2)]
        try:
            out = _capi.DeviceStats()
            out.struct_size = 232
            out.peak_live_blocks = 0xDEAD
            _capi.library().call("memcoord_device_stats_get", -1, ctypes.byref(out))
        finally:
            for ptr in blocks:
                memcoord.free(ptr)
        self.assertEqual(out.peak_live_blocks, 0xDEAD)
        self.assertGreaterEqual(out.live_blocks, 2)
        flat = memcoord._stats.flatten(memcoord._stats.torch_stats(0, dict(out.as_dict(), peak_live_blocks=0)))
        self.assertEqual(flat["allocation.all.peak"], out.live_blocks)  # an older library's: the current count

    def test_a_version_4_struct_gets_no_byte_totals(self):
        # Version 5 added allocated_bytes_total and freed_bytes_total; a caller of version 4 gets neither, and
        # reads 0 bytes allocated and freed in all (as memory_stats did before).
        memcoord.free(memcoord.alloc(MIB))
        out = _capi.DeviceStats()
        out.struct_size = 240
        out.allocated_bytes_total = out.freed_bytes_total = 0xDEAD
        _capi.library().call("memcoord_device_stats_get", -1, ctypes.byref(out))
        self.assertEqual((out.allocated_bytes_total, out.freed_bytes_total), (0xDEAD, 0xDEAD))
        self.assertGreater(out.peak_live_blocks, 0)
        raw = out.as_dict()
        del raw["allocated_bytes_total"], raw["freed_bytes_total"]
        flat = memcoord._stats.flatten(memcoord._stats.torch_stats(0, raw))
        self.assertEqual((flat["allocated_bytes.all.allocated"], flat["allocated_bytes.all.freed"]), (0, 0))

    def stats_of_an_earlier_version(self, struct_size, later_field):
        """memcoord_device_stats_get into a struct of `struct_size` bytes: `later_field`, past it, keeps the marker
        it held (the library writes no byte past struct_size)."""
        out = _capi.DeviceStats()
        out.struct_size = struct_size
        setattr(out, later_field, 0xDEAD)
        _capi.library().call("memcoord_device_stats_get", -1, ctypes.byref(out))
        self.assertEqual(getattr(out, later_field), 0xDEAD)
        return out

    def test_peak_sums_count_and_a_version_5_struct_gets_none(self):
        # Version 6 added peak_sums: the pool's exact sums of its thread caches for the peaks. One thread sums at
        # each new peak only; the memcoord part of memory_stats carries it.
        memcoord.reset_peak_stats()
        before = memcoord.stats()["peak_sums"]
        blocks = [memcoord.alloc(MIB) for _ in range(3)]  # above the reset peak from the first: a sum each
        try:
            self.assertEqual(memcoord.stats()["peak_sums"], before + 3)
            out = self.stats_of_an_earlier_version(256, "peak_sums")
            self.assertGreaterEqual(out.live_blocks, 3)
        finally:
            for ptr in blocks:
                memcoord.free(ptr)
        nested = memcoord._stats.torch_stats(0, memcoord.stats())
        self.assertGreaterEqual(nested["memcoord"]["peak_sums"], 3)

    def test_frees_of_another_threads_blocks_count_and_a_version_6_struct_gets_none(self):
        # Version 7 added other_thread_frees: a backward thread freeing the forward pass's blocks takes the thread
        # caches' slow path, and the count says how often. The memcoord part of memory_stats carries it.
        before = memcoord.stats()["other_thread_frees"]
        blocks = [memcoord.alloc(MIB) for _ in range(3)]
        own = memcoord.alloc(MIB)
        memcoord.free(own)  # this thread's own block: not counted
        freer = threading.Thread(target=lambda: [memcoord.free(ptr) for ptr in blocks])
        freer.start()
        freer.join()
        self.assertEqual(memcoord.stats()["other_thread_frees"], before + 3)
        self.stats_of_an_earlier_version(264, "other_thread_frees")
        nested = memcoord._stats.torch_stats(0, memcoord.stats())
        self.assertEqual(nested["memcoord"]["other_thread_frees"], before + 3)
        self.assertEqual(memcoord._stats.flatten(nested)["memcoord.other_thread_frees"], before + 3)

    def test_empty_cache_returns_cached_memory(self):
        require(self, "memcoord_empty_cache")
        ptr = memcoord.alloc(16 * MIB)
        memcoord.free(ptr)
        cached = memcoord.stats()
        self.assertGreater(cached["reserved_bytes"], cached["allocated_bytes"])
        released = memcoord.empty_cache()
        trimmed = memcoord.stats()
        self.assertGreaterEqual(released, 16 * MIB)
        self.assertEqual(trimmed["reserved_bytes"], cached["reserved_bytes"] - released)
        self.assertLess(trimmed["reserved_bytes"], cached["reserved_bytes"])

    def test_cache_info_answers_through_the_ctypes_signature(self):
        # What the shim's cacheInfo asks (the larger of the device's free memory and the largest cached
        # block); the C++ test CAbi.CacheInfo... shows the cached block winning on a nearly full device.
        require(self, "memcoord_cache_info")
        lib = _capi.library()
        ptr = memcoord.alloc(64 * MIB)
        memcoord.free(ptr)
        largest = ctypes.c_uint64(0)
        lib.call("memcoord_cache_info", 0, ctypes.byref(largest))
        self.assertGreaterEqual(largest.value, 64 * MIB)
        with self.assertRaises(memcoord.MemcoordError) as caught:
            lib.call("memcoord_cache_info", 9, ctypes.byref(largest))
        self.assertEqual(caught.exception.code, _capi.INVALID_ARGUMENT)
        self.assertIn("device 9 is out of range", str(caught.exception))

    def test_a_memory_fraction_caps_the_default_pool(self):
        # torch.cuda.set_per_process_memory_fraction's path under memcoord.enable(): a cap of 64 MiB of the
        # device (host memory here) takes one 48 MiB block and refuses a second as out of memory; a cap below
        # what is live is refused with the reason; 1 lifts it. CAbi.AMemoryFraction... covers the rest.
        require(self, "memcoord_set_memory_fraction")
        total = memcoord.stats()["device_total_bytes"]
        self.assertGreater(total, 256 * MIB)
        self.assertEqual(memcoord.memory_fraction(), 1.0)
        memcoord.empty_cache()
        live = memcoord.stats()["allocated_bytes"]
        fraction = (live + 64 * MIB) / total
        memcoord.set_memory_fraction(fraction)
        ptr = None
        try:
            self.assertAlmostEqual(memcoord.memory_fraction(), fraction, places=6)
            ptr = memcoord.alloc(48 * MIB)
            with self.assertRaises(memcoord.MemcoordError) as caught:
                memcoord.alloc(48 * MIB)
            self.assertEqual(caught.exception.code, _capi.RESOURCE_EXHAUSTED)
            with self.assertRaises(memcoord.MemcoordError) as caught:
                memcoord.set_memory_fraction((live + 16 * MIB) / total)
            self.assertEqual(caught.exception.code, _capi.FAILED_PRECONDITION)
            self.assertIn("below the", str(caught.exception))
            for bad in (0.0, -1.0, 1.5, float("nan")):
                with self.assertRaises(memcoord.MemcoordError) as caught:
                    memcoord.set_memory_fraction(bad)
                self.assertEqual(caught.exception.code, _capi.INVALID_ARGUMENT)
                self.assertIn("accepted: more than 0 and at most 1", str(caught.exception))
        finally:
            if ptr is not None:
                memcoord.free(ptr)
            memcoord.set_memory_fraction(1.0)
        self.assertEqual(memcoord.memory_fraction(), 1.0)

    def test_record_stream_on_a_live_block(self):
        require(self, "memcoord_record_stream")
        ptr = memcoord.alloc(MIB)
        memcoord.record_stream(ptr, 0)
        memcoord.free(ptr)
        with self.assertRaises(memcoord.MemcoordError) as caught:
            memcoord.record_stream(0x2000, 0)
        self.assertEqual(caught.exception.code, _capi.NOT_FOUND)


class TorchNamesTest(unittest.TestCase):
    """memcoord.memory_stats(): PyTorch's keys, with memcoord's figures."""

    # Every key torch.cuda.memory_summary reads (torch/cuda/memory.py).
    SUMMARY_KEYS = ["num_ooms", "num_alloc_retries"] + [
        f"{metric}.{pool}.{field}"
        for metric in ("allocated_bytes", "active_bytes", "requested_bytes", "reserved_bytes",
                       "inactive_split_bytes", "allocation", "active", "segment", "inactive_split")
        for pool in ("all", "large_pool", "small_pool")
        for field in ("current", "peak", "allocated", "freed")
    ] + [f"{m}.{f}" for m in ("oversize_allocations", "oversize_segments")
         for f in ("current", "peak", "allocated", "freed")]

    def setUp(self):
        require(self, "memcoord_device_stats_get", "memcoord_device_alloc")
        memcoord.init()

    def test_keys_and_values(self):
        ptr = memcoord.alloc(4 * MIB)
        try:
            flat = memcoord.memory_stats()
            raw = memcoord.stats()
        finally:
            memcoord.free(ptr)
        for key in self.SUMMARY_KEYS:
            self.assertIn(key, flat)
        self.assertEqual(flat["allocated_bytes.all.current"], raw["allocated_bytes"])
        self.assertEqual(flat["allocated_bytes.all.peak"], raw["peak_allocated_bytes"])
        self.assertEqual(flat["reserved_bytes.all.current"], raw["reserved_bytes"])
        self.assertEqual(flat["reserved_bytes.all.peak"], raw["peak_reserved_bytes"])
        self.assertEqual(flat["num_ooms"], raw["ooms"])
        self.assertEqual(flat["memcoord.largest_free_bytes"], raw["largest_free_bytes"])
        self.assertGreaterEqual(flat["allocated_bytes.all.current"], 4 * MIB)

    def test_reset_accumulated_baselines_end_with_the_worker(self):
        # A baseline of the worker shut down would hide the next worker's counts (it starts from 0).
        for _ in range(3):
            memcoord.free(memcoord.alloc(MIB))
        memcoord.reset_accumulated_stats()
        memcoord.shutdown()
        memcoord.init()
        memcoord.free(memcoord.alloc(MIB))
        flat = memcoord.memory_stats()
        self.assertEqual(flat["allocation.all.allocated"], 1)
        self.assertEqual(flat["allocation.all.freed"], 1)

    def test_bytes_allocated_and_freed_in_all_count_thread_cache_hits(self):
        # The default pool keeps a thread cache: the second and third 1 MiB pairs are hits there, and the
        # frees before them went into the cache, not the pool. Users see three of each all the same.
        memcoord.reset_accumulated_stats()
        before = memcoord.memory_stats()
        self.assertEqual((before["allocated_bytes.all.allocated"], before["allocated_bytes.all.freed"]), (0, 0))
        for _ in range(3):
            memcoord.free(memcoord.alloc(MIB))
        held = memcoord.alloc(2 * MIB)
        flat = memcoord.memory_stats()
        self.assertGreater(memcoord.stats()["cache_hits"], 0)
        self.assertEqual(flat["allocated_bytes.all.allocated"], 5 * MIB)
        self.assertEqual(flat["allocated_bytes.all.freed"], 3 * MIB)
        self.assertEqual(flat["allocated_bytes.all.allocated"] - flat["allocated_bytes.all.freed"],
                         flat["allocated_bytes.all.current"] - before["allocated_bytes.all.current"])
        memcoord.free(held)
        memcoord.empty_cache()  # the cache's blocks go back to the pool: no second count of their frees
        flat = memcoord.memory_stats()
        self.assertEqual(flat["allocated_bytes.all.freed"], 5 * MIB)

    def test_reset_accumulated_restarts_counts(self):
        memcoord.free(memcoord.alloc(MIB))
        self.assertGreater(memcoord.memory_stats()["allocation.all.allocated"], 0)
        memcoord.reset_accumulated_stats()
        self.assertEqual(memcoord.memory_stats()["allocation.all.allocated"], 0)
        memcoord.free(memcoord.alloc(MIB))
        flat = memcoord.memory_stats()
        self.assertEqual(flat["allocation.all.allocated"], 1)
        self.assertEqual(flat["allocation.all.freed"], 1)


class SnapshotTest(unittest.TestCase):
    def setUp(self):
        require(self, "memcoord_snapshot_json", "memcoord_free_string", "memcoord_device_alloc")
        memcoord.init()

    def test_record_history_fills_device_traces(self):
        require(self, "memcoord_record_history")
        memcoord.record_history(True, max_entries=4, device=0)
        try:
            ptrs = []
            for _ in range(3):
                ptrs.append(memcoord.alloc(2 * MIB))
                memcoord.free(ptrs[-1])
            traces = memcoord.snapshot(device=0)["device_traces"][0]
        finally:
            memcoord.record_history(False, device=0)
        # The last four of six events, oldest first, in PyTorch's TraceEntry shape.
        self.assertEqual([(e["action"], e["addr"], e["size"]) for e in traces],
                         [("alloc", ptrs[1], 2 * MIB), ("free_completed", ptrs[1], 2 * MIB),
                          ("alloc", ptrs[2], 2 * MIB), ("free_completed", ptrs[2], 2 * MIB)])
        self.assertTrue(all(e["frames"] == [] and e["time_us"] > 0 for e in traces))
        with self.assertRaises(ValueError):
            memcoord.record_history(True, max_entries=0)

    def test_snapshot_path_must_be_a_file_name(self):
        # snapshot(path=5) handed 5 to open(): the pickle went to file descriptor 5, which was then closed.
        read_end, write_end = os.pipe()
        try:
            with self.assertRaises(TypeError) as caught:
                memcoord.snapshot(path=write_end)
            self.assertIn("str, bytes or os.PathLike", str(caught.exception))
            self.assertIn("snapshot", str(caught.exception))
            os.fstat(write_end)  # still open
            os.set_blocking(read_end, False)
            with self.assertRaises(BlockingIOError):  # and nothing written to it
                os.read(read_end, 1)
        finally:
            os.close(read_end)
            os.close(write_end)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.fsencode(os.path.join(tmp, "snapshot.pickle"))  # bytes, as open() takes them
            memcoord.snapshot(path)
            with open(path, "rb") as f:
                self.assertIn("segments", pickle.load(f))

    def test_snapshot_pickle_has_our_block(self):
        ptr = memcoord.alloc(3 * MIB)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "snapshot.pickle")
                memcoord.snapshot(path)
                with open(path, "rb") as f:
                    snap = pickle.load(f)
        finally:
            memcoord.free(ptr)
        self.assertIn("segments", snap)
        self.assertIsInstance(snap["device_traces"], list)
        pools = snap["memcoord"]["pools"]
        self.assertTrue(pools, "the snapshot lists no pool")
        self.assertGreaterEqual(sum(p["stats"].get("allocated_bytes", 0) for p in pools), 3 * MIB)
        self.assertTrue(all(p["segments_available"] for p in pools), pools)
        live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
        self.assertTrue(any(b["address"] == ptr and b["size"] >= 3 * MIB for b in live), live[:5])
        for segment in snap["segments"]:
            self.assertEqual(segment["total_size"] >= segment["allocated_size"], True)
            self.assertIn(segment["segment_type"], ("small", "large"))


if __name__ == "__main__":
    unittest.main()
