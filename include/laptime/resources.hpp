// laptime: CPU and I/O of the process tree and of the machine, sampled from /proc (SPEC §3).
//
//   auto start = laptime::resources::sample();
//   run_one_iteration();
//   usage.add(start, laptime::resources::sample(), wall_ns);
//   if (auto cores = usage.process_cores()) std::printf("%.2f cores\n", *cores);
//
// A Sample holds raw counters at one instant; a Usage turns pairs of them into interval-weighted
// figures. Any figure /proc could not give is std::nullopt, never a guess. docs/resources.md
// explains what each figure means and what one sample costs.
#pragma once

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/procfs.hpp"
#include "laptime/error.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace resources {

/// Raw counters at one instant, each group with its own validity flag. Only differences between
/// two Samples of the same process mean anything; Usage::add takes them.
struct Sample {
  /// utime+stime+cutime+cstime of the process and of each live descendant, in seconds: the CPU
  /// used by the whole tree, including children already reaped.
  bool tree_cpu_ok = false;
  double tree_cpu_s = 0;
  /// The "cpu" line of /proc/stat in clock ticks: busy = total - idle - iowait.
  bool system_ok = false;
  std::uint64_t system_busy_ticks = 0, system_total_ticks = 0;
  /// /proc/<pid>/io summed over the tree (reaped children are inside their parent's counters).
  bool io_ok = false;
  std::uint64_t read_bytes = 0, write_bytes = 0, rchar = 0, wchar = 0;
  /// Processes counted in tree_cpu_s: the process itself plus its live descendants.
  std::uint32_t processes = 0;
  /// Bytes the sampler itself had read from /proc (process-wide) when it read this process's io
  /// file: its own reads count in rchar, and Usage::add takes them out again.
  std::uint64_t sampler_bytes = 0;
  /// CLOCK_MONOTONIC (ns) when the process's own CPU clock was read (precise samples only; 0
  /// otherwise). Usage::add divides by the time between two samples' readings rather than by
  /// the interval, which the samples' own cost lengthens on either side.
  std::int64_t taken_ns = 0;
};

/// Clock ticks per second of every /proc time field (sysconf(_SC_CLK_TCK)); 0 if unknown.
inline long clock_ticks() noexcept {
#if LAPTIME_ENABLED
  static const long ticks = [] {
    const long t = ::sysconf(_SC_CLK_TCK);
    return t > 0 ? t : 0L;
  }();
  return ticks;
#else
  return 0;
#endif
}

