// laptime internals: resources::sample() of the calling process at a cost that does not grow with
// its child processes.
//
// Walking the process tree costs a few /proc files per descendant (≈ 15 µs each on the build
// machine, so a DataLoader with 16 workers paid half a millisecond per tracked interval). Here a
// tracked boundary reads only what belongs to the process itself, each with one cheap call:
//
//   - its own threads' CPU: CLOCK_PROCESS_CPUTIME_ID (ns);
//   - its reaped descendants' CPU: getrusage(RUSAGE_CHILDREN) (µs; cutime/cstime without ticks);
//   - its I/O and the machine's CPU: /proc/self/io and /proc/stat through descriptors kept open,
//     read with pread (the open is most of the cost of a /proc read);
//
// and takes its LIVE descendants from a background thread, the children sampler, which walks the
// tree every few milliseconds while tracked boundaries keep coming (and sleeps otherwise). A
// boundary reads the CPU clocks of the descendants the last walk found
// (detail/resources_clocks.hpp; else extrapolates the last two readings) and takes their I/O from
// the last reading. Where that could be wrong, the boundary walks the tree itself, as before:
//   - the process reaped a child since the last reading (the child's CPU moved from the live
//     descendants into RUSAGE_CHILDREN: its fingerprint, utime+stime+minflt+majflt, moved);
//   - the last reading is older than kMaxAge (the sampler was idle, starved, or not started);
//   - the process was forked since (the readings are the parent's).
// docs/resources.md gives the accuracy this has and the bench rows that show its cost.
#pragma once

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/detail/descriptors.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/procfs.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/detail/resources_clocks.hpp"
#include "laptime/detail/resources_walk.hpp"
#include "laptime/detail/thread.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace resources {
namespace detail {

/// The process-wide state of the fast sampler: descriptors kept open, the children sampler's
/// last two readings (a seqlock, so that a boundary takes no lock), and its thread's state.
/// Every field is an atomic: boundaries on any thread and the sampler thread use them together.
class SelfSampler {
 public:
  // Readings older than this are not extrapolated: the boundary walks the tree itself.
  static constexpr std::int64_t kMaxAge = 25'000'000;
  // The sampler walks every kPeriod, or every kSlowdown walks' CPU time where walks are slower (so
  // that it takes at most 1/kSlowdown of a core), while a boundary came within kIdleAfter; then
  // it sleeps until the next boundary wakes it.
  static constexpr std::int64_t kPeriod = 10'000'000;
  static constexpr std::int64_t kSlowdown = 40;
  static constexpr std::int64_t kIdleAfter = 1'000'000'000;
  static constexpr std::int64_t kRateSpan = 5'000'000;

  /// The descendants at `now`: the last reading extrapolated, when it may be; nullopt otherwise.
  std::optional<Descendants> estimate(std::int64_t now, std::uint64_t fingerprint) noexcept {
    // seq_cst, with the load of sleeping_ below and the sampler's store of it and load of this:
    // either the sampler sees this boundary, or this boundary sees it asleep and wakes it.
    demand_ns_.store(now, std::memory_order_seq_cst);
    if (thread_.load(std::memory_order_acquire) != kRunning) return std::nullopt;
    if (sleeping_.load(std::memory_order_seq_cst) != 0) wake();
    Readings r;
    if (!load(r) || r.now.fingerprint != fingerprint || now - r.now.taken_ns > kMaxAge ||
        now < r.now.taken_ns) {
      return std::nullopt;
    }
    Descendants d = r.now;
    // The descendants' CPU grew at the rate between the two readings; a new child or a reap
    // between them makes that rate a guess, so it is used only with the same processes.
    if (r.has_before && r.before.processes == r.now.processes &&
        r.now.taken_ns > r.before.taken_ns && r.now.cpu_s >= r.before.cpu_s) {
      const double rate =
          (r.now.cpu_s - r.before.cpu_s) / static_cast<double>(r.now.taken_ns - r.before.taken_ns);
      d.cpu_s += rate * static_cast<double>(now - r.now.taken_ns);
    }
    d.taken_ns = now;
    return d;
  }

