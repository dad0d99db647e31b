"""Several devices in one process (MEMCOORD_DEVICES=2 simulated host devices, as model1.cuda(0) and
model2.cuda(1) are on GPUs): each device's allocations land in its own pool, and its figures, cache trims
and snapshots are its own."""

import os

os.environ["MEMCOORD_DEVICES"] = "2"

import unittest  # noqa: E402

from support import MIB, require  # noqa: E402

import memcoord  # noqa: E402


class TwoDevicesTest(unittest.TestCase):
    def setUp(self):
        require(self, "memcoord_device_alloc", "memcoord_device_count", "memcoord_device_stats_get")
        memcoord.init()

    def test_device_count(self):
        self.assertEqual(memcoord.device_count(), 2)

    def test_each_device_counts_its_own_blocks(self):
        before = [memcoord.stats(d) for d in (0, 1)]
        a = memcoord.alloc(2 * MIB, device=0)
        b = [memcoord.alloc(3 * MIB, device=1) for _ in range(2)]
        during = [memcoord.stats(d) for d in (0, 1)]
        self.assertEqual(during[0]["device"], 0)
        self.assertEqual(during[1]["device"], 1)
        self.assertEqual(during[0]["live_blocks"] - before[0]["live_blocks"], 1)
        self.assertEqual(during[1]["live_blocks"] - before[1]["live_blocks"], 2)
        self.assertGreaterEqual(during[1]["allocated_bytes"] - before[1]["allocated_bytes"], 6 * MIB)
        memcoord.free(a, device=0)
        for ptr in b:
            memcoord.free(ptr, device=1)
        after = [memcoord.stats(d) for d in (0, 1)]
        self.assertEqual([s["allocated_bytes"] for s in after], [s["allocated_bytes"] for s in before])

    def test_a_block_freed_on_the_wrong_device_is_refused(self):
        ptr = memcoord.alloc(MIB, device=1)
        try:
            with self.assertRaises(memcoord.MemcoordError):
                memcoord.free(ptr, device=0)
        finally:
            memcoord.free(ptr, device=1)

    def test_empty_cache_of_one_device_leaves_the_other(self):
        require(self, "memcoord_empty_cache")
        memcoord.free(memcoord.alloc(8 * MIB, device=0), device=0)
        memcoord.free(memcoord.alloc(8 * MIB, device=1), device=1)
        cached1 = memcoord.stats(1)["reserved_bytes"]
        released = memcoord.empty_cache(0)
        self.assertGreaterEqual(released, 8 * MIB)
        self.assertEqual(memcoord.stats(1)["reserved_bytes"], cached1)
        self.assertGreaterEqual(memcoord.empty_cache(), 8 * MIB)  # every device: device 1's cache goes too
        self.assertLess(memcoord.stats(1)["reserved_bytes"], cached1)

    def test_memory_stats_per_device(self):
        ptr = memcoord.alloc(5 * MIB, device=1)
        try:
            self.assertGreaterEqual(memcoord.memory_stats(1)["allocated_bytes.all.current"], 5 * MIB)
            self.assertEqual(memcoord.memory_stats(1)["allocated_bytes.all.current"],
                             memcoord.stats(1)["allocated_bytes"])
        finally:
            memcoord.free(ptr, device=1)

    def test_a_device_out_of_range_is_refused(self):
        with self.assertRaises(memcoord.MemcoordError) as caught:
            memcoord.alloc(MIB, device=5)
        self.assertTrue(caught.exception.message)
        self.assertNotEqual(caught.exception.code, memcoord._capi.RESOURCE_EXHAUSTED, caught.exception.message)


if __name__ == "__main__":
    unittest.main()
