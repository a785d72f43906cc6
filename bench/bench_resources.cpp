// laptime_bench's rows of /proc sampling and memory (bench.cpp says how the benchmark puts the
// singletons in the state each row measures): one sample() of the process and of a tree, the raw
// reads it needs, a CPU-tracked pair with busy children, and the resident memory per
// (thread, name).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "laptime/laptime.hpp"

namespace {

using laptime::Stopwatch;
using laptime_bench::enable_stopwatch;
using laptime_bench::thread_cpu_s;

// ---- /proc sampling ---------------------------------------------------------------------------

void BM_CpuSample_Self(benchmark::State& state) {
  for (auto _ : state) {
    laptime::resources::Sample s = laptime::resources::sample();
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(BM_CpuSample_Self);

// The sampler walks the process tree: 8 children (a DataLoader's workers), blocked on a pipe.
void BM_CpuSample_Tree8(benchmark::State& state) {
  int fds[2];
  if (::pipe(fds) != 0) {
    state.SkipWithError("pipe() failed");
    return;
  }
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[1]);
      char c;
      while (::read(fds[0], &c, 1) < 0) {
      }
      ::_exit(0);
    }
    if (pid > 0) children.push_back(pid);
  }
  ::close(fds[0]);
  if (children.size() != 8) state.SkipWithError("fork() failed");
  for (auto _ : state) {
    laptime::resources::Sample s = laptime::resources::sample();
    benchmark::DoNotOptimize(s);
  }
  state.counters["processes"] = static_cast<double>(laptime::resources::sample().processes);
  for (const pid_t pid : children) ::kill(pid, SIGKILL);
  for (const pid_t pid : children) ::waitpid(pid, nullptr, 0);
  ::close(fds[1]);
}
BENCHMARK(BM_CpuSample_Tree8);

// ---- Memory per (thread, name) (docs/performance.md) -------------------------------------------

// Resident memory per (thread, name): 64 threads each time 256 names (a few intervals each), and
// the growth of RSS (/proc/self/statm) and of malloc'd bytes between each thread's first name and
// its 256th is divided by 64 x 255 (the threads stay alive in between). Counters:
// rss_bytes_per_pair (goal: <= 2048, 2 KiB per (thread, name)), malloc_bytes_per_pair.
long statm_rss_bytes() {
  long size = 0, rss = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &size, &rss) != 2) rss = 0;
    std::fclose(f);
  }
  return rss * ::sysconf(_SC_PAGESIZE);
}

