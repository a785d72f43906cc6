// laptime internals: the Stopwatch's intervals as NVTX ranges (Stopwatch::set_nvtx_ranges,
// LAPTIME_NVTX_RANGES; docs/nvtx.md "Stopwatch intervals as ranges") and the iteration marks on
// the profiler's timeline. The implementation part.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "laptime/config.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/impl/nvtx_measured.hpp"  // the NVTX ranges of set_nvtx_ranges, inlined
#include "laptime/impl/stopwatch_parts.hpp"
#include "laptime/nvtx.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

// Each interval is an NVTX range of the name's text, through the NVTX wrapper (its domain, colours,
// registered strings, syncs, range stack and order checks), while the wrapper is enabled:
//   - a push at start_meas, a pop at end_meas on the same thread: ranges nest with each other and
//     with range_push/range_pop (with order tracking, an end_meas whose range is not the innermost
//     is a usage error after the interval was counted; nothing is popped);
//   - a name whose interval once ended on another thread (kNameNvtxCross) uses start/end ranges
//     from then on (nvtxDomainRangeStartEx/RangeEnd: not tied to a thread's stack), started by
//     the starting thread and ended by whichever thread ends the interval;
//   - that first interval was pushed on its starting thread, whose stack only that thread may pop:
//     the ending thread marks it owed (kNvtxRangeOwed), and the starting thread pops it at its next
//     start_meas of that name (with order tracking: if it is then the innermost range; otherwise
//     it stays open, with a one-time warning). On the timeline that one range ends late.
//   - an interval dropped (of an older enable/reset period) closes its range when it is dropped.

#if LAPTIME_ENABLED
LAPTIME_ALWAYS_INLINE void StopwatchState::open_nvtx_range(Slot& s, std::uint32_t id) {
  // A range left open: owed by an interval that ended elsewhere, or of a dropped interval.
  if (LAPTIME_UNLIKELY(s.nvtx.load(std::memory_order_acquire) != kNvtxRangeNone)) {
    close_own_nvtx_range(s, id, /*report=*/false);
  }
  // Quiet (no profiler attached, no sync, no order tracking): NVTX would drop the range.
  if (LAPTIME_LIKELY(NvtxCore::quiet(nvtx_core().state.load(std::memory_order_relaxed)))) return;
  const bool start_end = (name_flags[id].load(std::memory_order_relaxed) & kNameNvtxCross) != 0;
  std::uint64_t range = 0;
  const std::uint32_t opened = nvtx_measured_open(
      nvtx_state(), *names[id].load(std::memory_order_acquire), &s.nvtx_name, start_end, &range);
  if (LAPTIME_UNLIKELY(opened == 0)) {
    nvtx_ranges_without_wrapper();
    return;
  }
  s.nvtx_range.store(range, std::memory_order_relaxed);
  s.nvtx_state.store(opened, std::memory_order_relaxed);
  s.nvtx.store(start_end ? kNvtxRangeStarted : kNvtxRangePushed, std::memory_order_release);
}

LAPTIME_NOINLINE LAPTIME_COLD inline void StopwatchState::nvtx_ranges_without_wrapper() {
  warn_once("stopwatch-nvtx-off",
            "Stopwatch NVTX ranges are on, but the NVTX wrapper is not enabled "
            "(NVTXRangeWrapper::enable, LAPTIME_NVTX=1): no range is sent until it is");
}

// The slot's own thread closes its range. A load and a store, no locked instruction: another
// thread only turns Pushed into Owed (the owner pops either way, once) or ends a Started range at
// the same moment as its owner (then both end it, as both count the interval: end_elsewhere).
LAPTIME_NOINLINE inline void StopwatchState::close_own_nvtx_range(Slot& s, std::uint32_t id,
                                                                  bool report) {
  const std::uint8_t how = s.nvtx.load(std::memory_order_acquire);
  s.nvtx.store(kNvtxRangeNone, std::memory_order_relaxed);
  const std::uint32_t opened = s.nvtx_state.load(std::memory_order_relaxed);
  if (how == kNvtxRangeStarted) {
    nvtx_measured_end(nvtx_state(), opened, s.nvtx_range.load(std::memory_order_relaxed));
  } else if (how == kNvtxRangePushed || how == kNvtxRangeOwed) {
    const std::string& text = *names[id].load(std::memory_order_acquire);
    // An owed range is popped without an error: its end_meas already came, on another thread.
    if (!nvtx_measured_pop(nvtx_state(), opened, text, s.nvtx_name.load(std::memory_order_relaxed),
                           report && how == kNvtxRangePushed) &&
        how == kNvtxRangeOwed) {
      warn_once("stopwatch-nvtx-owed",
                "Stopwatch NVTX range " + detail::quoted(text) +
                    " ended on another thread while ranges pushed after it were still open on its "
                    "starting thread; that range stays open there");
    }
  }
}

