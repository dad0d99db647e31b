"""bench/gpu/driver_call_timer.c and its reader examples/pytorch/driver_timer.py, without CUDA: the timer and a
small fake CUDA runtime (below) are compiled here, and a child python3 runs with the timer LD_PRELOADed and
the fake loaded RTLD_GLOBAL behind it, the order a real run has (the preload first, then libcudart).

Checked, since the GPU benches trust these counts: the driver entry points fetched through
cudaGetDriverEntryPointByVersion / cudaGetDriverEntryPoint come back wrapped when they are ours (cuMemCreate
counted with its time, arguments and results passed through) and untouched otherwise (another driver
function, an unknown name); runtime calls (cudaMemGetInfo, cudaMalloc, cudaFree) are counted in place, the
beside calls (cudaMemGetInfo here) only with DRIVER_CALL_TIMER_BESIDE=1 and forwarded untimed without it;
driver_timer.read() and summary() report the totals, read_threads() and by_thread_name() the memory calls
thread by thread, and both readings are None without the preload;
DRIVER_CALL_TIMER_REPORT=1 prints the totals at exit."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMER_SOURCE = ROOT / "bench" / "gpu" / "driver_call_timer.c"
EXAMPLES = ROOT / "examples" / "pytorch"

# The fake runtime: driver functions that record nothing but their result (cuMemCreate sleeps 1 ms so its
# measured time has a floor), an entry-point lookup that, like CUDA's, returns 0 with a NULL function and
# status 1 (cudaDriverEntryPointSymbolNotFound) for a name it lacks, and fake_function() to fetch its own
# pointers without going through the timer. Its two entry-point functions share a static lookup (libcudart 13
# does too: were one to call the other through the PLT, the timer would be entered twice for one fetch; its
# wrap() leaves a pointer that is already a wrapper as it is).
FAKE_RUNTIME = r"""
#include <stddef.h>
#include <string.h>
#include <time.h>
static int create(unsigned long long* h, size_t size, const void* prop, unsigned long long flags) {
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
  *h = size + 1;
  return 0;
}
static int map(unsigned long long p, size_t s, size_t o, unsigned long long h, unsigned long long f) { return 0; }
static int set_access(unsigned long long p, size_t s, const void* d, size_t c) { return 0; }
static int unmap(unsigned long long p, size_t s) { return 0; }
static int release(unsigned long long h) { return 0; }
static int reserve(unsigned long long* p, size_t s, size_t a, unsigned long long addr, unsigned long long f) {
  return 0;
}
static const struct { const char* name; void* fn; } kTable[] = {
    {"cuMemCreate", (void*)create}, {"cuMemMap", (void*)map}, {"cuMemSetAccess", (void*)set_access},
    {"cuMemUnmap", (void*)unmap}, {"cuMemRelease", (void*)release}, {"cuMemAddressReserve", (void*)reserve}};
void* fake_function(const char* symbol) {
  for (size_t i = 0; i < sizeof kTable / sizeof kTable[0]; ++i)
    if (strcmp(symbol, kTable[i].name) == 0) return kTable[i].fn;
  return NULL;
}
static int lookup(const char* symbol, void** fn, int* status) {
  *fn = fake_function(symbol);
  if (status) *status = *fn ? 0 : 1;
  return 0;
}
int cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int version,
                                     unsigned long long flags, int* status) {
  return lookup(symbol, fn, status);
}
int cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags, int* status) {
  return lookup(symbol, fn, status);
}
int cudaMemGetInfo(size_t* free_bytes, size_t* total) { *free_bytes = 1 << 20; *total = 1 << 30; return 0; }
int cudaMalloc(void** ptr, size_t size) { *ptr = (void*)0x1000; return 0; }
int cudaFree(void* ptr) { return 0; }
"""

# The child: calls go through ctypes.CDLL(None), the global lookup a real library's calls get, so the
# preloaded timer's definitions come first. It reports what it saw as JSON; the parent judges.
CHILD = r"""
import ctypes, json, sys
from ctypes import byref, c_int, c_size_t, c_ulonglong, c_void_p
fake = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
sys.path.insert(0, sys.argv[2])
import driver_timer
fake.fake_function.restype = c_void_p
glob = ctypes.CDLL(None)

