"""memcoord.enable()'s own logic, run against a stand-in for torch (a module with the few attributes enable()
touches), since torch is not installed here: the refusal after CUDA's initialisation, the allocator handed to
PyTorch (library path and symbol names), and torch._C's statistics, snapshot and empty-cache entry points
answering with memcoord's figures. The real thing runs on a GPU: examples/pytorch/integration_checks.py."""

import os
import sys
import types
import unittest
import warnings

from support import MIB, require

import memcoord
from memcoord import _capi, _torch


def fake_torch(initialized=False):
    torch = types.ModuleType("torch")
    calls = {"changed": []}

    class PluggableAllocator:
        def __init__(self, path, alloc_name, free_name):
            self.args = (path, alloc_name, free_name)

    class CUDAGraph:  # torch.cuda.CUDAGraph: torch.cuda.graph(...) calls capture_begin on entering
        def capture_begin(self, pool=None, capture_error_mode="global"):
            calls.setdefault("capture_begin", []).append(pool)
            if calls.get("begin"):  # the shim's begin hook, then whatever PyTorch does after it
                calls["begin"]()

        def capture_end(self):  # raises as cudaStreamEndCapture's failure does when calls["end_fails"] is set
            calls.setdefault("capture_end", []).append(self)
            if calls.get("end"):  # the shim's end hook, when PyTorch reaches it
                calls["end"]()
            if calls.get("end_fails"):
                raise RuntimeError("CUDA error: operation failed due to a previous error during capture")

    class graph:  # torch.cuda.graph, the context manager around a capture
        def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
            self.cuda_graph = cuda_graph

    cuda = types.SimpleNamespace(
        CUDAGraph=CUDAGraph,
        graph=graph,
        is_available=lambda: True,
        is_initialized=lambda: initialized,
        current_device=lambda: 0,
        memory=types.SimpleNamespace(
            CUDAPluggableAllocator=PluggableAllocator,
            change_current_allocator=lambda a: calls["changed"].append(a),
            get_allocator_backend=lambda: "native",
        ),
    )
    torch.cuda = cuda
    torch._C = types.SimpleNamespace(
        _cuda_memoryStats=None, _cuda_resetPeakMemoryStats=None, _cuda_resetAccumulatedMemoryStats=None,
        _cuda_memorySnapshot=None, _cuda_emptyCache=None, _cuda_record_memory_history=None,
        _cuda_setMemoryFraction=None, _cuda_getMemoryFraction=None)

    class Tensor:
        def record_stream(self, stream):
            calls.setdefault("original_record_stream", []).append(stream)

    torch.Tensor = Tensor
    return torch, calls