  /// max(`children_s`, every value this returned before): the CPU of all descendants, reaped or
  /// live, never goes backwards, while an extrapolation may overshoot what the next reading
  /// finds. (A descendant re-parented away then leaves the figure flat until the tree catches up,
  /// rather than an interval dropped.)
  double at_least(double children_s) noexcept {
    double last = children_max_.load(std::memory_order_relaxed);
    while (children_s > last &&
           !children_max_.compare_exchange_weak(last, children_s, std::memory_order_relaxed)) {
    }
    return children_s > last ? children_s : last;
  }

  /// Publishes a walk made at a boundary (the sampler thread publishes its own).
  void publish(const Descendants& d) noexcept {
    bool expected = false;
    if (!writing_.compare_exchange_strong(expected, true, std::memory_order_acquire)) return;
    Readings r;
    const bool had = load(r);
    if (had && d.taken_ns <= r.now.taken_ns) {  // a newer reading came first: keep it
      writing_.store(false, std::memory_order_release);
      return;
    }
    const std::uint64_t seq = seq_.load(std::memory_order_relaxed);
    // A seqlock without fences (ThreadSanitizer does not model them): every field is stored with
    // release, so a reader that sees one of them also sees the odd sequence number before it.
    seq_.store(seq + 1, std::memory_order_relaxed);
    // The rate is taken over at least kRateSpan: a walk at a boundary right after the sampler's
    // would make it the quotient of two small and noisy differences.
    if (had && d.taken_ns - r.now.taken_ns >= kRateSpan) {
      store(before_, r.now);
      has_before_.store(true, std::memory_order_release);
    } else if (!had) {
      has_before_.store(false, std::memory_order_release);
    }
    store(now_, d);
    valid_.store(true, std::memory_order_release);
    seq_.store(seq + 2, std::memory_order_release);
    writing_.store(false, std::memory_order_release);
  }

  /// Starts the sampler thread once per process (again in a forked child, whose readings, kept
  /// descriptors and thread state are its parent's until then). False where it does not run.
  bool ensure_started(pid_t self) noexcept {
    pid_t owner = owner_.load(std::memory_order_acquire);
    if (owner != self) {
      // Another thread of a forked child resets the state now: walk at this boundary.
      if (!owner_.compare_exchange_strong(owner, self, std::memory_order_acq_rel)) return false;
      reset_after_fork(owner != 0);
    }
    if (thread_.load(std::memory_order_acquire) != kNone) {
      return thread_.load(std::memory_order_relaxed) == kRunning;
    }
    int none = kNone;
    if (!thread_.compare_exchange_strong(none, kStarting, std::memory_order_acq_rel)) {
      return thread_.load(std::memory_order_relaxed) == kRunning;
    }
    const bool ok = laptime::detail::start_background_thread(&SelfSampler::thread_main, this,
                                                             "laptime-sampler");
    thread_.store(ok ? kRunning : kFailed, std::memory_order_release);
    if (!ok) {
      laptime::detail::warn_once("resources.sampler_thread",
                                 "resources: cannot start the children sampler thread; each "
                                 "tracked boundary walks the process tree itself");
    }
    return ok;
  }

  /// sampler_bytes_read(): the bytes read from /proc (resources_read.hpp), made with the sampler.
  std::atomic<std::uint64_t>& bytes_read = proc_bytes_read();

  /// A descriptor of `path` kept open for pread (slot 0: /proc/stat, 1: /proc/self/io); -errno.
  int file(int slot) noexcept {
    std::atomic<int>& fd = fds_[slot];
    int f = fd.load(std::memory_order_acquire);
    if (f >= 0) return f;
    const int opened = laptime::detail::above_std_streams(
        ::open(slot == 0 ? "/proc/stat" : "/proc/self/io", O_RDONLY | O_CLOEXEC));
    if (opened < 0) return -errno;
    int none = -1;
    if (fd.compare_exchange_strong(none, opened, std::memory_order_acq_rel)) return opened;
    ::close(opened);  // another thread opened it first
    return none;
  }
  /// Drops a kept descriptor that failed (closed by the program, or not /proc any more).
  void forget(int slot, int f) noexcept {
    int expected = f;
    fds_[slot].compare_exchange_strong(expected, -1, std::memory_order_acq_rel);
  }

  /// walk_descendants under the kept /proc descriptor, opened once more if the walk fails (the
  /// program may have closed it).
  std::optional<Descendants> walk() {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const int proc = proc_dir();
      if (proc < 0) return std::nullopt;
      if (auto d = walk_descendants(proc)) return d;
      int expected = proc;
      proc_fd_.compare_exchange_strong(expected, -1, std::memory_order_acq_rel);
    }
    return std::nullopt;
  }