def fetch(symbol, by_version=True):
    fn, status = c_void_p(), c_int(-1)
    if by_version:
        r = glob.cudaGetDriverEntryPointByVersion(symbol, byref(fn), 12000, c_ulonglong(0), byref(status))
    else:
        r = glob.cudaGetDriverEntryPoint(symbol, byref(fn), c_ulonglong(0), byref(status))
    return r, fn.value, status.value

seen = {}
r, create, status = fetch(b"cuMemCreate")
seen["create_fetch"] = [r, status]
seen["create_is_fake"] = create == fake.fake_function(b"cuMemCreate")
create_fn = ctypes.CFUNCTYPE(c_int, ctypes.POINTER(c_ulonglong), c_size_t, c_void_p, c_ulonglong)(create)
handles = []
for size in (10, 20, 30):
    handle = c_ulonglong()
    seen.setdefault("create_results", []).append(create_fn(byref(handle), size, None, 0))
    handles.append(handle.value)
seen["handles"] = handles
r, reserve, status = fetch(b"cuMemAddressReserve")
seen["reserve_is_fake"] = reserve == fake.fake_function(b"cuMemAddressReserve")
seen["unknown"] = list(fetch(b"cuNoSuchFunction"))
r, release, status = fetch(b"cuMemRelease", by_version=False)
seen["release_is_fake"] = release == fake.fake_function(b"cuMemRelease")
ctypes.CFUNCTYPE(c_int, c_ulonglong)(release)(handles[0])
free, total = c_size_t(), c_size_t()
seen["meminfo"] = [glob.cudaMemGetInfo(byref(free), byref(total)) for _ in range(2)] + [free.value, total.value]
ptr = c_void_p()
seen["malloc"] = [glob.cudaMalloc(byref(ptr), c_size_t(64)), ptr.value, glob.cudaFree(ptr)]
threads_before = driver_timer.read_threads()

import threading
called, read = threading.Event(), threading.Event()

def side():  # two more memory calls, on a thread of its own name (prctl PR_SET_NAME), alive while read
    ctypes.CDLL(None).prctl(15, b"side_thread", 0, 0, 0)
    for size in (40, 50):
        create_fn(byref(c_ulonglong()), size, None, 0)
    called.set()
    read.wait()

worker = threading.Thread(target=side)
worker.start()
called.wait()
figures = driver_timer.read()
threads_since = driver_timer.by_thread_name(threads_before, driver_timer.read_threads())
read.set()
worker.join()
with open("/proc/self/comm") as comm:
    main_name = comm.read().strip()
print(json.dumps({"seen": seen, "figures": figures, "summary": driver_timer.summary(figures),
                  "memory_ms": driver_timer.memory_ms(figures) if figures else None, "main_name": main_name,
                  "threads_before": driver_timer.by_thread_name({}, threads_before),
                  "threads_since": threads_since}))
