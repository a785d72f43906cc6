// laptime internals: the results at the end of a process (LAPTIME_OUTPUT, LAPTIME_PRINT_AT_EXIT),
// and the one way laptime writes a JSON file (also Stopwatch::write_json).
//
// - The file is replaced atomically: a temporary file in the same folder, flushed to disk, then
//   renamed over the target. A reader, or a process killed at any moment, sees the old file or the
//   new one, never a torn one.
// - At exit (atexit, at_quick_exit) the file is written first, then the report printed with
//   SIGPIPE blocked: a stdout whose reader has gone costs a warning, never the file or the status.
// - SIGTERM, SIGINT, SIGHUP and SIGABRT (abort) write the file too: the handler wakes a writer
//   thread (made when the handlers are installed, all signals blocked) and waits for it with a
//   timeout, using only async-signal-safe calls; then the signal takes its course (the default
//   action, re-raised) or the handler the program had installed is called.
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
#include <string>
#include <string_view>
#include <thread>

#include "laptime/config.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/stopwatch_state.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

// ---------------------------------------------------------------------------------------------
// Pure logic

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

/// The temporary file next to `target`: "<target>.tmp.<pid>.<16 hex digits>".
inline std::string temporary_path_for(const std::string& target, long pid, std::uint64_t random) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = target + ".tmp." + std::to_string(pid) + ".";
  for (int shift = 60; shift >= 0; shift -= 4) out += kHex[(random >> shift) & 0xf];
  return out;
}

/// Why writing a file failed: errno and the step (nullptr: none in particular).
struct WriteFailure {
  int code = 0;  ///< 0: written
  const char* step = nullptr;

  explicit operator bool() const noexcept { return code != 0; }
  /// "No such file or directory (creating a temporary file next to it)".
  std::string reason() const {
    std::string r = std::strerror(code);
    if (step != nullptr) r = r + " (" + step + ")";
    return r;
  }
};

// ---------------------------------------------------------------------------------------------
// Writing a file

inline WriteFailure write_all(int fd, std::string_view bytes) noexcept {
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return {errno, "writing"};
    }
    if (n == 0) return {EIO, "writing"};
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return {};
}

/// A target that is not a regular file (/dev/null, /dev/stdout, a FIFO) has nothing to replace:
/// it is written as it is.
inline WriteFailure write_in_place(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return {errno, "opening"};
  WriteFailure f = write_all(fd, bytes);
  if (::close(fd) != 0 && !f && errno != EINTR) f = {errno, "closing"};
  return f;
}

inline std::uint64_t random_suffix() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  std::uint64_t x =
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
      (counter.fetch_add(1, std::memory_order_relaxed) << 48) ^
      reinterpret_cast<std::uintptr_t>(&x);
  // splitmix64's finaliser: neighbouring inputs give unrelated names.
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Writes `bytes` to `path` so that `path` is always either its old content or all of `bytes`:
/// a new temporary file in the same folder (O_EXCL), written in full, fsync'ed, closed, renamed
/// over `path`; the folder is then fsync'ed (best effort). On failure the temporary file is
/// removed and `path` left as it was. A symbolic link is followed (its target is replaced); a
/// target that is not a regular file is written in place; an existing read-only file is refused
/// (EACCES), as opening it for writing would be. Returns {} on success.
inline WriteFailure write_file_atomically(const std::string& path, std::string_view bytes) {
  std::string target = path;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    if (char* real = ::realpath(path.c_str(), nullptr)) {
      target = real;
      std::free(real);
    }
  }
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists) {
    if (S_ISDIR(st.st_mode)) return {EISDIR, nullptr};
    if (!S_ISREG(st.st_mode)) return write_in_place(target, bytes);
    if (::access(target.c_str(), W_OK) != 0) return {errno, nullptr};
  }
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    temp = temporary_path_for(target, static_cast<long>(::getpid()), random_suffix());
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return {errno, "creating a temporary file next to it"};
  if (exists) (void)::fchmod(fd, st.st_mode & 07777);  // keep the file's permissions
  WriteFailure f = write_all(fd, bytes);
  // Flushed before the rename: after a crash the name holds the old file or the whole new one.
  // File systems without fsync (EINVAL) have nothing to flush.
  if (!f && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) f = {errno, "flushing to disk"};
  if (::close(fd) != 0 && !f && errno != EINTR) f = {errno, "closing"};  // NFS reports here
  if (!f && ::rename(temp.c_str(), target.c_str()) != 0) {
    f = {errno, "renaming the temporary file over it"};
  }
  if (f) {
    ::unlink(temp.c_str());
    return f;
  }
  // The rename itself reaches the disk with the folder (best effort: power loss only).
  const auto slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : target.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// The at-exit output

/// Writes `r` to LAPTIME_OUTPUT (expanded), or warns on stderr why it could not.
inline void write_output_file(const StopwatchState& s, const Results& r) {
  const std::string path = expand_output_path(s.exit_output_path, r.rank, r.pid);
  if (const WriteFailure f = write_file_atomically(path, r.to_json())) {
    std::fprintf(stderr, "laptime: warning: could not write results to LAPTIME_OUTPUT='%s': %s\n",
                 path.c_str(), f.reason().c_str());
  }
}

