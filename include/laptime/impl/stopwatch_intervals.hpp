// laptime internals: the rare branches of start_meas and end_meas on the thread records (the
// first use of a name on a thread, errors, an interval ended on another thread, statistics of an
// older generation, intervals of an older period), declared by StopwatchCore in stopwatch_hot.hpp.
// The implementation part (LAPTIME_IMPL: defined in every translation unit that includes it,
// linked once).
#pragma once

#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/cuda.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/impl/stopwatch_nvtx_ranges.hpp"
#include "laptime/impl/stopwatch_parts.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

LAPTIME_IMPL ThreadRecord& StopwatchCore::attach_thread() {
  return threads.local();
}

// Out of line on purpose: keeps the hot path small.
LAPTIME_IMPL const NameCacheEntry* StopwatchCore::lookup_slow(ThreadRecord& rec,
                                                              std::string_view name) {
  NameTable& table = whole(*this);
  std::uint32_t id;
  const std::uint64_t hash = text_hash(name);
  if (const std::uint32_t* known = rec.known.find(name, hash)) {
    id = *known;
  } else {
    id = table.intern(name, hash);
    if (id == kNoName) {
      // A program may name past the limit on every call: once told, a call is only counted,
      // without the message's allocations.
      if (!usage_error_told("max-names", kMaxNamesRepeats)) {
        usage_error("start_meas/end_meas",
                    "more than " + std::to_string(table.max_names.load(std::memory_order_relaxed)) +
                        " distinct measurement names (LAPTIME_MAX_NAMES); " + detail::quoted(name) +
                        " is not measured");
      }
      return nullptr;
    }
    rec.known.insert(table.name_text(id), hash, id);
  }
  Slot& slot = rec.slot(id);
  return &rec.cache.insert(name, table.name_text(id).data(), &slot);
}

LAPTIME_IMPL void StopwatchCore::prepare(Slot& s) {
  // The histogram is allocated here, on the first start on this thread, so end_meas never
  // allocates; a worker's pair gets it from its region of the shared file (or is counted there).
  StopwatchState& st = whole(*this);
  if (st.share.is_worker()) st.share.admit_pair(s, st.name_text(s.id));
  s.stats.allocate();
  s.generation.store(iter_gate().generation.load(std::memory_order_relaxed),
                     std::memory_order_release);
  s.prepared = true;
}

LAPTIME_IMPL LAPTIME_COLD void StopwatchCore::start_running_error(std::string_view name) {
  usage_error("start_meas(" + detail::quoted(name) + ")",
              detail::quoted(name) +
                  " is already running on this thread (end it with end_meas first; other "
                  "threads may time the same name at the same time)");
}

// An interval that will never be ended: its GPU events go back to the pool untimed.
LAPTIME_IMPL LAPTIME_COLD void StopwatchCore::drop_interval(Slot& s, std::uint32_t mark) noexcept {
  s.run.store(mark, std::memory_order_relaxed);
  s.sampled.store(false, std::memory_order_relaxed);
  // Called by the slot's own thread: its NVTX range closes now (where the order check allows).
  if (s.nvtx.load(std::memory_order_relaxed) != kNvtxRangeNone) {
    try {
      whole(*this).close_own_nvtx_range(s, s.id, /*report=*/false);
    } catch (...) {  // an allocation of the wrapper's first use on this thread: the range stays
    }
  }
  const std::uint32_t token =
      s.gpu_token.exchange(cuda::GpuEventTimer::kInvalid, std::memory_order_relaxed);
  if (token != cuda::GpuEventTimer::kInvalid) cuda::GpuEventTimer::instance().cancel(token);
}

// end_meas(name) of an interval not running on this thread in this epoch (docs/stopwatch.md):
//   - one of an older epoch runs here: it is dropped, silently;
//   - exactly one runs on another thread, alive or exited since: this call ends it (the seed
//     allowed a start in one callback and the end in another; records outlive their threads).
//     The interval is claimed with a compare-exchange, added to this thread's statistics, and its
//     resource window and GPU events closed for its owner;
//   - none or several: a usage error.
// The owner's own end_meas does not compare-exchange (it would cost a locked instruction on every
// pair): two threads that end one interval at the same moment may both count it.
LAPTIME_IMPL void StopwatchCore::end_elsewhere(ThreadRecord& rec, Slot& mine, std::uint32_t id,
                                               std::string_view name, std::int64_t t,
                                               unsigned feats) {
  const std::uint32_t ep = epoch.load(std::memory_order_relaxed);
  if (mine.run.load(std::memory_order_relaxed) != 0) {
    drop_interval(mine);
    return;
  }
  ThreadRecord* owner = nullptr;
  Slot* found = nullptr;
  int others = 0;
  Slot* older = nullptr;  // one started elsewhere in an older epoch, not yet ended or dropped
  std::uint32_t older_run = 0;
  threads.for_each_record([&](ThreadRecord& other) {  // no lock: reads the slots' atomics
    if (&other == &rec) return;
    Slot* c = other.chunks[id / kChunk].load(std::memory_order_acquire);
    if (c == nullptr) return;
    const std::uint32_t r = c[id % kChunk].run.load(std::memory_order_acquire);
    if (r != ep) {
      if (r != 0 && r != kDroppedRun) {
        older = &c[id % kChunk];
        older_run = r;
      }
      return;
    }
    ++others;
    owner = &other;
    found = &c[id % kChunk];
  });
  if (others == 1) {
    if (take_interval(*owner, *found, mine, id, t, feats)) return;
    others = 0;  // its own thread ended it meanwhile
  }
  // Started elsewhere before a disable(), reset() or enable() (another thread's): this end ends
  // nothing, silently, as on its own thread, once: the slot is marked dropped (kDroppedRun), so
  // that a second end is the usage error again. Its owner drops it at its next start of the name
  // (the slot's NVTX range and GPU events are the owner's to close).
  if (others == 0 && older != nullptr &&
      older->run.compare_exchange_strong(older_run, kDroppedRun, std::memory_order_acq_rel)) {
    return;
  }
  usage_error("end_meas(" + detail::quoted(name) + ")",
              others == 0 ? detail::quoted(name) + " is not running (no start_meas(" +
                                detail::quoted(name) + ") on any thread, or it already ended)"
                          : detail::quoted(name) + " is not running on this thread and runs on " +
                                std::to_string(others) +
                                " other threads (end it on the thread that started it)");
}

