// The side of workers-test that runs outside its cases: a measurement found by name, intervals
// measured with a sleep, and the programs a case starts as this binary again ("--worker MODE"),
// each exiting 0 when what it checks holds (doctest does not run there).
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

#include "laptime/laptime.hpp"

#if LAPTIME_ENABLED
namespace workers_test {

using laptime::Stopwatch;

inline const laptime::MeasurementResult* find(const laptime::Results& r, std::string_view name) {
  for (const auto& m : r.measurements) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

inline void measure(std::string_view name, int times, int sleep_us = 200) {
  for (int i = 0; i < times; ++i) {
    Stopwatch::instance().start_meas(name);
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    Stopwatch::instance().end_meas(name);
  }
}

// More pairs than a worker's region holds, and the fewest it must hold (docs/workers.md).
inline constexpr int kManyPairs = 800;
inline constexpr int kPairsAtLeast = 700;

/// Whether the child `pid` ended with exit status 0.
inline bool exited_ok(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// "measure": a program started with exec by the parent measures for it, labelled.
inline int measure_for_parent() {
  Stopwatch& sw = Stopwatch::instance();
  if (!sw.is_worker()) return 10;
  sw.set_worker_label("spawned");
  measure("spawned decode", 3);
  return 0;
}

// "own-enable": a started program that enables the Stopwatch is a program of its own.
inline int own_enable() {
  Stopwatch& sw = Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  if (sw.is_worker()) return 11;
  measure("own program", 2);
  const auto r = sw.results();
  return find(r, "own program") != nullptr && find(r, "own program")->count == 2 ? 0 : 12;
}

// "many-pairs": a worker measures more (thread, name) pairs than its region holds; prints how
// many reached the report whole, then the report and the JSON.
inline int many_pairs() {
  Stopwatch& sw = Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (int i = 0; i < kManyPairs; ++i) measure("pair " + std::to_string(i), 1, 1);
    ::_exit(0);
  }
  if (!exited_ok(pid)) return 27;
  (void)sw.results();  // a second report warns no more
  const auto r = sw.results();
  int present = 0, whole = 0;
  for (const auto& m : r.measurements) {
    present += m.name.rfind("pair ", 0) == 0;
    whole += m.name.rfind("pair ", 0) == 0 && m.median_ns > 0 && m.p99_ns > 0;
  }
  std::printf("present %d whole %d\n%s\n%s\n", present, whole, r.to_text().c_str(),
              r.to_json().c_str());
  sw.disable();
  return 0;
}

// "truncate": workers truncate the shared region; the parent goes on measuring and reports.
inline int truncating_workers() {
  Stopwatch& sw = Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  measure("parent", 1, 10);
  // One worker measured before it truncates, one measured nothing.
  for (const bool measures : {true, false}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (measures) measure("decode", 2, 10);
      const char* share = std::getenv("LAPTIME_WORKER_SHARE");
      long owner = 0;
      int fd = -1;
      if (share == nullptr || std::sscanf(share, "%ld:%d", &owner, &fd) != 2) ::_exit(21);
      (void)::ftruncate(fd, measures ? 4096 : 0);
      ::_exit(0);
    }
    if (!exited_ok(pid)) return 22;
  }
  measure("parent", 2, 10);
  const auto r = sw.results();
  if (find(r, "parent") == nullptr || find(r, "parent")->count != 3) return 23;
  return find(r, "decode") != nullptr && find(r, "decode")->count == 2 ? 0 : 24;
}

// "stale": started with a LAPTIME_WORKER_SHARE that is not a live parent's region.
inline int stale_share() {
  Stopwatch& sw = Stopwatch::instance();
  measure("before enable", 1, 10);  // the first call reads LAPTIME_WORKER_SHARE
  if (sw.is_worker()) return 25;
  sw.enable(0, std::nullopt, false);
  measure("own", 2, 10);
  const auto r = sw.results();
  sw.disable();
  return find(r, "own") != nullptr && find(r, "own")->count == 2 ? 0 : 26;
}

// "off-scenario": with LAPTIME_WORKERS=0 a forked child keeps its own copy.
inline int workers_off() {
  Stopwatch& sw = Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  const pid_t pid = ::fork();
  if (pid == 0) {
    measure("decode", 2);
    ::_exit(sw.is_worker() ? 13 : 0);
  }
  if (!exited_ok(pid)) return 14;
  const auto r = sw.results();
  sw.disable();
  return find(r, "decode") == nullptr && r.worker_processes == 0 ? 0 : 15;
}

/// The program `mode` names, run in this process; 2 where none does.
inline int worker_main(std::string_view mode) {
  if (mode == "measure") return measure_for_parent();
  if (mode == "own-enable") return own_enable();
  if (mode == "many-pairs") return many_pairs();
  if (mode == "truncate") return truncating_workers();
  if (mode == "stale") return stale_share();
  if (mode == "off-scenario") return workers_off();
  return 2;
}

}  // namespace workers_test
#endif  // LAPTIME_ENABLED
