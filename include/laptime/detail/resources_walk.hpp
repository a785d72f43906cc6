// laptime internals: the walk of a process tree under /proc for laptime/resources.hpp. The file
// access it builds on is in detail/resources_read.hpp, the parsers it feeds in detail/procfs.hpp;
// the background children sampler (detail/resources_sampler.hpp) builds on this walk.
#pragma once

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/pid_liveness.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/procfs.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/detail/resources_clocks.hpp"
#include "laptime/detail/resources_read.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace resources {
namespace detail {

/// sysconf(_SC_CLK_TCK), made once; 0 if unknown.
inline long ticks_per_second() noexcept {
  static const long ticks = [] {
    const long t = ::sysconf(_SC_CLK_TCK);
    return t > 0 ? t : 0L;
  }();
  return ticks;
}

/// CLOCK_MONOTONIC in nanoseconds (the clock of Sample::taken_ns).
inline std::int64_t monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

/// The CPU time of every thread of `pid`, live and exited (not its children), in nanoseconds,
/// from the kernel's own per-process CPU clock; nullopt if it cannot be read (the process is
/// gone). Linux lets any process read another one's clock in the same pid namespace.
inline std::optional<std::uint64_t> process_cpu_ns(pid_t pid) noexcept {
  clockid_t clock{};
  timespec ts{};
  if (::clock_getcpuclockid(pid, &clock) != 0 || ::clock_gettime(clock, &ts) != 0) {
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

/// Per-thread buffers, so that a warm sampler allocates nothing.
struct Scratch {
  std::string root;                                      // proc_root, NUL-terminated for open()
  std::vector<pid_t> pids;                               // children still to visit, as a stack
  std::vector<std::pair<pid_t, pid_t>> pid_ppid;         // fallback scan of /proc/*/stat
  std::vector<char> text;                                // children files
  std::vector<std::pair<pid_t, std::uint64_t>> clocked;  // TreeWalk::clocks: (pid, utime+stime)
  std::vector<pid_t> walked;                             // this walk's processes, each once
};

// the thread's buffers are freed at its exit: wanted
LAPTIME_CLANG_ALLOW("-Wexit-time-destructors")
inline Scratch& scratch() {
  thread_local Scratch s;
  return s;
}
LAPTIME_CLANG_ALLOW_END

/// What one subtree contributed.
struct Totals {
  std::uint64_t ticks = 0;     ///< clock ticks (USER_HZ): reaped children, or all without clocks
  std::uint64_t clock_ns = 0;  ///< the processes' own CPU from their CPU clocks (TreeWalk::clocks)
  laptime::detail::procfs::IoCounters io;
  std::uint32_t processes = 0;

  Totals& operator+=(const Totals& o) noexcept {
    ticks += o.ticks;
    clock_ns += o.clock_ns;
    io += o.io;
    processes += o.processes;
    return *this;
  }

  double cpu_s(long hz) const noexcept {
    return static_cast<double>(ticks) / static_cast<double>(hz) +
           static_cast<double>(clock_ns) * 1e-9;
  }
};

/// One walk of a process tree under an open proc root.
class TreeWalk {
 public:
  /// With `clocks`, each process's own CPU comes from its CPU clock (nanoseconds) rather than
  /// from the utime and stime ticks of its stat file; only for the live /proc of this machine.
  TreeWalk(int root_fd, Scratch& s, bool clocks = false) noexcept
      : root_fd_(root_fd), s_(s), clocks_(clocks) {}

  // A process tree is a few levels deep; the cap, and walking each pid once (a listing that
  // names a process twice, or an ancestor: a corrupt one, or a fixture), bound a corrupt listing.
  static constexpr int kMaxDepth = 64;
  // A reap during the walk is retried this often, then the last reading is taken.
  static constexpr int kAttempts = 3;

  /// Sums `pid` and its descendants into `out`. False if `pid` itself could not be read (for
  /// the root that makes the CPU and I/O figures unavailable).
  bool walk(pid_t pid, int depth, Totals& out) {
    namespace pf = laptime::detail::procfs;
    if (depth == 0) s_.walked.clear();
    if (walked(pid)) return false;  // counted once already
    const std::size_t clocked = s_.clocked.size();
    const std::size_t seen = s_.walked.size();
    for (int attempt = 1;; ++attempt) {
      s_.clocked.resize(clocked);  // a walk that is done again is clocked again
      s_.walked.resize(seen);
      s_.walked.push_back(pid);
      const auto st = read_stat(pid, depth);
      if (!st) return false;
      Totals t;
      if (clocks_) {  // its own CPU comes from its clock, read by read_clocks()
        s_.clocked.emplace_back(pid, st->utime + st->stime);
        t.ticks = st->cutime + st->cstime;
      } else {
        t.ticks = st->cpu_ticks();
      }
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

  /// Sums the live descendants of `pid` (not `pid` itself) into `out`, listing the children of
  /// every thread of `pid`. False if they cannot be listed.
  bool walk_children(pid_t pid, Totals& out) {
    s_.walked.assign(1, pid);
    const std::size_t begin = s_.pids.size();
    if (!list_children(pid, /*num_threads=*/2, /*is_root=*/true)) {
      s_.pids.resize(begin);
      return false;
    }
    const std::size_t end = s_.pids.size();
    for (std::size_t i = begin; i < end; ++i) {
      Totals child;
      if (walk(s_.pids[i], 1, child)) out += child;
    }
    s_.pids.resize(begin);
    return true;
  }

  /// With `clocks`: adds the CPU clocks of the processes walked so far to `out`, read one after
  /// the other after the walk, so that they are nearly simultaneous however slow the walk was.
  /// A process gone meanwhile counts with the utime and stime its stat file had. The list stays
  /// in the scratch (ChildClocks keeps it for boundaries) until the next walk clears it.
  void read_clocks(Totals& out) {
    for (const auto& [pid, ticks] : s_.clocked) {
      if (const auto ns = process_cpu_ns(pid)) {
        out.clock_ns += *ns;
      } else {
        out.ticks += ticks;
      }
    }
  }

  bool children_failed() const noexcept { return children_failed_; }
  /// Whether `pid` was walked already in this walk (a tree has tens of processes: a scan).
  bool walked(pid_t pid) const noexcept {
    for (const pid_t p : s_.walked) {
      if (p == pid) return true;
    }
    return false;
  }
  /// utime+stime of the root process itself (its threads; not its children), in ticks.
  std::uint64_t root_own_ticks() const noexcept { return root_own_ticks_; }
  bool root_io_failed() const noexcept { return root_io_failed_; }
  std::uint64_t sampler_bytes() const noexcept { return sampler_bytes_; }

 private:
  std::optional<laptime::detail::procfs::ProcessStat> read_stat(pid_t pid, int depth) {
    char rel[48];
    std::snprintf(rel, sizeof rel, "%d/stat", int{pid});
    char buf[2048];
    const long n = read_at(root_fd_, rel, buf, sizeof buf);
    if (n < 0) {
      // A descendant that vanished (exited and was reaped) is normal: its CPU is now in its
      // parent's cutime/cstime.
      if (depth == 0) warn("resources.process_stat", "cannot read", rel, static_cast<int>(-n));
      return std::nullopt;
    }
    auto st = laptime::detail::procfs::parse_process_stat(
        std::string_view(buf, static_cast<std::size_t>(n)));
    if (!st && depth == 0) warn("resources.process_stat", "cannot parse", rel, 0);
    // comm points into buf, which dies here; nothing reads it.
    if (st) st->comm = {};
    return st;
  }

  void read_io(pid_t pid, int depth, laptime::detail::procfs::IoCounters& io) {
    char rel[48];
    std::snprintf(rel, sizeof rel, "%d/io", int{pid});
    char buf[1024];
    const long n = read_at(root_fd_, rel, buf, sizeof buf);
    const auto parsed =
        n < 0
            ? std::nullopt
            : laptime::detail::procfs::parse_io(std::string_view(buf, static_cast<std::size_t>(n)));
    if (parsed) {
      io = *parsed;
      if (depth == 0) sampler_bytes_ = proc_bytes_read().load(std::memory_order_relaxed);
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
    std::snprintf(rel, sizeof rel, "%d/task", int{pid});
    const int rc = for_each_pid_entry(root_fd_, rel, [&](pid_t tid) {
      if (tid != pid) read_children(pid, tid);  // a thread that just exited is skipped
    });
    return rc == 0 || (rc == -ENOENT && !is_root);
  }

  int read_children(pid_t pid, pid_t tid) {
    char rel[64];
    std::snprintf(rel, sizeof rel, "%d/task/%d/children", int{pid}, int{tid});
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
                   std::snprintf(rel, sizeof rel, "%d/stat", int{p});
                   char buf[2048];
                   const long n = read_at(root_fd_, rel, buf, sizeof buf);
                   if (n < 0) return;
                   const auto st = laptime::detail::procfs::parse_process_stat(
                       std::string_view(buf, static_cast<std::size_t>(n)));
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
  bool clocks_ = false;
  bool scan_ = false, scanned_ = false, scan_ok_ = false;
  bool children_failed_ = false, root_io_failed_ = false;
  std::uint64_t sampler_bytes_ = 0;
  std::uint64_t root_own_ticks_ = 0;
};

/// What a sample read, each group with its validity flag (resources::Sample, before the
/// public header turns it into one).
struct Reading {
  bool system_ok = false;
  laptime::detail::procfs::SystemTicks system;
  bool io_ok = false;
  laptime::detail::procfs::IoCounters io;
  std::uint64_t sampler_bytes = 0;
  bool cpu_ok = false;
  double cpu_s = 0;
  double self_cpu_s = 0;  ///< the process's own part of cpu_s (its threads, not its children)
  std::int64_t taken_ns = 0;
  std::uint32_t processes = 0;
};

/// resources::sample_at: one walk of the tree of `pid` under `proc_root`, every process's CPU in
/// clock ticks (with `precise_self`, the calling process's own from CLOCK_PROCESS_CPUTIME_ID).
inline Reading walk_at(std::string_view proc_root, pid_t pid, bool precise_self) noexcept {
  Reading out;
  try {
    Scratch& s = scratch();
    s.root.assign(proc_root.data(), proc_root.size());
    const Fd root(::open(s.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (root.get() < 0) {
      const std::string message = "resources: cannot open the proc file system at '" + s.root +
                                  "': " + std::strerror(errno) +
                                  "; CPU and I/O figures are reported as unavailable";
      laptime::detail::warn_once("resources.proc_root", message);
      return out;
    }

    // The "cpu" line comes first; the kernel formats all of /proc/stat anyway, so read no more.
    char buf[4096];
    const long n = read_at(root.get(), "stat", buf, sizeof buf);
    if (n < 0) {
      // Neither <proc>/stat nor <proc>/<pid>: no proc file system is mounted there (an empty
      // directory in a container). One warning for the one cause, not one per file.
      char pid_dir[24];
      std::snprintf(pid_dir, sizeof pid_dir, "%d", int{pid});
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
      out.system = *ticks;
    } else {
      laptime::detail::warn_once("resources.system",
                                 "resources: cannot read the cpu line of <proc>/stat; system CPU "
                                 "is reported as unavailable");
    }

    TreeWalk walk(root.get(), s);
    Totals t;
    s.pids.clear();
    if (walk.walk(pid, 0, t)) {
      if (walk.children_failed()) {
        laptime::detail::warn_once("resources.children",
                                   "resources: cannot list the child processes; process-tree CPU "
                                   "and I/O are reported as unavailable");
      } else {
        const long hz = ticks_per_second();
        if (hz > 0) {
          out.cpu_ok = true;
          out.cpu_s = static_cast<double>(t.ticks) / static_cast<double>(hz);
          out.self_cpu_s = static_cast<double>(walk.root_own_ticks()) / static_cast<double>(hz);
          timespec self{};
          timespec mono{};
          if (precise_self && ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &self) == 0 &&
              ::clock_gettime(CLOCK_MONOTONIC, &mono) == 0) {
            out.taken_ns = std::int64_t{mono.tv_sec} * 1000000000 + mono.tv_nsec;
            out.cpu_s =
                static_cast<double>(t.ticks - walk.root_own_ticks()) / static_cast<double>(hz) +
                static_cast<double>(self.tv_sec) + static_cast<double>(self.tv_nsec) * 1e-9;
            out.self_cpu_s =
                static_cast<double>(self.tv_sec) + static_cast<double>(self.tv_nsec) * 1e-9;
          }
        }
        if (!walk.root_io_failed()) {
          out.io_ok = true;
          out.io = t.io;
          out.sampler_bytes = walk.sampler_bytes();
        }
        out.processes = t.processes;
      }
    }
  } catch (...) {  // out of memory while growing a buffer: report nothing rather than a part
    return Reading{};
  }
  return out;
}

/// The live descendants of this process at one instant.
struct Descendants {
  std::int64_t taken_ns = 0;      ///< CLOCK_MONOTONIC when the walk ended
  double cpu_s = 0;               ///< their own CPU (clocks) and their reaped children's (ticks)
  std::uint64_t fingerprint = 0;  ///< Reaped::fingerprint of this process during the walk
  laptime::detail::procfs::IoCounters io;
  std::uint32_t processes = 0;
};

/// Walks the live descendants of the calling process under /proc. nullopt where they cannot be
/// listed, or where the process kept reaping children during three walks.
inline std::optional<Descendants> walk_descendants(int proc_fd) {
  Scratch& s = scratch();
  const pid_t self = ::getpid();
  const long hz = ticks_per_second();
  if (hz <= 0) return std::nullopt;
  // A /proc of another PID namespace (`unshare -p` without `--mount-proc`) shows other
  // processes under our numbers: the walk would add up the host's.
  if (!laptime::detail::proc_shows_our_pids(proc_fd) &&
      ::faccessat(proc_fd, "self", F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
    laptime::detail::warn_once(
        "resources.pid_namespace",
        "resources: /proc does not number processes as this PID namespace does (its "
        "'self' is not our pid: a namespace entered without remounting /proc); the "
        "process tree's CPU and I/O are reported as unavailable");
    return std::nullopt;
  }
  // Without its own directory the children could not be listed, only not found.
  char own[32];
  std::snprintf(own, sizeof own, "%d/stat", static_cast<int>(self));
  if (::faccessat(proc_fd, own, F_OK, 0) != 0) return std::nullopt;
  for (int attempt = 0; attempt < TreeWalk::kAttempts; ++attempt) {
    const auto before = reaped_children();
    if (!before) return std::nullopt;
    TreeWalk walk(proc_fd, s, /*clocks=*/true);
    Totals t;
    s.pids.clear();
    s.clocked.clear();
    if (!walk.walk_children(self, t)) return std::nullopt;
    const std::int64_t clocks_from = monotonic_ns();
    walk.read_clocks(t);
    const std::int64_t clocks_to = monotonic_ns();
    const auto after = reaped_children();
    if (!after) return std::nullopt;
    // A child reaped during the walk may be in neither reading, or in both: walk again.
    if (after->fingerprint != before->fingerprint) continue;
    child_clocks().publish(self, after->fingerprint, s.clocked,
                           static_cast<double>(t.ticks) / static_cast<double>(hz));
    Descendants d;
    d.taken_ns = clocks_from + (clocks_to - clocks_from) / 2;
    d.cpu_s = t.cpu_s(hz);
    d.fingerprint = after->fingerprint;
    d.io = t.io;
    d.processes = t.processes;
    return d;
  }
  return std::nullopt;
}

}  // namespace detail
}  // namespace resources
LAPTIME_END_NAMESPACE