  /// The descriptor of the proc root the walks use (kept open, like the files).
  int proc_dir() noexcept {
    int f = proc_fd_.load(std::memory_order_acquire);
    if (f >= 0) return f;
    const int opened =
        laptime::detail::above_std_streams(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (opened < 0) return -errno;
    int none = -1;
    if (proc_fd_.compare_exchange_strong(none, opened, std::memory_order_acq_rel)) return opened;
    ::close(opened);
    return none;
  }

 private:
  enum : int { kNone, kStarting, kRunning, kFailed };

  struct Readings {
    Descendants now, before;
    bool has_before = false;
  };
  struct Slots {
    std::atomic<std::int64_t> taken_ns{0};
    std::atomic<double> cpu_s{0};
    std::atomic<std::uint64_t> fingerprint{0}, rchar{0}, wchar{0}, read_bytes{0}, write_bytes{0};
    std::atomic<std::uint32_t> processes{0};
  };
  static void store(Slots& s, const Descendants& d) noexcept {
    s.taken_ns.store(d.taken_ns, std::memory_order_release);
    s.cpu_s.store(d.cpu_s, std::memory_order_release);
    s.fingerprint.store(d.fingerprint, std::memory_order_release);
    s.rchar.store(d.io.rchar, std::memory_order_release);
    s.wchar.store(d.io.wchar, std::memory_order_release);
    s.read_bytes.store(d.io.read_bytes, std::memory_order_release);
    s.write_bytes.store(d.io.write_bytes, std::memory_order_release);
    s.processes.store(d.processes, std::memory_order_release);
  }
  static Descendants loaded(const Slots& s) noexcept {
    Descendants d;
    d.taken_ns = s.taken_ns.load(std::memory_order_acquire);
    d.cpu_s = s.cpu_s.load(std::memory_order_acquire);
    d.fingerprint = s.fingerprint.load(std::memory_order_acquire);
    d.io.rchar = s.rchar.load(std::memory_order_acquire);
    d.io.wchar = s.wchar.load(std::memory_order_acquire);
    d.io.read_bytes = s.read_bytes.load(std::memory_order_acquire);
    d.io.write_bytes = s.write_bytes.load(std::memory_order_acquire);
    d.processes = s.processes.load(std::memory_order_acquire);
    return d;
  }

  /// A consistent copy of both readings; false when there is none (or a writer kept racing).
  bool load(Readings& r) const noexcept {
    for (int attempt = 0; attempt < 4; ++attempt) {
      const std::uint64_t seq = seq_.load(std::memory_order_acquire);
      if (seq & 1) continue;
      const bool valid = valid_.load(std::memory_order_acquire);
      r.now = loaded(now_);
      r.before = loaded(before_);
      r.has_before = has_before_.load(std::memory_order_acquire);
      if (seq_.load(std::memory_order_relaxed) == seq) return valid;
    }
    return false;
  }

  // In a forked child: no sampler thread, and the parent's readings and descriptors (which name
  // the parent's /proc/<pid>) must not be used. The child is single-threaded at this point of
  // its first sample, or the CAS on owner_ elected this thread.
  void reset_after_fork(bool was_other_process) noexcept {
    if (!was_other_process) return;
    valid_.store(false, std::memory_order_relaxed);
    has_before_.store(false, std::memory_order_relaxed);
    seq_.store(0, std::memory_order_relaxed);
    writing_.store(false, std::memory_order_relaxed);
    sleeping_.store(0, std::memory_order_relaxed);
    children_max_.store(0, std::memory_order_relaxed);
    const int io = fds_[1].exchange(-1, std::memory_order_acq_rel);
    if (io >= 0) ::close(io);
    thread_.store(kNone, std::memory_order_release);
  }

  void wake() noexcept {
    if (sleeping_.exchange(0, std::memory_order_seq_cst) != 0) {
      ::syscall(SYS_futex, &sleeping_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    }
  }

  static std::int64_t thread_cpu_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  }

  static void* thread_main(void* arg) {
    static_cast<SelfSampler*>(arg)->run();
    return nullptr;
  }

  [[noreturn]] void run() noexcept {
    std::int64_t period = kPeriod;
    for (;;) {
      const std::int64_t now = monotonic_ns();
      if (now - demand_ns_.load(std::memory_order_relaxed) > kIdleAfter) {
        sleeping_.store(1, std::memory_order_seq_cst);
        if (monotonic_ns() - demand_ns_.load(std::memory_order_seq_cst) > kIdleAfter) {
          const timespec timeout{60, 0};  // a boundary wakes it; the timeout only guards that
          ::syscall(SYS_futex, &sleeping_, FUTEX_WAIT_PRIVATE, 1, &timeout, nullptr, 0);
        }
        sleeping_.store(0, std::memory_order_relaxed);
        continue;
      }
      const std::int64_t cpu_before = thread_cpu_ns();
      std::optional<Descendants> d;
      try {
        d = walk();
      } catch (...) {  // out of memory growing a buffer: no reading this time
      }
      const std::int64_t took = thread_cpu_ns() - cpu_before;
      if (d) publish(*d);
      period = took * kSlowdown > kPeriod ? took * kSlowdown : kPeriod;
      const timespec pause{period / 1000000000, period % 1000000000};
      ::nanosleep(&pause, nullptr);
    }
  }

  std::atomic<pid_t> owner_{0};
  std::atomic<int> thread_{kNone};
  std::atomic<std::int64_t> demand_ns_{0};
  alignas(64) std::atomic<int> sleeping_{0};  // the futex word
  std::atomic<bool> writing_{false};
  std::atomic<std::uint64_t> seq_{0};
  std::atomic<bool> valid_{false}, has_before_{false};
  Slots now_, before_;
  std::atomic<int> fds_[2] = {-1, -1};
  std::atomic<int> proc_fd_{-1};
  std::atomic<double> children_max_{0};
};

inline SelfSampler& self_sampler() {
  return laptime::detail::process_singleton<SelfSampler>("self_sampler");
}

inline std::atomic<std::uint64_t>& sampler_bytes_read() {
  return self_sampler().bytes_read;
}

/// Reads a kept-open file of the sampler into `buf`. A descriptor whose read fails or does not
/// start as the file does is dropped and the file opened once more: the program may have closed
/// the descriptor, and its number may name another file now. Returns the byte count or -errno.
inline long read_kept(SelfSampler& ss, int slot, char* buf, std::size_t cap) noexcept {
  const std::string_view head = slot == 0 ? "cpu " : "rchar:";
  long n = -EBADF;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ss.file(slot);
    if (fd < 0) return fd;
    n = pread_into(fd, buf, cap);
    if (n > 0 &&
        std::string_view(buf, static_cast<std::size_t>(n)).substr(0, head.size()) == head) {
      return n;
    }
    ss.forget(slot, fd);
  }
  return n;
}