class EnableTest(unittest.TestCase):
    def setUp(self):
        require(self, "memcoord_device_alloc", "memcoord_device_stats_get", "memcoord_empty_cache",
                "memcoord_snapshot_json")
        self.saved = sys.modules.get("torch")
        self.addCleanup(self.restore)
        _torch._state.update({"enabled": False, "shim": None, "hooks": {}, "patched": []})
        # These tests run on the host backend (support.py), which enable() refuses for a real torch.
        _torch._allow_non_device_backends = True

    def restore(self):
        if self.saved is None:
            sys.modules.pop("torch", None)
        else:
            sys.modules["torch"] = self.saved
        _torch._state.update({"enabled": False, "shim": None, "hooks": {}, "patched": []})
        _torch._allow_non_device_backends = False

    def test_a_backend_whose_memory_is_not_the_gpus_is_refused(self):
        _torch._allow_non_device_backends = False
        memcoord.shutdown()
        sys.modules["torch"], calls = fake_torch()
        for option, expected in ((None, "MEMCOORD_BACKEND in the environment is 'host'"),
                                 ("virtual", "backend='virtual' is 'virtual'")):
            with self.subTest(backend=option):
                with self.assertRaises(RuntimeError) as caught:
                    memcoord.enable(shim="off", watch_aborts=False, patch_memory_api=False, backend=option)
                self.assertIn(expected, str(caught.exception))
                self.assertIn("whose memory is not the GPU's", str(caught.exception))
                self.assertIn("needs 'cuda-vmm', 'cuda' or 'auto'", str(caught.exception))
                self.assertEqual(os.environ["MEMCOORD_BACKEND"], "host")  # a refusal changes nothing
                self.assertEqual(memcoord.step_count(), -1)  # no worker made
        # A worker made on the host backend before enable() is refused the same way.
        memcoord.init()
        with self.assertRaises(RuntimeError) as caught:
            memcoord.enable(shim="off", watch_aborts=False, patch_memory_api=False)
        self.assertIn("the existing worker's MEMCOORD_BACKEND is 'host'", str(caught.exception))
        self.assertEqual(calls["changed"], [])
        self.assertFalse(memcoord.is_enabled())

    def test_options_of_the_wrong_type_are_named(self):
        sys.modules["torch"], _ = fake_torch()
        for option, value, accepted in (("alloc_conf", {"thread_cache": 0}, "a str such as 'thread_cache:0"),
                                        ("coordinator", ("127.0.0.1", 9), "a str 'HOST:PORT' or None, not tuple"),
                                        ("backend", 1, "a str: 'cuda-vmm', 'cuda' or 'auto' or None, not int")):
            with self.subTest(option=option):
                with self.assertRaises(TypeError) as caught:
                    memcoord.enable(shim="off", watch_aborts=False, **{option: value})
                self.assertIn(f"memcoord.enable({option}={value!r})", str(caught.exception))
                self.assertIn(accepted, str(caught.exception))
        self.assertFalse(memcoord.is_enabled())

    def test_an_enable_that_fails_leaves_the_environment_as_it_was(self):
        memcoord.shutdown()
        self.addCleanup(os.environ.pop, "MEMCOORD_ALLOC_CONF", None)
        os.environ.pop("MEMCOORD_ALLOC_CONF", None)
        sys.modules["torch"], _ = fake_torch()
        with self.assertRaises(memcoord.MemcoordError) as caught:
            memcoord.enable(shim="off", watch_aborts=False, patch_memory_api=False, alloc_conf="bogus:1")
        self.assertIn("bogus", str(caught.exception))
        self.assertNotIn("MEMCOORD_ALLOC_CONF", os.environ)
        self.assertFalse(memcoord.is_enabled())
        memcoord.init()  # the refused conf is not read again
        self.assertEqual(memcoord.initialized_alloc_conf(), "")

    def test_a_second_enable_with_other_options_is_refused(self):
        memcoord.shutdown()
        self.addCleanup(os.environ.pop, "MEMCOORD_ALLOC_CONF", None)
        sys.modules["torch"], _ = fake_torch()
        details = memcoord.enable(shim="off", watch_aborts=False, patch_memory_api=False,
                                  alloc_conf="thread_cache:0")
        for options, named in (({"alloc_conf": "thread_cache:1MiB"}, "alloc_conf='thread_cache:0'"),
                               ({"watch_aborts": True}, "watch_aborts=False"),
                               ({"patch_memory_api": True}, "patch_memory_api=False"),
                               ({"shim": "auto"}, "shim='off'"),
                               ({"coordinator": "127.0.0.1:9"}, "coordinator=''")):
            with self.subTest(options=options):
                with self.assertRaises(RuntimeError) as caught:
                    memcoord.enable(**options)
                self.assertIn("memcoord is PyTorch's allocator already, enabled with " + named, str(caught.exception))
        # The first call's options, or none, are no conflict.
        self.assertEqual(memcoord.enable(), details)
        self.assertEqual(memcoord.enable(shim="off", watch_aborts=False, alloc_conf="thread_cache:0", backend="host"),
                         details)
        self.assertEqual(memcoord.initialized_alloc_conf(), "thread_cache:0")

    def test_refuses_after_cuda_was_initialised(self):
        sys.modules["torch"], calls = fake_torch(initialized=True)
        with self.assertRaises(RuntimeError) as caught:
            memcoord.enable(shim="off", watch_aborts=False)
        self.assertIn("before CUDA is initialised", str(caught.exception))
        self.assertIn("'native'", str(caught.exception))
        self.assertEqual(calls["changed"], [])
        self.assertFalse(memcoord.is_enabled())

    def test_bad_shim_option(self):
        sys.modules["torch"], _ = fake_torch()
        with self.assertRaises(ValueError) as caught:
            memcoord.enable(shim="maybe")
        self.assertIn("'auto', 'required', 'off'", str(caught.exception))

    def test_alloc_conf_is_read_by_the_worker_enable_makes(self):
        self.addCleanup(os.environ.pop, "MEMCOORD_ALLOC_CONF", None)
        memcoord.shutdown()  # enable() then makes the worker, with this conf
        sys.modules["torch"], _ = fake_torch()
        memcoord.enable(shim="off", watch_aborts=False, patch_memory_api=False, alloc_conf="thread_cache:0")
        self.assertEqual(os.environ["MEMCOORD_ALLOC_CONF"], "thread_cache:0")
        self.assertEqual(memcoord.initialized_alloc_conf(), "thread_cache:0")
        # A worker made with one conf cannot take another: an error, not a setting silently ignored.
        _torch._state["enabled"] = False
        with self.assertRaises(RuntimeError) as caught:
            memcoord.enable(shim="off", watch_aborts=False, patch_memory_api=False, alloc_conf="thread_cache:1MiB")
        self.assertIn("alloc_conf='thread_cache:1MiB'", str(caught.exception))
        self.assertIn("MEMCOORD_ALLOC_CONF='thread_cache:0'", str(caught.exception))
        memcoord.shutdown()
        self.assertIsNone(memcoord.initialized_alloc_conf())
        # A worker the C ABI made by itself (as PyTorch's first allocation through the hooks would) read the
        # environment: another conf is refused the same way.
        os.environ["MEMCOORD_ALLOC_CONF"] = "thread_cache:512KiB"
        _capi.library().call("memcoord_init")
        _torch._state["enabled"] = False
        with self.assertRaises(RuntimeError) as caught:
            memcoord.enable(shim="off", watch_aborts=False, patch_memory_api=False, alloc_conf="thread_cache:0")
        self.assertIn("MEMCOORD_ALLOC_CONF='thread_cache:512KiB'", str(caught.exception))
        memcoord.shutdown()

    def test_a_bad_shim_variable_is_named(self):
        sys.modules["torch"], _ = fake_torch()
        os.environ["MEMCOORD_TORCH_SHIM"] = "Off"
        self.addCleanup(os.environ.pop, "MEMCOORD_TORCH_SHIM", None)
        with self.assertRaises(ValueError) as caught:
            memcoord.enable(watch_aborts=False)
        self.assertIn("MEMCOORD_TORCH_SHIM='Off' in the environment; accepted: auto, required, off",
                      str(caught.exception))
        self.assertFalse(memcoord.is_enabled())

    def test_coordinator_and_backend_of_an_existing_worker_are_not_silently_ignored(self):
        memcoord.shutdown()
        memcoord.init()  # standalone, MEMCOORD_BACKEND=host (support.py)
        sys.modules["torch"], calls = fake_torch()
        with self.assertRaises(RuntimeError) as caught:
            memcoord.enable(shim="off", watch_aborts=False, patch_memory_api=False, coordinator="127.0.0.1:9")
        self.assertIn("enable(coordinator='127.0.0.1:9'): the worker already exists, made with "
                      "MEMCOORD_COORDINATOR=''", str(caught.exception))
        self.assertIn("call memcoord.shutdown() first", str(caught.exception))
        self.assertNotIn("MEMCOORD_COORDINATOR", os.environ)  # a refusal changes nothing
        with self.assertRaises(RuntimeError) as caught:
            memcoord.enable(shim="off", watch_aborts=False, patch_memory_api=False, backend="virtual")
        self.assertIn("enable(backend='virtual'): the worker already exists, made with MEMCOORD_BACKEND='host'",
                      str(caught.exception))
        self.assertEqual(os.environ["MEMCOORD_BACKEND"], "host")
        self.assertEqual(calls["changed"], [])
        self.assertFalse(memcoord.is_enabled())
        # The values the worker was made with are no conflict.
        memcoord.enable(shim="off", watch_aborts=False, patch_memory_api=False, backend="host")
        self.assertTrue(memcoord.is_enabled())

    def test_shutdown_is_refused_while_memcoord_is_pytorchs_allocator(self):
        sys.modules["torch"], _ = fake_torch()
        memcoord.enable(shim="off", watch_aborts=False, patch_memory_api=False)
        live = memcoord.alloc(MIB, device=0)  # a tensor's memory
        with self.assertRaises(RuntimeError) as caught:
            memcoord.shutdown()
        self.assertIn("memcoord is PyTorch's CUDA allocator in this process", str(caught.exception))
        self.assertIn("would free their memory under them", str(caught.exception))
        self.assertGreaterEqual(memcoord.step_count(), 0)  # the worker lives on
        memcoord.free(live, device=0)  # and so does the block
        # At exit the process still detaches (see _shutdown_at_exit for why it shuts down even when enabled).
        memcoord._shutdown_at_exit()
        self.assertEqual(memcoord.step_count(), -1)
        memcoord.init()

    def test_graph_capture_without_the_shim_raises_saying_why(self):
        torch, calls = fake_torch()
        sys.modules["torch"] = torch
        original = torch.cuda.CUDAGraph.capture_begin
        details = memcoord.enable(shim="off", watch_aborts=False, patch_memory_api=False)
        self.assertIn("CUDAGraph.capture_begin", details["patched"])
        self.assertFalse(details["hooks"]["graph_pools"])
        with self.assertRaises(RuntimeError) as caught:
            torch.cuda.CUDAGraph().capture_begin()
        self.assertIn("CUDA graph capture under memcoord needs memcoord's C++ shim", str(caught.exception))
        self.assertIn("python/README.md", str(caught.exception))
        self.assertNotIn("capture_begin", calls)
        self.assertIs(torch.cuda.CUDAGraph.capture_begin.__wrapped__, original)
        # `with torch.cuda.graph(g):` fails as it is made, before its __enter__ switches streams.
        with self.assertRaises(RuntimeError) as caught:
            torch.cuda.graph(torch.cuda.CUDAGraph())
        self.assertIn("needs memcoord's C++ shim", str(caught.exception))

    def test_a_failed_capture_has_the_shim_abandon_the_route_it_left_open(self):
        torch, calls = fake_torch()
        sys.modules["torch"] = torch
        routes, abandoned = [], []

        def abandon(capture_failed=True):
            abandoned.append(capture_failed)
            return bool(routes and routes.pop())

        shim = types.SimpleNamespace(  # torch_shim.cpp's module, its routes begun kept in `routes`
            install=lambda addresses: {"graph_pools": True, "record_stream": True, "empty_cache": True},
            routes_begun=lambda: len(routes), abandon_capture=abandon)
        loaded = _torch._load_shim
        _torch._load_shim = lambda mode: shim
        self.addCleanup(setattr, _torch, "_load_shim", loaded)
        originals = torch.cuda.CUDAGraph.capture_begin, torch.cuda.CUDAGraph.capture_end
        details = memcoord.enable(watch_aborts=False, patch_memory_api=False)
        self.assertTrue(details["hooks"]["failed_capture_recovery"])
        self.assertIn("CUDAGraph.capture_end", details["patched"])
        self.assertEqual((torch.cuda.CUDAGraph.capture_begin.__wrapped__, torch.cuda.CUDAGraph.capture_end.__wrapped__),
                         originals)
        graph = torch.cuda.CUDAGraph()
        calls["begin"] = lambda: routes.append("pool")
        graph.capture_begin()
        graph.capture_end()  # a capture that ends well: nothing abandoned (the real hook ends the route itself)
        self.assertEqual(abandoned, [])
        calls["end_fails"] = True
        with self.assertRaises(RuntimeError) as caught:  # the caller still gets PyTorch's error
            graph.capture_end()
        self.assertIn("previous error during capture", str(caught.exception))
        self.assertEqual((abandoned, routes), ([True], []))

        def begin_then_fail():  # memcoord's route begun, then PyTorch's host allocator refuses
            routes.append("pool")
            raise RuntimeError("beginAllocateToPool: already recording to mempool_id")

        calls["begin"] = begin_then_fail
        with self.assertRaises(RuntimeError):
            graph.capture_begin()
        self.assertEqual((abandoned, routes), ([True, False], []))  # only this call's route, and no host end

        def fail_before_the_hook():
            raise RuntimeError("cudaStreamBeginCapture failed")

        calls["begin"] = fail_before_the_hook
        routes.append("an open capture's")  # another capture this thread has open stays open
        with self.assertRaises(RuntimeError):
            graph.capture_begin()
        self.assertEqual((abandoned, routes), ([True, False], ["an open capture's"]))
        # A capture_end that ended its route, then raised (a later check of PyTorch's): the capture this thread
        # still has open is not taken for the failed one.
        calls["begin"] = lambda: routes.append("inner")
        graph.capture_begin()
        calls["end"] = routes.pop
        with self.assertRaises(RuntimeError):
            graph.capture_end()
        self.assertEqual((abandoned, routes), ([True, False], ["an open capture's"]))

    def test_allocator_and_memory_api(self):
        torch, calls = fake_torch()
        sys.modules["torch"] = torch
        details = memcoord.enable(shim="off", watch_aborts=False)
        self.assertTrue(memcoord.is_enabled())
        self.assertFalse(details["shim"])
        (allocator,) = calls["changed"]
        self.assertEqual(allocator.args, (memcoord.library_path(), "memcoord_torch_malloc", "memcoord_torch_free"))
        for name in ("_cuda_memoryStats", "_cuda_resetPeakMemoryStats", "_cuda_memorySnapshot", "_cuda_emptyCache",
                     "_cuda_record_memory_history"):
            self.assertIn(name, details["patched"])
        self.assertEqual(memcoord.enable(), details)  # a second call changes nothing

        ptr = memcoord.alloc(6 * MIB, device=0)
        stats = torch._C._cuda_memoryStats(0)
        self.assertEqual(stats["allocated_bytes"]["all"]["current"], memcoord.stats(0)["allocated_bytes"])
        self.assertGreaterEqual(stats["allocated_bytes"]["all"]["current"], 6 * MIB)
        snapshot = torch._C._cuda_memorySnapshot(None)
        self.assertIn("segments", snapshot)
        # _record_memory_history(enabled, context, stacks, max_entries): memcoord's own history, in snapshots.
        self.assertIsNone(torch._C._cuda_record_memory_history("all", "all", "all", 10))
        traced = memcoord.alloc(MIB, device=0)
        memcoord.free(traced, device=0)
        entries = torch._C._cuda_memorySnapshot(None)["device_traces"][0]
        self.assertEqual([(e["action"], e["addr"]) for e in entries[-2:]],
                         [("alloc", traced), ("free_completed", traced)])
        torch._C._cuda_record_memory_history(None)
        memcoord.free(ptr, device=0)
        reserved = memcoord.stats(0)["reserved_bytes"]
        torch._C._cuda_emptyCache()
        self.assertLess(memcoord.stats(0)["reserved_bytes"], reserved)

        # Tensor.record_stream reaches memcoord (then PyTorch's own method) without the shim.
        live = memcoord.alloc(MIB, device=0)
        tensor = torch.Tensor()
        tensor.is_cuda = True
        tensor.untyped_storage = lambda: types.SimpleNamespace(data_ptr=lambda: live)
        tensor.record_stream(types.SimpleNamespace(cuda_stream=0))
        self.assertEqual(len(calls["original_record_stream"]), 1)
        # As PyTorch's own allocator: nothing to do for a zero-size tensor (no memory), and memory memcoord did
        # not hand out (another allocator's) is ignored, with one warning.
        tensor.untyped_storage = lambda: types.SimpleNamespace(data_ptr=lambda: 0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tensor.record_stream(types.SimpleNamespace(cuda_stream=0))
        tensor.untyped_storage = lambda: types.SimpleNamespace(data_ptr=lambda: 0x3000)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            tensor.record_stream(types.SimpleNamespace(cuda_stream=0))
            tensor.record_stream(types.SimpleNamespace(cuda_stream=0))
        self.assertEqual(len(seen), 1, [str(w.message) for w in seen])
        self.assertIn("record_stream on memory memcoord did not allocate", str(seen[0].message))
        self.assertEqual(len(calls["original_record_stream"]), 4)
        memcoord.free(live, device=0)

        # torch.cuda.set_per_process_memory_fraction(f, device) reaches _cuda_setMemoryFraction(f, device) once
        # PyTorch has checked 0 <= f <= 1; get_per_process_memory_fraction reads it back.
        if memcoord._lib().has("memcoord_set_memory_fraction"):
            self.assertIn("_cuda_setMemoryFraction", details["patched"])
            torch._C._cuda_setMemoryFraction(0.5, 0)
            try:
                self.assertEqual(torch._C._cuda_getMemoryFraction(0), 0.5)
                self.assertEqual(memcoord.stats(0)["limit_bytes"], memcoord.stats(0)["device_total_bytes"] // 2)
                with self.assertRaises(memcoord.MemcoordError) as caught:
                    torch._C._cuda_setMemoryFraction(0.0, 0)  # PyTorch's range allows 0; memcoord says why not
                self.assertIn("accepted: more than 0 and at most 1", str(caught.exception))
            finally:
                torch._C._cuda_setMemoryFraction(1.0, 0)
            self.assertEqual(torch._C._cuda_getMemoryFraction(0), 1.0)


if __name__ == "__main__":
    unittest.main()
