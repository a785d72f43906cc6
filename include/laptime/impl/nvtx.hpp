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
  nvtx_core_pointer().store(&s, std::memory_order_release);
  return s;
}

LAPTIME_IMPL void nvtx_push_text(std::string_view text) {
  nvtx_push_text(nvtx_state(), text);
}

LAPTIME_IMPL std::uint32_t nvtx_push(std::string_view text, std::atomic<const NvtxName*>* resolved,
                                     NvtxPushed* pushed) {
  return nvtx_push(nvtx_state(), text, resolved, pushed);
}

LAPTIME_IMPL void nvtx_pop(std::string_view expected, const std::atomic<const NvtxName*>* resolved,
                           bool check) {
  nvtx_pop(nvtx_state(), expected, resolved, check);
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
