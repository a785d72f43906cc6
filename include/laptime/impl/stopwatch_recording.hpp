// laptime internals: interval recording (Stopwatch::enable_recording, LAPTIME_RECORD): the last
// intervals of each thread in its ring (IntervalRing, stopwatch_hot.hpp) and the iteration ends
// (IterationLog), read back as Samples. The implementation part (LAPTIME_IMPL: defined in every
// translation unit that includes it, linked once).
#pragma once

#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/impl/stopwatch_parts.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// The calling thread's ring, (re)allocated here (start_features, a slow path) when recording is
/// on and the thread has none of the current capacity: end_meas never allocates.
LAPTIME_NOINLINE inline void StopwatchState::ensure_ring(ThreadRecord& rec) {
  const std::size_t cap = record_capacity.load(std::memory_order_relaxed);
  IntervalRing* r = rec.ring.load(std::memory_order_relaxed);
  if (cap == 0 || (r != nullptr && r->capacity == cap)) return;
  std::unique_ptr<IntervalRing> fresh = make_interval_ring(cap);
  if (fresh == nullptr) {  // no memory: recording off, never an exception from start_meas
    features.fetch_and(~kFeatRecord, std::memory_order_relaxed);
    return warn_once("record-memory", "recording off: no memory for the last " +
                                          std::to_string(cap) + " intervals of a thread");
  }
  char name[32] = {};
  if (::pthread_getname_np(::pthread_self(), name, sizeof name) == 0) fresh->thread_name = name;
  fresh->tid = rec.tid;
  std::lock_guard<std::mutex> lock(rec.mutex);  // rec.rings: also read by reports
  IntervalRing* const ring = fresh.get();
  try {
    rec.rings.push_back(std::move(fresh));  // first: a failure leaves the ring in use as it was
  } catch (...) {
    features.fetch_and(~kFeatRecord, std::memory_order_relaxed);
    return warn_once("record-memory", "recording off: no memory to keep a thread's ring");
  }
  rec.ring.store(ring, std::memory_order_release);
}

// Out of line: the recording cost stays off the plain pair. The interval goes to the ring of the
// thread that ends it (each ring has one writer); it belongs to the iteration in which it ends.
LAPTIME_IMPL void StopwatchCore::record_interval(std::uint32_t id, std::int64_t t0,
                                                 std::int64_t dt) {
  IntervalRing* r = threads.local().ring.load(std::memory_order_relaxed);
  if (LAPTIME_UNLIKELY(r == nullptr)) {  // this thread started nothing since recording began
    whole(*this).unrecorded.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::uint64_t gen = iter_gate().generation.load(std::memory_order_relaxed);
  r->push(std::uint64_t{id} | (gen << 32), t0, dt,
          iter_gate().finished.load(std::memory_order_relaxed));
}

/// The ring capacity of the iteration ends finish_iter keeps: 0 while not recording.
inline std::size_t StopwatchState::iteration_ends_capacity() const {
  if (!(features.load(std::memory_order_relaxed) & kFeatRecord)) return 0;
  return record_capacity.load(std::memory_order_relaxed);
}

inline void StopwatchState::set_recording(std::size_t capacity, bool from_env) {
  // The user's LAPTIME_RECORD wins (docs/configuration.md).
  configure(record_from_env, from_env, [&] { set_record_capacity(capacity); });
}

inline void StopwatchState::set_record_capacity(std::size_t capacity) noexcept {
  record_capacity.store(capacity, std::memory_order_relaxed);
  if (capacity > 0) {
    features.fetch_or(kFeatRecord, std::memory_order_relaxed);
  } else {
    features.fetch_and(~kFeatRecord, std::memory_order_relaxed);
  }
}

/// The name the kernel has for a live thread now (it may have been set after its ring was made).
inline void read_thread_name(ThreadSamples& ts) {
  const std::string path = "/proc/self/task/" + std::to_string(ts.tid) + "/comm";
  if (std::FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, f) != nullptr) {
      ts.name = buf;
      while (!ts.name.empty() && ts.name.back() == '\n') ts.name.pop_back();
    }
    std::fclose(f);
  }
}

