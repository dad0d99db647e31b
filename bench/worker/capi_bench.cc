// capi_bench: the cost of an alloc+free pair through the C ABI, as PyTorch pays it (memcoord_torch_malloc
// then memcoord_torch_free on the same thread, cache hits after the first round), on 1..N threads at once.
// Each library given with --lib is measured in a child process of its own (two builds cannot share one
// process: both register the same protobuf descriptors), so one run compares builds side by side (e.g. the
// current library against one built from an older commit). Prints one JSON document:
//   {"backend":..,"pairs_per_thread":..,"results":[{"lib":..,"threads":t,"median_ns_per_pair":..,
//     "p90_ns_per_pair":..,"runs":[..],"run_cpus":[[..],..],"run_thread_ns":[[..],..],
//     "cpu_median_ns":{"cpu":ns,..},"runs_sharing_a_core":n[,"cpu_ratio":{"cpu":r,..},
//     "cpu_ratio_base_threads":1,"median_cpu_ratio":r]}]}
// The median is over runs of each thread's mean ns per pair (every thread of every run counts once); runs go
// round the thread counts (1, N, 1, N, ...) so that a machine whose speed drifts slows every count alike.
// cpu_ns figures use the thread's CPU time instead of the wall clock: on a shared, oversubscribed machine
// they leave out the time the thread was not running.
// Which library: every --lib PATH; without one, $MEMCOORD_CAPI_LIB (the variable the Python package reads);
// without that, libmemcoord_capi.so in ../lib beside this executable, which is where both the build tree
// (build/release/bin, build/release/lib) and a device bundle (.device-bundle/bin, .device-bundle/lib) put it.
// No path is compiled in, so the same binary runs from a bundle copied to another machine.
// --control adds the same loop over the C library's malloc/free (per-thread caches, nothing shared between
// threads): how much slower each thread gets at N threads on this machine for reasons that are not
// memcoord's (frequency falling as more cores run, shared caches, SMT siblings). A C ABI whose per-thread
// cost grows no more than the control's scales as well as the machine allows.
// --cpus LIST pins thread t of run r to CPU LIST[(r + t) % size], so that 1 and N threads are compared on the
// same cores rather than wherever the scheduler put them: the one-thread runs go round the listed CPUs as the
// N-thread runs use them all (a shared host's vCPUs differ: on an H100 machine of 2026-12-06 one thread took
// 70 ns a pair on CPU 8 and 41 on CPU 5, the C library's malloc/free 50 and 32).
// Each result also says where its threads ran: "run_cpus" (per run, the CPU each thread ended its loop on,
// beside "run_thread_ns", each thread's ns per pair; "cpu_median_ns" their median CPU by CPU)
// and "runs_sharing_a_core" (runs in which two of them ended on one physical core, SMT siblings, from
// sysfs): an unpinned run at N threads that shares cores is slower for reasons that are not memcoord's.
// Every thread count after the first also carries "cpu_ratio" (CPU by CPU, its median ns per pair over the
// first count's on that CPU; "cpu_ratio_base_threads" names the first count) and "median_cpu_ratio", their
// median: "no worse per thread at N" read on the same CPUs, beside the control's own ratio. Pinned, each CPU
// has runs/size one-thread runs, so give --runs several times the number of CPUs listed.
// With --control, each run of a library is also followed at once by the control's run on the same CPUs
// ("paired_control_thread_ns", thread by thread beside "run_thread_ns"): a shared host's vCPUs slow one
// another in spells (on the H100 of 2026-12-06k, in 9 of the control's 40 four-thread runs and in memcoord's
// last 11, CPUs 2 and 3 both took over 1.3 times their one-thread medians, the control's ~35 ns a pair
// becoming 52-60 and memcoord's ~49 becoming 85-87, while one-thread runs on either were rarely slowed),
// which a control measured later in a child of its own cannot match run by run. "paired_control_run_cpus"
// says where the control's threads ended. A thread whose paired control took over kDisturbedControl times
// the control's calm figure on its CPU (the median of the first count's paired control there) ran on a
// disturbed CPU, and so does one whose paired control ended on another CPU (unpinned, the scheduler places
// the two runs' threads apart, and such a control tells nothing of this thread's CPU): "disturbed_threads"
// counts them, and every count after the first also carries "undisturbed_cpu_ratio" and
// "median_undisturbed_cpu_ratio", the CPU-by-CPU ratio of the undisturbed threads alone (both counts filtered
// alike). Pinned, every pair shares its CPU; unpinned, few do, so read these fields from pinned runs.
//
// A library whose memcoord_device_stats has peak_sums (version 6) also gives each thread count's "peak_sums"
// (its runs' exact sums of every thread cache, made to settle the pool's peaks) and
// "peak_sums_per_million_pairs": each sum reads every thread's cache counters, a cache miss per thread, so
// they are where a thread count's per-pair cost can grow that the control's cannot.
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "worker/memcoord.h"  // the C ABI's types only: the library itself is loaded with dlopen

