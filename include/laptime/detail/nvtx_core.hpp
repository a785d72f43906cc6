// laptime internals: what the NVTX wrapper's inline API (nvtx.hpp) reads: NvtxCore (the flags of
// the process-wide state, impl/nvtx_state.hpp derives from it), this copy's pointer to it, and the
// declarations of the out-of-line half (LAPTIME_IMPL, impl/nvtx_setup.hpp). Light: no NVTX header,
// no mutex. The NVTX detection macros (LAPTIME_HAVE_NVTX, LAPTIME_NVTX_MAX_NAMES) are config.hpp's.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE

namespace detail {
#if LAPTIME_ENABLED
struct NvtxName;     // impl/nvtx_state.hpp
struct NvtxOps;      // impl/nvtx_state.hpp
struct NvtxSession;  // impl/nvtx_state.hpp
struct NvtxCalls;    // impl/nvtx_api.hpp

/// The part of the process-wide wrapper state (NvtxState, impl/nvtx_state.hpp, derives from it)
/// that the inline API reads: whether the wrapper is enabled. One per process, found through
/// nvtx_core().
struct NvtxCore {
  static constexpr std::uint32_t kEnabled = 1;
  static constexpr std::uint32_t kSyncPush = 2;
  static constexpr std::uint32_t kSyncPop = 4;
  static constexpr std::uint32_t kTrack = 8;
  static constexpr std::uint32_t kFlagMask = 15;  // the settings of enable()
  // Set by enable() when NVTX has no tool for pushes and pops (no profiler attached: NVTX's own
  // push and pop return at once, and will for the life of the process).
  static constexpr std::uint32_t kNoTool = 16;
  // The states in which a push or a pop has nothing to do: enabled, no tool, no sync, no order
  // tracking. The inline API returns there after one load, as raw NVTX does.
  static constexpr std::uint32_t kQuietMask = kEnabled | kSyncPush | kSyncPop | kTrack | kNoTool;
  static constexpr std::uint32_t kQuiet = kEnabled | kNoTool;
  static constexpr bool quiet(std::uint32_t state) noexcept {
    return (state & kQuietMask) == kQuiet;
  }
  static constexpr int kGenerationShift = 5;

  // Read on every call: on their own cache line, written only by enable() and the test reset.
  // state: kEnabled | kSync* | kTrack | generation << kGenerationShift. A new generation starts at
  // each enable() after a reset, so per-thread caches and scoped ranges notice they are stale.
  alignas(64) std::atomic<std::uint32_t> state{0};
  std::atomic<void*> domain{nullptr};
  std::atomic<NvtxSession*> session{nullptr};
  std::atomic<const NvtxOps*> ops{nullptr};  // set before the first kEnabled, never cleared
  // The NVTX calls of the first copy compiled with the NVTX headers that reached this state, for
  // a copy compiled without them that cannot see that copy's symbols (a plugin or an extension
  // built with hidden visibility: impl/nvtx_api.hpp). Never cleared.
  std::atomic<const NvtxCalls*> calls{nullptr};
};

// This copy of the code's pointer to the process-wide state, set at its first use. Constant-
// initialised (no guard variable): the inline API below is one load and a branch.
inline std::atomic<NvtxCore*>& nvtx_core_pointer() noexcept {
  static std::atomic<NvtxCore*> p{nullptr};
  return p;
}

// The out-of-line half of the wrapper, defined once (LAPTIME_IMPL) in the implementation part
// (impl/nvtx_setup.hpp, compiled by src/laptime.cpp or included by <laptime/laptime.hpp>), so
// that a file that only pushes and pops compiles none of it.

/// What a scoped range pushed: its name (nullptr: beyond the name table, sent as text) and, with
/// order tracking, the thread's stack depth after the push, so that its end pops its own range
/// only (an inner range left open may have the same name, or be beyond the table too).
struct NvtxPushed {
  const NvtxName* name = nullptr;
  std::size_t depth = 0;
};

/// Makes (or finds) the process-wide state, and sets this copy's pointer to it.
NvtxCore& nvtx_core_slow();
/// range_push(text).
void nvtx_push_text(std::string_view text);
/// Pushes `text` with the call site's cached name in `resolved` (NVTXRangeName; nullptr: none).
/// Returns the state it pushed under (0: nothing pushed); `pushed` (if not nullptr) gets what it
/// pushed.
std::uint32_t nvtx_push(std::string_view text, std::atomic<const NvtxName*>* resolved,
                        NvtxPushed* pushed);
/// range_pop() (check false) / range_pop(expected).
void nvtx_pop(std::string_view expected, const std::atomic<const NvtxName*>* resolved, bool check);
/// The end of an NVTXScopedRange. Never throws.
void nvtx_pop_scoped(std::uint32_t pushed_state, const NvtxPushed& pushed) noexcept;
void nvtx_mark(std::string_view message);
void nvtx_enable(bool sync_on_push, bool sync_on_pop, bool track, const std::string& domain,
                 const std::vector<std::uint32_t>& colors);
void nvtx_name_current_thread(std::string_view name);
/// cuProfilerStart (true) / cuProfilerStop (false).
bool nvtx_profiler_call(bool start) noexcept;

/// The process-wide state, as the inline API sees it.
LAPTIME_ALWAYS_INLINE NvtxCore& nvtx_core() {
  NvtxCore* s = nvtx_core_pointer().load(std::memory_order_acquire);
  if (LAPTIME_LIKELY(s != nullptr)) return *s;
  return nvtx_core_slow();
}

LAPTIME_ALWAYS_INLINE bool nvtx_enabled() {
  return (nvtx_core().state.load(std::memory_order_relaxed) & NvtxCore::kEnabled) != 0;
}

/// Whether a push or a pop must go to the out-of-line half: enabled, and not quiet (kQuiet).
LAPTIME_ALWAYS_INLINE bool nvtx_busy() {
  const std::uint32_t s = nvtx_core().state.load(std::memory_order_relaxed);
  return (s & NvtxCore::kEnabled) != 0 && !NvtxCore::quiet(s);
}
#endif  // LAPTIME_ENABLED
}  // namespace detail

LAPTIME_END_NAMESPACE