/// The machine's CPU ticks (the "cpu" line of /proc/stat) into `out`. False where no proc file
/// system is mounted: the reading then has nothing at all.
inline bool read_system_cpu(SelfSampler& ss, pid_t self, char (&buf)[4096], Reading& out) noexcept {
  // The "cpu" line comes first; the kernel formats all of /proc/stat anyway, so read no more.
  const long n = read_kept(ss, 0, buf, sizeof buf);
  if (n < 0) {
    // Neither /proc/stat nor /proc/<pid>: no proc file system is mounted (an empty directory in
    // a container). One warning for the one cause, not one per file.
    char pid_dir[32];
    std::snprintf(pid_dir, sizeof pid_dir, "/proc/%d", int{self});
    if (::access(pid_dir, F_OK) != 0) {
      laptime::detail::warn_once("resources.proc_root",
                                 "resources: '/proc' has neither stat nor <pid>/ (no proc file "
                                 "system mounted there?); CPU and I/O figures are reported as "
                                 "unavailable");
      return false;
    }
  }
  const auto ticks = n < 0 ? std::nullopt
                           : laptime::detail::procfs::parse_system_cpu(
                                 std::string_view(buf, static_cast<std::size_t>(n)));
  if (ticks) {
    out.system_ok = true;
    out.system = *ticks;
  } else {
    laptime::detail::warn_once("resources.system",
                               "resources: cannot read the cpu line of /proc/stat; system CPU "
                               "is reported as unavailable");
  }
  return true;
}