namespace {

using MallocFn = void* (*)(std::ptrdiff_t, int, void*);
using FreeFn = void (*)(void*, std::ptrdiff_t, int, void*);
using IntFn = int (*)();
using StatsFn = int (*)(int, memcoord_device_stats*);
using ErrorFn = const char* (*)();

struct Library {
  std::string path;
  MallocFn malloc_fn = nullptr;
  FreeFn free_fn = nullptr;
  IntFn init = nullptr;
  IntFn shutdown = nullptr;
  ErrorFn last_error = nullptr;
  StatsFn device_stats = nullptr;  // optional (the control): no peak_sums then
};

bool Load(const std::string& path, Library& lib) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "capi_bench: cannot load %s: %s\n", path.c_str(), ::dlerror());
    return false;
  }
  lib.path = path;
  lib.malloc_fn = reinterpret_cast<MallocFn>(::dlsym(handle, "memcoord_torch_malloc"));
  lib.free_fn = reinterpret_cast<FreeFn>(::dlsym(handle, "memcoord_torch_free"));
  lib.init = reinterpret_cast<IntFn>(::dlsym(handle, "memcoord_init"));
  lib.shutdown = reinterpret_cast<IntFn>(::dlsym(handle, "memcoord_shutdown"));
  lib.last_error = reinterpret_cast<ErrorFn>(::dlsym(handle, "memcoord_last_error"));
  lib.device_stats = reinterpret_cast<StatsFn>(::dlsym(handle, "memcoord_device_stats_get"));
  if (!lib.malloc_fn || !lib.free_fn || !lib.init || !lib.shutdown || !lib.last_error) {
    std::fprintf(stderr, "capi_bench: %s lacks the memcoord_* entry points\n", path.c_str());
    return false;
  }
  return true;
}

// The directory this executable lives in (from /proc/self/exe); empty when it cannot be read.
std::string ExecutableDirectory() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return {};
  const std::string exe(path, static_cast<std::size_t>(n));
  const std::size_t slash = exe.rfind('/');
  return slash == std::string::npos ? std::string() : exe.substr(0, slash);
}

// The libraries to measure: `given` (--lib), else $MEMCOORD_CAPI_LIB, else the one in ../lib beside this
// executable. Empty, with the reason on stderr, when none is there.
std::vector<std::string> LibrariesToMeasure(std::vector<std::string> given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("MEMCOORD_CAPI_LIB"); env != nullptr && *env != '\0') {
    if (::access(env, R_OK) == 0) return {env};
    std::fprintf(stderr, "capi_bench: MEMCOORD_CAPI_LIB=%s is not a readable file\n", env);
    return {};
  }
  const std::string beside = ExecutableDirectory() + "/../lib/libmemcoord_capi.so";
  if (::access(beside.c_str(), R_OK) == 0) return {beside};
  std::fprintf(
      stderr, "capi_bench: no libmemcoord_capi.so: give --lib PATH or set MEMCOORD_CAPI_LIB (looked in %s)\n",
      beside.c_str());
  return {};
}

// --cpus, set once by main before any measurement: thread t of run r runs on g_pin_cpus[(r + t) % size]
// (empty: unpinned).
std::vector<int> g_pin_cpus;
// --control, set once by main: each library's runs are followed by the control's on the same CPUs.
bool g_paired_control = false;
// A paired control this many times its calm figure on a CPU marks that thread's CPU as disturbed. On the H100
// of 2026-12-06k, 31 of the control's 40 one-thread runs read at most 1.15 times their CPU's median and the
// other 9 read 1.16-1.38 times it. A vCPU whose busy sibling slowed it read about 1.5 times.
constexpr double kDisturbedControl = 1.15;

