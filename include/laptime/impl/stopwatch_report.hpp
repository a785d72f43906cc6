// laptime internals: the Stopwatch's report (StopwatchState::results, a snapshot of everything
// measured, assembled from the parts of the state) and the periodic-print rule. The figures of one
// name are computed in stopwatch_figures.hpp, the verdict in verdict.hpp, the text and JSON in
// impl/results.hpp. The implementation part.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/cuda.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/impl/atomic_file.hpp"
#include "laptime/impl/clock.hpp"
#include "laptime/impl/stopwatch_figures.hpp"
#include "laptime/impl/stopwatch_parts.hpp"
#include "laptime/impl/stopwatch_recording.hpp"
#include "laptime/impl/stopwatch_workers.hpp"
#include "laptime/impl/verdict.hpp"
#include "laptime/resources.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

// The one home of the periodic-print rule (docs/stopwatch.md): every n measured iterations, n > 0
// (0: never), and only on rank 0 when printing is limited to it.
inline bool StopwatchState::prints_after(std::int64_t finished) {
  const int every = print_every.load(std::memory_order_relaxed);
  const std::int64_t measured = finished - iter_gate().warmup.load(std::memory_order_relaxed);
  if (every <= 0 || measured <= 0 || measured % every != 0) return false;
  return !print_rank0_only.load(std::memory_order_relaxed) || rank_info().rank == 0;
}

/// One name's figures of this generation, merged over the threads (and workers).
struct MergedName {
  IntervalStats stats;
  int running = 0;
  std::optional<resources::Usage> usage;
};
using MergedNames = std::vector<std::unique_ptr<MergedName>>;

/// Who and where this report is, and how far the loop got.
inline void describe_run(StopwatchState& s, Results& r) {
  const RankInfo ri = s.rank_info();
  r.rank = ri.rank;
  r.world_size = ri.world_size;
  r.pid = static_cast<long>(::getpid());
  r.host = s.host;
}

inline void describe_iterations(StopwatchState& s, Results& r) {
  {
    std::string c = clock_description();  // "clock: tsc 2.60 GHz"
    r.clock = c.rfind("clock: ", 0) == 0 ? c.substr(7) : c;
  }
  r.warnings = repeated_warnings();
  r.num_warmup_iters = s.iter_gate().warmup.load(std::memory_order_relaxed);
  r.iterations_finished = s.iter_gate().finished.load(std::memory_order_relaxed);
  r.iterations_measured = std::max<std::int64_t>(0, r.iterations_finished - r.num_warmup_iters);
}

/// Every thread's slots of generation `gen` merged per name id below `n` (running intervals:
/// those started in this epoch and not ended, on live threads and on exited ones, whose
/// intervals another thread may still end: docs/stopwatch.md).
inline MergedNames merge_thread_slots(StopwatchState& s, std::uint32_t n, std::uint32_t gen) {
  const std::uint32_t ep = s.epoch.load(std::memory_order_relaxed);
  MergedNames merged(n);
  for (auto& m : merged) m = std::make_unique<MergedName>();
  s.threads.for_each([&](ThreadRecord& rec, long, bool) {
    for (std::uint32_t id = 0; id < n; ++id) {
      Slot* c = rec.chunks[id / kChunk].load(std::memory_order_acquire);
      if (c == nullptr) continue;
      Slot& slot = c[id % kChunk];
      if (slot.run.load(std::memory_order_relaxed) == ep) ++merged[id]->running;
      if (slot.generation.load(std::memory_order_acquire) != gen) continue;
      merged[id]->stats.merge_from(slot.stats);
      if (ResourceSlot* rs = slot.resources.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(rec.mutex);
        if (!merged[id]->usage) merged[id]->usage.emplace();
        merged[id]->usage->merge(rs->usage);
      }
    }
  });
  return merged;
}

/// The GPU side of the per-name figures: whether GPU timing runs, and what pends per name.
struct GpuReport {
  unsigned feats = 0;
  bool runs = true;  // false: asked for, but impossible here
  std::vector<std::uint64_t> pending;
};

