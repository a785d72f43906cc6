// laptime internals: the results at the end of a process (LAPTIME_OUTPUT, LAPTIME_PRINT_AT_EXIT).
//
// - The file is replaced atomically (impl/atomic_file.hpp, also Stopwatch::write_json).
// - At exit (atexit, at_quick_exit) the file is written first, and last: a write at a signal that
//   comes meanwhile waits for it and adds nothing. Then the report is printed with SIGPIPE blocked
//   (impl/own_output.hpp): a stdout whose reader has gone costs a warning, never the file or the
//   status. Temporary files of writes still in progress on other threads are waited for or removed.
// - SIGTERM, SIGINT, SIGHUP and SIGABRT (abort) write the file too: the handler wakes a writer
//   thread (made when the handlers are installed, all signals blocked) and waits for it with a
//   timeout, using only async-signal-safe calls; then the signal takes its course (the default
//   action, re-raised, after laptime's temporary files are removed) or the handler the program
//   had installed is called.
// docs/guarantees.md lists what survives which way a process ends, with the tests that show it.
#pragma once

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "laptime/config.hpp"
#include "laptime/detail/descriptors.hpp"
#include "laptime/detail/env_vars.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/impl/atomic_file.hpp"
#include "laptime/impl/own_output.hpp"
#include "laptime/impl/seed_report.hpp"
#include "laptime/impl/stopwatch_state.hpp"
#include "laptime/results.hpp"

// glibc's sa_handler and sa_sigaction are macros that name themselves (members of a union).
LAPTIME_CLANG_ALLOW("-Wdisabled-macro-expansion")