"""


class DriverCallTimerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            raise unittest.SkipTest("no C compiler (cc or gcc) to build the timer with")
        cls.dir = tempfile.TemporaryDirectory(prefix="driver_call_timer_")
        out = Path(cls.dir.name)
        (out / "fake_cudart.c").write_text(FAKE_RUNTIME)
        cls.timer, cls.fake = out / "driver_call_timer.so", out / "libfake_cudart.so"
        for source, library, libs in ((TIMER_SOURCE, cls.timer, ["-ldl"]), (out / "fake_cudart.c", cls.fake, [])):
            built = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(library), str(source), *libs],
                                   capture_output=True, text=True)
            if built.returncode != 0:
                cls.dir.cleanup()
                raise AssertionError(f"building {library.name} failed:\n{built.stderr}")

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def child(self, preload=True, **env):
        environment = {k: v for k, v in os.environ.items()
                       if k not in ("LD_PRELOAD", "DRIVER_CALL_TIMER_REPORT", "DRIVER_CALL_TIMER_BESIDE")}
        environment.update(env)
        if preload:
            environment["LD_PRELOAD"] = str(self.timer)
        done = subprocess.run([sys.executable, "-c", CHILD, str(self.fake), str(EXAMPLES)], env=environment,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        return json.loads(done.stdout), done.stderr

    def test_wrapped_calls_are_counted_and_timed_and_others_pass_through(self):
        out, _ = self.child(DRIVER_CALL_TIMER_BESIDE="1")
        seen, figures = out["seen"], out["figures"]
        self.assertIsNotNone(figures, "read() found no timer in a process that preloads it")
        # Ours come back wrapped, yet the fake still runs underneath: its results and handles come through.
        self.assertEqual(seen["create_fetch"], [0, 0])
        self.assertFalse(seen["create_is_fake"], "cuMemCreate was not replaced by the timer's wrapper")
        self.assertEqual(seen["create_results"], [0, 0, 0])
        self.assertEqual(seen["handles"], [11, 21, 31])
        self.assertFalse(seen["release_is_fake"], "cudaGetDriverEntryPoint did not wrap cuMemRelease")
        # Other driver functions and unknown names are handed back exactly as the runtime gave them.
        self.assertTrue(seen["reserve_is_fake"], "cuMemAddressReserve was wrapped though the timer has no slot")
        self.assertEqual(seen["unknown"], [0, None, 1])
        self.assertEqual(seen["meminfo"], [0, 0, 1 << 20, 1 << 30])
        self.assertEqual(seen["malloc"], [0, 0x1000, 0])

        calls, ms = figures["cuMemCreate"]
        self.assertEqual(calls, 3 + 2)  # the main thread's three and the side thread's two
        self.assertGreaterEqual(ms, 3.0)  # three 1 ms sleeps inside the wrapped call
        self.assertEqual(figures["cuMemRelease"][0], 1)
        self.assertEqual(figures["cudaMemGetInfo"][0], 2)
        self.assertEqual(figures["cudaMalloc"][0], 1)
        self.assertEqual(figures["cudaFree"][0], 1)
        for untouched in ("cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cudaEventRecord", "cudaStreamSynchronize"):
            self.assertEqual(figures[untouched], [0, 0.0], untouched)
        self.assertGreaterEqual(out["memory_ms"], ms)
        self.assertIn("5 cuMemCreate", out["summary"])
        self.assertIn("beside them: 2 cudaMemGetInfo", out["summary"])  # not a memory call

    def test_memory_calls_are_summed_by_thread(self):
        # Each thread's memory calls, by its name: the main thread's 3 cuMemCreate, 1 cuMemRelease, 1 cudaMalloc
        # and 1 cudaFree before the reading, the side thread's 2 cuMemCreate (1 ms each) after it. The beside
        # calls (cudaMemGetInfo) are in no thread's figures.
        out, _ = self.child(DRIVER_CALL_TIMER_BESIDE="1")
        before, since = out["threads_before"], out["threads_since"]
        self.assertEqual(list(before), [out["main_name"]])
        self.assertEqual(before[out["main_name"]][0], 6)
        self.assertGreaterEqual(before[out["main_name"]][1], 3.0)
        self.assertEqual(list(since), ["side_thread"])  # the main thread made none since
        self.assertEqual(since["side_thread"][0], 2)
        self.assertGreaterEqual(since["side_thread"][1], 2.0)
        total_ms = before[out["main_name"]][1] + since["side_thread"][1]
        self.assertAlmostEqual(total_ms, out["memory_ms"], delta=0.01)

    def test_beside_calls_are_forwarded_untimed_by_default(self):
        # PyTorch makes some beside calls on every operation: by default they pass through uncounted.
        out, _ = self.child()
        self.assertEqual(out["seen"]["meminfo"], [0, 0, 1 << 20, 1 << 30])
        self.assertEqual(out["figures"]["cudaMemGetInfo"], [0, 0.0])
        self.assertEqual(out["figures"]["cuMemCreate"][0], 5)  # memory calls are always timed
        self.assertEqual(out["figures"]["cudaMalloc"][0], 1)

    def test_read_is_none_without_the_preload(self):
        out, _ = self.child(preload=False)
        self.assertIsNone(out["figures"])
        self.assertIsNone(out["threads_since"])
        self.assertEqual(out["summary"], "driver timer not loaded")
        self.assertTrue(out["seen"]["create_is_fake"])  # nothing in between: the fake's own pointer

    def test_report_at_exit(self):
        out, stderr = self.child(DRIVER_CALL_TIMER_REPORT="1")
        lines = [line.split() for line in stderr.splitlines() if line.startswith("driver_call_timer: ")]
        self.assertEqual(len(lines), len(out["figures"]), stderr)  # one line per kind
        self.assertIn(["driver_call_timer:", "cuMemCreate", "5", "calls"], [line[:4] for line in lines])
        _, quiet = self.child()
        self.assertNotIn("driver_call_timer:", quiet)


if __name__ == "__main__":
    unittest.main()