/// Runs `f` with SIGPIPE blocked on this thread, so that writing to a pipe whose reader has gone
/// fails with EPIPE instead of ending the process; a SIGPIPE that `f` raised is consumed.
template <class F>
void without_sigpipe(F&& f) {
  sigset_t pipe_set, old_mask, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  const bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  f();
  if (!was_pending) {
    const timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
}

/// Signal handling state, one per process (process_singleton: every copy of the header in the
/// process, a Python extension and a C++ library alike, sees the same choice and handlers).
struct ExitSignals {
  static constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGABRT};
  static constexpr int kCount = 4;
  /// How long a handler waits for the writer: bounded, because the thread the signal interrupted
  /// may hold a lock the writer needs (then the file is not written and the signal goes on).
  static constexpr long kTimeoutMs = 2000;
  using Handler = void (*)(int, siginfo_t*, void*);

  std::mutex mutex;                        // install / uninstall
  std::atomic<pid_t> owner{0};             // the process that armed; a forked child only chains
  std::atomic<long> writer_tid{0};         // the writer thread never waits for itself
  std::atomic<int> request_fd{-1};         // a byte here wakes the writer
  std::atomic<unsigned> requested{0};      // tickets handed out by handlers
  std::atomic<unsigned> completed{0};      // the last ticket the writer served
  std::atomic<bool> final_written{false};  // the at-exit output is done: nothing more to save
  std::atomic<int> code_choice{-1};        // set_exit_signal_handlers: -1 none, 0 off, 1 on
  std::atomic<int> env_choice{-1};         // LAPTIME_SIGNAL_HANDLERS: -1 unset, 0, 1
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

inline void write_exit_output() {
  StopwatchState& s = stopwatch_state();
  if (::getpid() != s.owner_pid) return;  // a forked child never reports its parent's results
  if (!s.is_on()) return;
  const Results r = s.results();
  // The file first: printing may fail (a closed pipe) or block.
  if (!s.exit_output_path.empty()) write_output_file(s, r);
  exit_signals().final_written.store(true);  // a signal during static destruction: nothing to add
  const bool rank_ok = !s.print_rank0_only.load() || s.rank_info().rank == 0;
  if (!s.exit_print || !rank_ok) return;
  without_sigpipe([&] {
    // A print function that throws (a closed stream) must not cost the exit code: an exception
    // leaving an atexit handler is std::terminate.
    const bool to_stdout = s.print_fn.load() == nullptr;
    try {
      if (to_stdout) std::clearerr(stdout);
      errno = 0;
      s.print(r.to_text());
      if (to_stdout && std::ferror(stdout)) {
        const int err = errno != 0 ? errno : EIO;
        std::fprintf(stderr,
                     "laptime: warning: the report could not be printed at exit: stdout: %s\n",
                     std::strerror(err));
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "laptime: warning: the report could not be printed at exit: %s\n",
                   e.what());
    } catch (...) {
      std::fprintf(stderr, "laptime: warning: the report could not be printed at exit\n");
    }
  });
}

/// atexit and at_quick_exit: never lets an exception out (std::terminate at exit).
inline void run_exit_output() noexcept {
  try {
    write_exit_output();
  } catch (const std::exception& e) {  // out of memory
    std::fprintf(stderr, "laptime: warning: results not written at exit: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "laptime: warning: results not written at exit\n");
  }
}

// ---------------------------------------------------------------------------------------------
// Signals

inline long current_kernel_tid() noexcept {
  return static_cast<long>(::syscall(SYS_gettid));
}

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
    if (waited_ms >= ExitSignals::kTimeoutMs) return;
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
    // blocked meanwhile), and the process ends as it would have without laptime.
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
      if (s.is_on()) write_output_file(s, s.results(/*wait_for_gpu=*/false));
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
  if (::pipe2(fds, O_CLOEXEC) != 0) {
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
  if (auto v = env_value("LAPTIME_OUTPUT")) s.exit_output_path = std::string(*v);
  if (auto v = env_value("LAPTIME_PRINT_AT_EXIT")) {
    const auto b = parse_bool(*v);
    if (!b) {
      warn_once("env-print-at-exit", "LAPTIME_PRINT_AT_EXIT='" + std::string(*v) +
                                         "' is not a boolean (1/0, true/false, on/off); ignored");
    }
    s.exit_print = b.value_or(false);
  }
  ExitSignals& g = exit_signals();
  if (auto v = env_value("LAPTIME_SIGNAL_HANDLERS")) {
    const auto b = parse_bool(*v);
    if (!b) {
      warn_once("env-signal-handlers", "LAPTIME_SIGNAL_HANDLERS='" + std::string(*v) +
                                           "' is not a boolean (1/0, true/false, on/off); ignored");
    } else {
      g.env_choice.store(*b ? 1 : 0);
    }
  }
  if (s.exit_output_path.empty() && !s.exit_print) return;
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