LAPTIME_BEGIN_NAMESPACE
namespace detail {

// ---------------------------------------------------------------------------------------------
// Pure logic

/// `path` as a path from the root: a relative one is taken in `cwd` (the folder the program was
/// in when it was read), so that a later chdir (a work-dir switch) does not move the file.
inline std::string absolute_in(std::string_view path, std::string_view cwd) {
  if (path.empty() || path.front() == '/' || cwd.empty()) return std::string(path);
  std::string out(cwd);
  if (out.back() != '/') out += '/';
  out += path;
  return out;
}

/// absolute_in(path, the current folder); the path as given where that folder cannot be read.
inline std::string in_folder_now(std::string_view path) {
  char cwd[4096];
  return absolute_in(path, ::getcwd(cwd, sizeof cwd) != nullptr ? cwd : "");
}

/// LAPTIME_OUTPUT's pattern with every "{rank}" and "{pid}" replaced.
inline std::string expand_output_path(std::string_view pattern, int rank, long pid) {
  std::string out;
  out.reserve(pattern.size() + 16);
  std::size_t i = 0;
  while (i < pattern.size()) {
    if (pattern.compare(i, 6, "{rank}") == 0) {
      out += std::to_string(rank);
      i += 6;
    } else if (pattern.compare(i, 5, "{pid}") == 0) {
      out += std::to_string(pid);
      i += 5;
    } else {
      out += pattern[i++];
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The at-exit output

/// Whether `r` holds nothing at all: no interval, no one-time measurement, no iteration.
inline bool nothing_measured(const Results& r) noexcept {
  return r.measurements.empty() && r.one_time.empty() && r.iterations_finished == 0;
}

/// The pid in the results file at `path` where another process wrote it at or after `since_ns`
/// (CLOCK_REALTIME), else 0. Two processes of one rank (the launcher of
/// torch.multiprocessing.spawn ranks that measured something itself, or a LAPTIME_OUTPUT without
/// {rank} on several ranks) would otherwise replace each other's file, the last one winning.
inline long other_writer_since(const std::string& path, std::int64_t since_ns, long pid) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  if (std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec < since_ns) return 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return 0;
  char head[1024];
  const ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  const std::string_view text(head, n > 0 ? static_cast<std::size_t>(n) : 0);
  const std::size_t at = text.find("\"pid\": ");  // laptime's own JSON: near the start
  if (at == std::string_view::npos) return 0;
  const std::string_view value = text.substr(at + 7);
  const std::optional<int> other =
      parse_int(value.substr(0, value.find_first_not_of("0123456789")));
  return other && *other != pid ? *other : 0;
}

/// `path` with ".<pid>" before its extension: "rank0.json" gives "rank0.1234.json".
inline std::string beside_path(const std::string& path, long pid) {
  const std::size_t slash = path.rfind('/');
  const std::size_t dot = path.rfind('.');
  const bool extension =
      dot != std::string::npos && (slash == std::string::npos ? dot > 0 : dot > slash + 1);
  const std::size_t at = extension ? dot : path.size();
  return path.substr(0, at) + "." + std::to_string(pid) + path.substr(at);
}

/// Writes `r` to LAPTIME_OUTPUT (expanded), or warns on stderr why it could not.
inline void write_output_file(const StopwatchState& s, const Results& r) {
  std::string path = expand_output_path(s.exit_output_path, r.rank, r.pid);
  // A process that measured nothing writes no file: the launcher of torch.multiprocessing.spawn
  // ranks, enabled by a top-level configure_from_env(), would replace rank 0's file with an
  // empty one (docs/workers.md).
  if (nothing_measured(r)) {
    std::fprintf(stderr,
                 "laptime: nothing was measured in this process (pid %ld): LAPTIME_OUTPUT='%s' "
                 "not written\n",
                 static_cast<long>(r.pid), escaped(path).c_str());
    return;
  }
  if (const long other = other_writer_since(path, s.made_realtime_ns, r.pid)) {
    const std::string beside = beside_path(path, r.pid);
    std::fprintf(stderr,
                 "laptime: warning: LAPTIME_OUTPUT='%s' was written by pid %ld during this run "
                 "(two processes of rank %d: put {pid} in the path, or set each one's rank); "
                 "this process's results go to '%s'\n",
                 escaped(path).c_str(), other, r.rank, escaped(beside).c_str());
    path = beside;
  }
  const WriteFailure f = write_file_atomically(path, r.to_json());
  // ECANCELED: a write at a signal while the process exits; the at-exit file is the one written.
  if (f && f.code != ECANCELED) {
    std::fprintf(stderr, "laptime: warning: could not write results to LAPTIME_OUTPUT='%s': %s\n",
                 escaped(path).c_str(), escaped(f.reason()).c_str());
  }
}

/// Signal handling state, one per process (process_singleton: every copy of the header in the
/// process, a Python extension and a C++ library alike, sees the same choice and handlers).
struct ExitSignals {
  static constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGABRT};
  static constexpr int kCount = 4;
  /// How long a handler waits for the writer to gather the results: bounded, because the thread
  /// the signal interrupted may hold a lock the writer needs (then the file is not written, one
  /// line says so, and the signal goes on).
  static constexpr long kTimeoutMs = 2000;
  /// Once the writer has them, how long the handler waits for the file: long recordings take
  /// seconds to serialise and write (4 million intervals, about 130 MB), and launchers give a
  /// process tens of seconds after SIGTERM (torchrun, Slurm, Kubernetes: 30 s by default).
  static constexpr long kWriteTimeoutMs = 20000;
  using Handler = void (*)(int, siginfo_t*, void*);

  std::mutex mutex;                        // install / uninstall
  std::mutex output_mutex;                 // one LAPTIME_OUTPUT write at a time, the final last
  std::atomic<pid_t> owner{0};             // the process that armed; a forked child only chains
  std::atomic<long> writer_tid{0};         // the writer thread never waits for itself
  std::atomic<int> request_fd{-1};         // a byte here wakes the writer
  std::atomic<unsigned> requested{0};      // tickets handed out by handlers
  std::atomic<unsigned> completed{0};      // the last ticket the writer served
  std::atomic<unsigned> gathered{0};       // the last ticket whose results the writer holds
  std::atomic<bool> final_written{false};  // the at-exit output is done: nothing more to save
  std::atomic<int> code_choice{-1};        // set_exit_signal_handlers: -1 none, 0 off, 1 on
  std::atomic<int> env_choice{-1};         // LAPTIME_SIGNAL_HANDLERS: -1 unset, 0, 1
  std::atomic<bool> armed{false};          // one of laptime's handlers is installed
  bool writer_started = false;             // under mutex
  Handler installed[kCount]{};             // laptime's handler in place, per signal (under mutex)
  struct sigaction previous[kCount] {};    // the program's actions, called after ours
};

inline ExitSignals& exit_signals() {
  return process_singleton<ExitSignals>("exit_signals");
}

/// This copy's pointer to the state, for its signal handler, which may not call
/// process_singleton (getenv, locks). Constant-initialised, set before the handler is installed.
inline std::atomic<ExitSignals*>& exit_signals_for_handler() noexcept {
  static std::atomic<ExitSignals*> p{nullptr};
  return p;
}

/// The ending signals held back on this thread while laptime's handlers are installed (nothing
/// otherwise), around a call that takes locks the signal writer needs (finish_iter, enable,
/// disable, reset, the settings): a handler run on this thread there would wait for the writer,
/// and the writer for the lock (no file, 2 s late). A signal that comes meanwhile is handled at
/// the call's end. Two system calls, where LAPTIME_OUTPUT is set.
class WriterLocksGuard {
 public:
  WriterLocksGuard() noexcept {
    // The process's choice: another copy of laptime (a Python extension, a library) may have
    // installed them. Made at its first use, which may fail for want of memory: none are then.
    try {
      if (exit_signals().armed.load(std::memory_order_relaxed)) held_.emplace();
    } catch (...) {
    }
  }

 private:
  std::optional<EndingSignalsHeld> held_;
};

/// The file at exit, the last one written: a write at a signal waits for it (output_mutex) and
/// then finds final_written. Called with the ending signals held back: a handler run in this
/// thread would wait for the writer thread, which waits for the locks this thread's results()
/// holds; one that comes meanwhile runs once they are released and finds the file written.
inline void write_final_output_file(StopwatchState& s, const Results& r) {
  ExitSignals& g = exit_signals();
  std::lock_guard<std::mutex> lock(g.output_mutex);
  if (!s.exit_output_path.empty()) write_output_file(s, r);
  g.final_written.store(true);  // a signal during static destruction: nothing to add
}

inline void write_exit_output() {
  StopwatchState& s = stopwatch_state();
  if (::getpid() != s.owner_pid) return;  // a forked child never reports its parent's results
  if (!s.ever_enabled()) return;          // disabled since: the results stay, and are written
  std::optional<Results> made;
  {
    const EndingSignalsHeld held(/*with_abort=*/true);
    made.emplace(s.results());
    // The file first: printing may fail (a closed pipe) or block.
    write_final_output_file(s, *made);
  }
  const Results& r = *made;
  const bool rank_ok = !s.print_rank0_only.load() || s.rank_info().rank == 0;
  if (!s.exit_print || !rank_ok) return;
  // A print function that throws (a closed stream) must not cost the exit code: an exception
  // leaving an atexit handler is std::terminate. Into stdout, a failure is told once.
  const SigpipeBlocked blocked;
  try {
    s.print(report_text(r, s.report_format.load()), "the report could not be printed at exit");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "laptime: warning: the report could not be printed at exit: %s\n",
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "laptime: warning: the report could not be printed at exit\n");
  }
}

/// atexit and at_quick_exit, or a binding whose interpreter ends the process without them
/// (binding_hooks.hpp): once; never lets an exception out (std::terminate at exit).
inline void run_exit_output() noexcept {
  if (exit_signals().final_written.load()) return;  // it ran already (a binding's exit handler)
  try {
    write_exit_output();
    // Writes other threads still have in progress finish first (bounded); none starts after. Not
    // in a forked child, which may not take the process lookup's lock at exit (its own writes
    // registered remove_temporary_files_at_exit already).
    if (::getpid() == stopwatch_state().owner_pid) remove_temporary_files_at_exit();
  } catch (const std::exception& e) {  // out of memory
    std::fprintf(stderr, "laptime: warning: results not written at exit: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "laptime: warning: results not written at exit\n");
  }
}

// ---------------------------------------------------------------------------------------------
// Signals

/// Async-signal-safe: hands the writer a ticket and waits (bounded) until it has been served.
inline void request_write_from_signal(ExitSignals& g) noexcept {
  const unsigned ticket = g.requested.fetch_add(1) + 1;
  const char byte = 1;
  while (::write(g.request_fd.load(), &byte, 1) < 0 && errno == EINTR) {
  }
  timespec start, now;
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  while (static_cast<int>(g.completed.load() - ticket) < 0) {
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    const long waited_ms =
        (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    const bool gathered = static_cast<int>(g.gathered.load() - ticket) >= 0;
    if (waited_ms >= (gathered ? ExitSignals::kWriteTimeoutMs : ExitSignals::kTimeoutMs)) {
      static const char kGathering[] =
          "laptime: warning: results not written at the signal: they could not be gathered "
          "within 2 s (a lock the interrupted thread holds?)\n";
      static const char kWriting[] =
          "laptime: warning: results not written at the signal: writing them took more than "
          "20 s\n";
      static_assert(ExitSignals::kTimeoutMs == 2000 && ExitSignals::kWriteTimeoutMs == 20000,
                    "the lines above name the two waits");
      const ssize_t said = gathered ? ::write(2, kWriting, sizeof kWriting - 1)
                                    : ::write(2, kGathering, sizeof kGathering - 1);
      (void)said;  // where stderr is gone, there is nowhere to say it
      return;
    }
    const timespec nap{0, 1000000};
    ::nanosleep(&nap, nullptr);
  }
}

/// The handler for SIGTERM, SIGINT, SIGHUP and SIGABRT: saves the results, then lets the signal
/// take its course: the program's own handler is called (it may go on running: the file is then
/// rewritten at exit), or the default action ends the process with this signal's status.
inline void exit_signal_handler(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  ExitSignals* gp = exit_signals_for_handler().load();
  if (gp == nullptr) return;
  ExitSignals& g = *gp;
  int i = 0;
  while (i < ExitSignals::kCount && ExitSignals::kSignals[i] != sig) ++i;
  if (i == ExitSignals::kCount) return;
  if (::getpid() == g.owner.load() && !g.final_written.load() &&
      current_kernel_tid() != g.writer_tid.load()) {
    request_write_from_signal(g);
  }
  const struct sigaction prev = g.previous[i];
  if ((prev.sa_flags & SA_SIGINFO) != 0) {
    if (prev.sa_sigaction != nullptr) prev.sa_sigaction(sig, info, context);
  } else if (prev.sa_handler == SIG_DFL) {
    // The default action: raised again, it is delivered when this handler returns (the signal is
    // blocked meanwhile), and the process ends as it would have without laptime, leaving none of
    // laptime's temporary files (not so where the program's handler is called: it may go on).
    if (TemporaryFiles* t = temporary_files_for_handler().load()) remove_temporary_files(*t, 100);
    ::sigaction(sig, &prev, nullptr);
    ::raise(sig);
  } else if (prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
  }
  errno = saved_errno;
}

inline void exit_writer_loop(ExitSignals& g, int fd) {
  g.writer_tid.store(current_kernel_tid());
  for (;;) {
    char buf[64];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    const unsigned upto = g.requested.load();
    try {
      StopwatchState& s = stopwatch_state();
      std::lock_guard<std::mutex> lock(g.output_mutex);
      // After the at-exit file, an older one must not replace it.
      if (s.ever_enabled() && !g.final_written.load()) {
        const Results r = s.results(/*wait_for_gpu=*/false);
        g.gathered.store(upto);  // no lock of the program's needed from here on
        write_output_file(s, r);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "laptime: warning: results not written at signal: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "laptime: warning: results not written at signal\n");
    }
    g.completed.store(upto);
  }
}

/// Starts the writer thread (once), all signals blocked in it. Under g.mutex. False with a
/// warning if it cannot.
inline bool start_exit_writer(ExitSignals& g) {
  if (g.writer_started) return true;
  int fds[2];
  bool piped = ::pipe2(fds, O_CLOEXEC) == 0;
  if (piped) {
    fds[0] = above_std_streams(fds[0]);
    fds[1] = above_std_streams(fds[1]);
    piped = fds[0] >= 0 && fds[1] >= 0;
    if (!piped) {
      const int saved = errno;
      for (int fd : fds) {
        if (fd >= 0) ::close(fd);
      }
      errno = saved;
    }
  }
  if (!piped) {
    warn_once("signal-writer",
              std::string("cannot save results on signals: pipe: ") + std::strerror(errno));
    return false;
  }
  // A handler never blocks on a full pipe (a byte already there wakes the writer all the same).
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    std::thread([&g, fd = fds[0]] { exit_writer_loop(g, fd); }).detach();
  } catch (const std::exception& e) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    ::close(fds[0]);
    ::close(fds[1]);
    warn_once("signal-writer", std::string("cannot save results on signals: thread: ") + e.what());
    return false;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  while (g.writer_tid.load() == 0) std::this_thread::yield();
  g.request_fd.store(fds[1]);
  g.writer_started = true;
  return true;
}

/// Installs the handlers (signals the program ignores stay ignored), or restores the program's
/// actions where laptime's is still the one installed.
inline void set_exit_signal_handlers_installed(bool on) {
  ExitSignals& g = exit_signals();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (on && !start_exit_writer(g)) return;
  exit_signals_for_handler().store(&g);
  temporary_files_for_handler().store(&temporary_files());
  for (int i = 0; i < ExitSignals::kCount; ++i) {
    const int sig = ExitSignals::kSignals[i];
    struct sigaction current;
    if (::sigaction(sig, nullptr, &current) != 0) continue;
    const bool siginfo = (current.sa_flags & SA_SIGINFO) != 0;
    const bool ours =
        g.installed[i] != nullptr && siginfo && current.sa_sigaction == g.installed[i];
    if (on && g.installed[i] == nullptr) {
      if (!siginfo && current.sa_handler == SIG_IGN) continue;
      g.previous[i] = current;
      struct sigaction act = {};
      act.sa_sigaction = &exit_signal_handler;
      act.sa_mask = current.sa_mask;
      // SA_RESTART as the program had it: Python relies on EINTR to run its SIGINT handler.
      act.sa_flags = SA_SIGINFO | (current.sa_flags & (SA_RESTART | SA_ONSTACK));
      if (!siginfo && current.sa_handler == SIG_DFL) act.sa_flags |= SA_RESTART;
      if (::sigaction(sig, &act, nullptr) == 0) g.installed[i] = &exit_signal_handler;
    } else if (!on && g.installed[i] != nullptr) {
      // A handler the program installed after laptime's stays: it chains to laptime's no more.
      if (ours) ::sigaction(sig, &g.previous[i], nullptr);
      g.installed[i] = nullptr;
    }
  }
  bool any = false;
  for (const ExitSignals::Handler h : g.installed) any = any || h != nullptr;
  g.armed.store(any);
}

/// Whether the handlers are wanted: LAPTIME_SIGNAL_HANDLERS over the code's choice, on by default.
inline bool exit_signal_handlers_wanted() {
  const ExitSignals& g = exit_signals();
  if (const int env = g.env_choice.load(); env >= 0) return env == 1;
  return g.code_choice.load() != 0;
}

/// Reads LAPTIME_OUTPUT / LAPTIME_PRINT_AT_EXIT / LAPTIME_SIGNAL_HANDLERS once, at the first
/// enable, and registers the at-exit output.
inline void arm_exit_output(StopwatchState& s) {
  if (s.exit_hook_registered.exchange(true)) return;
  if (const auto v = env_text<Env::output>()) s.exit_output_path = in_folder_now(*v);
  if (const auto b = env_checked(env_bool<Env::print_at_exit>())) s.exit_print = *b;
  ExitSignals& g = exit_signals();
  if (const auto b = env_checked(env_bool<Env::signal_handlers>())) g.env_choice.store(*b ? 1 : 0);
  if (s.exit_output_path.empty() && !s.exit_print) return;
  // A forked child that arms its own output began after its parent: files written since count.
  if (s.owner_pid != ::getpid()) s.made_realtime_ns = ConfigState::realtime_now_ns();
  s.owner_pid = ::getpid();
  g.owner.store(s.owner_pid);
  std::atexit(run_exit_output);
  std::at_quick_exit(run_exit_output);
  // Only the file is saved on a signal: printing there could wait for a lock forever.
  if (!s.exit_output_path.empty() && exit_signal_handlers_wanted()) {
    set_exit_signal_handlers_installed(true);
  }
}

/// Stopwatch::set_exit_signal_handlers.
inline void choose_exit_signal_handlers(bool on) {
  ExitSignals& g = exit_signals();
  g.code_choice.store(on ? 1 : 0);
  StopwatchState& s = stopwatch_state();
  // Before the first enable the choice is read there; afterwards it applies now.
  if (!s.exit_hook_registered.load() || g.owner.load() != ::getpid()) return;
  if (s.exit_output_path.empty()) return;
  set_exit_signal_handlers_installed(exit_signal_handlers_wanted());
}

}  // namespace detail
LAPTIME_END_NAMESPACE

LAPTIME_CLANG_ALLOW_END
