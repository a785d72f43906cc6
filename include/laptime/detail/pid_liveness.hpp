// laptime internals: whether a process a pid names still runs, and whether /proc can say so.
// /proc is not always this process's view of the pids: a sandbox mounts none (or an empty
// folder), `chroot` hides it, a process at its descriptor limit cannot open it, and a PID
// namespace entered without remounting it (`unshare -p` without `--mount-proc`) shows the outer
// namespace's processes under the numbers this one's getpid() gives. Where /proc cannot tell,
// kill(pid, 0) can (it works in the caller's namespace and opens nothing): a process that exists
// is taken as alive, never as ended, since ending a live worker's region loses its measurements
// and fails its next end_meas.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/detail/procfs.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// Whether the proc file system open as `proc_fd` (a directory descriptor, or AT_FDCWD for
/// "/proc") numbers processes as this process's getpid() does: its "self" link names our pid.
/// False where it has no "self" (none mounted) or another namespace's number. The answer yes for
/// "/proc" is kept (per pid: a forked child asks again); no is asked again each time.
inline bool proc_shows_our_pids(int proc_fd = AT_FDCWD) noexcept {
  static std::atomic<long> shows_pid{0};
  const long me = static_cast<long>(::getpid());
  if (proc_fd == AT_FDCWD && shows_pid.load(std::memory_order_relaxed) == me) return true;
  char link[32];
  const ssize_t n =
      ::readlinkat(proc_fd, proc_fd == AT_FDCWD ? "/proc/self" : "self", link, sizeof link - 1);
  if (n <= 0) return false;
  long pid = 0;
  for (ssize_t i = 0; i < n; ++i) {
    if (link[i] < '0' || link[i] > '9') return false;
    pid = pid * 10 + (link[i] - '0');
  }
  if (pid != me) return false;
  if (proc_fd == AT_FDCWD) shows_pid.store(me, std::memory_order_relaxed);
  return true;
}

/// What can be said of the process `pid`.
enum class Liveness {
  Gone,               ///< no such process, or a zombie (it ended; its parent has not reaped it)
  Alive,              ///< running; its start time read from /proc
  AliveStartUnknown,  ///< exists (kill(pid, 0)), but /proc cannot say more: perhaps a zombie
};

/// `pid`'s liveness, and its start time (clock ticks after boot) into `*start_time` when Alive.
/// `proc_fd` as for proc_shows_our_pids (tests pass an empty folder: no /proc).
inline Liveness process_liveness(long pid, std::uint64_t* start_time,
                                 int proc_fd = AT_FDCWD) noexcept {
  if (pid <= 0) return Liveness::Gone;  // kill(0 or -1, 0) would ask of a group
  const int saved_errno = errno;
  Liveness answer = Liveness::Gone;
  char path[48];
  std::snprintf(path, sizeof path, proc_fd == AT_FDCWD ? "/proc/%ld/stat" : "%ld/stat", pid);
  const int fd = proc_shows_our_pids(proc_fd) ? ::openat(proc_fd, path, O_RDONLY | O_CLOEXEC) : -1;
  char buf[1024];
  const ssize_t n = fd >= 0 ? ::read(fd, buf, sizeof buf) : -1;
  if (fd >= 0) ::close(fd);
  // Two ifs, not `n > 0 ? parse(...) : std::nullopt`: g++ -Os then warns that the optional's
  // state may be read uninitialised (-Wmaybe-uninitialized, a false positive).
  std::optional<procfs::ProcessStat> st;
  if (n > 0) st = procfs::parse_process_stat(std::string_view(buf, static_cast<std::size_t>(n)));
  if (st.has_value()) {
    const bool ended = st->state == 'Z' || st->state == 'X' || st->state == 'x';
    if (!ended && start_time != nullptr) *start_time = st->start_time;
    answer = ended ? Liveness::Gone : Liveness::Alive;
  } else if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) {
    answer = Liveness::AliveStartUnknown;
  }
  errno = saved_errno;
  return answer;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
