// laptime internals: the CPU of the calling process's live descendants, read at a boundary from
// their own kernel CPU clocks (resources::sample(), detail/resources_sampler.hpp).
//
// The children sampler walks the tree every 10 ms; a boundary used to extrapolate its last two
// readings to its own instant. Over an interval shorter than that period the extrapolation sees
// nothing of what happened inside it: loader workers that work while the loop waits for a batch
// and idle otherwise, or that get more of the machine while the loop blocks, read 10-22 % low
// in 5 ms intervals. The walk is what costs (listing children, reading stat and io files), not
// the clocks: each walk publishes here the clocks of the live descendants it found, and a
// boundary reads them again, one clock_gettime each, as long as no child was reaped since (a
// reap moves a child's CPU into the parent's RUSAGE_CHILDREN, and the boundary walks instead).
// A child forked after the last walk is counted from the next walk on (with the CPU it used
// before it). docs/resources.md gives the accuracy and the cost.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/process_singleton.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace resources {
namespace detail {

/// RUSAGE_CHILDREN of the calling process: the CPU of every descendant it (or they) reaped, in
/// seconds, and a fingerprint that moves with every reap (each reaped process took a page fault).
struct Reaped {
  double cpu_s = 0;
  std::uint64_t fingerprint = 0;
};
inline std::optional<Reaped> reaped_children() noexcept {
  rusage ru{};
  if (::getrusage(RUSAGE_CHILDREN, &ru) != 0) return std::nullopt;
  const auto us = static_cast<std::uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
                  static_cast<std::uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  return Reaped{static_cast<double>(us) * 1e-6,
                us + static_cast<std::uint64_t>(ru.ru_minflt + ru.ru_majflt)};
}

/// The clocks of the live descendants the last walk found, and the CPU that walk counted
/// otherwise (what they reaped themselves, in ticks). Written by walks (a seqlock; a walk that
/// finds another one writing skips), read by boundaries on any thread without a lock.
class ChildClocks {
 public:
  // A tree larger than this is read from the sampler's readings as before: a boundary's clock
  // reads grow with the tree, and a sample must cost about the same with 0 or 16 children.
  static constexpr std::size_t kCapacity = 64;

  /// What a walk of `owner`'s tree found, with `fingerprint` (Reaped::fingerprint) unchanged
  /// during it: `clocked` (pid, ticks) of each live descendant read by its clock, and `rest_s`,
  /// the CPU the walk counted besides those clocks.
  void publish(pid_t owner, std::uint64_t fingerprint,
               const std::vector<std::pair<pid_t, std::uint64_t>>& clocked,
               double rest_s) noexcept {
    bool expected = false;
    if (!writing_.compare_exchange_strong(expected, true, std::memory_order_acquire)) return;
    const std::uint64_t seq = seq_.load(std::memory_order_relaxed);
    // As the sampler's readings: release stores, no fences (ThreadSanitizer does not model them).
    seq_.store(seq + 1, std::memory_order_relaxed);
    const bool fits = clocked.size() <= kCapacity;
    for (std::size_t i = 0; fits && i < clocked.size(); ++i) {
      clocks_[i].store(process_clock(clocked[i].first), std::memory_order_release);
    }
    count_.store(fits ? clocked.size() : kTooMany, std::memory_order_release);
    rest_s_.store(rest_s, std::memory_order_release);
    fingerprint_.store(fingerprint, std::memory_order_release);
    owner_.store(owner, std::memory_order_release);
    seq_.store(seq + 2, std::memory_order_release);
    writing_.store(false, std::memory_order_release);
  }

  /// The live descendants' CPU now, in seconds; nullopt where the last walk is not `owner`'s (a
  /// forked child), a child was reaped since (`fingerprint` moved), the tree was too large, or a
  /// clock could not be read (a descendant gone).
  std::optional<double> now(pid_t owner, std::uint64_t fingerprint) const noexcept {
    clockid_t ids[kCapacity];
    std::size_t n = 0;
    double rest = 0;
    const std::uint64_t seq = seq_.load(std::memory_order_acquire);
    if (seq == 0 || (seq & 1) != 0) return std::nullopt;
    n = count_.load(std::memory_order_acquire);
    rest = rest_s_.load(std::memory_order_acquire);
    if (n > kCapacity || owner_.load(std::memory_order_acquire) != owner ||
        fingerprint_.load(std::memory_order_acquire) != fingerprint) {
      return std::nullopt;
    }
    for (std::size_t i = 0; i < n; ++i) ids[i] = clocks_[i].load(std::memory_order_acquire);
    if (seq_.load(std::memory_order_relaxed) != seq) return std::nullopt;
    // One after the other, after the copy: they are nearly simultaneous.
    std::uint64_t ns = 0;
    for (std::size_t i = 0; i < n; ++i) {
      timespec ts{};
      if (::clock_gettime(ids[i], &ts) != 0) return std::nullopt;
      ns += static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
            static_cast<std::uint64_t>(ts.tv_nsec);
    }
    return rest + static_cast<double>(ns) * 1e-9;
  }

 private:
  static constexpr std::size_t kTooMany = kCapacity + 1;

  // What clock_getcpuclockid(pid) returns (the kernel's process CPU clock of pid, CPUCLOCK_SCHED:
  // ((~pid) << 3) | 2), without the clock_getres call glibc adds to check the process exists:
  // the boundary's clock_gettime fails for a process that is gone.
  static clockid_t process_clock(pid_t pid) noexcept {
    return static_cast<clockid_t>((~static_cast<unsigned>(pid) << 3) | 2u);
  }

  std::atomic<std::uint64_t> seq_{0};
  std::atomic<bool> writing_{false};
  std::atomic<std::size_t> count_{0};
  std::atomic<double> rest_s_{0};
  std::atomic<std::uint64_t> fingerprint_{0};
  std::atomic<pid_t> owner_{0};
  std::atomic<clockid_t> clocks_[kCapacity] = {};
};

inline ChildClocks& child_clocks() {
  return laptime::detail::process_singleton<ChildClocks>("child_clocks");
}

}  // namespace detail
}  // namespace resources
LAPTIME_END_NAMESPACE