// At the end of an interval (end_features), on the thread that ends it. The common cases (a range
// this thread pushed, the wrapper's state unchanged, no sync; with order tracking, the range is
// the innermost by its registered name) are a few loads, a store and NVTX's pop: every other case
// is a tail call to close_nvtx_range_slow.
LAPTIME_NOINLINE inline void StopwatchState::close_nvtx_range(ThreadRecord& owner, Slot& run_slot,
                                                              std::uint32_t id) {
  NvtxCore* core = nvtx_core_pointer().load(std::memory_order_acquire);
  if (LAPTIME_LIKELY(threads.find_local() == &owner && core != nullptr &&
                     run_slot.nvtx.load(std::memory_order_acquire) == kNvtxRangePushed)) {
    const std::uint32_t st = core->state.load(std::memory_order_acquire);
    if (LAPTIME_LIKELY(st == run_slot.nvtx_state.load(std::memory_order_relaxed) &&
                       (st & NvtxCore::kSyncPop) == 0)) {
      if ((st & NvtxCore::kTrack) == 0) {
        run_slot.nvtx.store(kNvtxRangeNone, std::memory_order_relaxed);
        nvtx_api::pop(core->domain.load(std::memory_order_relaxed));
        return;
      }
      // Order tracking: the innermost range is this one when its registered name is on top
      // (a name beyond the table, or another on top, takes the slow path and its text check).
      NvtxThread& t = nvtx_thread(static_cast<NvtxState&>(*core), st);
      const NvtxName* pushed = run_slot.nvtx_name.load(std::memory_order_relaxed);
      if (LAPTIME_LIKELY(pushed != nullptr && !t.stack.empty() && t.stack.back() == pushed)) {
        run_slot.nvtx.store(kNvtxRangeNone, std::memory_order_relaxed);
        t.stack.pop_back();
        nvtx_api::pop(t.domain);
        return;
      }
    }
  }
  close_nvtx_range_slow(owner, run_slot, id);
}

LAPTIME_NOINLINE inline void StopwatchState::close_nvtx_range_slow(ThreadRecord& owner,
                                                                   Slot& run_slot,
                                                                   std::uint32_t id) {
  if (LAPTIME_LIKELY(&owner == &threads.local())) {
    if (LAPTIME_LIKELY(run_slot.nvtx.load(std::memory_order_acquire) == kNvtxRangePushed)) {
      run_slot.nvtx.store(kNvtxRangeNone, std::memory_order_relaxed);
      (void)nvtx_measured_pop(nvtx_state(), run_slot.nvtx_state.load(std::memory_order_relaxed),
                              *names[id].load(std::memory_order_acquire),
                              run_slot.nvtx_name.load(std::memory_order_relaxed), true);
      return;
    }
    close_own_nvtx_range(run_slot, id, /*report=*/true);
    return;
  }
  close_nvtx_range_elsewhere(run_slot, id);
}

// Ended on another thread: from now on the name's intervals are start/end ranges.
LAPTIME_NOINLINE inline void StopwatchState::close_nvtx_range_elsewhere(Slot& run_slot,
                                                                        std::uint32_t id) {
  name_flags[id].fetch_or(kNameNvtxCross, std::memory_order_relaxed);
  std::uint8_t how = run_slot.nvtx.load(std::memory_order_acquire);
  if (how == kNvtxRangeStarted) {
    const std::uint32_t opened = run_slot.nvtx_state.load(std::memory_order_relaxed);
    const std::uint64_t range = run_slot.nvtx_range.load(std::memory_order_relaxed);
    if (run_slot.nvtx.compare_exchange_strong(how, kNvtxRangeNone, std::memory_order_acq_rel)) {
      nvtx_measured_end(nvtx_state(), opened, range);
    }
  } else if (how == kNvtxRangePushed) {
    // Only its own thread may pop it: owed (a compare-exchange, as its owner may be closing it).
    run_slot.nvtx.compare_exchange_strong(how, kNvtxRangeOwed, std::memory_order_acq_rel);
  }
}
#else
// Compiled out (LAPTIME_DISABLE): no NVTX, and no feature bit is ever set.
LAPTIME_ALWAYS_INLINE void StopwatchState::open_nvtx_range(Slot&, std::uint32_t) {}
inline void StopwatchState::nvtx_ranges_without_wrapper() {}
inline void StopwatchState::close_own_nvtx_range(Slot&, std::uint32_t, bool) {}
inline void StopwatchState::close_nvtx_range(ThreadRecord&, Slot&, std::uint32_t) {}
inline void StopwatchState::close_nvtx_range_slow(ThreadRecord&, Slot&, std::uint32_t) {}
inline void StopwatchState::close_nvtx_range_elsewhere(Slot&, std::uint32_t) {}
#endif  // LAPTIME_ENABLED

/// Stopwatch::set_nvtx_ranges (from_env: LAPTIME_NVTX_RANGES or the profiling profile, which the
/// code's calls yield to, docs/configuration.md).
inline void StopwatchState::set_nvtx_ranges(bool on, bool from_env) {
  configure(nvtx_ranges_from_env, from_env, [&] {
    if (on) {
      features.fetch_or(kFeatNvtx, std::memory_order_relaxed);
    } else {
      // First the leftover bit: an interval that opened its range ends it whatever it reads.
      features.fetch_or(kFeatLeftover, std::memory_order_relaxed);
      features.fetch_and(~kFeatNvtx, std::memory_order_relaxed);
    }
  });
}

/// The end of iteration `finished` as a mark on the profiler's timeline, while the NVTX wrapper
/// is enabled.
inline void mark_iteration(std::int64_t finished) {
  if (!NVTXRangeWrapper::instance().is_enabled()) return;
  char text[48];
  std::snprintf(text, sizeof text, "iteration %lld", static_cast<long long>(finished));
  NVTXRangeWrapper::instance().mark(text);
}

}  // namespace detail
LAPTIME_END_NAMESPACE
