// laptime internals: the Stopwatch's worker processes (DataLoader workers and the like,
// docs/workers.md): the parent's share, a worker's attach and fork, and what the workers measured
// merged into the parent's report. The machinery is worker_share.hpp. The implementation part
// (LAPTIME_IMPL: defined in every translation unit that includes it, linked once).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"

#include "laptime/detail/leak_check.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/impl/stopwatch_parts.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

inline bool StopwatchState::leave_worker_share(bool own_program) {
  if (!share.is_worker() || !share.leave_if_unused(own_program)) return false;
  IterationGate& g = own_gate;
  g.finished.store(0, std::memory_order_relaxed);
  gate.store(&g, std::memory_order_release);
  return true;
}

inline void StopwatchState::start_worker_share(bool wanted) {
  (void)leave_worker_share(/*own_program=*/false);
  if (share.active() || !wanted) return;
  if (share.create(own_gate)) gate.store(&share.header()->gate, std::memory_order_release);
}

inline void StopwatchState::attach_worker_share() {
  if (share_checked.exchange(true)) return;
  if (!share.attach_from_env()) return;
  configure_from_parent([&] {
    gate.store(&share.header()->gate, std::memory_order_release);
    print_every.store(0, std::memory_order_relaxed);
    power.store(kEnabled, std::memory_order_release);
  });
}

inline void StopwatchState::worker_after_fork_in_child() {
  // A worker: what the parent measured is not its own. Its threads' next measurements make
  // slots in the region it claims (add_chunk); the names stay interned (same ids). The parent's
  // slots are forgotten, not freed (detail/leak_check.hpp).
  share.after_fork_in_child();
  features.store(0, std::memory_order_relaxed);  // times only (docs/workers.md)
  threads.for_each([](ThreadRecord& r, long, bool) {
    for (auto& c : r.chunks) {
      forgotten_on_purpose(c.load(std::memory_order_relaxed));
      c.store(nullptr, std::memory_order_relaxed);
    }
    r.cache.clear();
    r.running = 0;
  });
}

// What every worker measured (live ones read in place, ended ones folded), merged into the
// per-name figures, and kept per worker. A name only workers used is interned here.
template <class Merged>
void StopwatchState::merge_workers(Results& r, std::vector<std::unique_ptr<Merged>>& merged,
                                   std::vector<std::vector<WorkerResult>>& per_name,
                                   std::uint32_t gen) {
  struct PerWorker {
    long pid;
    std::string label;
    bool alive;
    std::unique_ptr<IntervalStats> stats;
  };
  std::vector<std::vector<PerWorker>> found;
  std::vector<long> pids;
  const WorkerShare::Missing missing =
      share.for_each_worker_name(gen, [&](std::string_view name, const WorkerFigures& w) {
        const std::uint32_t id = intern(name);
        if (id == kNoName) return;
        while (merged.size() <= id) merged.push_back(std::make_unique<Merged>());
        if (found.size() <= id) found.resize(id + 1);
        name_flags[id].fetch_or(kNameSeen, std::memory_order_relaxed);
        merged[id]->stats.merge_from(*w.stats, w.where);
        auto& list = found[id];
        auto it = std::find_if(list.begin(), list.end(),
                               [&](const PerWorker& p) { return p.pid == w.pid; });
        if (it == list.end()) {
          list.push_back({w.pid, std::string(w.label), w.alive, std::make_unique<IntervalStats>()});
          it = list.end() - 1;
        }
        it->stats->merge_from(*w.stats, w.where);
        if (std::find(pids.begin(), pids.end(), w.pid) == pids.end()) {
          pids.push_back(w.pid);
          if (w.alive) ++r.workers_alive;
        }
      });
  r.worker_processes = static_cast<int>(pids.size());
  r.workers_peak = std::min(share.most_live(), r.worker_processes);
  r.workers_unrecorded = static_cast<int>(missing.unclaimed);
  r.workers_pairs_dropped = missing.pairs_dropped;
  per_name.resize(found.size());
  for (std::size_t id = 0; id < found.size(); ++id) {
    for (const PerWorker& p : found[id]) {
      const IntervalStats& st = *p.stats;
      per_name[id].push_back(WorkerResult{
          p.pid, p.label, p.alive, st.count(), static_cast<double>(st.total_ns()), st.mean_ns(),
          st.quantile_ns(0.5), st.quantile_ns(0.9), static_cast<double>(st.max_ns())});
    }
  }
}

LAPTIME_IMPL void worker_share_warn(std::string_view key, std::string_view message) noexcept {
  try {
    warn_once(key, message);
  } catch (...) {  // a warning that cannot be built is not worth dying for
  }
}

}  // namespace detail
LAPTIME_END_NAMESPACE
