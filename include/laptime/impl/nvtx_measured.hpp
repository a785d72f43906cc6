// laptime internals: the Stopwatch's intervals as NVTX ranges (Stopwatch::set_nvtx_ranges), sent
// through the NVTX wrapper: what the Stopwatch's side (impl/stopwatch_nvtx_ranges.hpp) calls.
// The wrapper's implementation part (impl/nvtx_setup.hpp) is what these build on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/impl/nvtx_setup.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

#if LAPTIME_ENABLED
// Called from the Stopwatch's feature branches (impl/stopwatch_nvtx_ranges.hpp), where they
// inline. The push and the tracked pop are the wrapper's own (nvtx_push, the stack and its order
// check), so a Stopwatch range nests with the user's range_push/range_pop and is checked like one.

/// A start/end range of `text` on the calling thread (its id in *range); the wrapper's state it
/// opened under, 0 when the wrapper is not enabled.
template <int = 0>
std::uint32_t nvtx_measured_start(NvtxState& w, std::string_view text, std::uint64_t* range) {
  const std::uint32_t s = w.state.load(std::memory_order_acquire);
  if ((s & NvtxState::kEnabled) == 0) return 0;
  if ((s & NvtxState::kSyncPush) != 0) nvtx_ops(w).sync();
  NvtxThread& t = nvtx_thread(w, s);
  const NvtxName* name = t.find_cached(text);
  if (name == nullptr) name = nvtx_find_slow(t, text);
  if (name != nullptr) {
    *range = nvtx_api::range_start(t.domain, &name->attributes);
    return s;
  }
  // Beyond LAPTIME_NVTX_MAX_NAMES: as text, as range_push does (nvtx_push_unregistered).
  const std::string copy(text);
  const std::vector<std::uint32_t> no_colors;
  const NvtxEventAttributes a = nvtx_text_attributes(
      copy.c_str(), t.session != nullptr ? t.session->colors : no_colors, text);
  *range = nvtx_api::range_start(t.domain, &a);
  return s;
}

/// Opens the range `text` on the calling thread: a push, or with `start_end` a start/end range
/// whose id goes to *range. `resolved`: the caller's cache of the registered name (as a call
/// site's NVTXRangeName is). Returns the wrapper's state it opened under (0: the wrapper is not
/// enabled, nothing was opened).
LAPTIME_ALWAYS_INLINE std::uint32_t nvtx_measured_open(NvtxState& w, std::string_view text,
                                                       std::atomic<const NvtxName*>* resolved,
                                                       bool start_end, std::uint64_t* range) {
  if (LAPTIME_UNLIKELY(start_end)) return nvtx_measured_start(w, text, range);
  return nvtx_push(w, text, resolved, nullptr);
}

/// Pops the range `text` pushed under `opened` on the calling thread. Nothing when the wrapper was
/// reset or enabled again since. With order tracking, only if `text` (registered as `pushed`,
/// when not nullptr) is the innermost range: otherwise nothing is popped, false is returned and,
/// with `report`, it is a usage error.
// Declared with its attribute (nvcc warns about an attribute on the definition, a redeclaration).
template <int = 0>
LAPTIME_NOINLINE bool nvtx_measured_pop_tracked(NvtxState& w, std::uint32_t s,
                                                const std::string& text, const NvtxName* pushed,
                                                bool report);

LAPTIME_ALWAYS_INLINE bool nvtx_measured_pop(NvtxState& w, std::uint32_t opened,
                                             const std::string& text, const NvtxName* pushed,
                                             bool report) {
  const std::uint32_t s = w.state.load(std::memory_order_acquire);
  if (LAPTIME_UNLIKELY(s != opened)) return true;  // disabled or re-enabled since: not ours
  if ((s & (NvtxState::kTrack | NvtxState::kSyncPop)) != 0) {
    return nvtx_measured_pop_tracked(w, s, text, pushed, report);
  }
  nvtx_api::pop(w.domain.load(std::memory_order_relaxed));
  return true;
}

/// nvtx_measured_pop with order tracking or a sync: out of line, so that the plain pop builds no
/// frame.
template <int>
bool nvtx_measured_pop_tracked(NvtxState& w, std::uint32_t s, const std::string& text,
                               const NvtxName* pushed, bool report) {
  if ((s & NvtxState::kTrack) == 0) {
    nvtx_ops(w).sync();
    nvtx_api::pop(w.domain.load(std::memory_order_relaxed));
    return true;
  }
  NvtxThread& t = nvtx_thread(w, s);
  // The check comes before the sync and the pop: on a mismatch nothing at all happens.
  if (LAPTIME_UNLIKELY(t.stack.empty() ||
                       (t.stack.back() != pushed && t.top_text() != std::string_view(text)))) {
    if (report) nvtx_ops(w).pop_error(t, text, kPopMeasured);
    return false;
  }
  if ((s & NvtxState::kSyncPop) != 0) nvtx_ops(w).sync();
  if (LAPTIME_UNLIKELY(t.stack.back() == nullptr)) t.unregistered.pop_back();
  t.stack.pop_back();
  nvtx_api::pop(t.domain);
  return true;
}

/// Ends the start/end range `range` opened under `opened` (on any thread).
template <int = 0>
void nvtx_measured_end(NvtxState& w, std::uint32_t opened, std::uint64_t range) {
  const std::uint32_t s = w.state.load(std::memory_order_acquire);
  if (s != opened) return;
  if ((s & NvtxState::kSyncPop) != 0) nvtx_ops(w).sync();
  nvtx_api::range_end(w.domain.load(std::memory_order_relaxed), range);
}

#endif  // LAPTIME_ENABLED

}  // namespace detail
LAPTIME_END_NAMESPACE