inline GpuReport collect_gpu_for_report(StopwatchState& s, Results& r, std::uint32_t n,
                                        bool wait_for_gpu) {
  GpuReport g;
  g.feats = s.features.load(std::memory_order_relaxed);
  const bool gpu_timing = (g.feats & (kFeatGpuTiming | kFeatGpuNames)) != 0;
  // Asked for, but impossible here (no driver, no device).
  g.runs = !gpu_timing || cuda::GpuEventTimer::instance().available();
  if (!g.runs) r.gpu_timing_off = cuda::gpu_timing_off_reason();
  if (gpu_timing) {
    (void)s.collect_gpu(wait_for_gpu, s.iter_gate());
    g.pending = GpuCollection::pending_per_name(n, s.iter_gate());
  }
  return g;
}

/// The report's line for each name seen in this generation.
template <class GpuStats>
void add_measurements(StopwatchState& s, Results& r, const MergedNames& merged,
                      std::vector<std::vector<WorkerResult>>& per_worker, const GpuReport& g,
                      GpuStats&& gpu_stats) {
  const auto names_now = static_cast<std::uint32_t>(merged.size());
  for (std::uint32_t id = 0; id < names_now; ++id) {
    const std::uint8_t flags = s.name_flags[id].load(std::memory_order_relaxed);
    if (!(flags & kNameSeen)) continue;
    const MergedName& m = *merged[id];
    MeasurementResult out;
    out.name = s.name_text(id);
    set_host_figures(out, m.stats, r.iterations_measured);
    if (const Histogram* h = m.stats.histogram(); h != nullptr && h->lost() > 0) {
      warn_once("histogram-memory",
                detail::quoted(out.name) + ": " + std::to_string(h->lost()) +
                    " intervals are left out of its percentiles: there was no memory for their "
                    "histogram buckets (its count, total, mean, min and max include them)");
    }
    out.running = m.running;
    if (id < per_worker.size()) out.workers = std::move(per_worker[id]);
    if (flags & kNameTracked) out.resources = resource_figures(m.usage ? &*m.usage : nullptr);
    const bool gpu_name =
        (g.feats & kFeatGpuTiming) || ((g.feats & kFeatGpuNames) && (flags & kNameGpu));
    if (gpu_name && !g.runs) {
      out.gpu_unavailable = true;  // said once, at the top: no made-up zeros per name
    } else if (const IntervalStats* st = gpu_stats(id); st != nullptr || gpu_name) {
      out.gpu = gpu_figures(st, r.iterations_measured, id < g.pending.size() ? g.pending[id] : 0);
    }
    r.measurements.push_back(std::move(out));
  }
}

/// The results assembly: a snapshot of everything measured. With `wait_for_gpu` (every report
/// but the periodic one in finish_iter) it first waits for the GPU to finish the intervals
/// already ended, so that their GPU times are in it; without, GPU times still pending are counted
/// per name.
inline Results StopwatchState::results(bool wait_for_gpu) {
  // The locks below are the signal writer's too: an ending signal handled on this thread while
  // it holds one would wait for the writer, and the writer for the lock (no file, 2 s late).
  // Held here, the signal is handled once the report is made (docs/guarantees.md).
  const EndingSignalsHeld held;
  Results r;
  describe_run(*this, r);
  const std::string data_name_asked = chosen_data_name();
  describe_iterations(*this, r);
  const std::uint32_t gen = iter_gate().generation.load(std::memory_order_relaxed);
  const std::uint32_t n = name_count.load(std::memory_order_acquire);
  MergedNames merged = merge_thread_slots(*this, n, gen);
  std::vector<std::vector<WorkerResult>> per_worker;
  if (share.is_parent()) merge_workers(r, merged, per_worker, gen);
  const GpuReport gpu_report = collect_gpu_for_report(*this, r, n, wait_for_gpu);
  read_gpu([&](auto gpu_stats) {
    add_measurements(*this, r, merged, per_worker, gpu_report, gpu_stats);
  });
  r.one_time = one_time_results();
  if (record_capacity.load(std::memory_order_relaxed) > 0) r.samples = samples();
  r.loop = loop_figures();
  r.cpus = resources::online_cpus();
  r.data_name = find_data_name(r.measurements, data_name_asked);
  r.tail = slow_tail_of(r);  // before the verdict, which reads it
  r.verdict = verdict_of(r);
  return r;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
