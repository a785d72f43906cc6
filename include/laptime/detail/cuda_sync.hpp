// laptime internals: CUDA syncs and profiler capture through the run-time-loaded driver
// (cuda.hpp is the API: laptime::cuda::synchronize, set_sync_function, profiler_start/stop).
//
// Used by the Stopwatch's do_cuda_sync and the NVTX wrapper's sync_on_push / sync_on_pop, which
// include this rather than cuda.hpp: GPU event timing (detail/cuda_events.hpp) is not theirs.
// The functions are templates (`template <int = 0>`, called as plain functions) so that a file
// that includes this but never syncs does not compile them (the compile-cost goal of
// docs/build.md).
#pragma once

#include <atomic>
#include <mutex>
#include <new>
#include <string>

#include "laptime/config.hpp"
#include "laptime/detail/cuda_driver.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/report.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// A user's replacement for the context sync (cuda::set_sync_function).
using CudaSyncFunction = void (*)(void* user_data);

struct CudaSyncHook {
  CudaSyncFunction fn;
  void* user_data;
  CudaSyncHook* retired_next;
};

struct CudaSyncState {
  // One pointer, so that a sync never sees the function of one call and the data of another.
  // Replaced hooks are kept (on the retired list, a few bytes each) rather than freed: a sync on
  // another thread may still be calling one, and installing a hook is rare.
  std::atomic<CudaSyncHook*> hook{nullptr};
  std::mutex set_mutex;
  CudaSyncHook* retired = nullptr;
};

template <int = 0>
CudaSyncState& cuda_sync_state() {
  return process_singleton<CudaSyncState>("cuda_sync");
}

template <int = 0>
void cuda_warn_once(const char* key, const std::string& what) noexcept {
  try {
    warn_once(key, what);
  } catch (...) {  // a warning that cannot be built is not worth dying for
  }
}

/// cuCtxSynchronize through `api` with laptime's warnings; true if the context was synchronised.
template <int = 0>
bool cuda_synchronize_context(const CudaDriverApi& api) noexcept {
  const cu::Result r = api.ctx_synchronize();
  if (LAPTIME_LIKELY(r == cu::kSuccess)) return true;
  if (r == cu::kErrorInvalidContext) {
    std::string who;
    try {
      who = thread_label();
    } catch (...) {
    }
    cuda_warn_once("cuda-sync-no-context",
                   "CUDA sync requested on " + who +
                       ", which has no current CUDA context (make the device current first, "
                       "e.g. cudaSetDevice / torch.cuda.set_device); timing goes on without "
                       "the sync");
  } else {
    cuda_warn_once("cuda-sync-failed", "cuCtxSynchronize failed: " + cuda_error_text(api, r) +
                                           "; timing goes on without the sync");
  }
  return false;
}

/// cuda::synchronize().
template <int = 0>
bool cuda_synchronize() noexcept {
#if LAPTIME_ENABLED
  if (const auto* hook = cuda_sync_state().hook.load(std::memory_order_acquire)) {
    hook->fn(hook->user_data);
    return true;
  }
  const CudaDriver& d = cuda_driver();
  if (LAPTIME_LIKELY(d.available)) return cuda_synchronize_context(d.api);
  cuda_warn_once("cuda-sync-unavailable", "CUDA sync requested but CUDA is " + d.status +
                                              "; timing goes on without the sync");
#endif
  return false;
}

/// cuda::set_sync_function().
template <int = 0>
void cuda_set_sync_function(CudaSyncFunction fn, void* user_data) noexcept {
#if LAPTIME_ENABLED
  auto* hook = fn != nullptr ? new (std::nothrow) CudaSyncHook{fn, user_data, nullptr} : nullptr;
  CudaSyncState& state = cuda_sync_state();
  std::lock_guard<std::mutex> lock(state.set_mutex);
  if (CudaSyncHook* old = state.hook.exchange(hook, std::memory_order_acq_rel)) {
    old->retired_next = state.retired;
    state.retired = old;
  }
#else
  (void)fn;
  (void)user_data;
#endif
}

/// cuda::profiler_start() (start) and cuda::profiler_stop().
template <int = 0>
bool cuda_profiler_call(bool start) noexcept {
  const CudaDriver& d = cuda_driver();
  if (d.available) {
    const cu::Result r = start ? d.api.profiler_start() : d.api.profiler_stop();
    if (r == cu::kSuccess) return true;
    cuda_warn_once(start ? "cuda-profiler-start" : "cuda-profiler-stop",
                   std::string(start ? "cuProfilerStart" : "cuProfilerStop") +
                       " failed: " + cuda_error_text(d.api, r));
    return false;
  }
#if LAPTIME_ENABLED
  cuda_warn_once("cuda-profiler-unavailable",
                 "CUDA profiler start/stop requested but CUDA is " + cuda_driver().status);
#endif
  (void)start;
  return false;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
