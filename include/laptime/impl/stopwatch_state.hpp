// laptime internals: the Stopwatch's process-wide state, whole, and everything the hot path leaves
// out of line. The state and its parts are in stopwatch_parts.hpp; what it does, by concern:
//   stopwatch_nvtx_ranges.hpp   intervals as NVTX ranges, iteration marks
//   stopwatch_recording.hpp     the last intervals of each thread
//   stopwatch_workers.hpp       worker processes
//   stopwatch_report.hpp        the report (results()) and the periodic-print rule
//   stopwatch_progress_line.hpp what prints at the end of an iteration
// and here: reset, fork, the test reset, the state's creation. The end of an iteration and the
// rare branches of an interval (stopwatch_intervals.hpp, stopwatch_features.hpp) are in
// stopwatch.hpp: this file emits only the state's creation and two ThreadRecord members (which
// every reader of the state needs, compiled out too), so a white-box test or the Python binding
// that includes it to read the state compiles little more than what it reads.
#pragma once

#include <cstdint>
#include <cstdio>
#include <exception>
#include <mutex>
#include <new>

#include "laptime/config.hpp"
#include "laptime/detail/fork_plan.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/impl/stopwatch_nvtx_ranges.hpp"
#include "laptime/impl/stopwatch_parts.hpp"
#include "laptime/impl/stopwatch_progress_line.hpp"
#include "laptime/impl/stopwatch_recording.hpp"
#include "laptime/impl/stopwatch_report.hpp"
#include "laptime/impl/stopwatch_workers.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

inline void StopwatchState::reset() {
  // Statistics are dropped lazily: a slot whose generation is old is cleared by its own thread
  // on its next end_meas, and ignored by reports until then. Intervals running now belong to the
  // old epoch: they are dropped when they end.
  if (!share.is_worker()) {  // a worker's reset() leaves the parent's iterations alone
    iter_gate().generation.fetch_add(1, std::memory_order_relaxed);
    iter_gate().finished.store(0, std::memory_order_relaxed);
    {
      // A new run takes the warm-up enable() last asked for (one kept past a done warm-up).
      std::lock_guard<std::mutex> lock(config_mutex);
      if (configured) iter_gate().warmup.store(cfg_warmup, std::memory_order_relaxed);
    }
    share.drop_folded();
  }
  next_epoch();
  const std::uint32_t n = name_count.load(std::memory_order_acquire);
  for (std::uint32_t id = 0; id < n; ++id) {
    name_flags[id].fetch_and(static_cast<std::uint8_t>(~kNameSeen), std::memory_order_relaxed);
  }
  clear_one_time();
  clear_iterations();
  clear_gpu();
  unrecorded.store(0, std::memory_order_relaxed);  // the recorded intervals' count of the missing
  clear_repeated_warnings();
}

// A forked child (a DataLoader worker) gets a copy of this state, possibly while another thread
// is changing it. The locks that guard tables (configuration, names, GPU figures, one-time
// measurements; never held across a callback) are held across fork, in this order, so that the
// child gets them free and the tables whole. The report lock is held across the user's print
// function (which may wait for Python's GIL, held by the forking thread): it, the iteration lock
// and the per-thread locks are re-armed in the child instead, where the threads that may have held
// them do not exist. The child may keep measuring on its own copy; it never prints or writes the
// parent's results at exit.
inline void StopwatchState::before_fork() {
  // A new worker needs a free region: the parent folds ended workers' regions when they run
  // short, here too (an evaluation loop forks its loader's workers with no finish_iter between).
  // Before any of the fork plan's locks: reap takes only the share's own lock, and releases it.
  if (share.regions_short()) {
    try {
      share.reap();
    } catch (...) {  // no memory to fold into: the regions stay, the report counts what is missed
    }
  }
  lock_config_for_fork();
  lock_names_for_fork();
  lock_gpu_for_fork();
  lock_one_time_for_fork();
}

inline void StopwatchState::after_fork_in_parent() {
  unlock_one_time_after_fork();
  unlock_gpu_after_fork();
  unlock_names_after_fork();
  unlock_config_after_fork();
}

inline void StopwatchState::after_fork_in_child() {
  after_fork_in_parent();
  rearm_printer_in_child();
  rearm_iterations_in_child();
  threads.after_fork_in_child(current_tid());
  threads.for_each([](ThreadRecord& r, long, bool) { new (&r.mutex) std::mutex(); });
  if (share.active()) worker_after_fork_in_child();
}

