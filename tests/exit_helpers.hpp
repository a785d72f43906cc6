// The side of exit-test that runs in a fresh process: the programs its cases start as this
// binary again ("--helper MODE [ARG]"), each measuring and then ending one way (returning from
// main, exit() from another thread, a signal, abort(), quick_exit()...). The variables laptime
// reads at the first enable(), and the process's end, are what the cases check.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "laptime/laptime.hpp"
#include "reliability_support.hpp"

namespace exit_test {

inline constexpr int kLoopIters = 20;

#if LAPTIME_ENABLED

inline std::atomic<long> g_worker_intervals{0};

// Constructed after enable(), so destroyed before laptime's atexit handler: its measurement is in
// the results.
struct LateStatic {
  ~LateStatic() {
    auto& sw = laptime::Stopwatch::instance();
    sw.start_meas("late static");
    sw.end_meas("late static");
  }
};

// A thread that measures until the process ends.
inline void start_detached_worker() {
  std::thread([] {
    // The exit signals go to the main thread. One that interrupts this thread inside results()
    // (every 64 intervals) finds the lock the writer needs held, and the file is then not written
    // (docs/guarantees.md, "At most 2 seconds"): not what these tests check. ThreadSanitizer runs
    // a handler late, at the interrupted thread's next intercepted call (a lock, say), which can
    // make that likely: a SIGHUP run under TSan once ended with no file.
    sigset_t exit_signals;
    sigemptyset(&exit_signals);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&exit_signals, sig);
    pthread_sigmask(SIG_BLOCK, &exit_signals, nullptr);
    auto& sw = laptime::Stopwatch::instance();
    for (long i = 0;; ++i) {
      sw.start_meas("worker");
      sw.end_meas("worker");
      g_worker_intervals.fetch_add(1, std::memory_order_relaxed);
      if (i % 64 == 0) (void)sw.results();
    }
  }).detach();
  while (g_worker_intervals.load() < 100) std::this_thread::yield();
}

inline void main_loop(laptime::Stopwatch& sw) {
  for (int i = 0; i < kLoopIters; ++i) {
    sw.start_meas("main loop");
    sw.end_meas("main loop");
    sw.finish_iter();
  }
}

// Returns from main with a detached thread still measuring and statics on both sides of
// laptime's atexit handler.
inline int helper_detached() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  static LateStatic late;
  (void)late;
  start_detached_worker();
  main_loop(sw);
  std::printf("exit-helper pid %ld\n", static_cast<long>(::getpid()));
  return 0;
}

// exit() from another thread while the main thread keeps measuring.
inline int helper_exit_from_thread() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  std::printf("exit-helper pid %ld\n", static_cast<long>(::getpid()));
  std::fflush(stdout);
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::exit(0);
  }).detach();
  for (;;) {
    sw.start_meas("main after exit");
    sw.end_meas("main after exit");
  }
}

// A print function that throws (a user's, or a binding's whose stream is closed): the JSON must
// still be written and the process must not end in std::terminate.
inline int helper_throwing_print() {
  auto& sw = laptime::Stopwatch::instance();
  sw.set_print_function(
      [](const char*, std::size_t, void*) { throw std::runtime_error("print function failed"); },
      nullptr);
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  return 0;
}

// Measures and exits normally; LAPTIME_OUTPUT is set by the test to a path that cannot be
// written. With "read-only-mount", the helper first makes its directory a read-only bind mount
// in a private mount namespace (exit code 77 where namespaces are not allowed).
inline int helper_plain(bool read_only_mount, const char* dir) {
  if (read_only_mount) {
    if (!reliability::enter_private_mount_namespace()) return 77;
    if (::mount(dir, dir, nullptr, MS_BIND, nullptr) != 0 ||
        ::mount(nullptr, dir, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
      std::perror("read-only bind mount");
      return 77;
    }
  }
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  return 0;
}

// Runs with stdin, stdout and stderr closed (`train <&- >&- 2>&-`), printing a report every 5
// iterations and a warning: nothing laptime opens may take their numbers, or what it prints lands
// in its own files (the workers' shared counters, the signal pipe). Exit code 5 if one did.
inline int helper_closed_streams() {
  for (int fd = 0; fd <= 2; ++fd) ::close(fd);
  laptime::set_error_policy(laptime::ErrorPolicy::Warn);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, 5, false);
  sw.end_meas("never started");  // a warning, to stderr
  main_loop(sw);
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1) return 5;
  }
  return 0;
}