void PinThisThread(int run_index, int thread_index) {
  if (g_pin_cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(g_pin_cpus[static_cast<std::size_t>(run_index + thread_index) % g_pin_cpus.size()], &set);
  if (::pthread_setaffinity_np(::pthread_self(), sizeof(set), &set) != 0) {
    std::fprintf(stderr, "capi_bench: cannot pin thread %d\n", thread_index);
    std::exit(1);
  }
}

struct PerPair {
  double wall_ns = 0;
  double cpu_ns = 0;
  int cpu = -1;  // where the thread ended its loop (sched_getcpu)
};

// "package-core" of a CPU from sysfs, empty when unreadable: CPUs with the same key are SMT siblings.
std::string PhysicalCore(int cpu) {
  const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
  std::string key;
  for (const char* name : {"physical_package_id", "core_id"}) {
    std::FILE* f = std::fopen((base + name).c_str(), "r");
    if (f == nullptr) return {};
    char text[32] = {};
    const bool read = std::fgets(text, sizeof(text), f) != nullptr;
    std::fclose(f);
    if (!read) return {};
    key += std::string(key.empty() ? "" : "-") + std::to_string(std::atoi(text));
  }
  return key;
}

// Whether two of the threads of one run ended on one physical core.
bool SharesACore(const std::vector<PerPair>& threads) {
  std::vector<std::string> cores;
  for (const PerPair& p : threads) {
    if (p.cpu < 0) continue;
    const std::string core = PhysicalCore(p.cpu);
    if (core.empty()) continue;
    if (std::find(cores.begin(), cores.end(), core) != cores.end()) return true;
    cores.push_back(core);
  }
  return false;
}

double ThreadCpuNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// One thread: `pairs` alloc+free pairs over a few sizes (every one a cache hit after the first round).
PerPair ThreadNsPerPair(const Library& lib, long pairs, int device, std::atomic<int>& ready, int threads) {
  static constexpr std::ptrdiff_t kSizes[] = {512, 4096, 65536, 1 << 20};
  for (std::ptrdiff_t s : kSizes) lib.free_fn(lib.malloc_fn(s, device, nullptr), s, device, nullptr);
  ready.fetch_add(1);
  while (ready.load() < threads) {
  }
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = ThreadCpuNs();
  for (long i = 0; i < pairs; ++i) {
    const std::ptrdiff_t size = kSizes[i & 3];
    void* p = lib.malloc_fn(size, device, nullptr);
    if (p == nullptr) {
      std::fprintf(stderr, "capi_bench: allocation failed: %s\n", lib.last_error());
      std::exit(1);
    }
    lib.free_fn(p, size, device, nullptr);
  }
  const auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  const double n = static_cast<double>(pairs);
  return {ns / n, (ThreadCpuNs() - cpu_start) / n, ::sched_getcpu()};
}

std::vector<PerPair> Run(const Library& lib, int run_index, int threads, long pairs) {
  std::vector<PerPair> per_thread(static_cast<std::size_t>(threads));
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      PinThisThread(run_index, t);
      per_thread[static_cast<std::size_t>(t)] = ThreadNsPerPair(lib, pairs, 0, ready, threads);
    });
  }
  for (auto& t : pool) t.join();
  return per_thread;
}

// Device 0's peak_sums (every pool's); -1 when the library cannot tell: no stats function, a failed call, or
// a library older than version 6, which copies only its own struct and leaves the marker in place.
long long PeakSums(const Library& lib) {
  if (lib.device_stats == nullptr) return -1;
  constexpr std::uint64_t kUnset = ~std::uint64_t{0};
  memcoord_device_stats stats{};
  stats.struct_size = sizeof(stats);
  stats.peak_sums = kUnset;
  if (lib.device_stats(0, &stats) != 0 || stats.peak_sums == kUnset) return -1;
  return static_cast<long long>(stats.peak_sums);
}