/// This process's I/O counters into `out` (io_ok says whether they were read). The sampler's own
/// /proc reads count in rchar; Usage::add takes them out again. A reading of the sampler thread
/// between the io read and the counter would be taken out wrongly: read again (three tries).
inline void read_own_io(SelfSampler& ss, char (&buf)[4096], Reading& out) noexcept {
  out.io_ok = false;
  for (int tries = 0; tries < 3 && !out.io_ok; ++tries) {
    const std::uint64_t before = sampler_bytes_read().load(std::memory_order_relaxed);
    const long n = read_kept(ss, 1, buf, sizeof buf);
    const std::uint64_t after = sampler_bytes_read().load(std::memory_order_relaxed);
    const auto io =
        n < 0
            ? std::nullopt
            : laptime::detail::procfs::parse_io(std::string_view(buf, static_cast<std::size_t>(n)));
    if (!io) {
      laptime::detail::warn_once("resources.process_io",
                                 "resources: cannot read /proc/self/io; the figures that need "
                                 "it are reported as unavailable");
      return;
    }
    if (after - before != static_cast<std::uint64_t>(n) && tries < 2) continue;
    out.io_ok = true;
    out.io = *io;
    out.sampler_bytes = after;
  }
}

/// Children the kernel reaps itself (SIGCHLD ignored, or SA_NOCLDWAIT) add nothing to this
/// process's counters: a live child's CPU and I/O since the last sample are lost when it ends
/// (docs/resources.md, "What the tree cannot see"). Said once, when there is a child to lose.
// glibc's sa_handler is a macro that names itself (a member of a union).
LAPTIME_CLANG_ALLOW("-Wdisabled-macro-expansion")
inline void warn_if_children_auto_reaped() noexcept {
  struct sigaction now {};
  if (::sigaction(SIGCHLD, nullptr, &now) != 0) return;
  if (now.sa_handler != SIG_IGN && (now.sa_flags & SA_NOCLDWAIT) == 0) return;
  laptime::detail::warn_once("resources.auto_reaped",
                             "resources: this process ignores SIGCHLD (or set SA_NOCLDWAIT), so "
                             "the kernel reaps its children without adding their CPU and I/O to "
                             "it: what a child used since the last sample is lost when it ends");
}
LAPTIME_CLANG_ALLOW_END

/// The calling process and its descendants now (see the top of this file). Never throws.
inline Reading read_self() noexcept {
  Reading out;
  SelfSampler& ss = self_sampler();
  const pid_t self = ::getpid();
  const bool sampler = ss.ensure_started(self);
  char buf[4096];
  if (!read_system_cpu(ss, self, buf, out)) return out;

  for (int attempt = 0; attempt < TreeWalk::kAttempts; ++attempt) {
    const auto reaped = reaped_children();
    if (!reaped) break;
    read_own_io(ss, buf, out);
    timespec own{};
    if (::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &own) != 0) break;
    const std::int64_t now = monotonic_ns();
    std::optional<Descendants> d = sampler ? ss.estimate(now, reaped->fingerprint) : std::nullopt;
    if (!d) {
      try {
        d = ss.walk();
      } catch (...) {  // out of memory while growing a buffer: report nothing rather than a part
      }
      if (!d) {
        laptime::detail::warn_once("resources.children",
                                   "resources: cannot list the child processes; process-tree "
                                   "CPU and I/O are reported as unavailable");
        out.io_ok = false;
        return out;
      }
      ss.publish(*d);
    } else if (const auto live = child_clocks().now(self, reaped->fingerprint)) {
      d->cpu_s = *live;
    }
    // A child reaped since the first reading moved its CPU and I/O into this process's
    // counters, which may then hold it twice or not at all: read again.
    const auto again = reaped_children();
    if (!again || again->fingerprint != reaped->fingerprint ||
        d->fingerprint != reaped->fingerprint) {
      continue;
    }
    out.cpu_ok = true;
    out.self_cpu_s = static_cast<double>(own.tv_sec) + static_cast<double>(own.tv_nsec) * 1e-9;
    out.cpu_s = out.self_cpu_s + ss.at_least(reaped->cpu_s + d->cpu_s);
    out.taken_ns = now;
    out.processes = 1 + d->processes;
    out.io += d->io;
    if (d->processes > 0) warn_if_children_auto_reaped();
    return out;
  }
  out.io_ok = false;
  return out;
}

}  // namespace detail
}  // namespace resources
LAPTIME_END_NAMESPACE
