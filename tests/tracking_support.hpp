// Shared by tests/tracking-test.cpp and bench/bench_tracking.cpp: loader-like child processes,
// an independent reference of the process tree's CPU (every process's own kernel CPU clock), and
// the two accuracy figures of a tracked interval (its CPU, its time).
#pragma once

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "laptime/resources.hpp"
#include "laptime/results.hpp"
#include "laptime/stopwatch.hpp"

namespace laptime_test {

inline std::int64_t monotonic_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline void spin_for_ns(std::int64_t ns) {
  const std::int64_t until = monotonic_now_ns() + ns;
  while (monotonic_now_ns() < until) {
  }
}

inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Child processes that spin while the parent is inside an interval and sleep between intervals,
/// as DataLoader workers produce a batch while the loop waits for it and idle when their queue is
/// full. Killed with the object (and with the parent: PR_SET_PDEATHSIG).
class LoaderChildren {
 public:
  explicit LoaderChildren(int n) {
    void* page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return;
    busy_ = new (page) std::atomic<int>(0);
    const pid_t parent = ::getpid();
    for (int i = 0; i < n; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) run(busy_, parent);
      if (pid < 0) return;
      clockid_t clock{};
      if (::clock_getcpuclockid(pid, &clock) != 0) return;
      pids_.push_back(pid);
      clocks_.push_back(clock);
    }
    ok_ = true;
  }
  ~LoaderChildren() {
    for (const pid_t pid : pids_) ::kill(pid, SIGKILL);
    for (const pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
    if (busy_ != nullptr) ::munmap(busy_, 4096);
  }
  LoaderChildren(const LoaderChildren&) = delete;
  LoaderChildren& operator=(const LoaderChildren&) = delete;

  bool ok() const { return ok_; }
  void set_busy(bool on) { busy_->store(on ? 1 : 0, std::memory_order_relaxed); }

  /// CPU seconds of this process (all its threads) and of each child, by their own kernel CPU
  /// clocks: the reference laptime's figure is checked against.
  double reference_cpu_s() const {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    double s = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    for (const clockid_t c : clocks_) {
      if (::clock_gettime(c, &ts) == 0) {
        s += static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
      }
    }
    return s;
  }

 private:
  [[noreturn]] static void run(std::atomic<int>* busy, pid_t parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(0);
    const timespec nap{0, 200000};
    for (;;) {
      if (busy->load(std::memory_order_relaxed) != 0) {
        const std::int64_t until = monotonic_now_ns() + 100000;
        while (monotonic_now_ns() < until) {
        }
      } else {
        ::nanosleep(&nap, nullptr);
      }
    }
  }

  std::atomic<int>* busy_ = nullptr;
  std::vector<pid_t> pids_;
  std::vector<clockid_t> clocks_;
  bool ok_ = false;
};

/// The relative error of resources::sample()'s process-tree CPU rate (cores) against the reference
/// over each of `reps` intervals of `interval_ns`: the children busy inside each interval only
/// (woken right before it), idle for `gap_ns` between intervals, the calling thread spinning inside
/// them (so that with no child there is CPU to measure). The reference is read right outside the
/// two samples; both rates divide by their own readings' times.
inline std::vector<double> tree_cpu_errors(LoaderChildren& kids, std::int64_t interval_ns, int reps,
                                           std::int64_t gap_ns = 5000000) {
  namespace res = laptime::resources;
  std::vector<double> errors;
  for (int i = 0; i < reps; ++i) {
    kids.set_busy(true);
    const std::int64_t r0_from = monotonic_now_ns();
    const double r0 = kids.reference_cpu_s();
    const std::int64_t r0_to = monotonic_now_ns();
    const res::Sample s0 = res::sample();
    spin_for_ns(interval_ns);
    const res::Sample s1 = res::sample();
    const std::int64_t r1_from = monotonic_now_ns();
    const double r1 = kids.reference_cpu_s();
    const std::int64_t r1_to = monotonic_now_ns();
    kids.set_busy(false);
    const timespec gap{0, static_cast<long>(gap_ns)};
    ::nanosleep(&gap, nullptr);
    if (!s0.tree_cpu_ok || !s1.tree_cpu_ok || s1.taken_ns <= s0.taken_ns) continue;
    const double ref_wall = static_cast<double>((r1_from + r1_to) / 2 - (r0_from + r0_to) / 2);
    const double ref_cores = (r1 - r0) / (ref_wall * 1e-9);
    const double cores =
        (s1.tree_cpu_s - s0.tree_cpu_s) / (static_cast<double>(s1.taken_ns - s0.taken_ns) * 1e-9);
    if (ref_cores > 0) errors.push_back(cores / ref_cores - 1.0);
  }
  return errors;
}

/// For each of `reps` intervals of the tracked name `name` around a busy-wait of `busy_ns`: how
/// much shorter than a steady_clock timing around its start_meas..end_meas it reads, as a
/// fraction of that outer timing. The Stopwatch must be enabled with recording on.
inline std::vector<double> interval_shortfalls(const std::string& name, std::int64_t busy_ns,
                                               int reps) {
  laptime::Stopwatch& sw = laptime::Stopwatch::instance();
  std::vector<double> outer;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    sw.start_meas(name);
    spin_for_ns(busy_ns);
    sw.end_meas(name);
    const auto t1 = std::chrono::steady_clock::now();
    outer.push_back(
        static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
    sw.finish_iter();
  }
  const laptime::Results r = sw.results();
  std::vector<double> out;
  if (!r.samples) return out;
  std::uint32_t id = 0;
  while (id < r.samples->names.size() && r.samples->names[id] != name) ++id;
  std::vector<double> inner;
  for (const auto& t : r.samples->threads) {
    for (const auto& iv : t.intervals) {
      if (iv.name == id) inner.push_back(static_cast<double>(iv.duration_ns));
    }
  }
  // The ring keeps the last intervals: they pair with the last outer timings.
  const std::size_t n = std::min(inner.size(), outer.size());
  for (std::size_t k = 0; k < n; ++k) {
    const double o = outer[outer.size() - n + k];
    out.push_back((o - inner[inner.size() - n + k]) / o);
  }
  return out;
}

}  // namespace laptime_test
