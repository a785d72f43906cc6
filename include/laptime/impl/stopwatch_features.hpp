// laptime internals: an interval's features beyond its time, at its start and end: CUDA sync,
// the resource window of a tracked name, GPU events; the NVTX range is opened first and closed
// last (stopwatch_nvtx_ranges.hpp). StopwatchCore's rare branches (stopwatch_hot.hpp). The
// implementation part (LAPTIME_IMPL: defined in every translation unit that includes it, linked
// once).
#pragma once

#include <cstdint>
#include <mutex>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/cuda.hpp"
#include "laptime/impl/nvtx_counters.hpp"
#include "laptime/impl/stopwatch_nvtx_ranges.hpp"
#include "laptime/impl/stopwatch_parts.hpp"
#include "laptime/resources.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

static_assert(kNoGpuToken == cuda::GpuEventTimer::kInvalid, "Slot::gpu_token's 'none'");

LAPTIME_IMPL void StopwatchCore::start_features(Slot& s, std::uint32_t id, unsigned feats,
                                                bool measuring) {
  StopwatchState& st = whole(*this);
  // First: the range encloses all the Stopwatch does for the interval (docs/nvtx.md).
  s.sampled.store(false, std::memory_order_relaxed);
  if (feats & kFeatNvtx) {
    st.open_nvtx_range(s, id);
    if (LAPTIME_LIKELY(feats == kFeatNvtx)) {  // the NVTX ranges alone: none of the rest
      s.start_ns.store(now_ns(), std::memory_order_relaxed);
      return;
    }
  }
  if (feats & kFeatRecord) st.ensure_ring(threads.local());
  const std::uint8_t flags = name_flags[id].load(std::memory_order_relaxed);
  if ((feats & kFeatGpuTiming) || ((feats & kFeatGpuNames) && (flags & kNameGpu))) {
    s.gpu_token.store(
        cuda::GpuEventTimer::instance().start(st.gpu_stream.load(std::memory_order_relaxed)),
        std::memory_order_relaxed);
  }
  // The sync comes right before the start timestamp (docs/stopwatch.md); the resource sample after
  // it, so that the interval's time encloses its samples as a timer around start_meas..end_meas
  // does.
  if ((feats & kFeatCudaSync) && measuring) cuda::synchronize();
  s.start_ns.store(now_ns(), std::memory_order_relaxed);
  if ((feats & kFeatTracked) && (flags & kNameTracked)) {
    ResourceSlot* r = s.resources.load(std::memory_order_relaxed);
    if (r == nullptr) s.resources.store(r = new ResourceSlot(), std::memory_order_release);
    r->start = resources::sample();
    s.sampled.store(true, std::memory_order_relaxed);
  }
}

// Sync before the end timestamp, for intervals that synced at their start (after warm-up).
// Decided per interval; end() only knows whether syncing is configured at all.
LAPTIME_IMPL void StopwatchCore::sync_before_end(std::string_view name) {
  ThreadRecord& rec = threads.local();
  if (const NameCacheEntry* e = lookup(rec, name)) {
    if (e->value->run.load(std::memory_order_relaxed) == epoch.load(std::memory_order_relaxed) &&
        e->value->measuring.load(std::memory_order_relaxed)) {
      cuda::synchronize();
    }
  }
}

LAPTIME_IMPL std::int64_t StopwatchCore::end_sample(Slot& run_slot) noexcept {
  run_slot.resources.load(std::memory_order_acquire)->end = resources::sample();
  return now_ns();
}

LAPTIME_IMPL void StopwatchCore::end_features(ThreadRecord& owner, Slot& run_slot, std::uint32_t id,
                                              bool measuring, std::int64_t dt) {
  StopwatchState& st = whole(*this);
  // Resources and GPU events only where the interval has some (plain loads decide): the NVTX
  // ranges alone pay no locked instruction and no large frame. The range closes last, so that it
  // encloses the rest; that may be a usage error (an order check), after the interval counted.
  if (LAPTIME_UNLIKELY(run_slot.sampled.load(std::memory_order_relaxed) ||
                       run_slot.gpu_token.load(std::memory_order_relaxed) !=
                           cuda::GpuEventTimer::kInvalid)) {
    st.end_samples(owner, run_slot, id, measuring, dt);
  }
  // A tail call: the common case (NVTX ranges alone) builds no frame here.
  if (run_slot.nvtx.load(std::memory_order_acquire) != kNvtxRangeNone) {
    st.close_nvtx_range(owner, run_slot, id);
  }
}

LAPTIME_NOINLINE inline void StopwatchState::end_samples(ThreadRecord& owner, Slot& run_slot,
                                                         std::uint32_t id, bool measuring,
                                                         std::int64_t dt) {
  if (run_slot.sampled.exchange(false, std::memory_order_relaxed)) {
    ResourceSlot* r = run_slot.resources.load(std::memory_order_acquire);  // end: add_interval's
    if (measuring) {
      std::lock_guard<std::mutex> lock(owner.mutex);
      r->usage.add(r->start, r->end, static_cast<std::uint64_t>(dt));
    }
#if LAPTIME_ENABLED
    // The interval's figures on the profiler's timeline, warm-up included (enable_nvtx_counters).
    nvtx_counters_interval_end(id, names[id], r->start, r->end, dt);
#endif
  }
  const std::uint32_t token =
      run_slot.gpu_token.exchange(cuda::GpuEventTimer::kInvalid, std::memory_order_relaxed);
  if (token != cuda::GpuEventTimer::kInvalid) {
    const std::uint32_t gen = iter_gate().generation.load(std::memory_order_relaxed);
    cuda::GpuEventTimer::instance().stop(token, gpu_stream.load(std::memory_order_relaxed),
                                         gpu_tag(id, gen, measuring));
  }
}

}  // namespace detail
LAPTIME_END_NAMESPACE
