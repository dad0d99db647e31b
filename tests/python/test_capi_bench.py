"""bench/worker/capi_bench on host memory: its JSON names where each run's threads ran ("run_cpus") and counts the
runs in which two of them shared a physical core ("runs_sharing_a_core"), so that an unpinned run slowed by SMT
siblings is told from the C ABI's own cost; pinned runs go round the listed CPUs; each thread count after the first is
set against it CPU by CPU ("cpu_ratio"); with --control each run of memcoord is paired with the control's on the same
CPUs, and threads on a CPU the control found disturbed are left out of a second ratio; memcoord's results count the
pool's exact peak sums ("peak_sums"); and bad --cpus are refused with a reason."""

import json
import os
import subprocess
import unittest

BENCH = os.environ.get("MEMCOORD_CAPI_BENCH", "")


def bench(*args):
    return subprocess.run([BENCH, "--backend", "host", "--pairs", "2000", *args], capture_output=True, text=True,
                          timeout=100)


class CapiBenchTest(unittest.TestCase):
    def setUp(self):
        # ctest sets it (bench/worker/CMakeLists.txt registers this test where capi_bench is built).
        self.assertTrue(BENCH, "MEMCOORD_CAPI_BENCH must name the built capi_bench")

    def pinned_to_two_cpus(self, runs, *args):
        """capi_bench at 1 and 2 threads pinned round the first two CPUs allowed: (a, b, results); skips with one."""
        allowed = sorted(os.sched_getaffinity(0))
        if len(allowed) < 2:
            self.skipTest("one CPU allowed")
        a, b = allowed[:2]
        done = bench("--threads", "1,2", "--runs", str(runs), "--cpus", f"{a},{b}", *args)
        self.assertEqual(done.returncode, 0, done.stderr)
        return a, b, json.loads(done.stdout)["results"]

    def test_each_run_says_where_its_threads_ran(self):
        done = bench("--threads", "1,2", "--runs", "3", "--control")
        self.assertEqual(done.returncode, 0, done.stderr)
        report = json.loads(done.stdout)
        cpus = report["hardware_threads"]
        self.assertEqual([(r["lib"] == "control: C library malloc/free", r["threads"]) for r in report["results"]],
                         [(False, 1), (False, 2), (True, 1), (True, 2)])
        for r in report["results"]:
            with self.subTest(lib=r["lib"], threads=r["threads"]):
                self.assertEqual(len(r["runs"]), 3)
                self.assertEqual([len(run) for run in r["run_cpus"]], [r["threads"]] * 3)
                self.assertTrue(all(0 <= c < cpus for run in r["run_cpus"] for c in run), r["run_cpus"])
                self.assertIn(r["runs_sharing_a_core"], range(0, 4))
                if r["threads"] == 1:
                    self.assertEqual(r["runs_sharing_a_core"], 0)

    def test_two_threads_pinned_to_one_cpu_share_its_core_in_every_run(self):
        if not os.path.exists("/sys/devices/system/cpu/cpu0/topology/core_id"):
            self.skipTest("no CPU topology in sysfs")
        done = bench("--threads", "2", "--runs", "2", "--cpus", "0")
        self.assertEqual(done.returncode, 0, done.stderr)
        (result,) = json.loads(done.stdout)["results"]
        self.assertEqual(result["run_cpus"], [[0, 0], [0, 0]])
        self.assertEqual(result["runs_sharing_a_core"], 2)

    def test_pinned_one_thread_runs_go_round_the_listed_cpus(self):
        # Thread t of run r on LIST[(r + t) % size]: one thread visits every listed CPU in turn, as two threads use
        # both in every run (a shared host's CPUs differ in speed, so one thread on the first alone is unfair).
        a, b, (one, two) = self.pinned_to_two_cpus(3)
        self.assertEqual(one["run_cpus"], [[a], [b], [a]])
        self.assertEqual(two["run_cpus"], [[a, b], [b, a], [a, b]])
        # Each thread's figure beside its CPU, and their median CPU by CPU: 1 and 2 threads on the same CPUs.
        for r in (one, two):
            self.assertEqual([len(run) for run in r["run_thread_ns"]], [len(run) for run in r["run_cpus"]])
            self.assertTrue(all(ns > 0 for run in r["run_thread_ns"] for ns in run), r["run_thread_ns"])
            self.assertEqual(set(r["cpu_median_ns"]), {str(a), str(b)})
        on_a = sorted(ns for run, cpus in zip(one["run_thread_ns"], one["run_cpus"]) for ns, c in zip(run, cpus)
                      if c == a)
        self.assertEqual(len(on_a), 2)  # runs 0 and 2
        self.assertEqual(one["cpu_median_ns"][str(a)], on_a[1])  # capi_bench's median of two is the upper one

    def test_each_count_after_the_first_is_set_against_it_cpu_by_cpu(self):
        # "cpu_ratio": N threads' median on a CPU over one thread's on the same CPU; "median_cpu_ratio" their median
        # (of two, the upper one, as capi_bench's medians). The first count, and the control alike, has none.
        a, b, results = self.pinned_to_two_cpus(4, "--control")
        self.assertEqual(len(results), 4)
        for one, two in (results[0:2], results[2:4]):
            with self.subTest(lib=one["lib"]):
                self.assertNotIn("cpu_ratio", one)
                self.assertEqual(two["cpu_ratio_base_threads"], 1)
                self.assertEqual(set(two["cpu_ratio"]), {str(a), str(b)})
                for cpu, ratio in two["cpu_ratio"].items():
                    self.assertAlmostEqual(ratio, two["cpu_median_ns"][cpu] / one["cpu_median_ns"][cpu], places=4)
                self.assertEqual(two["median_cpu_ratio"], max(two["cpu_ratio"].values()))

    def test_each_library_run_is_paired_with_a_control_run_on_the_same_cpus(self):
        # With --control, every run of memcoord is followed by the control's on the same CPUs: its figures thread by
        # thread ("paired_control_thread_ns") and where they ended ("paired_control_run_cpus"); a thread whose paired
        # control read over 1.15 times the control's calm figure on its CPU (the median of the one-thread runs'
        # paired control there) is disturbed; the ratio of the undisturbed threads alone, CPU by CPU. The control's
        # own results carry none of it.
        a, b, (one, two, control_one, control_two) = self.pinned_to_two_cpus(6, "--control")
        for r in (control_one, control_two):
            self.assertNotIn("paired_control_thread_ns", r)
            self.assertNotIn("disturbed_threads", r)
        for r in (one, two):
            self.assertEqual(r["paired_control_run_cpus"], r["run_cpus"])  # pinned alike
        self.check_paired_figures(one, two, runs=6)

    def test_unpinned_a_paired_control_on_another_cpu_counts_its_thread_as_disturbed(self):
        # Unpinned, the scheduler may place the control's thread t on another CPU than memcoord's thread t; such a
        # control says nothing of memcoord's CPU, so that thread counts as disturbed, and the calm figures come from
        # the pairs that shared their CPU.
        done = bench("--threads", "1,2", "--runs", "6", "--control")
        self.assertEqual(done.returncode, 0, done.stderr)
        one, two = json.loads(done.stdout)["results"][:2]
        self.check_paired_figures(one, two, runs=6)

    def check_paired_figures(self, one, two, runs):
        """Recomputes one and two threads' paired-control fields from their JSON (the header's definitions)."""

        def median(values):  # capi_bench's: of an even count, the upper of the middle two
            values = sorted(values)
            return values[int(0.5 * (len(values) - 1) + 0.5)]

        def threads(r):
            return [(cpu, ns, control_cpu, control) for cpus, nss, control_cpus, controls in
                    zip(r["run_cpus"], r["run_thread_ns"], r["paired_control_run_cpus"], r["paired_control_thread_ns"])
                    for cpu, ns, control_cpu, control in zip(cpus, nss, control_cpus, controls)]

        for r in (one, two):
            self.assertEqual([len(run) for run in r["paired_control_thread_ns"]], [r["threads"]] * runs)
            self.assertEqual([len(run) for run in r["paired_control_run_cpus"]], [r["threads"]] * runs)
            self.assertTrue(all(ns > 0 for run in r["paired_control_thread_ns"] for ns in run))
        shared = {}
        for cpu, _, control_cpu, control in threads(one):
            if control_cpu == cpu:
                shared.setdefault(cpu, []).append(control)
        calm = {cpu: median(controls) for cpu, controls in shared.items()}

        def undisturbed(r):
            kept = {}
            for cpu, ns, control_cpu, control in threads(r):
                if control_cpu == cpu and cpu in calm and control <= 1.15 * calm[cpu]:
                    kept.setdefault(cpu, []).append(ns)
            return kept

        for r in (one, two):
            self.assertEqual(r["disturbed_threads"], len(threads(r)) - sum(len(v) for v in undisturbed(r).values()))
        self.assertNotIn("undisturbed_cpu_ratio", one)
        base, now = undisturbed(one), undisturbed(two)
        ratios = {str(cpu): median(now[cpu]) / median(base[cpu]) for cpu in now if cpu in base}
        self.assertEqual(set(two["undisturbed_cpu_ratio"]), set(ratios))
        for cpu, ratio in ratios.items():
            self.assertAlmostEqual(two["undisturbed_cpu_ratio"][cpu], ratio, places=4)
        if ratios:
            self.assertAlmostEqual(two["median_undisturbed_cpu_ratio"], median(list(ratios.values())), places=4)

    def test_memcoords_results_count_the_exact_peak_sums(self):
        # One thread sums at each new peak: its first run's four sizes, growing (512 B to 1 MiB), make four; later
        # runs hold no more, so none. The control has no pool to ask.
        done = bench("--threads", "1,2", "--runs", "3", "--control")
        self.assertEqual(done.returncode, 0, done.stderr)
        results = json.loads(done.stdout)["results"]
        one, two, control_one, control_two = results
        self.assertEqual(one["peak_sums"], 4)
        for r in (one, two):
            with self.subTest(threads=r["threads"]):
                self.assertGreaterEqual(r["peak_sums"], 0)
                self.assertAlmostEqual(r["peak_sums_per_million_pairs"], r["peak_sums"] * 1e6 / (2000 * 3 * r["threads"]),
                                       places=3)
        for r in (control_one, control_two):
            self.assertNotIn("peak_sums", r)

    def test_a_cpu_the_machine_lacks_is_refused(self):
        done = bench("--threads", "1", "--cpus", "100000")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("--cpus: Value 100000 not in range 0 to", done.stderr)
        self.assertNotIn("results", done.stdout)


if __name__ == "__main__":
    unittest.main()
