// laptime internals: the out-of-line half of the NVTX wrapper's API — what nvtx.hpp declares
// (LAPTIME_IMPL: weak, one copy kept per program), each a call into the wrapper's state
// (nvtx_setup.hpp). Apart from nvtx_setup.hpp so that a file that reads the wrapper's state (a
// white-box test, the Stopwatch's ranges) compiles only what it uses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/cuda_sync.hpp"
#include "laptime/impl/nvtx_setup.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

#if LAPTIME_ENABLED

LAPTIME_IMPL NvtxCore& nvtx_core_slow() {
  keep_caller_loaded();  // this copy's code may become the wrapper's (its table of functions)
  NvtxState& s = process_singleton<NvtxState>("nvtx");
#if LAPTIME_HAVE_NVTX
  // For copies compiled without the NVTX headers in other shared objects (nvtx_api.hpp).
  const NvtxCalls* none = nullptr;
  s.calls.compare_exchange_strong(none, &nvtx_native_calls, std::memory_order_acq_rel);
#endif
  nvtx_core_pointer().store(&s, std::memory_order_release);
  return s;
}

// range_push(text) and range_pop(expected) with order tracking are the calls a loop makes most.
// Each has a fast lane that makes no call of its own but its last (NVTX's, or the general path's
// when any condition fails), so that it saves no registers and keeps no stack frame: a state the
// lane does not handle goes, unchanged, to the general path (nvtx_state.hpp). Measured by the bench
// row BM_NvtxWrapperPushPop_Tracked (docs/performance.md).

LAPTIME_NOINLINE inline void nvtx_push_text_general(std::string_view text) {
  nvtx_push_text(nvtx_state(), text);
}

LAPTIME_NOINLINE inline void nvtx_pop_general(std::string_view expected,
                                              const std::atomic<const NvtxName*>* resolved,
                                              bool check) {
  nvtx_pop(nvtx_state(), expected, resolved, check);
}

/// The calling thread's record where the lanes can use it: attached through this copy of the code
/// and refreshed for the current enable(); else nullptr.
LAPTIME_ALWAYS_INLINE NvtxThread* nvtx_lane_thread(NvtxState& w, std::uint32_t s) noexcept {
  NvtxThread* t = w.threads.find_local();
  if (t == nullptr || t->generation != s >> NvtxState::kGenerationShift) return nullptr;
  return t;
}

LAPTIME_IMPL void nvtx_push_text(std::string_view text) {
  NvtxCore* core = nvtx_core_pointer().load(std::memory_order_acquire);
  // Texts the cache compares without a call (same_text's inline range).
  if (LAPTIME_LIKELY(core != nullptr && text.size() <= 64)) {
    NvtxState& w = static_cast<NvtxState&>(*core);
    const std::uint32_t s = w.state.load(std::memory_order_acquire);
    NvtxThread* t = nvtx_lane_thread(w, s);
    if (LAPTIME_LIKELY((s & (NvtxState::kEnabled | NvtxState::kSyncPush)) == NvtxState::kEnabled &&
                       t != nullptr)) {
      const auto* e = t->cache.find(text);
      const NvtxName* name = e != nullptr ? e->value : nullptr;
      if (LAPTIME_LIKELY(name != nullptr)) {
        if ((s & NvtxState::kTrack) == 0) return nvtx_api::push(t->domain, &name->attributes);
        if (LAPTIME_LIKELY(t->stack.size != t->stack.capacity)) {
          t->stack.data[t->stack.size++] = name;
          return nvtx_api::push(t->domain, &name->attributes);
        }
      }
    }
  }
  nvtx_push_text_general(text);
}

LAPTIME_IMPL std::uint32_t nvtx_push(std::string_view text, std::atomic<const NvtxName*>* resolved,
                                     NvtxPushed* pushed) {
  return nvtx_push(nvtx_state(), text, resolved, pushed);
}

LAPTIME_IMPL void nvtx_pop(std::string_view expected, const std::atomic<const NvtxName*>* resolved,
                           bool check) {
  constexpr std::uint32_t kLane = NvtxState::kEnabled | NvtxState::kTrack | NvtxState::kSyncPop;
  NvtxCore* core = nvtx_core_pointer().load(std::memory_order_acquire);
  if (LAPTIME_LIKELY(core != nullptr && expected.size() <= 64)) {
    NvtxState& w = static_cast<NvtxState&>(*core);
    const std::uint32_t s = w.state.load(std::memory_order_acquire);
    NvtxThread* t = nvtx_lane_thread(w, s);
    if (LAPTIME_LIKELY((s & kLane) == (NvtxState::kEnabled | NvtxState::kTrack) && t != nullptr &&
                       !t->stack.empty())) {
      const NvtxName* top = t->stack.back();
      // The checks of the general path, for a registered name on top: the call site's name, else
      // the text.
      if (LAPTIME_LIKELY(top != nullptr) &&
          (!check || (resolved != nullptr && resolved->load(std::memory_order_relaxed) == top) ||
           same_text(top->text, expected))) {
        t->stack.pop_back();
        return nvtx_api::pop(t->domain);
      }
    }
  }
  nvtx_pop_general(expected, resolved, check);
}

LAPTIME_IMPL void nvtx_pop_scoped(std::uint32_t pushed_state, const NvtxPushed& pushed) noexcept {
  nvtx_pop_scoped(nvtx_state(), pushed_state, pushed);
}

LAPTIME_IMPL void nvtx_mark(std::string_view message) {
  nvtx_mark(nvtx_state(), message);
}

LAPTIME_IMPL void nvtx_enable(bool sync_on_push, bool sync_on_pop, bool track,
                              const std::string& domain, const std::vector<std::uint32_t>& colors) {
  nvtx_enable(nvtx_state(), sync_on_push, sync_on_pop, track, domain, colors);
}

LAPTIME_IMPL void nvtx_name_current_thread(std::string_view name) {
  nvtx_name_current_thread(nvtx_state(), name);
}

LAPTIME_IMPL bool nvtx_profiler_call(bool start) noexcept {
  return cuda_profiler_call(start);
}

LAPTIME_IMPL void nvtx_reset_for_testing() {
  nvtx_reset(nvtx_state());
}

#endif  // LAPTIME_ENABLED

}  // namespace detail
LAPTIME_END_NAMESPACE