LAPTIME_IMPL bool StopwatchCore::take_interval(ThreadRecord& owner, Slot& theirs, Slot& mine,
                                               std::uint32_t id, std::int64_t t, unsigned feats) {
  std::uint32_t expected = epoch.load(std::memory_order_relaxed);
  if (!theirs.run.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return false;
  if (LAPTIME_UNLIKELY(!mine.prepared)) prepare(mine);
  add_interval(owner, theirs, mine, id, t, feats);
  return true;
}

// A scope's end on another thread than the one it started on (a coroutine resumed elsewhere),
// at `t`: the interval `owner` runs of the name is ended, as end_elsewhere ends one, even where the
// ending thread runs one of that name too (which stays running). One `owner` started before a
// disable(), reset() or enable() ends nothing, silently, as on its own thread (marked dropped: its
// owner drops it at its next start). Never the ending thread's own interval.
LAPTIME_IMPL void StopwatchCore::end_started_on(ThreadRecord& rec, ThreadRecord& owner,
                                                std::string_view name, std::int64_t t,
                                                unsigned feats) {
  const NameCacheEntry* e = lookup(rec, name);
  if (e == nullptr) return;
  const std::uint32_t id = e->value->id;
  Slot& mine = *e->value;
  Slot* chunk = owner.chunks[id / kChunk].load(std::memory_order_acquire);
  if (chunk != nullptr && take_interval(owner, chunk[id % kChunk], mine, id, t, feats)) return;
  std::uint32_t r = chunk != nullptr ? chunk[id % kChunk].run.load(std::memory_order_acquire) : 0;
  if (r == kDroppedRun || (r != 0 && chunk[id % kChunk].run.compare_exchange_strong(
                                         r, kDroppedRun, std::memory_order_acq_rel))) {
    return;
  }
  usage_error("end_meas(" + detail::quoted(name) + ")",
              detail::quoted(name) + " is not running on the thread that started the scope (it " +
                  "was ended there by hand)");
}

// Stopwatch::discard_meas: the calling thread's interval of `name` in this epoch ends uncounted
// (its NVTX range closed, its GPU events and CPU sample dropped, as an interval of an older epoch
// is); one of an older period ends silently, as at its end_meas. Only while enabled.
inline void discard_interval(std::string_view name) {
  StopwatchCore& c = stopwatch_core();
  if (!c.is_on()) return;
  ThreadRecord& rec = c.local_record();
  const NameCacheEntry* e = c.lookup(rec, name);
  if (e == nullptr) return;  // past the name table: it never ran (its start was refused)
  Slot& s = *e->value;
  const std::uint32_t run = s.run.load(std::memory_order_relaxed);
  if (run == 0) {
    usage_error("discard_meas(" + quoted(name) + ")",
                quoted(name) +
                    " is not running on this thread (discard it on the thread that "
                    "started it, before its end_meas)");
    return;
  }
  c.drop_interval(s);  // one of an older period ends silently, as at its end_meas
  if (run == c.epoch.load(std::memory_order_relaxed)) --rec.running;
}

// reset() since this thread last wrote to the slot: its statistics belong to the old generation.
LAPTIME_IMPL LAPTIME_COLD void StopwatchCore::drop_stale(ThreadRecord& rec, Slot& s,
                                                         std::uint32_t gen) {
  s.stats.clear();
  if (ResourceSlot* r = s.resources.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(rec.mutex);
    r->usage = resources::Usage();
  }
  s.generation.store(gen, std::memory_order_release);  // after the clear, for reports
}

/// How many intervals run on `rec` in this epoch (their names appended to `listed` when given);
/// drops those of older epochs and makes rec.running exact.
LAPTIME_NOINLINE inline int StopwatchState::count_running(ThreadRecord& rec, std::string* listed) {
  const std::uint32_t ep = epoch.load(std::memory_order_relaxed);
  const std::uint32_t n = name_count.load(std::memory_order_acquire);
  int count = 0;
  for (std::uint32_t id = 0; id < n; ++id) {
    Slot* c = rec.chunks[id / kChunk].load(std::memory_order_relaxed);
    if (c == nullptr) continue;
    const std::uint32_t r = c[id % kChunk].run.load(std::memory_order_relaxed);
    if (r == 0) continue;
    if (r != ep) {
      if (r != kDroppedRun) drop_interval(c[id % kChunk], kDroppedRun);
      continue;
    }
    ++count;
    if (listed != nullptr) {
      if (!listed->empty()) *listed += ", ";
      *listed += detail::quoted(name_text(id));
    }
  }
  rec.running = count;
  return count;
}

inline bool StopwatchState::nothing_running_here() {
  ThreadRecord& rec = threads.local();
  if (LAPTIME_LIKELY(rec.running <= 0) || count_running(rec, nullptr) == 0) return true;
  std::string running;
  (void)count_running(rec, &running);
  usage_error("finish_iter()", "measurement still running on this thread: " + running +
                                   " (end it before finishing the iteration; measurements "
                                   "running on other threads are fine)");
  return false;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
