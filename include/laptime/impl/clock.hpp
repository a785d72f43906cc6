// laptime internals: the clock's cold half (implementation part): the choice of clock, the
// calibration of the cycle counter, the drift check and the report's line. The hot half, now_ns(),
// is detail/clock.hpp.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "laptime/detail/clock.hpp"
#include "laptime/detail/env_vars.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/impl/format.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// Which clock a process uses, and why: the pure decision, tested with fixture text.
struct ClockChoice {
  bool counter = false;  ///< the cycle counter; else steady_clock
  std::string reason;    ///< why (for the report), e.g. "no invariant TSC"
  std::string warning;   ///< a malformed LAPTIME_CLOCK, or empty
};

/// The flags line of /proc/cpuinfo's first processor has both words `constant_tsc` and
/// `nonstop_tsc` (a whole word each, so "nonstop_tsc_s3" does not count).
inline bool has_invariant_tsc(std::string_view cpuinfo) {
  const std::size_t at = cpuinfo.find("\nflags");
  const std::size_t start = cpuinfo.compare(0, 5, "flags") == 0 ? 0 : at;
  if (start == std::string_view::npos) return false;
  std::string_view line = cpuinfo.substr(start);
  line = line.substr(0, line.find('\n', start == 0 ? 0 : 1));
  auto has_word = [line](std::string_view w) {
    for (std::size_t p = line.find(w); p != std::string_view::npos; p = line.find(w, p + 1)) {
      const bool left = p > 0 && (line[p - 1] == ' ' || line[p - 1] == '\t' || line[p - 1] == ':');
      const std::size_t end = p + w.size();
      const bool right = end == line.size() || line[end] == ' ' || line[end] == '\t';
      if (left && right) return true;
    }
    return false;
  };
  return has_word("constant_tsc") && has_word("nonstop_tsc");
}

/// The clock for `cpuinfo` (the text of /proc/cpuinfo, x86-64 only) and LAPTIME_CLOCK's value.
/// `arch_counter`: the architecture has a counter that is invariant by definition (AArch64);
/// `any_counter`: it has one at all.
inline ClockChoice choose_clock(std::string_view cpuinfo, std::optional<std::string_view> env,
                                bool arch_counter, bool any_counter) {
  ClockChoice c;
  std::optional<bool> forced;                                            // true: tsc, false: steady
  const EnvReading<int> chosen = read_choice(env_var(Env::clock), env);  // steady|tsc
  if (chosen.value) forced = *chosen.value == 1;
  c.warning = chosen.warning;
  if (!any_counter) {
    c.reason = "no cycle counter on this architecture";
    if (forced == true) c.warning = "LAPTIME_CLOCK=tsc: no cycle counter here; steady_clock used";
    return c;
  }
  if (forced == false) {
    c.reason = "LAPTIME_CLOCK=steady";
    return c;
  }
  const bool invariant = arch_counter || has_invariant_tsc(cpuinfo);
  if (forced == true) {
    c.counter = true;
    c.reason = invariant ? "LAPTIME_CLOCK=tsc" : "LAPTIME_CLOCK=tsc, without invariant TSC";
    return c;
  }
  c.counter = invariant;
  c.reason = invariant ? "" : "no invariant TSC";
  return c;
}

/// What the report shows: "clock: tsc 2.45 GHz" or "clock: steady (no invariant TSC)".
struct ClockInfo {
  bool counter = false;
  double hz = 0.0;     ///< the counter's calibrated rate; 0 on steady_clock or before calibration
  std::string reason;  ///< why steady_clock, or a note on the counter ("LAPTIME_CLOCK=tsc")
};

inline std::string describe_clock(const ClockInfo& info) {
  std::string s = "clock: ";
#if defined(__aarch64__)
  const char* counter_name = "cntvct";
#else
  const char* counter_name = "tsc";
#endif
  if (info.counter) {
    s += counter_name;
    // append_fixed, not printf: the program's LC_NUMERIC must not make "2,45 GHz".
    if (info.hz >= 1e9) {
      s += ' ';
      append_fixed(s, info.hz / 1e9, 2);
      s += " GHz";
    } else if (info.hz > 0) {
      s += ' ';
      append_fixed(s, info.hz / 1e6, 2);
      s += " MHz";
    } else {
      s += " (calibrating: steady_clock until then)";
    }
    if (!info.reason.empty()) s += " (" + info.reason + ")";
  } else {
    s += "steady";
    if (!info.reason.empty()) s += " (" + info.reason + ")";
  }
  return s;
}