/// ThreadRecord::adopt, under the registry lock: what the exited owner's ring holds of this
/// generation joins the exited threads' intervals, of which the most recent `capacity` stay. A
/// failed allocation drops them, counted as unrecorded.
inline void StopwatchState::keep_exited(const IntervalRing& ring) noexcept {
  const std::uint32_t gen = iter_gate().generation.load(std::memory_order_relaxed);
  std::size_t kept = 0;
  try {
    ExitedThread t{ring.tid, ring.thread_name, {}};
    ring.read([&](std::uint64_t name_gen, std::int64_t start, std::int64_t dur, std::int64_t it) {
      if (static_cast<std::uint32_t>(name_gen >> 32) == gen) {
        t.intervals.push_back({name_gen, start, dur, it});
      }
    });
    kept = t.intervals.size();
    if (kept == 0) return;
    exited.push_back(std::move(t));
  } catch (...) {  // std::bad_alloc
    unrecorded.fetch_add(kept, std::memory_order_relaxed);
    return;
  }
  exited_intervals += kept;
  const std::size_t cap = record_capacity.load(std::memory_order_relaxed);
  std::size_t whole_threads = 0;  // the oldest threads to drop whole
  while (exited_intervals > cap && whole_threads < exited.size() &&
         exited_intervals - exited[whole_threads].intervals.size() >= cap) {
    exited_intervals -= exited[whole_threads++].intervals.size();
  }
  exited.erase(exited.begin(), exited.begin() + static_cast<std::ptrdiff_t>(whole_threads));
  if (exited_intervals > cap) {  // the oldest thread left keeps its newest intervals
    auto& oldest = exited.front().intervals;
    const std::size_t excess = exited_intervals - cap;
    oldest.erase(oldest.begin(), oldest.begin() + static_cast<std::ptrdiff_t>(excess));
    exited_intervals = cap;
  }
}

/// What the rings hold now, of this generation (since the last reset()): the exited threads'
/// intervals first, then each record's ring.
inline Samples StopwatchState::samples() {
  Samples out;
  out.capacity = record_capacity.load(std::memory_order_relaxed);
  out.unrecorded = unrecorded.load(std::memory_order_relaxed);
  const std::uint32_t gen = iter_gate().generation.load(std::memory_order_relaxed);
  const std::uint32_t n = name_count.load(std::memory_order_acquire);
  std::vector<std::uint32_t> index(n, kNoName);  // name id -> index into out.names
  // Adds thread `ts` with the intervals that `each(f)` passes to f(name_gen, start, dur, iter).
  auto add = [&](ThreadSamples ts, auto&& each) {
    each([&](std::uint64_t name_gen, std::int64_t start, std::int64_t dur, std::int64_t it) {
      const auto id = static_cast<std::uint32_t>(name_gen & 0xffffffffu);
      if (static_cast<std::uint32_t>(name_gen >> 32) != gen || id >= n) return;  // before reset
      if (index[id] == kNoName) {
        index[id] = static_cast<std::uint32_t>(out.names.size());
        out.names.push_back(name_text(id));
      }
      ts.intervals.push_back({index[id], start, dur, it});
    });
    if (!ts.intervals.empty()) out.threads.push_back(std::move(ts));
  };
  threads.under_lock([&] {
    for (const ExitedThread& t : exited) {
      add(ThreadSamples{t.tid, t.name, {}}, [&](auto&& f) {
        for (const ExitedInterval& e : t.intervals) f(e.name_gen, e.start, e.dur, e.iter);
      });
    }
  });
  threads.for_each([&](ThreadRecord& rec, long, bool alive) {
    std::lock_guard<std::mutex> lock(rec.mutex);  // rec.rings, thread names
    const IntervalRing* r = rec.ring.load(std::memory_order_acquire);
    if (r == nullptr) return;
    ThreadSamples ts;
    ts.tid = r->tid;
    ts.name = r->thread_name;
    if (alive) read_thread_name(ts);
    add(std::move(ts), [&](auto&& f) { r->read(f); });
  });
  out.iteration_ends = iteration_ends();
  return out;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
