// laptime internals: the descriptors laptime keeps open or writes through never take the numbers
// 0, 1 or 2. A program started with a standard stream closed (`train >&-`, a daemon, a launcher
// that closes stdin) would otherwise get laptime's file as its stdout or stderr: every line the
// program or laptime prints would be written into the workers' shared counters, the signal pipe or
// the results file.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

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

}  // namespace detail
LAPTIME_END_NAMESPACE