namespace detail {

/// Bytes read from /proc by the sampler, process-wide (every copy of the header adds to one
/// counter, as a start and an end sample may come from two different shared objects).
struct SamplerCounters {
  std::atomic<std::uint64_t> bytes_read{0};
};
inline std::atomic<std::uint64_t>& sampler_bytes_read() {
  return laptime::detail::process_singleton<SamplerCounters>("sampler").bytes_read;
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
/// the bytes in sampler_bytes_read(). Returns the new size, or -errno.
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
  sampler_bytes_read().fetch_add(size - first, std::memory_order_relaxed);
  return static_cast<long>(size);
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
template <class F>
int for_each_pid_entry(int dir_fd, const char* rel, F&& f) {
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

/// Per-thread buffers, so that a warm sampler allocates nothing.
struct Scratch {
  std::string root;                               // proc_root, NUL-terminated for open()
  std::vector<pid_t> pids;                        // children still to visit, as a stack
  std::vector<std::pair<pid_t, pid_t>> pid_ppid;  // fallback scan of /proc/*/stat
  std::vector<char> text;                         // children files
};

inline Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

/// What one subtree contributed.
struct Totals {
  std::uint64_t ticks = 0;
  laptime::detail::procfs::IoCounters io;
  std::uint32_t processes = 0;

  Totals& operator+=(const Totals& o) noexcept {
    ticks += o.ticks;
    io += o.io;
    processes += o.processes;
    return *this;
  }
};

/// One walk of a process tree under an open proc root.
class TreeWalk {
 public:
  TreeWalk(int root_fd, Scratch& s) noexcept : root_fd_(root_fd), s_(s) {}

  // A process tree is a few levels deep; the cap only guards against a corrupt listing.
  static constexpr int kMaxDepth = 64;
  // A reap during the walk is retried this often, then the last reading is taken.
  static constexpr int kAttempts = 3;

  /// Sums `pid` and its descendants into `out`. False if `pid` itself could not be read (for
  /// the root that makes the CPU and I/O figures unavailable).
  bool walk(pid_t pid, int depth, Totals& out) {
    namespace pf = laptime::detail::procfs;
    for (int attempt = 1;; ++attempt) {
      const auto st = read_stat(pid, depth);
      if (!st) return false;
      Totals t;
      t.ticks = st->cpu_ticks();
      t.processes = 1;
      read_io(pid, depth, t.io);

      const std::size_t begin = s_.pids.size();
      if (!list_children(pid, st->num_threads, depth == 0) && depth == 0) children_failed_ = true;
      const std::size_t end = s_.pids.size();
      for (std::size_t i = begin; i < end && depth < kMaxDepth; ++i) {
        Totals child;
        if (walk(s_.pids[i], depth + 1, child)) t += child;
      }
      s_.pids.resize(begin);

      // A child reaped between reading this process and reading the child would be in neither
      // (or, read the other way round, in both). Reaping moves the parent's fingerprint, so
      // compare it after the walk. The root is always checked; a process that listed no
      // children can only have reaped one it had at its first read, which was listed then.
      if (attempt < kAttempts && (depth == 0 || end > begin)) {
        const auto again = read_stat(pid, depth);
        if (again && again->reap_fingerprint() != st->reap_fingerprint()) continue;
      }
      if (depth == 0) root_own_ticks_ = st->utime + st->stime;
      out = t;
      return true;
    }
  }

  bool children_failed() const noexcept { return children_failed_; }
  /// utime+stime of the root process itself (its threads; not its children), in ticks.
  std::uint64_t root_own_ticks() const noexcept { return root_own_ticks_; }
  bool root_io_failed() const noexcept { return root_io_failed_; }
  std::uint64_t sampler_bytes() const noexcept { return sampler_bytes_; }

 private:
  std::optional<laptime::detail::procfs::ProcessStat> read_stat(pid_t pid, int depth) {
    char rel[48];
    std::snprintf(rel, sizeof rel, "%d/stat", static_cast<int>(pid));
    char buf[2048];
    const long n = read_at(root_fd_, rel, buf, sizeof buf);
    if (n < 0) {
      // A descendant that vanished (exited and was reaped) is normal: its CPU is now in its
      // parent's cutime/cstime.
      if (depth == 0) warn("resources.process_stat", "cannot read", rel, static_cast<int>(-n));
      return std::nullopt;
    }
    auto st = laptime::detail::procfs::parse_process_stat(std::string_view(buf, n));
    if (!st && depth == 0) warn("resources.process_stat", "cannot parse", rel, 0);
    // comm points into buf, which dies here; nothing reads it.
    if (st) st->comm = {};
    return st;
  }

  void read_io(pid_t pid, int depth, laptime::detail::procfs::IoCounters& io) {
    char rel[48];
    std::snprintf(rel, sizeof rel, "%d/io", static_cast<int>(pid));
    char buf[1024];
    const long n = read_at(root_fd_, rel, buf, sizeof buf);
    const auto parsed =
        n < 0 ? std::nullopt : laptime::detail::procfs::parse_io(std::string_view(buf, n));
    if (parsed) {
      io = *parsed;
      if (depth == 0) sampler_bytes_ = sampler_bytes_read().load(std::memory_order_relaxed);
      return;
    }
    if (depth == 0) {
      root_io_failed_ = true;
      warn("resources.process_io", n < 0 ? "cannot read" : "cannot parse", rel,
           n < 0 ? static_cast<int>(-n) : 0);
    } else if (n == -EACCES || n == -EPERM) {
      // Another user's process (a setuid helper): skip its I/O, keep its CPU, say so once.
      char what[160];
      std::snprintf(what, sizeof what,
                    "resources: no permission to read /proc/%s (a descendant); the I/O of such "
                    "descendants is left out of the figures",
                    rel);
      laptime::detail::warn_once("resources.child_io_denied", what);
    }
  }

  /// Appends the children of every thread of `pid` to s_.pids. False when they cannot be listed.
  bool list_children(pid_t pid, std::uint64_t num_threads, bool is_root) {
    if (scan_) return scan_children(pid);
    // The leader's children file first: where it is missing for the root (which exists), the
    // kernel has no CONFIG_PROC_CHILDREN, and the tree comes from the ppid fields instead.
    const int leader = read_children(pid, pid);
    if (leader == -ENOENT && is_root) {
      scan_ = true;
      return scan_children(pid);
    }
    if (leader < 0) return leader == -ENOENT && !is_root;  // a vanished descendant has none
    if (num_threads <= 1) return true;
    // A child belongs to the thread that forked it: read every thread's list.
    char rel[48];
    std::snprintf(rel, sizeof rel, "%d/task", static_cast<int>(pid));
    const int rc = for_each_pid_entry(root_fd_, rel, [&](pid_t tid) {
      if (tid != pid) read_children(pid, tid);  // a thread that just exited is skipped
    });
    return rc == 0 || (rc == -ENOENT && !is_root);
  }

  int read_children(pid_t pid, pid_t tid) {
    char rel[64];
    std::snprintf(rel, sizeof rel, "%d/task/%d/children", static_cast<int>(pid),
                  static_cast<int>(tid));
    const int rc = read_all_at(root_fd_, rel, s_.text);
    if (rc < 0) return rc;
    const std::string_view text(s_.text.data(), s_.text.size());
    return laptime::detail::procfs::parse_pid_list(text, s_.pids) ? 0 : -EINVAL;
  }

  bool scan_children(pid_t pid) {
    if (!scanned_) {
      scanned_ = true;
      s_.pid_ppid.clear();
      scan_ok_ = for_each_pid_entry(root_fd_, ".", [&](pid_t p) {
                   char rel[48];
                   std::snprintf(rel, sizeof rel, "%d/stat", static_cast<int>(p));
                   char buf[2048];
                   const long n = read_at(root_fd_, rel, buf, sizeof buf);
                   if (n < 0) return;
                   const auto st =
                       laptime::detail::procfs::parse_process_stat(std::string_view(buf, n));
                   if (st) s_.pid_ppid.emplace_back(p, st->ppid);
                 }) == 0;
    }
    if (!scan_ok_) return false;
    laptime::detail::procfs::children_from_ppids(pid, s_.pid_ppid, s_.pids);
    return true;
  }

  static void warn(const char* key, const char* what, const char* rel, int err) {
    char message[256];
    std::snprintf(message, sizeof message,
                  "resources: %s <proc>/%s%s%s; the figures that need it are reported as "
                  "unavailable",
                  what, rel, err != 0 ? ": " : "", err != 0 ? std::strerror(err) : "");
    laptime::detail::warn_once(key, message);
  }

  int root_fd_;
  Scratch& s_;
  bool scan_ = false, scanned_ = false, scan_ok_ = false;
  bool children_failed_ = false, root_io_failed_ = false;
  std::uint64_t sampler_bytes_ = 0;
  std::uint64_t root_own_ticks_ = 0;
};

}  // namespace detail

/// Reads the counters of process `pid` and its descendants, and of the machine, from the proc
/// file system mounted at `proc_root` (tests point it at a fixture directory). Never throws;
/// each source that cannot be read leaves its group invalid and warns once per process.
///
/// With `precise_self` (only for the calling process), the process's own CPU time comes from
/// CLOCK_PROCESS_CPUTIME_ID (nanoseconds) instead of /proc's clock ticks (10 ms at 100 Hz, far too
/// coarse for intervals of a few milliseconds); children's CPU can only come in ticks.
///
///   auto s = laptime::resources::sample_at("/proc", getpid());
inline Sample sample_at(std::string_view proc_root, pid_t pid, bool precise_self = false) noexcept {
  Sample out;
#if LAPTIME_ENABLED
  try {
    detail::Scratch& s = detail::scratch();
    s.root.assign(proc_root.data(), proc_root.size());
    const detail::Fd root(::open(s.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (root.get() < 0) {
      const std::string message = "resources: cannot open the proc file system at '" + s.root +
                                  "': " + std::strerror(errno) +
                                  "; CPU and I/O figures are reported as unavailable";
      laptime::detail::warn_once("resources.proc_root", message);
      return out;
    }

    // The "cpu" line comes first; the kernel formats all of /proc/stat anyway, so read no more.
    char buf[4096];
    const long n = detail::read_at(root.get(), "stat", buf, sizeof buf);
    if (n < 0) {
      // Neither <proc>/stat nor <proc>/<pid>: no proc file system is mounted there (an empty
      // directory in a container). One warning for the one cause, not one per file.
      char pid_dir[24];
      std::snprintf(pid_dir, sizeof pid_dir, "%d", static_cast<int>(pid));
      if (::faccessat(root.get(), pid_dir, F_OK, 0) != 0) {
        const std::string message = "resources: '" + s.root + "' has neither stat nor " + pid_dir +
                                    "/ (no proc file system mounted there?); CPU and I/O "
                                    "figures are reported as unavailable";
        laptime::detail::warn_once("resources.proc_root", message);
        return out;
      }
    }
    if (const auto ticks = n < 0 ? std::nullopt
                                 : laptime::detail::procfs::parse_system_cpu(
                                       std::string_view(buf, static_cast<std::size_t>(n)))) {
      out.system_ok = true;
      out.system_busy_ticks = ticks->busy;
      out.system_total_ticks = ticks->total;
    } else {
      laptime::detail::warn_once("resources.system",
                                 "resources: cannot read the cpu line of <proc>/stat; system CPU "
                                 "is reported as unavailable");
    }

    detail::TreeWalk walk(root.get(), s);
    detail::Totals t;
    s.pids.clear();
    if (walk.walk(pid, 0, t)) {
      if (walk.children_failed()) {
        laptime::detail::warn_once("resources.children",
                                   "resources: cannot list the child processes; process-tree CPU "
                                   "and I/O are reported as unavailable");
      } else {
        const long hz = clock_ticks();
        if (hz > 0) {
          out.tree_cpu_ok = true;
          out.tree_cpu_s = static_cast<double>(t.ticks) / static_cast<double>(hz);
          timespec self{};
          timespec mono{};
          if (precise_self && ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &self) == 0 &&
              ::clock_gettime(CLOCK_MONOTONIC, &mono) == 0) {
            out.taken_ns = static_cast<std::int64_t>(mono.tv_sec) * 1000000000 + mono.tv_nsec;
            out.tree_cpu_s =
                static_cast<double>(t.ticks - walk.root_own_ticks()) / static_cast<double>(hz) +
                static_cast<double>(self.tv_sec) + self.tv_nsec * 1e-9;
          }
        }
        if (!walk.root_io_failed()) {
          out.io_ok = true;
          out.read_bytes = t.io.read_bytes;
          out.write_bytes = t.io.write_bytes;
          out.rchar = t.io.rchar;
          out.wchar = t.io.wchar;
          out.sampler_bytes = walk.sampler_bytes();
        }
        out.processes = t.processes;
      }
    }
  } catch (...) {  // out of memory while growing a buffer: report nothing rather than a part
    return Sample{};
  }
#else
  (void)proc_root;
  (void)pid;
  (void)precise_self;
#endif
  return out;
}

/// The calling process now: sample_at("/proc", getpid(), /*precise_self=*/true).
///
///   const auto start = laptime::resources::sample();
inline Sample sample() noexcept {
#if LAPTIME_ENABLED
  return sample_at("/proc", ::getpid(), /*precise_self=*/true);
#else
  return Sample{};
#endif
}

/// CPUs online now (sysconf(_SC_NPROCESSORS_ONLN), else the cpuN lines of /proc/stat); 0 if
/// unknown or compiled out.
inline int online_cpus() noexcept {
#if LAPTIME_ENABLED
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (n > 0) return static_cast<int>(n);
  try {
    std::vector<char> text;
    if (detail::read_all_at(AT_FDCWD, "/proc/stat", text) == 0) {
      return laptime::detail::procfs::count_cpu_lines(std::string_view(text.data(), text.size()));
    }
  } catch (...) {
  }
#endif
  return 0;
}

/// Resource use accumulated over intervals: plain arithmetic on Samples. Means are weighted by
/// interval length, because they are ratios of sums. A group counts in an interval only if it was
/// valid at both ends (and its counters did not go backwards, as when a descendant left the tree).
///
///   laptime::resources::Usage u;
///   u.add(start, laptime::resources::sample(), wall_ns);
///   std::optional<double> pct = u.process_percent();  // nullopt: no valid interval
class Usage {
 public:
  /// Adds the interval from `start` to `end`, `wall_ns` nanoseconds long.
  void add(const Sample& start, const Sample& end, std::uint64_t wall_ns) noexcept {
#if LAPTIME_ENABLED
    ++intervals_;
    if (start.tree_cpu_ok && end.tree_cpu_ok && end.tree_cpu_s >= start.tree_cpu_s) {
      cpu_s_ += end.tree_cpu_s - start.tree_cpu_s;
      // The CPU counters were read taken_ns apart: that, not the interval, is their window.
      const bool timed = start.taken_ns > 0 && end.taken_ns > start.taken_ns;
      cpu_wall_ns_ += timed ? static_cast<std::uint64_t>(end.taken_ns - start.taken_ns) : wall_ns;
    }
    if (start.system_ok && end.system_ok && end.system_busy_ticks >= start.system_busy_ticks &&
        end.system_total_ticks >= start.system_total_ticks) {
      busy_ticks_ += end.system_busy_ticks - start.system_busy_ticks;
      total_ticks_ += end.system_total_ticks - start.system_total_ticks;
    }
    if (start.io_ok && end.io_ok && end.read_bytes >= start.read_bytes &&
        end.write_bytes >= start.write_bytes && end.rchar >= start.rchar &&
        end.wchar >= start.wchar) {
      read_bytes_ += end.read_bytes - start.read_bytes;
      write_bytes_ += end.write_bytes - start.write_bytes;
      // The sampler's own /proc reads between the two io readings are not the program's.
      const std::uint64_t rchar = end.rchar - start.rchar;
      const std::uint64_t own =
          end.sampler_bytes >= start.sampler_bytes ? end.sampler_bytes - start.sampler_bytes : 0;
      rchar_ += rchar > own ? rchar - own : 0;
      wchar_ += end.wchar - start.wchar;
      io_wall_ns_ += wall_ns;
    }
#else
    (void)start;
    (void)end;
    (void)wall_ns;
#endif
  }

  /// Adds everything `other` accumulated (another thread's Usage, for instance).
  void merge(const Usage& other) noexcept {
#if LAPTIME_ENABLED
    intervals_ += other.intervals_;
    cpu_s_ += other.cpu_s_;
    cpu_wall_ns_ += other.cpu_wall_ns_;
    busy_ticks_ += other.busy_ticks_;
    total_ticks_ += other.total_ticks_;
    read_bytes_ += other.read_bytes_;
    write_bytes_ += other.write_bytes_;
    rchar_ += other.rchar_;
    wchar_ += other.wchar_;
    io_wall_ns_ += other.io_wall_ns_;
#else
    (void)other;
#endif
  }

  /// CPU seconds of the process tree per wall second: 2.0 is two cores busy.
  std::optional<double> process_cores() const {
    if (cpu_wall_ns_ == 0) return std::nullopt;
    return cpu_s_ / (static_cast<double>(cpu_wall_ns_) * 1e-9);
  }

  /// process_cores() as a percentage of the CPUs online now: 100 is the whole machine.
  std::optional<double> process_percent() const {
    const auto cores = process_cores();
    const int cpus = online_cpus();
    if (!cores || cpus <= 0) return std::nullopt;
    return *cores / cpus * 100.0;
  }

  /// Busy share of all CPU time of the machine, in percent. nullopt also when no clock tick
  /// (10 ms) elapsed in the valid intervals: /proc/stat cannot resolve less.
  std::optional<double> system_percent() const {
    if (total_ticks_ == 0) return std::nullopt;
    return static_cast<double>(busy_ticks_) / static_cast<double>(total_ticks_) * 100.0;
  }

  /// Bytes the tree fetched from storage per second, in MB (1e6 bytes); page-cache hits are not in
  /// it.
  std::optional<double> read_mb_per_s() const {
    return rate(read_bytes_);
  }
  /// Bytes the tree caused to be written to storage per second, in MB.
  std::optional<double> write_mb_per_s() const {
    return rate(write_bytes_);
  }
  /// Bytes the tree passed to read()-like calls per second, in MB, page-cache hits included.
  std::optional<double> rchar_mb_per_s() const {
    return rate(rchar_);
  }
  /// Bytes the tree passed to write()-like calls per second, in MB.
  std::optional<double> wchar_mb_per_s() const {
    return rate(wchar_);
  }

  /// Intervals added (valid or not), merged ones included.
  std::uint64_t intervals() const {
    return intervals_;
  }

 private:
  std::optional<double> rate(std::uint64_t bytes) const {
    if (io_wall_ns_ == 0) return std::nullopt;
    return static_cast<double>(bytes) * 1e-6 / (static_cast<double>(io_wall_ns_) * 1e-9);
  }

  std::uint64_t intervals_ = 0;
  double cpu_s_ = 0;
  std::uint64_t cpu_wall_ns_ = 0;
  std::uint64_t busy_ticks_ = 0, total_ticks_ = 0;
  std::uint64_t read_bytes_ = 0, write_bytes_ = 0, rchar_ = 0, wchar_ = 0;
  std::uint64_t io_wall_ns_ = 0;
};

}  // namespace resources
LAPTIME_END_NAMESPACE
