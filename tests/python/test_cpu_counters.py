"""examples/pytorch/cpu_counters.py: the perf_event_attr it asks for, the counts between two reads, and, where the
machine exposes CPU counters (the device machines may; this one's virtual machine has no PMU), that the work of a
thread started after opening is counted; where it does not, that opening says why."""

import os
import struct
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
import cpu_counters  # noqa: E402


class AttrTest(unittest.TestCase):
    def test_the_attr_counts_user_space_of_this_thread_and_its_new_threads(self):
        buf = cpu_counters._attr(cpu_counters.PERF_COUNT_HW_INSTRUCTIONS)
        self.assertEqual(len(buf.raw), cpu_counters.ATTR_SIZE)
        kind, size, config, _, _, read_format, flags = struct.unpack_from("=IIQQQQQ", buf.raw, 0)
        self.assertEqual((kind, size, config), (0, 128, 1))  # hardware, the struct's size, instructions
        self.assertEqual(read_format, 3)  # time enabled and time running: multiplexing is scaled away
        self.assertEqual(flags, (1 << 1) | (1 << 5) | (1 << 6))  # inherit, exclude_kernel, exclude_hv
        self.assertEqual(buf.raw[48:], bytes(cpu_counters.ATTR_SIZE - 48))

    def test_since_subtracts_and_passes_none_through(self):
        self.assertEqual(cpu_counters.since({"instructions": 10, "cycles": 30}, {"instructions": 25, "cycles": 70}),
                         {"instructions": 15, "cycles": 40})
        self.assertIsNone(cpu_counters.since(None, {"instructions": 1, "cycles": 1}))


class OpenTest(unittest.TestCase):
    def test_counters_count_a_new_threads_work_or_opening_says_why_not(self):
        counters, why = cpu_counters.open_counters()
        if counters is None:
            self.assertRegex(why, r"^perf_event_open: .+ \(perf_event_paranoid \S+\)$|no PMU")
            return
        self.assertIsNone(why)
        try:
            before = counters.read()
            worked, release = threading.Event(), threading.Event()

            def work():
                sum(range(2_000_000))
                worked.set()
                release.wait()

            worker = threading.Thread(target=work)
            worker.start()
            worked.wait()
            live = cpu_counters.since(before, counters.read())  # read while the thread lives, as after a step
            release.set()
            worker.join()
            # A loop of two million additions retires far more than two million instructions.
            self.assertGreater(live["instructions"], 2_000_000)
            self.assertGreater(live["cycles"], 0)
        finally:
            counters.close()

if __name__ == "__main__":
    unittest.main()
