// Shared by the suites that check the resource sampler on this machine (resources-test,
// tracking-test, saturation-test): child processes that spin, and the kernel's own CPU clocks of a
// process, of its reaped children and of a live process, to check the sampler against.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

#include "test_support.hpp"

namespace sampler_test {

// Spins the calling thread for `seconds` of wall time.
inline void spin_for(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile std::uint64_t sink = 0;
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<std::uint64_t>(i);
  }
}

// A forked child that spins for `seconds` (capped, so that it never outlives a crashed test)
// and then _exits: no doctest, no atexit handlers, no stdio in the child.
inline pid_t fork_spinner(double seconds) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    spin_for(seconds);
    ::_exit(0);
  }
  return child;
}

// A child that spins until it is killed (an alarm ends it if the test crashes).
inline pid_t fork_busy() {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(60);
    volatile std::uint64_t sink = 0;
    for (;;) sink = sink + 1;
  }
  return child;
}

// A child that sleeps until it is killed (an alarm ends it if the test crashes).
inline pid_t fork_idle() {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(60);
    for (;;) ::pause();
  }
  return child;
}

inline void kill_and_reap(pid_t child) {
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
}

inline double seconds(const timespec& ts) {
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// CPU seconds used so far by a live process, by reaped children: the kernel's own clocks.
inline double process_cpu_s(pid_t pid) {
  clockid_t clock{};
  timespec ts{};
  if (::clock_getcpuclockid(pid, &clock) != 0 || ::clock_gettime(clock, &ts) != 0) return -1;
  return seconds(ts);
}
inline double reaped_children_cpu_s() {
  rusage ru{};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

}  // namespace sampler_test