// Enables in the folder `dir`, then moves to `dir`/moved (as Hydra's work-dir switch does) and
// measures.
inline int helper_chdir_after_enable(const char* dir) {
  if (::chdir(dir) != 0) return 77;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  if (::chdir("moved") != 0) return 77;
  std::printf("exit-helper pid %ld\n", static_cast<long>(::getpid()));
  main_loop(sw);
  return 0;
}

// Measures, then ends the way `how` names: a signal sent to the process ("SIGTERM", "SIGINT",
// "SIGHUP"), "abort" (a failed assertion), "quick_exit" (status 3); "disabled-exit" and
// "disabled-SIGTERM" call disable() first. A detached thread keeps
// measuring, so the signal may land on either thread.
inline int helper_end_by(std::string_view how) {
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);  // abort() leaves no core file behind
  // As under nohup: an ignored signal stays ignored.
  if (how == "SIGHUP-ignored") ::signal(SIGHUP, SIG_IGN);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  if (how == "SIGTERM-code-off") sw.set_exit_signal_handlers(false);
  start_detached_worker();
  main_loop(sw);
  if (how == "SIGHUP-ignored") {
    ::kill(::getpid(), SIGHUP);
    return 0;
  }
  if (how == "abort") std::abort();
  if (how == "quick_exit") std::quick_exit(3);
  if (how == "disabled-exit") {  // measuring off before the end: the results stay
    sw.disable();
    return 0;
  }
  if (how == "disabled-SIGTERM") sw.disable();
  const int sig = how == "SIGINT" ? SIGINT : how == "SIGHUP" ? SIGHUP : SIGTERM;
  ::kill(::getpid(), sig);
  for (;;) ::pause();
}

// The program's own SIGTERM handler (installed before laptime's): it ends the process its way.
inline void program_term_handler(int, siginfo_t*, void*) {
  const char msg[] = "the program's SIGTERM handler ran\n";
  if (::write(2, msg, sizeof msg - 1) < 0) ::_exit(43);
  ::_exit(42);
}

inline int helper_chained() {
  struct sigaction act = {};
  act.sa_sigaction = program_term_handler;
  act.sa_flags = SA_SIGINFO;
  ::sigaction(SIGTERM, &act, nullptr);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  ::kill(::getpid(), SIGTERM);
  for (;;) ::pause();
}

inline std::atomic<bool> g_interrupted{false};

// The program catches SIGINT and goes on (a graceful stop): five more iterations, then a normal
// exit, whose file has them all.
inline int helper_interrupted_then_continues() {
  struct sigaction act = {};
  act.sa_handler = [](int) { g_interrupted.store(true); };
  ::sigaction(SIGINT, &act, nullptr);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  ::kill(::getpid(), SIGINT);
  while (!g_interrupted.load()) std::this_thread::yield();
  for (int i = 0; i < 5; ++i) {
    sw.start_meas("main loop");
    sw.end_meas("main loop");
    sw.finish_iter();
  }
  return 0;
}

// Rewrites `path` with write_json as fast as it can, with 200 names (a file of tens of KB), until
// it is killed.
inline int helper_write_json_loop(const char* path) {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  for (int i = 0; i < 200; ++i) {
    const std::string name = "name " + std::to_string(i);
    sw.start_meas(name);
    sw.end_meas(name);
  }
  for (;;) {
    main_loop(sw);
    sw.write_json(path);
  }
}

// Measures, then makes the usage error `which` names under LAPTIME_ON_ERROR=abort: a one-time
// measurement started twice ("one-time") or ended without a start ("one-time-end"), enable()
// again with other settings ("enable").
inline int helper_abort_by_usage_error(std::string_view which) {
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  if (which == "one-time") {
    sw.start_one_time_measurement("set-up");
    sw.start_one_time_measurement("set-up");
  } else if (which == "one-time-end") {
    sw.end_one_time_measurement("never started");
  } else if (which == "enable") {
    sw.enable(3, std::nullopt, false);
  }
  return 0;
}

inline long g_term_delay_us = 0;
inline pid_t g_main_tid = 0;