/// The process-wide clock state (one per process, shared by every copy of the header).
struct ClockState {
  static constexpr std::int64_t kCalibrationWindowNs = 10'000'000;  // 10 ms
  static constexpr double kMaxDrift = 1e-3;                         // 0.1 %
  enum : int { kUndecided, kCalibrating, kCounter, kSteady };

  struct Anchor {
    std::uint64_t cycles = 0;
    std::int64_t ns = 0;
  };

  ClockScale scale;
  std::atomic<int> phase{kUndecided};
  std::mutex mutex;  // cold paths only, taken with try_lock where a fork may have left it held
  Anchor first;
  std::int64_t calibrated_ns = 0;  // steady_clock time of the second anchor
  double hz = 0.0;
  std::string reason;

  /// The tightest of a few counter/steady_clock/counter brackets: the counter's midpoint.
  static Anchor anchor() noexcept {
    Anchor best;
    std::uint64_t width = ~std::uint64_t{0};
    for (int i = 0; i < 7; ++i) {
      const std::uint64_t a = cycle_counter();
      const std::int64_t ns = steady_ns();
      const std::uint64_t b = cycle_counter();
      if (b >= a && b - a < width) {
        width = b - a;
        best = {a + (b - a) / 2, ns};
      }
    }
    return best;
  }
};

/// The first flags line of /proc/cpuinfo (x86-64), read in a few KiB, not the whole file.
inline std::string read_cpuinfo_head() {
  std::string text;
  const int fd = ::open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  while (text.size() < (1u << 16)) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    const std::size_t f = text.find("\nflags");
    if (f != std::string::npos && text.find('\n', f + 1) != std::string::npos) break;
  }
  ::close(fd);
  return text;
}

inline ClockState& clock_state() {
  return process_singleton<ClockState>("clock");
}

/// Decides the clock (once per process), finishes the calibration when its window has passed,
/// and answers in the meantime: the counter once calibrated, steady_clock otherwise.
LAPTIME_IMPL LAPTIME_COLD std::int64_t now_ns_cold() noexcept {
  try {
    ClockState& c = clock_state();
    clock_scale_pointer().store(&c.scale, std::memory_order_release);
    if (const std::uint64_t m = c.scale.mult.load(std::memory_order_acquire); m != 0) {
      return scale_cycles(cycle_counter(), m, c.scale.offset);
    }
    const int phase = c.phase.load(std::memory_order_acquire);
    if (phase == ClockState::kSteady) return steady_ns();
    std::unique_lock<std::mutex> lock(c.mutex, std::try_to_lock);
    if (!lock.owns_lock()) return steady_ns();  // another thread decides or calibrates
    if (phase == ClockState::kUndecided && c.phase.load() == ClockState::kUndecided) {
      const std::string cpuinfo = kHaveTsc ? read_cpuinfo_head() : std::string();
      const ClockChoice choice = choose_clock(cpuinfo, env_text(env_var(Env::clock)),
                                              kHaveArchCounter, kHaveTsc || kHaveArchCounter);
      if (!choice.warning.empty()) warn_once(choice.warning, choice.warning);
      c.reason = choice.reason;
      if (!choice.counter) {
        c.phase.store(ClockState::kSteady, std::memory_order_release);
        c.scale.steady.store(true, std::memory_order_relaxed);
        return steady_ns();
      }
      c.first = ClockState::anchor();
      c.phase.store(ClockState::kCalibrating, std::memory_order_release);
      return c.first.ns;
    }
    if (c.phase.load() != ClockState::kCalibrating) return steady_ns();
    const std::int64_t now = steady_ns();
    if (now - c.first.ns < ClockState::kCalibrationWindowNs) return now;
    const ClockState::Anchor second = ClockState::anchor();
    if (second.cycles <= c.first.cycles) {  // the counter went backwards: not usable
      c.reason = "the cycle counter went backwards during calibration";
      c.phase.store(ClockState::kSteady, std::memory_order_release);
      c.scale.steady.store(true, std::memory_order_relaxed);
      return steady_ns();
    }
    const double ns_per_cycle = static_cast<double>(second.ns - c.first.ns) /
                                static_cast<double>(second.cycles - c.first.cycles);
    const auto mult = static_cast<std::uint64_t>(std::llround(ns_per_cycle * 4294967296.0));
    if (mult == 0) {
      c.reason = "the cycle counter is too fast to scale";
      c.phase.store(ClockState::kSteady, std::memory_order_release);
      c.scale.steady.store(true, std::memory_order_relaxed);
      return steady_ns();
    }
    c.hz = 1e9 / ns_per_cycle;
    c.calibrated_ns = second.ns;
    // Anchored at the second point: timestamps continue steady_clock's from here.
    c.scale.offset = second.ns - scale_cycles(second.cycles, mult, 0);
    c.phase.store(ClockState::kCounter, std::memory_order_release);
    c.scale.mult.store(mult, std::memory_order_release);
    return scale_cycles(cycle_counter(), mult, c.scale.offset);
  } catch (...) {
    return steady_ns();  // no memory for the process-wide state: steady_clock, always right
  }
}

