// laptime: CUDA without a build-time CUDA dependency (SPEC §1 do_cuda_sync, GPU event timing;
// §2 sync options and profiler capture).
//
// STUB: the CUDA layer is being written (issue 5). The API below is the contract the Stopwatch and
// the NVTX wrapper call; until it lands every call reports "unavailable" once and does nothing.
#pragma once

#include <cstdint>
#include <cstddef>

#include "laptime/config.hpp"
#include "laptime/error.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace cuda {

/// Whether the CUDA driver (libcuda.so.1) could be loaded and initialised in this process.
inline bool driver_available() noexcept { return false; }

/// A user-installed replacement for the context sync (for example a stream sync).
using SyncFunction = void (*)(void* user_data);
inline void set_sync_function(SyncFunction fn, void* user_data) noexcept {
  (void)fn;
  (void)user_data;
}

/// Synchronises the calling thread's current CUDA context (the device the framework made
/// current), or calls the installed SyncFunction. Without a driver or context: warns once.
inline void synchronize() noexcept {
  detail::warn_once("cuda-sync", "CUDA sync requested but the CUDA layer is not built yet");
}

/// cuProfilerStart / cuProfilerStop, for nsys --capture-range=cudaProfilerApi. False if unavailable.
inline bool profiler_start() noexcept { return false; }
inline bool profiler_stop() noexcept { return false; }

/// Times intervals on the GPU with pooled CUDA events, resolved later without blocking.
class GpuEventTimer {
 public:
  static constexpr std::uint32_t kInvalid = 0xffffffffu;
  static GpuEventTimer& instance() {
    static GpuEventTimer t;
    return t;
  }
  /// Records a start event on `stream` (nullptr: the legacy default stream). kInvalid if unavailable.
  std::uint32_t start(void* stream) noexcept {
    (void)stream;
    return kInvalid;
  }
  /// Records the end event of `token`'s pair; `tag` is the caller's, handed back when resolved.
  void stop(std::uint32_t token, void* stream, std::uint64_t tag) noexcept {
    (void)token;
    (void)stream;
    (void)tag;
  }
  /// Non-blocking: calls on_done(tag, gpu_ns) for each completed pair; returns how many still pend.
  template <class F>
  std::size_t poll(F&& on_done) {
    (void)on_done;
    return 0;
  }
  /// Blocking: waits for every pending pair (report time only, never in the loop).
  template <class F>
  void drain(F&& on_done) {
    (void)on_done;
  }
};

}  // namespace cuda
LAPTIME_END_NAMESPACE
