// laptime internals: laptime's own output (reports, the progress line) written so that a closed or
// full stream never hurts the program that carries it.
//
// - SIGPIPE is blocked in the writing thread around the write, never ignored process-wide: a pipe
//   whose reader has gone (`./train | head -1`) fails the write with EPIPE instead of ending the
//   process, whatever the program's SIGPIPE disposition, which is left as it was. The SIGPIPE the
//   failed write raised is directed at this thread and consumed before the mask is restored.
// - The text is then dropped; the first failure per stream in the process is told in one line on
//   the other stream (dropped too where that one is closed).
// docs/guarantees.md lists what survives, with the tests that show it (tests/output-test.cpp).
#pragma once

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/detail/process_singleton.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// SIGPIPE blocked in this thread for the object's life; a SIGPIPE raised meanwhile (by a write
/// into a pipe without a reader) is consumed, unless the program itself blocks SIGPIPE here and
/// one was already pending: that one is the program's, left to it.
class SigpipeBlocked {
 public:
  SigpipeBlocked() noexcept {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    keep_pending_ = sigismember(&old_, SIGPIPE) == 1 && pending();
  }
  ~SigpipeBlocked() {
    // A thread is handed its own pending signals before the process's: one sigtimedwait takes the
    // SIGPIPE a write here raised, never one sent to the process.
    const timespec zero{0, 0};
    if (!keep_pending_ && pending()) (void)sigtimedwait(&pipe_, nullptr, &zero);
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  static bool pending() noexcept {
    sigset_t set;
    return sigpending(&set) == 0 && sigismember(&set, SIGPIPE) == 1;
  }
  sigset_t pipe_, old_;
  bool keep_pending_ = false;
};

/// Whether the failure of laptime's output to stdout / stderr was told (one line per process,
/// for every copy of this header in it).
struct OwnOutputWarned {
  std::atomic<bool> stream[2]{};
};

/// Tells on the other stream, the first time per stream in this process, that laptime's output
/// to `stream` (stdout or stderr) failed with `err`: "laptime: warning: <what>: stdout: Broken
/// pipe (...)". Call it with SIGPIPE blocked (SigpipeBlocked): the other stream may be closed too.
inline void warn_own_output_failed(std::FILE* stream, const char* what, int err) {
  const bool to_stdout = stream == stdout;
  if (process_singleton<OwnOutputWarned>("own_output_warned")
          .stream[to_stdout ? 0 : 1]
          .exchange(true)) {
    return;
  }
  std::FILE* other = to_stdout ? stderr : stdout;
  std::fprintf(other, "laptime: warning: %s: %s: %s (laptime's later output there is dropped)\n",
               what, to_stdout ? "stdout" : "stderr", std::strerror(err));
  std::fflush(other);
}

/// Writes laptime's own `text` to `stream` (stdout or stderr) and flushes it. False where the
/// stream is closed, full or failing: the text is dropped and the first failure told.
inline bool print_own_output(std::FILE* stream, std::string_view text, const char* what) {
  SigpipeBlocked blocked;
  errno = 0;
  const bool ok =
      std::fwrite(text.data(), 1, text.size(), stream) == text.size() && std::fflush(stream) == 0;
  if (!ok) warn_own_output_failed(stream, what, errno != 0 ? errno : EIO);
  return ok;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