template <typename T>
std::string Join(const std::vector<T>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// {"cpu": median ns per pair of the threads that ended on it, ...}: a thread count's figures CPU by CPU, so
// that 1 and N threads compare on the same (unequally fast) CPUs.
std::string CpuMedians(const std::map<int, std::vector<double>>& wall_by_cpu) {
  std::string out;
  for (const auto& [cpu, walls] : wall_by_cpu) {
    out += std::string(out.empty() ? "" : ",") + "\"" + std::to_string(cpu) +
           "\":" + std::to_string(Quantile(walls, 0.5));
  }
  return out;
}

// The control's entry points: the C library's allocator behind the C ABI's signatures.
__attribute__((noinline)) void* ControlMalloc(std::ptrdiff_t bytes, int, void*) {
  return std::malloc(static_cast<std::size_t>(bytes));
}
__attribute__((noinline)) void ControlFree(void* ptr, std::ptrdiff_t, int, void*) { std::free(ptr); }
int ControlNothing() { return 0; }
const char* ControlError() { return "malloc returned NULL"; }

Library ControlLibrary() {
  Library lib;
  lib.path = "control: C library malloc/free";
  lib.malloc_fn = &ControlMalloc;
  lib.free_fn = &ControlFree;
  lib.init = &ControlNothing;
  lib.shutdown = &ControlNothing;
  lib.last_error = &ControlError;
  return lib;
}

std::string Measure(const Library& lib, const Library* paired, const std::vector<int>& thread_counts,
                    long pairs, int runs);

// {"cpu": ratio, ...} of a thread count's median ns per pair on each CPU to the first count's on the same CPU
// (CPUs both used), and the median of those ratios in `median` (0 when none is shared): how much slower a
// thread got at N threads on the CPU it ran on, free of the CPUs' unequal speeds.
std::string CpuRatios(const std::map<int, std::vector<double>>& base,
                      const std::map<int, std::vector<double>>& now, double& median) {
  std::string out;
  std::vector<double> ratios;
  for (const auto& [cpu, walls] : now) {
    const auto it = base.find(cpu);
    if (it == base.end()) continue;
    const double ratio = Quantile(walls, 0.5) / Quantile(it->second, 0.5);
    ratios.push_back(ratio);
    out += std::string(out.empty() ? "" : ",") + "\"" + std::to_string(cpu) + "\":" + std::to_string(ratio);
  }
  median = ratios.empty() ? 0.0 : Quantile(ratios, 0.5);
  return out;
}

// The results of one library, as JSON objects separated by commas; empty on failure.
std::string MeasureLibrary(const std::string& path, const std::vector<int>& thread_counts, long pairs,
                           int runs) {
  Library lib;
  if (path == "control") {
    lib = ControlLibrary();
  } else if (!Load(path, lib)) {
    return {};
  }
  if (lib.init() != 0) {
    std::fprintf(stderr, "capi_bench: memcoord_init failed: %s\n", lib.last_error());
    return {};
  }
  const Library control = ControlLibrary();
  const bool paired = g_paired_control && path != "control";
  std::string out = Measure(lib, paired ? &control : nullptr, thread_counts, pairs, runs);
  (void)lib.shutdown();
  return out;
}

// A thread of a run measured with a paired control: its CPU, its ns per pair, and the paired control
// thread's (right after; on the same CPU when pinned).
struct PairedThread {
  int cpu = -1;
  double ns = 0;
  int control_cpu = -1;
  double control_ns = 0;

  bool SharesItsCpu() const { return control_cpu == cpu; }
};

// The control's calm figure on each CPU: the median of `base`'s paired control there, from the pairs that
// shared their CPU.
std::map<int, double> CalmControl(const std::vector<PairedThread>& base) {
  std::map<int, std::vector<double>> by_cpu;
  for (const PairedThread& t : base) {
    if (t.SharesItsCpu()) by_cpu[t.cpu].push_back(t.control_ns);
  }
  std::map<int, double> calm;
  for (const auto& [cpu, ns] : by_cpu) calm[cpu] = Quantile(ns, 0.5);
  return calm;
}

// The ns per pair, CPU by CPU, of the threads of `threads` whose paired control read at most
// kDisturbedControl times `calm` on their CPU, there (a CPU without a calm figure, or a paired control on
// another CPU, counts as disturbed); `disturbed` counts the rest.
std::map<int, std::vector<double>> Undisturbed(const std::vector<PairedThread>& threads,
                                               const std::map<int, double>& calm, int& disturbed) {
  std::map<int, std::vector<double>> by_cpu;
  disturbed = 0;
  for (const PairedThread& t : threads) {
    const auto it = calm.find(t.cpu);
    if (!t.SharesItsCpu() || it == calm.end() || t.control_ns > kDisturbedControl * it->second) {
      ++disturbed;
      continue;
    }
    by_cpu[t.cpu].push_back(t.ns);
  }
  return by_cpu;
}

// The paired control's fields of one thread count's result (see the header): `base` is the first count's
// threads, `now` this count's, `text` its "paired_control_thread_ns" runs and `cpus_text` their
// "paired_control_run_cpus"; the ratios only when `ratio`.
std::string PairedFigures(const std::vector<PairedThread>& base, const std::vector<PairedThread>& now,
                          const std::string& text, const std::string& cpus_text, bool ratio) {
  const std::map<int, double> calm = CalmControl(base);
  int disturbed = 0;
  const std::map<int, std::vector<double>> undisturbed_now = Undisturbed(now, calm, disturbed);
  std::string out = ",\"paired_control_thread_ns\":[" + text + "],\"paired_control_run_cpus\":[" + cpus_text +
                    "],\"disturbed_threads\":" + std::to_string(disturbed);
  if (ratio) {
    int base_disturbed = 0;
    double median = 0;
    const std::string ratios = CpuRatios(Undisturbed(base, calm, base_disturbed), undisturbed_now, median);
    out += ",\"undisturbed_cpu_ratio\":{" + ratios +
           "},\"median_undisturbed_cpu_ratio\":" + std::to_string(median);
  }
  return out;
}

std::string Measure(const Library& lib, const Library* paired, const std::vector<int>& thread_counts,
                    long pairs, int runs) {
  // Runs go round the thread counts (1, 4, 1, 4, ...), so that a change of the machine's speed during the
  // measurement (a shared host's neighbours, frequency) falls on every thread count alike.
  struct Figures {
    std::vector<double> wall, cpu;
    std::string run_text, cpus_text, thread_ns_text;
    std::map<int, std::vector<double>> wall_by_cpu;  // each thread's ns per pair, by the CPU it ended on
    int runs_sharing_a_core = 0;
    long long peak_sums = 0;                   // -1: the library cannot tell
    std::vector<PairedThread> paired_threads;  // with a paired control: every thread of every run
    std::string paired_text, paired_cpus_text;
  };
  std::vector<Figures> figures(thread_counts.size());
  for (int r = 0; r < runs; ++r) {
    for (std::size_t c = 0; c < thread_counts.size(); ++c) {
      Figures& f = figures[c];
      std::vector<double> run_wall;
      std::vector<int> run_cpus;
      const long long sums_before = PeakSums(lib);
      const std::vector<PerPair> threads = Run(lib, r, thread_counts[c], pairs);
      const long long sums_after = PeakSums(lib);
      if (sums_before < 0 || sums_after < 0 || f.peak_sums < 0) {
        f.peak_sums = -1;
      } else {
        f.peak_sums += sums_after - sums_before;
      }
      if (paired != nullptr) {
        // Right after, on the same CPUs: the machine as this run found it (thread t of run r is pinned
        // alike).
        const std::vector<PerPair> control = Run(*paired, r, thread_counts[c], pairs);
        std::vector<double> control_wall;
        std::vector<int> control_cpus;
        for (std::size_t t = 0; t < threads.size(); ++t) {
          f.paired_threads.push_back(
              {threads[t].cpu, threads[t].wall_ns, control[t].cpu, control[t].wall_ns});
          control_wall.push_back(control[t].wall_ns);
          control_cpus.push_back(control[t].cpu);
        }
        f.paired_text += std::string(r ? "," : "") + "[" + Join(control_wall) + "]";
        f.paired_cpus_text += std::string(r ? "," : "") + "[" + Join(control_cpus) + "]";
      }
      for (const PerPair& p : threads) {
        f.wall.push_back(p.wall_ns);
        f.cpu.push_back(p.cpu_ns);
        f.wall_by_cpu[p.cpu].push_back(p.wall_ns);
        run_wall.push_back(p.wall_ns);
        run_cpus.push_back(p.cpu);
      }
      f.run_text += (r ? "," : "") + std::to_string(Quantile(run_wall, 0.5));
      f.cpus_text += std::string(r ? "," : "") + "[" + Join(run_cpus) + "]";
      f.thread_ns_text += std::string(r ? "," : "") + "[" + Join(run_wall) + "]";
      f.runs_sharing_a_core += SharesACore(threads) ? 1 : 0;
    }
  }
  std::string out;
  for (std::size_t c = 0; c < thread_counts.size(); ++c) {
    const Figures& f = figures[c];
    out += std::string(out.empty() ? "" : ",") + "{\"lib\":\"" + lib.path +
           "\",\"threads\":" + std::to_string(thread_counts[c]) +
           ",\"median_ns_per_pair\":" + std::to_string(Quantile(f.wall, 0.5)) +
           ",\"p90_ns_per_pair\":" + std::to_string(Quantile(f.wall, 0.9)) +
           ",\"median_cpu_ns_per_pair\":" + std::to_string(Quantile(f.cpu, 0.5)) + ",\"runs\":[" +
           f.run_text + "],\"run_cpus\":[" + f.cpus_text + "],\"run_thread_ns\":[" + f.thread_ns_text +
           "],\"cpu_median_ns\":{" + CpuMedians(f.wall_by_cpu) +
           "},\"runs_sharing_a_core\":" + std::to_string(f.runs_sharing_a_core);
    if (f.peak_sums >= 0) {
      const double all_pairs = static_cast<double>(pairs) * runs * thread_counts[c];
      out += ",\"peak_sums\":" + std::to_string(f.peak_sums) + ",\"peak_sums_per_million_pairs\":" +
             std::to_string(static_cast<double>(f.peak_sums) * 1e6 / all_pairs);
    }
    if (c > 0) {
      double median = 0;
      const std::string ratios = CpuRatios(figures[0].wall_by_cpu, f.wall_by_cpu, median);
      out += ",\"cpu_ratio\":{" + ratios +
             "},\"cpu_ratio_base_threads\":" + std::to_string(thread_counts[0]) +
             ",\"median_cpu_ratio\":" + std::to_string(median);
    }
    if (paired != nullptr)
      out += PairedFigures(figures[0].paired_threads, f.paired_threads, f.paired_text, f.paired_cpus_text,
                           c > 0);
    out += "}";
  }
  return out;
}

std::string MeasureInChild(const std::string& path, const std::vector<int>& thread_counts, long pairs,
                           int runs) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const std::string part = MeasureLibrary(path, thread_counts, pairs, runs);
    const ssize_t written = ::write(fds[1], part.data(), part.size());
    ::_exit(part.empty() || written != static_cast<ssize_t>(part.size()) ? 1 : 0);
  }
  ::close(fds[1]);
  std::string part;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof(buffer))) > 0;)
    part.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? part : std::string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"alloc+free pairs through the memcoord C ABI"};
  std::vector<std::string> libs;
  std::vector<int> thread_counts{1, 4};
  long pairs = 200000;
  int runs = 7;
  std::string backend = "host";
  app.add_option(
      "--lib", libs,
      "libmemcoord_capi.so to measure (repeatable; default: $MEMCOORD_CAPI_LIB, else ../lib/ beside "
      "this executable)");
  app.add_option("--threads", thread_counts, "thread counts")->delimiter(',');
  app.add_option("--pairs", pairs, "alloc+free pairs per thread per run")->check(CLI::PositiveNumber);
  app.add_option("--runs", runs, "runs per thread count")->check(CLI::PositiveNumber);
  app.add_option("--backend", backend, "MEMCOORD_BACKEND for the run (host, cuda, cuda-vmm, virtual)");
  bool control = false;
  app.add_flag("--control", control,
               "also measure the same loop over the C library's malloc/free: the machine's own per-thread "
               "slowdown at N threads");
  const int cpus_online = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  app.add_option("--cpus", g_pin_cpus,
                 "pin thread t of run r to CPU LIST[(r + t) % size] (comma-separated CPU numbers)")
      ->delimiter(',')
      ->check(
          CLI::Range(0, cpus_online - 1).description("a CPU number below " + std::to_string(cpus_online)));
  CLI11_PARSE(app, argc, argv);
  libs = LibrariesToMeasure(std::move(libs));
  if (libs.empty()) return 2;
  if (control) libs.push_back("control");
  g_paired_control = control;
  ::setenv("MEMCOORD_BACKEND", backend.c_str(), 1);
  ::unsetenv("MEMCOORD_COORDINATOR");
  std::string out = "{\"backend\":\"" + backend + "\",\"pairs_per_thread\":" + std::to_string(pairs) +
                    ",\"hardware_threads\":" + std::to_string(std::thread::hardware_concurrency()) +
                    ",\"cpus\":[" + Join(g_pin_cpus) + "]" + ",\"results\":[";
  bool first = true;
  for (const std::string& path : libs) {
    const std::string part = MeasureInChild(path, thread_counts, pairs, runs);
    if (part.empty()) return 1;
    out += (first ? "" : ",") + part;
    first = false;
  }
  out += "]}";
  std::printf("%s\n", out.c_str());
  return 0;
}
