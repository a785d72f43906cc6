// laptime: CUDA without a build-time CUDA dependency (do_cuda_sync, GPU event timing, the NVTX
// wrapper's sync options and profiler capture: docs/cuda.md).
//
//   laptime::cuda::synchronize();            // cuCtxSynchronize on this thread's current context
//   auto& gpu = laptime::cuda::GpuEventTimer::instance();
//   auto token = gpu.start(stream);          // cuEventRecord on `stream`, no sync
//   launch_work(stream);
//   gpu.stop(token, stream, /*tag=*/42);
//   gpu.poll([](std::uint64_t tag, std::uint64_t gpu_ns) { ... });  // never blocks
//
// Nothing of CUDA is linked: the driver (libcuda.so.1) is opened at run time on first use
// (detail/cuda_driver.hpp), so the same binary runs on machines without CUDA, where each feature
// warns once and host timing goes on. docs/cuda.md has the details and the H200 measurements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "laptime/config.hpp"
// Compiled out (LAPTIME_DISABLE) CUDA reads as unavailable: the bodies below return what they
// return without a driver, warn about nothing and need none of the machinery.
#if LAPTIME_ENABLED
#include <utility>

#include "laptime/detail/cuda_driver.hpp"
#include "laptime/detail/cuda_events.hpp"
#include "laptime/detail/cuda_sync.hpp"
#include "laptime/detail/process_singleton.hpp"
#endif
#include "laptime/detail/cuda_event_stats.hpp"  // GpuEventTimer::Stats, both ways
#include "laptime/error.hpp"  // the error policy (set_error_policy), as this header always gave

LAPTIME_BEGIN_NAMESPACE
namespace cuda {

/// Whether the CUDA driver could be loaded and initialised and sees a device. The first call
/// loads the driver (milliseconds): call it at setup to keep that out of the first measurement.
inline bool driver_available() noexcept {
#if LAPTIME_ENABLED
  return laptime::detail::cuda_driver().available;
#else
  return false;
#endif
}

/// One line saying what was loaded ("CUDA driver 13.0 (libcuda.so.1), 1 device") or why CUDA is
/// unavailable ("unavailable: cannot load the CUDA driver libcuda.so.1 (...)").
inline std::string status() {
#if LAPTIME_ENABLED
  return laptime::detail::cuda_driver().status;
#else
  return "unavailable: laptime is compiled out (LAPTIME_DISABLE)";
#endif
}

/// Why GPU event timing cannot run here, for reports: "CUDA unavailable: cannot load ..." or
/// "laptime is compiled out (LAPTIME_DISABLE)". Meaningful where !driver_available().
inline std::string gpu_timing_off_reason() {
#if LAPTIME_ENABLED
  return "CUDA " + laptime::detail::cuda_driver().status;
#else
  return "laptime is compiled out (LAPTIME_DISABLE)";
#endif
}

/// The driver's CUDA version as cuDriverGetVersion reports it (13000 for 13.0); 0 if unavailable.
inline int driver_version() noexcept {
#if LAPTIME_ENABLED
  return laptime::detail::cuda_driver().driver_version;
#else
  return 0;
#endif
}

/// The CUcontext current on the calling thread (the device the framework made current), or
/// nullptr where there is none or no driver. For diagnostics and tests.
inline void* current_context() noexcept {
#if LAPTIME_ENABLED
  const laptime::detail::CudaDriver& d = laptime::detail::cuda_driver();
  if (!d.available) return nullptr;
  laptime::detail::cu::Context ctx = nullptr;
  if (d.api.ctx_get_current(&ctx) != laptime::detail::cu::kSuccess) return nullptr;
  return ctx;
#else
  return nullptr;
#endif
}

/// A user-installed replacement for the context sync, e.g. a stream sync:
///   laptime::cuda::set_sync_function(
///       [](void* s) { cudaStreamSynchronize(static_cast<cudaStream_t>(s)); }, stream);
/// It must not throw. Pass nullptr to go back to cuCtxSynchronize.
#if LAPTIME_ENABLED
using SyncFunction = laptime::detail::CudaSyncFunction;
#else
using SyncFunction = void (*)(void* user_data);
#endif

/// Installs `fn(user_data)` as the sync used by synchronize() (the Stopwatch's do_cuda_sync and the
/// NVTX wrapper's sync_on_push / sync_on_pop), for the whole process.
inline void set_sync_function(SyncFunction fn, void* user_data) noexcept {
#if LAPTIME_ENABLED
  laptime::detail::cuda_set_sync_function(fn, user_data);
#else
  (void)fn, (void)user_data;
#endif
}

/// Synchronises the calling thread's current CUDA context (the device the framework made
/// current), or calls the installed SyncFunction. Without a driver, device or current context it
/// warns once and returns false; timing goes on. Cost: a full device drain (that is the point).
inline bool synchronize() noexcept {
#if LAPTIME_ENABLED
  return laptime::detail::cuda_synchronize();
#else
  return false;  // compiled out: no sync, and no warning
#endif
}

/// cuProfilerStart / cuProfilerStop on the current context, for
/// `nsys profile --capture-range=cudaProfilerApi` and `ncu --profile-from-start off`.
/// False (and one warning) if CUDA is unavailable.
inline bool profiler_start() noexcept {
#if LAPTIME_ENABLED
  return laptime::detail::cuda_profiler_call(true);
#else
  return false;
#endif
}
inline bool profiler_stop() noexcept {
#if LAPTIME_ENABLED
  return laptime::detail::cuda_profiler_call(false);
#else
  return false;
#endif
}

/// Times intervals on the GPU with pairs of CUDA events, resolved later without blocking.
///
///   auto& gpu = laptime::cuda::GpuEventTimer::instance();
///   std::uint32_t t = gpu.start(stream);   // kInvalid where CUDA is unavailable
///   ... enqueue work on stream ...
///   gpu.stop(t, stream, tag);
///   gpu.poll(on_done);                     // at the end of each iteration: never blocks
///   gpu.drain(on_done);                    // at report time: waits
///
/// Events come from a pool per CUDA context (the context current at start()), are created ahead
/// or in batches, are recycled once resolved and are never destroyed per interval. They time
/// (CU_EVENT_DEFAULT; never CU_EVENT_DISABLE_TIMING). Thread-safe: an internal mutex guards the
/// bookkeeping; the cuEventRecord calls run outside it. Nothing here synchronises the device
/// except drain() and, where asked, reserve() creating events. (detail/cuda_events.hpp)
class GpuEventTimer {
 public:
  static constexpr std::uint32_t kInvalid = 0xffffffffu;
#if LAPTIME_ENABLED
  static_assert(kInvalid == laptime::detail::GpuEventPool::kInvalid);
#endif
  /// Counters for tests and reports: events_created, contexts, in_flight, pending, resolved,
  /// dropped, grown_in_start (pool batches created inside start(), not ahead of time); all 0
  /// compiled out.
  using Stats = laptime::detail::GpuEventStats;