// `n` more names measured once each: a report of them takes milliseconds.
inline void measure_names(laptime::Stopwatch& sw, int n) {
  for (int i = 0; i < n; ++i) {
    const std::string name = "name " + std::to_string(i);
    sw.start_meas(name);
    sw.end_meas(name);
  }
}

// A thread that sends SIGTERM to the main thread (g_main_tid) g_term_delay_us from now.
inline void sigterm_main_thread_later() {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::microseconds(g_term_delay_us));
    ::syscall(SYS_tgkill, ::getpid(), g_main_tid, SIGTERM);
  }).detach();
}

// Returns from main with a SIGTERM on its way to the main thread `delay_us` after the at-exit
// output starts (an atexit handler registered after laptime's runs just before it), as a launcher
// stops a job that is ending: the signal lands inside the exit's results() (4000 names).
inline int helper_sigterm_during_exit_output(const char* delay_us) {
  g_term_delay_us = std::atol(delay_us);
  g_main_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  measure_names(sw, 4000);
  std::atexit(sigterm_main_thread_later);
  return 0;
}

// A SIGTERM on its way to the main thread `delay_us` after the loop, while the main thread makes
// a periodic report at every finish_iter() (1500 names).
inline int helper_sigterm_during_report(const char* delay_us) {
  g_term_delay_us = std::atol(delay_us);
  g_main_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, 1, false);
  sw.set_print_function([](const char*, std::size_t, void*) {}, nullptr);  // made, not shown
  main_loop(sw);
  measure_names(sw, 1500);
  sigterm_main_thread_later();
  for (;;) sw.finish_iter();
}

// A SIGTERM on its way to the main thread `delay_us` after the loop, while the main thread calls,
// over and over, what takes the locks the signal writer needs: finish_iter() with nothing to
// print (`toggle` false), or disable() and enable() (`toggle` true).
inline int helper_sigterm_during_calls(bool toggle, const char* delay_us) {
  g_term_delay_us = std::atol(delay_us);
  g_main_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  sigterm_main_thread_later();
  for (;;) {
    if (toggle) {
      sw.disable();
      sw.enable(0, std::nullopt, false);
    } else {
      sw.finish_iter();
    }
  }
}

// Returns from main with an interval open on the main thread and one left by a thread that
// exited (a crash's uncaught exception unwinds the same way): both are "running" in the file.
inline int helper_open_at_exit() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  std::thread([&] { sw.start_meas("left by a thread"); }).join();
  sw.start_meas("open at exit");
  return 0;
}

#endif  // LAPTIME_ENABLED

/// The program `mode` names (with its argument `arg`, or nullptr), run in this process; 2 where
/// none does.
inline int run_helper_program(std::string_view mode, const char* arg) {
#if LAPTIME_ENABLED
  if (mode == "detached") return helper_detached();
  if (mode == "exit-from-thread") return helper_exit_from_thread();
  if (mode == "throwing-print") return helper_throwing_print();
  if (mode == "plain") return helper_plain(false, nullptr);
  if (mode == "open-at-exit") return helper_open_at_exit();
  if (mode == "closed-streams") return helper_closed_streams();
  if (mode == "chdir-after-enable" && arg != nullptr) return helper_chdir_after_enable(arg);
  if (mode == "abort-by-usage-error" && arg != nullptr) return helper_abort_by_usage_error(arg);
  if (mode == "sigterm-during-report" && arg != nullptr) return helper_sigterm_during_report(arg);
  if (mode == "sigterm-during-finish-iter" && arg != nullptr) {
    return helper_sigterm_during_calls(false, arg);
  }
  if (mode == "sigterm-during-toggle" && arg != nullptr)
    return helper_sigterm_during_calls(true, arg);
  if (mode == "sigterm-during-exit-output" && arg != nullptr) {
    return helper_sigterm_during_exit_output(arg);
  }
  if (mode == "read-only-mount" && arg != nullptr) return helper_plain(true, arg);
  if (mode == "end-by" && arg != nullptr) return helper_end_by(arg);
  if (mode == "chained") return helper_chained();
  if (mode == "interrupted-then-continues") return helper_interrupted_then_continues();
  if (mode == "write-json-loop" && arg != nullptr) return helper_write_json_loop(arg);
#else
  (void)arg;
#endif
  std::fprintf(stderr, "exit-test: unknown helper %.*s\n", static_cast<int>(mode.size()),
               mode.data());
  return 2;
}

}  // namespace exit_test
