// laptime internals: the descriptors laptime keeps open or writes through never take the numbers
// 0, 1 or 2. A program started with a standard stream closed (`train >&-`, a daemon, a launcher
// that closes stdin) would otherwise get laptime's file as its stdout or stderr: every line the
// program or laptime prints would be written into the workers' shared counters, the signal pipe or
// the results file.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// `fd` itself where it is above 2 (or negative: a failed open, errno kept). Otherwise a
/// close-on-exec duplicate above 2, `fd` closed; -1 with errno set where none can be made.
inline int above_std_streams(int fd) noexcept {
  if (fd < 0 || fd > 2) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return moved;
}

/// Whether `bytes` written to a regular file would pass the process's file size limit
/// (`ulimit -f`, RLIMIT_FSIZE: batch systems set it): the write would raise SIGXFSZ, which ends the
/// process, instead of failing. laptime checks before it writes, and fails with EFBIG instead.
inline bool over_file_size_limit(std::size_t bytes) noexcept {
  rlimit limit{};
  return ::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
         bytes > limit.rlim_cur;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