void BM_MemoryPerThreadName(benchmark::State& state) {
  constexpr int kThreads = 64, kNames = 256;
  // New names each run (repetitions): names are never forgotten, and a name's slots and
  // histograms, once allocated, are reused by later runs.
  static int run = 0;
  std::vector<std::string> names;
  for (int n = 0; n < kNames; ++n) {
    names.push_back("memory " + std::to_string(run) + " name " + std::to_string(n));
  }
  ++run;
  for (auto _ : state) {
    enable_stopwatch();
    std::atomic<int> arrived{0}, phase{0};
    auto wait_phase = [&](int p) {
      arrived.fetch_add(1);
      while (phase.load() < p) std::this_thread::sleep_for(std::chrono::microseconds(200));
    };
    auto time_names = [&](int from, int to) {
      for (int n = from; n < to; ++n) {
        for (int k = 0; k < 4; ++k) {
          Stopwatch::instance().start_meas(names[static_cast<std::size_t>(n)]);
          Stopwatch::instance().end_meas(names[static_cast<std::size_t>(n)]);
        }
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        time_names(0, 1);
        wait_phase(1);
        time_names(1, kNames);
        wait_phase(2);
      });
    }
    while (arrived.load() < kThreads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const long rss0 = statm_rss_bytes();
    const std::size_t heap0 = ::mallinfo2().uordblks;
    phase.store(1);
    while (arrived.load() < 2 * kThreads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const long rss1 = statm_rss_bytes();
    const std::size_t heap1 = ::mallinfo2().uordblks;
    phase.store(2);
    for (auto& t : threads) t.join();
    const double pairs = double{kThreads} * (kNames - 1);
    state.counters["rss_bytes_per_pair"] = static_cast<double>(rss1 - rss0) / pairs;
    state.counters["malloc_bytes_per_pair"] = static_cast<double>(heap1 - heap0) / pairs;
  }
  laptime::detail::testing_reset_stopwatch();
}
BENCHMARK(BM_MemoryPerThreadName)->Iterations(1)->UseRealTime();

// ---- The raw /proc reads and a CPU-tracked pair ------------------------------------------------

// The raw reads a no-child sample() needs, for its ratio: /proc/stat (the machine's CPU) and
// /proc/self/io, each a pread at offset 0 of a descriptor kept open, as the sampler does. (Its
// CPU clocks come from clock_gettime and getrusage, not from files.)
void BM_ProcFilesRaw(benchmark::State& state) {
  const int stat = ::open("/proc/stat", O_RDONLY | O_CLOEXEC);
  const int io = ::open("/proc/self/io", O_RDONLY | O_CLOEXEC);
  if (stat < 0 || io < 0) state.SkipWithError("cannot open /proc/stat or /proc/self/io");
  char buf[4096];
  for (auto _ : state) {
    benchmark::DoNotOptimize(::pread(stat, buf, sizeof buf, 0));
    benchmark::DoNotOptimize(::pread(io, buf, sizeof buf, 0));
    benchmark::ClobberMemory();
  }
  if (stat >= 0) ::close(stat);
  if (io >= 0) ::close(io);
}
BENCHMARK(BM_ProcFilesRaw);

// The same files the way the sampler read them before (open, read, close each time), for scale.
void BM_ProcFilesOpenRead(benchmark::State& state) {
  char buf[4096];
  for (auto _ : state) {
    for (const char* path : {"/proc/stat", "/proc/self/io"}) {
      const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      benchmark::DoNotOptimize(::read(fd, buf, sizeof buf));
      ::close(fd);
    }
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ProcFilesOpenRead);

double process_cpu_s() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// A Stopwatch pair of a CPU-tracked name (track_cpu_usage: a resources::sample() at each end)
// with state.range(0) live child processes that spin (DataLoader workers at work; at nice 19, so
// that on a small machine the benchmark thread still gets a core). The counter sampler_us is the
// CPU the children sampler thread used per pair (the process's CPU beyond this thread's):
// cpu_time, like every row, is this thread's.
void BM_CpuTrackedPair(benchmark::State& state) {
  std::vector<pid_t> children;
  for (int i = 0; i < state.range(0); ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (::nice(19) == -1) {  // best effort: the children only need to be busy
      }
      ::alarm(600);  // never outlives a crashed benchmark
      volatile std::uint64_t sink = 0;
      for (;;) sink = sink + 1;
    }
    if (pid > 0) children.push_back(pid);
  }
  if (children.size() != static_cast<std::size_t>(state.range(0))) {
    state.SkipWithError("fork() failed");
  }
  enable_stopwatch();
  Stopwatch::instance().track_cpu_usage("tracked");
  for (int i = 0; i < 50; ++i) {  // the children sampler starts and takes its first readings
    Stopwatch::instance().start_meas("tracked");
    Stopwatch::instance().end_meas("tracked");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double process0 = process_cpu_s(), thread0 = thread_cpu_s();
  for (auto _ : state) {
    Stopwatch::instance().start_meas("tracked");
    Stopwatch::instance().end_meas("tracked");
    benchmark::ClobberMemory();
  }
  const double others = (process_cpu_s() - process0) - (thread_cpu_s() - thread0);
  state.counters["sampler_us"] = others * 1e6 / static_cast<double>(state.iterations());
  state.counters["processes"] = static_cast<double>(laptime::resources::sample().processes);
  for (const pid_t pid : children) ::kill(pid, SIGKILL);
  for (const pid_t pid : children) ::waitpid(pid, nullptr, 0);
  laptime::detail::testing_reset_stopwatch();
}
BENCHMARK(BM_CpuTrackedPair)->ArgName("children")->Arg(0)->Arg(16);

}  // namespace
