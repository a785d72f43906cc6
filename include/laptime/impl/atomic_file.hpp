// laptime internals: the one way laptime writes a JSON file (LAPTIME_OUTPUT at exit and on signals,
// Stopwatch::write_json).
//
// - Replaced atomically: a temporary file in the target's folder, flushed to disk, then renamed
//   over the target. A reader, or a process killed at any moment, sees the old file or the new
//   one, never a torn one.
// - A symbolic link is followed as open(O_CREAT) follows it, dangling or not: the link stays, its
//   target is created or replaced.
// - No temporary file survives the process: each is listed while it exists (TemporaryFiles), and
//   the ways a process ends that laptime sees (its signal handlers taking the default action,
//   exit, quick_exit) remove what is left. Only SIGKILL and the like can leave one.
// docs/guarantees.md lists what survives, with the tests that show it.
#pragma once

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/detail/descriptors.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/impl/own_output.hpp"  // SigpipeBlocked

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// The temporary file next to `target`: "<target>.tmp.<pid>.<16 hex digits>", in the target's
/// folder. Where that name would be longer than NAME_MAX (a name open() accepts may be up to it),
/// the target's file name is cut so that it fits; the pid and the random digits stay whole, so
/// the name stays unique.
inline std::string temporary_path_for(const std::string& target, long pid, std::uint64_t random) {
  static const char kHex[] = "0123456789abcdef";
  std::string suffix = ".tmp." + std::to_string(pid) + ".";
  for (int shift = 60; shift >= 0; shift -= 4) suffix += kHex[(random >> shift) & 0xf];
  const std::size_t slash = target.rfind('/');
  const std::size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  const std::size_t name_room = static_cast<std::size_t>(NAME_MAX) - suffix.size();
  const std::size_t name_length = std::min(target.size() - name_start, name_room);
  return target.substr(0, name_start + name_length) + suffix;
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
// The temporary files in existence

inline long current_kernel_tid() noexcept {
  return ::syscall(SYS_gettid);
}

/// This process's temporary files, one slot per write in progress, readable from a signal
/// handler (fixed arrays, atomics). One per process (process_singleton): a Python extension and a
/// C++ library in one process list their files in one place.
struct TemporaryFiles {
  static constexpr int kSlots = 16;  // writes at once; more are written unlisted
  static constexpr std::size_t kPathMax = 4096;
  enum : int { kFree, kClaimed, kCreating, kCreated };
  struct Slot {
    std::atomic<int> state{kFree};
    std::atomic<pid_t> pid{0};  // a forked child never removes its parent's files
    std::atomic<long> tid{0};   // the writing thread
    char path[kPathMax];
  };
  /// The process is ending: other threads than `ending_tid` create no more temporary files.
  std::atomic<bool> ending{false};
  std::atomic<long> ending_tid{0};
  std::atomic<bool> exit_hook{false};  // remove_temporary_files_at_exit registered
  Slot slots[kSlots];
};

/// The process's list; its first use is outside any signal handler (the handlers are installed
/// after it, see temporary_files_for_handler).
inline TemporaryFiles& temporary_files() {
  return process_singleton<TemporaryFiles>("temporary_files");
}

/// This copy's pointer to the list, for a signal handler, which may not call process_singleton.
inline std::atomic<TemporaryFiles*>& temporary_files_for_handler() noexcept {
  static std::atomic<TemporaryFiles*> p{nullptr};
  return p;
}

/// A temporary file's slot in the list, released when this goes away.
class ListedTemporaryFile {
 public:
  /// Lists `path` before it is created; false where the process is ending (then it must not be
  /// created). A full list or an overlong path is not listed (true).
  bool list(const std::string& path) noexcept {
    TemporaryFiles& t = temporary_files();
    for (TemporaryFiles::Slot& s : t.slots) {
      int expected = TemporaryFiles::kFree;
      if (path.size() >= TemporaryFiles::kPathMax) break;
      if (!s.state.compare_exchange_strong(expected, TemporaryFiles::kClaimed)) continue;
      std::memcpy(s.path, path.c_str(), path.size() + 1);
      s.pid.store(::getpid());
      s.tid.store(current_kernel_tid());
      s.state.store(TemporaryFiles::kCreating);
      slot_ = &s;
      break;
    }
    // After the slot is marked (seq_cst): an ending process either sees the slot or is seen here.
    if (t.ending.load() && t.ending_tid.load() != current_kernel_tid()) {
      release();
      return false;
    }
    return true;
  }
  /// open() has returned: a handler that waits for the file to exist can stop waiting.
  void created() noexcept {
    if (slot_ != nullptr) slot_->state.store(TemporaryFiles::kCreated);
  }
  void release() noexcept {
    if (slot_ != nullptr) slot_->state.store(TemporaryFiles::kFree);
    slot_ = nullptr;
  }
  ~ListedTemporaryFile() { release(); }

 private:
  TemporaryFiles::Slot* slot_ = nullptr;
};

inline long milliseconds_since(const timespec& start) noexcept {
  timespec now;
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
}

/// The process is ending: no other thread creates a temporary file from now on; waits at most
/// `wait_ms` for other threads' writes in progress to finish, then removes this process's
/// temporary files that are left. Async-signal-safe (a handler calls it before the default action
/// ends the process).
inline void remove_temporary_files(TemporaryFiles& t, long wait_ms) noexcept {
  const long self = current_kernel_tid();
  t.ending_tid.store(self);
  t.ending.store(true);
  const pid_t pid = ::getpid();
  timespec start;
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  for (TemporaryFiles::Slot& s : t.slots) {
    // The thread this handler interrupted never goes on: its file is removed as it is.
    while (s.state.load() != TemporaryFiles::kFree && s.pid.load() == pid && s.tid.load() != self &&
           milliseconds_since(start) < wait_ms) {
      const timespec nap{0, 1000000};
      ::nanosleep(&nap, nullptr);
    }
    const int state = s.state.load();
    if (s.pid.load() == pid &&
        (state == TemporaryFiles::kCreating || state == TemporaryFiles::kCreated)) {
      ::unlink(s.path);
    }
  }
}

/// atexit and at_quick_exit, registered at the first write: a write another thread has in
/// progress when the process exits finishes first (bounded); none starts after.
inline void remove_temporary_files_at_exit() noexcept {
  remove_temporary_files(temporary_files(), 2000);
}

// ---------------------------------------------------------------------------------------------
// Symbolic links

/// Follows the symbolic links at the end of `path` as open(O_CREAT) does: the last one may be
/// dangling (then its target is where the file goes). ELOOP after 40 links, as the kernel.
inline int follow_links(std::string& path) {
  for (int hops = 0;; ++hops) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return 0;
    if (hops == 40) return ELOOP;
    char buf[TemporaryFiles::kPathMax];
    const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    if (n < 0) return errno;
    if (static_cast<std::size_t>(n) == sizeof buf) return ENAMETOOLONG;
    std::string next(buf, static_cast<std::size_t>(n));
    // A relative link is relative to the link's folder.
    const auto slash = path.rfind('/');
    if (next[0] != '/' && slash != std::string::npos) next = path.substr(0, slash + 1) + next;
    path = next;
  }
}

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
  // A pipe whose reader has gone fails the write with EPIPE, never ends the process.
  const SigpipeBlocked no_sigpipe;
  const int fd = above_std_streams(::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
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

/// The rename reaches the disk with the folder (best effort: power loss only).
inline void sync_folder_of(const std::string& target) {
  const auto slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : target.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

/// SIGTERM, SIGINT and SIGHUP held back in this thread while it has a temporary file: one sent
/// to the process then ends it (or runs laptime's handler) after the file is renamed or removed.
/// A process with other threads relies on laptime's handlers (remove_temporary_files).
/// `with_abort`: SIGABRT too (the exit output, whose handler shares the writer: exit_output.hpp).
class EndingSignalsHeld {
 public:
  explicit EndingSignalsHeld(bool with_abort = false) noexcept {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, sig);
    if (with_abort) sigaddset(&set, SIGABRT);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~EndingSignalsHeld() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  EndingSignalsHeld(const EndingSignalsHeld&) = delete;
  EndingSignalsHeld& operator=(const EndingSignalsHeld&) = delete;

 private:
  sigset_t old_;
};

/// Writes `bytes` to `path` so that `path` is always either its old content or all of `bytes`:
/// a new temporary file in the target's folder (O_EXCL), written in full, fsync'ed, closed,
/// renamed over the target; the folder is then fsync'ed (best effort). On failure the temporary
/// file is removed and `path` left as it was. Symbolic links are followed as open(O_CREAT) follows
/// them (a dangling link's target is created, the link stays); a target that is not a regular
/// file is written in place; an existing read-only file is refused (EACCES), as opening it for
/// writing would be; once the process is ending, another thread's write is refused (ECANCELED).
/// Returns {} on success.
inline WriteFailure write_file_atomically(const std::string& path, std::string_view bytes) {
  // The system would read the path up to its NUL: another file than the one named.
  if (path.find('\0') != std::string::npos) return {EINVAL, "the path has a NUL byte"};
  struct stat st;
  // A pipe, socket or device named through a descriptor's link (/dev/stdout is
  // /proc/self/fd/1, whose link text "pipe:[N]" names no file): the kernel opens it, readlink
  // cannot follow it.
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    return write_in_place(path, bytes);
  }
  std::string target = path;
  if (const int e = follow_links(target)) return {e, "following the symbolic link"};
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists) {
    if (S_ISDIR(st.st_mode)) return {EISDIR, nullptr};
    if (!S_ISREG(st.st_mode)) return write_in_place(target, bytes);
    if (::access(target.c_str(), W_OK) != 0) return {errno, nullptr};
  }
  if (over_file_size_limit(bytes.size())) {
    return {EFBIG, "the results are larger than the file size limit (ulimit -f)"};
  }
  if (!temporary_files().exit_hook.exchange(true)) {
    std::atexit(remove_temporary_files_at_exit);
    std::at_quick_exit(remove_temporary_files_at_exit);
  }
  const EndingSignalsHeld held;
  ListedTemporaryFile listed;
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    temp = temporary_path_for(target, static_cast<long>(::getpid()), random_suffix());
    listed.release();
    if (!listed.list(temp)) return {ECANCELED, "the process is ending"};
    fd = above_std_streams(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
    if (fd < 0 && errno != EEXIST) break;
  }
  const int open_errno = errno;
  listed.created();
  if (fd < 0) return {open_errno, "creating a temporary file next to it"};
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
  listed.release();
  sync_folder_of(target);
  return {};
}

}  // namespace detail
LAPTIME_END_NAMESPACE