inline void testing_reset_stopwatch_impl() {
  StopwatchState& s = stopwatch_state();
  s.testing_reset_config([&s] {
    s.power.store(kNeverEnabled);
    s.features.store(0);
    s.iter_gate().warmup.store(0);
    s.print_every.store(0);
    s.print_rank0_only.store(false);
    s.report_format.store(0);
    s.report_format_from_env.store(false);
    s.print_fn = nullptr;  // no report runs during a test reset
    s.gpu_stream.store(nullptr);
    s.record_capacity.store(0);
    s.progress.store(0);
    s.total_iters.store(0);
  });
  const std::uint32_t n = s.name_count.load(std::memory_order_acquire);
  for (std::uint32_t id = 0; id < n; ++id) s.name_flags[id].store(0);
  ThreadRecord& rec = s.threads.local();
  rec.adopt(rec.tid);  // drop what a failed test left running on this thread
  // and on threads that exited (their records wait for a hand-off's end otherwise)
  s.threads.for_each([](ThreadRecord& r, long tid, bool alive) {
    if (!alive) r.adopt(tid);
  });
  s.reset();
  std::lock_guard<std::mutex> lock(s.one_time_mutex);
  s.dropped_by_reset.clear();  // a test's reset is a fresh process, not a reset() of a run
}

// The state's creation, compiled out too: a white-box test reads the state either way.
LAPTIME_IMPL StopwatchCore& stopwatch_core_slow() {
  keep_caller_loaded();  // this copy's code joins the fork plan, may arm the exit output...
  StopwatchState& s = process_singleton<StopwatchState>("stopwatch");
  if (!s.fork_handlers.load(std::memory_order_acquire)) {
    // The library's one fork plan (process_singleton.hpp): the Stopwatch's locks are taken first
    // (kForkStopwatch), the warning table's last (error_state() joins as kForkErrors), since
    // enable() may warn while it holds config_mutex. Joining twice does nothing; where there was
    // no memory for the plan, the next call tries again.
    (void)error_state();
    if (fork_participate(
            kForkStopwatch, &s, [] { stopwatch_state().before_fork(); },
            [] { stopwatch_state().after_fork_in_parent(); },
            [] { stopwatch_state().after_fork_in_child(); })) {
      s.fork_handlers.store(true, std::memory_order_release);
    }
  }
  s.attach_worker_share();
  stopwatch_core_pointer().store(&s, std::memory_order_release);
  return s;
}

// ThreadRecord's out-of-line members: the thread registry calls them, compiled out too, in
// every file that reads the state (the only definitions this file emits; both are small).
LAPTIME_IMPL void ThreadRecord::adopt(long new_tid) noexcept {
  tid = new_tid;
  running = 0;
  // Under the registry lock: no report reads the rings now, and the old owner is gone. What its
  // ring holds joins the exited threads' intervals (copied: a ring's memory is its capacity,
  // however little it holds), and the new owner makes its own ring at its first start.
  if (IntervalRing* r = ring.exchange(nullptr, std::memory_order_relaxed)) {
    if (StopwatchCore* core = stopwatch_core_pointer().load(std::memory_order_acquire)) {
      whole(*core).keep_exited(*r);
    }
    std::lock_guard<std::mutex> lock(mutex);
    rings.clear();
  }
  for (auto& c : chunks) {
    if (Slot* s = c.load(std::memory_order_relaxed)) {
      for (std::size_t i = 0; i < kChunk; ++i) {
        s[i].run.store(0, std::memory_order_relaxed);
        s[i].nvtx.store(0, std::memory_order_relaxed);  // the old owner's stack is gone
      }
    }
  }
}

LAPTIME_IMPL bool ThreadRecord::reusable() const noexcept {
  if (running <= 0) return true;  // an upper bound: none was started and left
  const StopwatchCore* core = stopwatch_core_pointer().load(std::memory_order_acquire);
  if (core == nullptr) return true;
  const std::uint32_t ep = core->epoch.load(std::memory_order_relaxed);
  for (const auto& c : chunks) {
    if (const Slot* s = c.load(std::memory_order_acquire)) {
      for (std::size_t i = 0; i < kChunk; ++i) {
        if (s[i].run.load(std::memory_order_acquire) == ep) return false;
      }
    }
  }
  return true;
}

LAPTIME_IMPL Slot* ThreadRecord::add_chunk(std::size_t index) {
  // Never freed: reports may read it at any time. A worker's comes from its region of the
  // shared file, where its parent reads it.
  WorkerShare& share = stopwatch_state().share;
  void* region_memory = share.is_worker() ? share.allocate_chunk(index * kChunk) : nullptr;
  SlotChunk* chunk = region_memory != nullptr ? new (region_memory) SlotChunk : new SlotChunk;
  Slot* c = chunk->slots;
  for (std::size_t i = 0; i < kChunk; ++i) c[i].id = static_cast<std::uint32_t>(index * kChunk + i);
  chunks[index].store(c, std::memory_order_release);
  return c;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
