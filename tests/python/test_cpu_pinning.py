"""bench_allocators.py --cpus (examples/pytorch/cpu_pinning.py): CPU lists read as sysfs and taskset write
them, bad lists refused with what is accepted, the GPU's local CPUs found through its PCI bus id, the fastest CPUs
by a probe, and a child process really pinned."""

import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
import cpu_pinning  # noqa: E402


class ParseTest(unittest.TestCase):
    def test_lists_and_ranges(self):
        self.assertEqual(cpu_pinning.parse_cpus("0-3,8"), {0, 1, 2, 3, 8})
        self.assertEqual(cpu_pinning.parse_cpus("5\n"), {5})  # sysfs ends its line
        self.assertEqual(cpu_pinning.parse_cpus(" 0-1 , 4-5 "), {0, 1, 4, 5})
        self.assertEqual(cpu_pinning.format_cpus({0, 1, 2, 5, 7, 8}), "0-2,5,7-8")
        self.assertEqual(cpu_pinning.parse_cpus(cpu_pinning.format_cpus({3, 9, 10, 11})), {3, 9, 10, 11})

    def test_bad_lists_name_the_entry_and_the_accepted_form(self):
        for text, says in [("", "empty entry"), ("0,,2", "empty entry"), ("a-3", "bad entry 'a-3'"),
                           ("3-", "bad entry '3-'"), ("-1", "bad entry '-1'"), ("7-2", "runs backwards"),
                           ("0-3;5", "bad entry")]:
            with self.subTest(text=text):
                with self.assertRaises(ValueError) as caught:
                    cpu_pinning.parse_cpus(text)
                self.assertIn(says, str(caught.exception))
                self.assertIn("0-7,16-23", str(caught.exception))

    def test_resolve_none_and_cpus_this_process_may_not_use(self):
        self.assertIsNone(cpu_pinning.resolve_cpus("none"))
        allowed = os.sched_getaffinity(0)
        self.assertEqual(cpu_pinning.resolve_cpus(str(min(allowed))), {min(allowed)})
        with self.assertRaises(ValueError) as caught:
            cpu_pinning.resolve_cpus("100000")
        self.assertIn("CPUs 100000 of '100000' are not among those this process may use", str(caught.exception))


class GpuLocalTest(unittest.TestCase):
    def test_bus_id_is_written_as_sysfs_names_it(self):
        bus = cpu_pinning.first_gpu_bus_id(query=lambda command: "00000000:19:00.0\n")
        self.assertEqual(bus, "0000:19:00.0")
        with self.assertRaises(LookupError) as caught:
            cpu_pinning.first_gpu_bus_id(query=lambda command: "No devices were found\n")
        self.assertIn("no PCI bus id", str(caught.exception))

        def missing(command):
            raise FileNotFoundError(2, "No such file or directory", "nvidia-smi")

        with self.assertRaises(LookupError) as caught:
            cpu_pinning.first_gpu_bus_id(query=missing)
        self.assertIn("cannot ask nvidia-smi", str(caught.exception))

    def test_local_cpus_from_sysfs_limited_to_those_allowed(self):
        allowed = os.sched_getaffinity(0)
        with tempfile.TemporaryDirectory() as sysfs:
            os.makedirs(os.path.join(sysfs, "0000:19:00.0"))
            with open(os.path.join(sysfs, "0000:19:00.0", "local_cpulist"), "w") as f:
                f.write(f"{min(allowed)},100000-100003\n")
            self.assertEqual(cpu_pinning.gpu_local_cpus("0000:19:00.0", sysfs), {min(allowed)})
            with open(os.path.join(sysfs, "0000:19:00.0", "local_cpulist"), "w") as f:
                f.write("100000-100003\n")
            with self.assertRaises(LookupError) as caught:
                cpu_pinning.gpu_local_cpus("0000:19:00.0", sysfs)
            self.assertIn("none of which this process may run on", str(caught.exception))
            with self.assertRaises(LookupError) as caught:
                cpu_pinning.gpu_local_cpus("0000:aa:00.0", sysfs)
            self.assertIn("cannot read", str(caught.exception))