/// Checks the counter against steady_clock since calibration; past ClockState::kMaxDrift the
/// process falls back to steady_clock for good (with a warning). Cold: report time.
LAPTIME_COLD inline void clock_check_drift() noexcept {
  try {
    ClockState& c = clock_state();
    std::unique_lock<std::mutex> lock(c.mutex, std::try_to_lock);
    if (!lock.owns_lock() || c.phase.load() != ClockState::kCounter) return;
    const std::uint64_t m = c.scale.mult.load(std::memory_order_acquire);
    const ClockState::Anchor now = ClockState::anchor();
    const std::int64_t since = now.ns - c.calibrated_ns;
    if (m == 0 || since < 100'000'000) return;  // too short to judge (100 ms)
    const double off = static_cast<double>(scale_cycles(now.cycles, m, c.scale.offset) - now.ns);
    const double drift = std::fabs(off) / static_cast<double>(since);
    if (drift <= ClockState::kMaxDrift) return;
    std::string reason = "the cycle counter drifted ";
    append_fixed(reason, drift * 100.0, 3);
    c.reason = reason + " % from steady_clock; fell back";
    c.scale.mult.store(0, std::memory_order_release);
    c.phase.store(ClockState::kSteady, std::memory_order_release);
    c.scale.steady.store(true, std::memory_order_relaxed);
    warn_once("clock-drift", c.reason);
  } catch (...) {
  }
}

/// The clock in use, after a drift check: for the report ("clock: tsc 2.45 GHz").
inline ClockInfo clock_info() {
  (void)now_ns();  // decides the clock if nothing has yet
  clock_check_drift();
  ClockState& c = clock_state();
  ClockInfo info;
  const int phase = c.phase.load();
  info.counter = phase == ClockState::kCounter || phase == ClockState::kCalibrating;
  // try_lock: a fork may have left the mutex held by a thread that does not exist in the child
  // (the line then lacks the rate and the reason, never blocks).
  std::unique_lock<std::mutex> lock(c.mutex, std::try_to_lock);
  for (int i = 0; i < 100 && !lock.owns_lock(); ++i) {
    ::usleep(100);
    (void)lock.try_lock();
  }
  if (!lock.owns_lock()) return info;
  info.hz = c.phase.load() == ClockState::kCounter ? c.hz : 0.0;
  info.reason = c.reason;
  return info;
}

/// "clock: tsc 2.45 GHz" / "clock: steady (no invariant TSC)": the report's line.
inline std::string clock_description() {
  return describe_clock(clock_info());
}

/// Completes the calibration now (waits out the rest of its window; tests and enable() may).
LAPTIME_COLD inline void clock_calibrate_now() noexcept {
  (void)now_ns();
  try {
    ClockState& c = clock_state();
    while (c.phase.load(std::memory_order_acquire) == ClockState::kCalibrating) {
      (void)now_ns_cold();
      ::usleep(1000);
    }
  } catch (...) {
  }
}

}  // namespace detail
LAPTIME_END_NAMESPACE
