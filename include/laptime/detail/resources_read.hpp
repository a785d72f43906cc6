// laptime internals: reading /proc files for laptime/resources.hpp: open, read and pread with
// EINTR retried, getdents64 into a stack buffer, and the process-wide count of the bytes read
// (the children sampler takes them out of the process's own I/O: resources_sampler.hpp). Under
// the walk of a process tree (resources_walk.hpp) and the sampler.
#pragma once

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/procfs.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace resources {
namespace detail {

/// The bytes laptime read from /proc, process-wide.
struct ProcBytesRead {
  std::atomic<std::uint64_t> bytes{0};
};

/// Bytes read from /proc through this file, process-wide (every copy of the header adds to one
/// counter, as a start and an end sample may come from two different shared objects). Made with
/// the sampler's process-wide state (SelfSampler), so that whoever makes one (the Stopwatch's
/// track_cpu_usage, before any fork) makes both.
inline std::atomic<std::uint64_t>& proc_bytes_read() {
  return laptime::detail::process_singleton<ProcBytesRead>("proc_bytes_read").bytes;
}

/// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

/// Reads from `fd` into buf[size, cap) until end of file or `cap`, retrying on EINTR, and counts
/// the bytes in proc_bytes_read(). Returns the new size, or -errno.
inline long read_into(int fd, char* buf, std::size_t size, std::size_t cap) noexcept {
  const std::size_t first = size;
  while (size < cap) {
    const ssize_t n = ::read(fd, buf + size, cap - size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
  }
  proc_bytes_read().fetch_add(size - first, std::memory_order_relaxed);
  return static_cast<long>(size);
}

/// Reads up to `cap` bytes at offset 0 of an open /proc file (the kernel formats it anew on
/// each read at offset 0), counting them in proc_bytes_read(). Returns the count, or -errno.
inline long pread_into(int fd, char* buf, std::size_t cap) noexcept {
  for (;;) {
    const ssize_t n = ::pread(fd, buf, cap, 0);
    if (n >= 0) {
      proc_bytes_read().fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
      return static_cast<long>(n);
    }
    if (errno != EINTR) return -errno;
  }
}

/// Reads up to `cap` bytes of `rel` (relative to `dir_fd`) with open/read only. Returns the byte
/// count, or -errno.
inline long read_at(int dir_fd, const char* rel, char* buf, std::size_t cap) noexcept {
  const Fd fd(::openat(dir_fd, rel, O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return -errno;
  return read_into(fd.get(), buf, 0, cap);
}

/// Reads all of `rel` into `buf` (grown as needed, kept between calls). Returns 0 or -errno.
inline int read_all_at(int dir_fd, const char* rel, std::vector<char>& buf) {
  const Fd fd(::openat(dir_fd, rel, O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return -errno;
  if (buf.capacity() < 4096) buf.reserve(4096);
  std::size_t size = 0;
  for (;;) {
    buf.resize(std::max(buf.capacity(), 2 * size));
    const long n = read_into(fd.get(), buf.data(), size, buf.size());
    if (n < 0) return static_cast<int>(n);
    const bool full = static_cast<std::size_t>(n) == buf.size();
    size = static_cast<std::size_t>(n);
    if (!full) break;  // end of file before the buffer filled
  }
  buf.resize(size);
  return 0;
}

/// Calls f(pid) for each numeric entry of directory `rel` (relative to `dir_fd`), through
/// getdents64 into a stack buffer: no DIR allocation per call. Returns 0 or -errno.
template <class Fn>
int for_each_pid_entry(int dir_fd, const char* rel, Fn&& f) {
  const Fd fd(::openat(dir_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return -errno;
  alignas(8) char buf[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, fd.get(), buf, sizeof buf);
    if (n < 0) return -errno;
    if (n == 0) return 0;
    // struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
    for (long pos = 0; pos < n;) {
      unsigned short reclen = 0;
      std::memcpy(&reclen, buf + pos + 16, sizeof reclen);
      if (reclen == 0) return -EIO;
      const char* name = buf + pos + 19;
      if (const auto pid = laptime::detail::procfs::parse_pid(name)) f(*pid);
      pos += reclen;
    }
  }
}

}  // namespace detail
}  // namespace resources
LAPTIME_END_NAMESPACE