class FastestTest(unittest.TestCase):
    """fastest:N: the probe runs on each candidate CPU in turn, the fastest N are chosen, and the calling thread
    is allowed back where it was, also when the probe fails."""

    def setUp(self):
        self.allowed = os.sched_getaffinity(0)
        self.addCleanup(os.sched_setaffinity, 0, self.allowed)

    def test_the_probe_runs_on_each_cpu_and_the_fastest_are_chosen(self):
        cpus = sorted(self.allowed)
        # A made-up probe whose time depends on the CPU it runs on: the highest-numbered CPUs are the fastest.
        seen = []

        def probe():
            (cpu,) = os.sched_getaffinity(0)  # pinned to exactly one CPU while probing
            seen.append(cpu)
            return 1.0 / (cpu + 1)

        chosen, speeds = cpu_pinning.fastest_cpus(1, cpus, probe)
        self.assertEqual(chosen, {cpus[-1]})
        self.assertEqual(speeds, {cpu: 1.0 / (cpu + 1) for cpu in cpus})
        self.assertEqual(seen, [cpu for cpu in cpus for _ in range(cpu_pinning.PROBE_ROUNDS)])
        self.assertEqual(os.sched_getaffinity(0), self.allowed)
        chosen, _ = cpu_pinning.fastest_cpus(len(cpus), cpus, probe)
        self.assertEqual(chosen, set(cpus))

    def test_ties_go_to_the_lower_cpu_and_the_median_round_counts(self):
        cpus = sorted(self.allowed)
        if len(cpus) < 2:
            self.skipTest("needs two CPUs")
        rounds = {cpus[0]: iter([5.0, 1.0, 1.0]), cpus[1]: iter([1.0, 9.0, 1.0])}  # one slow round each
        chosen, speeds = cpu_pinning.fastest_cpus(1, cpus[:2], lambda: next(rounds[min(os.sched_getaffinity(0))]))
        self.assertEqual(speeds, {cpus[0]: 1.0, cpus[1]: 1.0})
        self.assertEqual(chosen, {cpus[0]})

    def test_a_failing_probe_leaves_the_affinity_as_it_was(self):
        def probe():
            raise RuntimeError("probe failed")

        with self.assertRaises(RuntimeError):
            cpu_pinning.fastest_cpus(1, sorted(self.allowed), probe)
        self.assertEqual(os.sched_getaffinity(0), self.allowed)

    def test_bad_counts_name_what_is_accepted(self):
        for text, says in [("fastest:0", "from 1"), ("fastest:x", "from 1"), ("fastest:", "from 1"),
                           ("fastest:-2", "from 1"), ("fastest:100000", "more CPUs than the")]:
            with self.subTest(text=text):
                with self.assertRaises(ValueError) as caught:
                    cpu_pinning.resolve_cpus(text)
                self.assertIn(says, str(caught.exception))

    def test_resolve_with_the_real_probe(self):
        speeds = {}
        chosen = cpu_pinning.resolve_cpus("fastest:1", speeds)
        self.assertEqual(len(chosen), 1)
        self.assertLessEqual(chosen, self.allowed)
        self.assertEqual(set(speeds), cpu_pinning._probe_candidates())
        (cpu,) = chosen
        self.assertEqual(speeds[cpu], min(speeds.values()))
        self.assertTrue(all(0 < t < 5 for t in speeds.values()), speeds)
        self.assertEqual(os.sched_getaffinity(0), self.allowed)


class PinTest(unittest.TestCase):
    def test_a_child_runs_on_the_cpus_given(self):
        self.assertIsNone(cpu_pinning.pin_to(None))
        cpu = min(os.sched_getaffinity(0))
        out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                             capture_output=True, text=True, check=True, preexec_fn=cpu_pinning.pin_to({cpu}))
        self.assertEqual(out.stdout.strip(), f"[{cpu}]")


if __name__ == "__main__":
    unittest.main()