  /// The process-wide timer (shared by every copy of the header, like the Stopwatch).
  static GpuEventTimer& instance() {
#if LAPTIME_ENABLED
    return laptime::detail::process_singleton<GpuEventTimer>("cuda_event_timer");
#else
    static GpuEventTimer timer;  // holds nothing compiled out: one per copy of the code will do
    return timer;
#endif
  }

#if LAPTIME_ENABLED
  /// A timer on the given driver table (nullptr: unavailable). Use instance(); this is for tests
  /// and for drivers loaded some other way.
  explicit GpuEventTimer(const laptime::detail::CudaDriverApi* api) noexcept : pool_(api) {}
#endif
  GpuEventTimer(const GpuEventTimer&) = delete;
  GpuEventTimer& operator=(const GpuEventTimer&) = delete;

  /// Whether start() can succeed at all (a driver and a device).
  bool available() const noexcept {
#if LAPTIME_ENABLED
    return pool_.available();
#else
    return false;
#endif
  }

  /// Records a start event on `stream` (nullptr: the legacy default stream of the current
  /// context; otherwise a CUstream / cudaStream_t / PyTorch stream handle). Returns a token for
  /// stop(), or kInvalid if unavailable, if no context is current, or if `stream` is capturing a
  /// CUDA graph (timing events would become graph nodes). Costs one cuEventRecord; no sync.
  std::uint32_t start(void* stream) noexcept {
#if LAPTIME_ENABLED
    return pool_.start(stream);
#else
    (void)stream;
    return kInvalid;
#endif
  }

  /// Records the end event of `token`'s pair on `stream`; `tag` is the caller's, handed back to
  /// on_done when the pair is resolved. kInvalid is ignored.
  void stop(std::uint32_t token, void* stream, std::uint64_t tag) noexcept {
#if LAPTIME_ENABLED
    pool_.stop(token, stream, tag);
#else
    (void)token, (void)stream, (void)tag;
#endif
  }

  /// Returns `token`'s pair to the pool without timing it (an interval abandoned after start()).
  void cancel(std::uint32_t token) noexcept {
#if LAPTIME_ENABLED
    pool_.cancel(token);
#else
    (void)token;
#endif
  }

  /// Non-blocking: calls on_done(tag, gpu_ns) for each stopped pair whose events completed, in
  /// no particular order, outside the timer's lock. Returns how many stopped pairs still pend.
  template <class Fn>
  std::size_t poll(Fn&& on_done) {
#if LAPTIME_ENABLED
    return pool_.poll(std::forward<Fn>(on_done));
#else
    (void)on_done;
    return 0;
#endif
  }

  /// Blocking: poll() once every stopped pair has completed (pairs started but not stopped are
  /// left alone). For report time, never inside the loop.
  template <class Fn>
  void drain(Fn&& on_done) {
#if LAPTIME_ENABLED
    pool_.drain(std::forward<Fn>(on_done));
#else
    (void)on_done;
#endif
  }

  /// Calls f(tag) for every stopped pair not resolved yet, under the timer's lock (f must not
  /// call the timer). Lets a report say which names still wait for the GPU.
  template <class Fn>
  void for_each_pending(Fn&& f) const {
#if LAPTIME_ENABLED
    pool_.for_each_pending(std::forward<Fn>(f));
#else
    (void)f;
#endif
  }

  /// Creates events ahead of time so that at least `pairs` pairs are free in the context current
  /// on the calling thread (call at setup, e.g. after enabling GPU timing). Returns the free count.
  std::size_t reserve(std::size_t pairs) noexcept {
#if LAPTIME_ENABLED
    return pool_.reserve(pairs);
#else
    (void)pairs;
    return 0;
#endif
  }

  /// Forgets stopped pairs that were not resolved yet (their results are dropped) and returns
  /// them to the pool. Pairs in flight stay valid.
  void reset() noexcept {
#if LAPTIME_ENABLED
    pool_.reset();
#endif
  }

  Stats stats() const {
#if LAPTIME_ENABLED
    return pool_.stats();
#else
    return Stats{};
#endif
  }

 private:
  GpuEventTimer() noexcept = default;
#if LAPTIME_ENABLED
  friend struct laptime::detail::SingletonHolder<GpuEventTimer>;
  laptime::detail::GpuEventPool pool_;
#endif
};

}  // namespace cuda
LAPTIME_END_NAMESPACE
