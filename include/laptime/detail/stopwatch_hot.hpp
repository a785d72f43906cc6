// laptime internals: the Stopwatch's hot path. What a translation unit that times intervals
// compiles: the per-thread slots, the name cache and start/end inline; everything else (first use
// of a name, errors, features, reports, configuration) is declared here and defined once, out of
// line, in the implementation part (impl/stopwatch_state.hpp, compiled by src/laptime.cpp or
// included by <laptime/laptime.hpp>).
//
// Layout (see docs/design.md):
//   - names are interned once into a process-wide table (id = first-seen order);
//   - every OS thread has a ThreadRecord (ThreadRegistry) holding one Slot per name it used:
//     the running interval and the statistics this thread accumulated for the name. A start/end
//     pair touches only the calling thread's record: no lock, no shared cache line written;
//   - a report merges the slots of all threads (threads alive or gone).
// Name lookup on the hot path: the thread's NameCache (detail/names.hpp) keyed by the caller's
// pointer and length, verified against the interned bytes; then the thread's own hash map; only a
// name new to this thread takes the process-wide lock.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/clock.hpp"
#include "laptime/detail/histogram.hpp"
#include "laptime/detail/names.hpp"
#include "laptime/detail/nvtx_core.hpp"
#include "laptime/detail/thread_registry.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::uint32_t kNoName = 0xffffffffu;
/// Slot::run of an interval of an older period that was dropped before its end_meas came (by
/// finish_iter, or started while disabled): that end_meas ends nothing, silently.
inline constexpr std::uint32_t kDroppedRun = 0xffffffffu;

// StopwatchCore::power: what start_meas and end_meas do.
inline constexpr std::uint8_t kNeverEnabled = 0;  // before the first enable(): nothing at all
inline constexpr std::uint8_t kEnabled = 1;       // measure
/// After disable() (or the environment's "off"): measure nothing, but remember a start as an
/// interval of the disabled period (kDroppedRun), so that its end_meas, after another thread's
/// enable(), ends it silently instead of raising or ending another thread's interval.
inline constexpr std::uint8_t kDisabled = 2;
inline constexpr std::size_t kChunk = 64;
inline constexpr std::size_t kChunks = (LAPTIME_MAX_NAMES + kChunk - 1) / kChunk;

// Bits of StopwatchState::features: what the hot path must do beyond taking timestamps.
inline constexpr unsigned kFeatCudaSync = 1;
inline constexpr unsigned kFeatGpuTiming = 2;  // every name
inline constexpr unsigned kFeatTracked = 4;
inline constexpr unsigned kFeatGpuNames = 8;  // the names flagged kNameGpu only
inline constexpr unsigned kFeatRecord = 16;   // keep each thread's last intervals (IntervalRing)
inline constexpr unsigned kFeatNvtx = 32;     // each interval is an NVTX range (set_nvtx_ranges)
/// NVTX ranges or GPU timing were switched off: an interval that started before may still hold
/// an NVTX range or GPU events, which its end must release (the slot says whether it does).
inline constexpr unsigned kFeatLeftover = 64;

// Bits of StopwatchState::name_flags.
inline constexpr std::uint8_t kNameTracked = 1;
inline constexpr std::uint8_t kNameSeen = 2;
inline constexpr std::uint8_t kNameGpu = 4;
/// An interval of the name ended on another thread than its start: its NVTX ranges are start/end
/// ranges from then on (Stopwatch::set_nvtx_ranges).
inline constexpr std::uint8_t kNameNvtxCross = 8;
/// Slot::gpu_token of an interval without GPU events (cuda::GpuEventTimer::kInvalid).
inline constexpr std::uint32_t kNoGpuToken = 0xffffffffu;

struct ResourceSlot;  // the implementation's (resources::Sample and Usage)
struct NvtxName;      // impl/nvtx_state.hpp

/// One (thread, name): the running interval, and what this thread accumulated for the name.
///
/// The running interval's fields are written by the owning thread and read by reports and by a
/// thread that ends the interval for it (end_meas on another thread): relaxed atomics, a plain mov
/// on x86. `run` is stored last with release, so whoever sees it sees the interval whole.
struct Slot {
  // The epoch (StopwatchState::epoch) the running interval started in; 0: none runs. An interval
  // of an older epoch (started before a disable(), reset() or enable()) is dropped, not ended.
  std::atomic<std::uint32_t> run{0};
  std::atomic<std::int64_t> start_ns{0};
  std::atomic<bool> sampled{false};    // resources were sampled at start
  std::atomic<bool> measuring{false};  // started after warm-up (decides the CUDA sync at the end)
  std::atomic<std::uint32_t> gpu_token{kNoGpuToken};
  // The running interval's NVTX range (Stopwatch::set_nvtx_ranges; impl/stopwatch_state.hpp):
  // how it is open (kNvtxRange*), the NVTX wrapper's state it was opened under, the id of a
  // start/end range, and the name's registered string as the owner last resolved it.
  std::atomic<std::uint8_t> nvtx{0};
  std::atomic<std::uint32_t> nvtx_state{0};
  std::atomic<std::uint64_t> nvtx_range{0};
  std::atomic<const NvtxName*> nvtx_name{nullptr};
  bool prepared = false;                          // owner only
  std::uint32_t id = kNoName;                     // the name's (set when the chunk is made)
  std::atomic<std::uint32_t> generation{0};       // StopwatchState::generation of the statistics
  IntervalStats stats;                            // written by the owner only
  std::atomic<ResourceSlot*> resources{nullptr};  // tracked names only (track_cpu_usage)
};

/// What a thread's name cache keeps for a name: the thread's slot for it (slots never move, and
/// know their name's id), so a hit needs no further lookup.
using NameCacheEntry = NameCache<Slot*>::Entry;

/// One recorded interval. Fields are relaxed atomics (plain movs on x86) so that a report may read
/// a slot while its thread overwrites it; IntervalRing::read discards such a slot.
struct RingEntry {
  std::atomic<std::uint64_t> name_gen{0};  // name id | (generation << 32)
  std::atomic<std::int64_t> start_ns{0};
  std::atomic<std::int64_t> dur_ns{0};
  std::atomic<std::int64_t> iter{0};
};

/// The last `capacity` intervals a thread ended (Stopwatch::enable_recording). One writer, the
/// owning thread, which never allocates or locks here; readers (reports) run under the registry
/// lock. Protocol: the writer announces index w in `claimed`, a release fence, writes the slot,
/// then publishes w + 1 with release. A reader copies the published slots (acquire loads), then
/// reads `claimed`: any slot it copied while the writer was overwriting it is older than
/// claimed - capacity, and is discarded. A torn record is never emitted.
struct IntervalRing {
  // Without the memory, `entries` is null (make_interval_ring gives no ring then). A count whose
  // bytes no allocation can hold is not asked for: new[] would throw for it even with nothrow.
  explicit IntervalRing(std::size_t cap)
      : capacity(cap),
        entries(cap <= kMaxRingEntries ? new (std::nothrow) RingEntry[cap] : nullptr) {}
  static constexpr std::size_t kMaxRingEntries =
      static_cast<std::size_t>(PTRDIFF_MAX) / sizeof(RingEntry);
  const std::size_t capacity;
  std::unique_ptr<RingEntry[]> entries;
  std::size_t next = 0;  // owner only: the slot of the next record (published % capacity)
  std::atomic<std::uint64_t> claimed{0};
  std::atomic<std::uint64_t> published{0};
  std::string thread_name;  // read at allocation; reports refresh it from /proc
  long tid = 0;             // of the thread that wrote it

  LAPTIME_ALWAYS_INLINE void push(std::uint64_t name_gen, std::int64_t start, std::int64_t dur,
                                  std::int64_t iteration) noexcept {
    const std::uint64_t w = published.load(std::memory_order_relaxed);
    claimed.store(w + 1, std::memory_order_relaxed);
    // Release stores (a plain mov on x86): none of them is seen before `claimed` is. Not a fence,
    // which ThreadSanitizer does not model.
    RingEntry& e = entries[next];
    e.name_gen.store(name_gen, std::memory_order_release);
    e.start_ns.store(start, std::memory_order_release);
    e.dur_ns.store(dur, std::memory_order_release);
    e.iter.store(iteration, std::memory_order_release);
    next = next + 1 == capacity ? 0 : next + 1;
    published.store(w + 1, std::memory_order_release);
  }

  /// Calls f(name_gen, start, dur, iter) for each whole record, oldest first.
  template <class Fn>
  void read(Fn&& f) const {
    const std::uint64_t h = published.load(std::memory_order_acquire);
    const std::uint64_t lo = h > capacity ? h - capacity : 0;
    struct Copy {
      std::uint64_t name_gen;
      std::int64_t start, dur, iter;
    };
    std::vector<Copy> copies;
    copies.reserve(std::size_t{h - lo});
    for (std::uint64_t i = lo; i < h; ++i) {
      const RingEntry& e = entries[std::size_t{i % capacity}];
      // Acquire loads: `claimed` below is read after every one of them.
      copies.push_back(
          {e.name_gen.load(std::memory_order_acquire), e.start_ns.load(std::memory_order_acquire),
           e.dur_ns.load(std::memory_order_acquire), e.iter.load(std::memory_order_acquire)});
    }
    const std::uint64_t c = claimed.load(std::memory_order_relaxed);
    const std::uint64_t valid_from = c > capacity ? c - capacity : 0;
    for (std::uint64_t i = std::max(lo, valid_from); i < h; ++i) {
      const Copy& r = copies[std::size_t{i - lo}];
      f(r.name_gen, r.start, r.dur, r.iter);
    }
  }
};

/// A ring of `cap` intervals, or null where the memory is not there: recording starts on a
/// thread's first start_meas, which must never throw.
inline std::unique_ptr<IntervalRing> make_interval_ring(std::size_t cap) noexcept {
  std::unique_ptr<IntervalRing> ring(new (std::nothrow) IntervalRing(cap));
  if (ring == nullptr || ring->entries == nullptr) return nullptr;
  return ring;
}

// Threads write only their own record and slots. Both are aligned to (and padded to a multiple
// of) a cache line, so that two threads never write one line: records and chunks are heap
// blocks that the allocator may otherwise place side by side.
inline constexpr std::size_t kCacheLine = 64;

struct alignas(kCacheLine) SlotChunk {
  Slot slots[kChunk];
};

struct alignas(kCacheLine) ThreadRecord {
  std::array<std::atomic<Slot*>, kChunks> chunks{};
  NameCache<Slot*> cache;
  TextTable<std::uint32_t> known;  // ids by text (behind the cache), keys are interned names
  // Intervals this thread started and may not have ended: an upper bound (another thread may
  // end one, an epoch may drop one); finish_iter() counts exactly when it is not 0. 64 bits: a
  // loader thread whose starts another thread ends, and that never calls finish_iter(), only
  // ever adds to it (2^31 hand-offs are 25 days at 1,000 a second).
  std::int64_t running = 0;
  long tid = 0;
  std::mutex mutex;  // resource slots: written by the owner, read by reports
  // Interval recording: the ring in use (owner writes; reports read under the registry lock);
  // `rings` owns it and rings of an earlier capacity (a report may still read them).
  std::atomic<IntervalRing*> ring{nullptr};
  std::vector<std::unique_ptr<IntervalRing>> rings;

  /// A thread takes this record: what ran on the previous owner is dropped (it can never end),
  /// what it accumulated stays. Called by ThreadRegistry under its lock.
  void adopt(long new_tid) noexcept;
  /// Whether no interval of this epoch runs on the record: one its exited thread started stays
  /// there, for another thread's end_meas to end (docs/stopwatch.md), and keeps the record from
  /// being adopted until it ends or its epoch passes.
  bool reusable() const noexcept;

  LAPTIME_ALWAYS_INLINE Slot& slot(std::uint32_t id) {
    Slot* c = chunks[id / kChunk].load(std::memory_order_relaxed);
    if (LAPTIME_UNLIKELY(c == nullptr)) c = add_chunk(id / kChunk);
    return c[id % kChunk];
  }

  /// Makes the chunk of slots `index` (never freed: reports may read it at any time).
  Slot* add_chunk(std::size_t index);
};

/// What decides whether an interval counts: iterations finished, warm-up, and the statistics
/// generation (reset() moves it on). The Stopwatch's own, or, once worker processes share the
/// parent's measurements (impl/worker_share.hpp), the one in shared memory: a worker's
/// warm-up follows the parent's iterations, and the parent's reset() drops the workers' figures.
struct IterationGate {
  std::atomic<std::int64_t> finished{0};
  std::atomic<int> warmup{0};
  std::atomic<std::uint32_t> generation{1};

  LAPTIME_ALWAYS_INLINE bool measuring() const noexcept {
    return finished.load(std::memory_order_relaxed) >= warmup.load(std::memory_order_relaxed);
  }
};

/// The part of the Stopwatch's process-wide state that start_meas and end_meas read, and their
/// code. The whole state (StopwatchState, the implementation part) derives from it; there is one,
/// found through stopwatch_core().
struct StopwatchCore {
  StopwatchCore() = default;
  StopwatchCore(const StopwatchCore&) = delete;
  StopwatchCore& operator=(const StopwatchCore&) = delete;

  // --- hot-path reads (relaxed) ---
  std::atomic<std::uint8_t> power{kNeverEnabled};
  std::atomic<unsigned> features{0};
  // Iterations, warm-up, statistics generation: `own_gate`, or the shared one (IterationGate).
  std::atomic<IterationGate*> gate{&own_gate};
  std::atomic<std::uint32_t> epoch{1};  // of running intervals: disable/reset/enable move it on
  std::array<std::atomic<std::uint8_t>, LAPTIME_MAX_NAMES> name_flags{};
  // Interval recording (kFeatRecord): each thread's ring holds this many; 0: off.
  std::atomic<std::size_t> record_capacity{0};

  ThreadRegistry<ThreadRecord> threads;
  IterationGate own_gate;
  LAPTIME_ALWAYS_INLINE IterationGate& iter_gate() const noexcept {
    return *gate.load(std::memory_order_relaxed);
  }

  LAPTIME_ALWAYS_INLINE bool is_on() const noexcept {
    return power.load(std::memory_order_relaxed) == kEnabled;
  }
  /// Enabled now or earlier (disabled since: the results stay); false before the first enable().
  bool ever_enabled() const noexcept {
    return power.load(std::memory_order_relaxed) != kNeverEnabled;
  }

  // --- the hot path ---
  /// The calling thread's record, or nullptr where nothing was started that an end may take: the
  /// name already runs on this thread (the error policy let the call return) or the name table
  /// is full.
  ThreadRecord* start(std::string_view name);
  /// `owner`: the thread a scope started the interval on (nullptr: the calling thread's, as
  /// end_meas): on another thread, that thread's interval is ended (end_started_on).
  void end(std::string_view name, ThreadRecord* owner = nullptr);
  // start_meas and end_meas while disabled after an enable() (kDisabled), out of line
  // (impl/stopwatch_disabled.hpp): what they leave on the calling thread's slot.
  void start_while_disabled(std::string_view name) noexcept;
  void end_while_disabled(std::string_view name) noexcept;
  LAPTIME_ALWAYS_INLINE ThreadRecord& local_record();
  LAPTIME_ALWAYS_INLINE const NameCacheEntry* lookup(ThreadRecord& rec, std::string_view name);
  LAPTIME_ALWAYS_INLINE void add_interval(ThreadRecord& owner, Slot& run_slot, Slot& stats_slot,
                                          std::uint32_t id, std::int64_t t, unsigned feats);

  // --- out of line (the implementation part): the rare branches of start/end (first use of a
  // name on a thread, errors, CUDA sync, after a reset, features), so that the hot functions keep
  // a small frame and a translation unit that times intervals does not compile them ---
  /// The calling thread's first start_meas or end_meas: its record, found or made
  /// (threads.local()); out of line, so that a file that times intervals does not compile the
  /// registry's attach.
  ThreadRecord& attach_thread();
  const NameCacheEntry* lookup_slow(ThreadRecord& rec, std::string_view name);
  void prepare(Slot& s);
  void start_running_error(std::string_view name);
  // `mark`: 0, or kDroppedRun where the interval's own end_meas may still come (it then ends
  // nothing, silently, as the end of any interval of an older period does).
  void drop_interval(Slot& s, std::uint32_t mark = 0) noexcept;
  void end_elsewhere(ThreadRecord& rec, Slot& mine, std::uint32_t id, std::string_view name,
                     std::int64_t t, unsigned feats);
  /// end_meas of the interval of `name` that `owner` started (a scope that ends on another
  /// thread): where it does not run there, end_meas's own rule.
  void end_started_on(ThreadRecord& rec, ThreadRecord& owner, std::string_view name, std::int64_t t,
                      unsigned feats);
  /// Ends the interval of this epoch that `theirs` (of thread `owner`) runs, into `mine`; false
  /// where it runs none now (its thread ended it meanwhile).
  bool take_interval(ThreadRecord& owner, Slot& theirs, Slot& mine, std::uint32_t id,
                     std::int64_t t, unsigned feats);
  void sync_before_end(std::string_view name);
  void drop_stale(ThreadRecord& rec, Slot& s, std::uint32_t gen);
  void start_features(Slot& s, std::uint32_t id, unsigned feats, bool measuring);
  /// The end sample of a tracked interval (into its ResourceSlot); returns the time after it.
  std::int64_t end_sample(Slot& run_slot) noexcept;
  void end_features(ThreadRecord& owner, Slot& run_slot, std::uint32_t id, bool measuring,
                    std::int64_t dt);
  void record_interval(std::uint32_t id, std::int64_t t0, std::int64_t dt);
  /// Stopwatch::finish_iter once enabled: the iteration's end, the NVTX mark, GPU timings, the
  /// periodic report.
  void finish_iter();
};

/// The calling thread's record: threads.local(), its attach out of line.
LAPTIME_ALWAYS_INLINE ThreadRecord& StopwatchCore::local_record() {
  return threads.local([this]() -> ThreadRecord& { return attach_thread(); });
}

/// The calling thread's cache entry for `name` (its id and slot); nullptr when the name table is
/// full.
LAPTIME_ALWAYS_INLINE const NameCacheEntry* StopwatchCore::lookup(ThreadRecord& rec,
                                                                  std::string_view name) {
  if (const NameCacheEntry* e = rec.cache.find(name); LAPTIME_LIKELY(e != nullptr)) return e;
  return lookup_slow(rec, name);
}

/// Whether the interval starting on `s` has nothing to open: the Stopwatch's NVTX ranges are its
/// only feature, the NVTX wrapper is quiet (enabled, no profiler attached, no sync, no order
/// tracking: NVTX would drop the range) and no earlier range is left open on the slot.
LAPTIME_ALWAYS_INLINE bool nvtx_ranges_idle(const Slot& s, unsigned feats) noexcept {
#if LAPTIME_ENABLED
  if (feats != kFeatNvtx) return false;
  const NvtxCore* c = nvtx_core_pointer().load(std::memory_order_acquire);
  return c != nullptr && NvtxCore::quiet(c->state.load(std::memory_order_relaxed)) &&
         s.nvtx.load(std::memory_order_relaxed) == 0;
#else
  (void)s, (void)feats;
  return false;
#endif
}

/// Whether the interval starting on `s` needs nothing of start_features: no feature on, recording
/// alone once
/// the thread has its ring of the capacity asked for (start_features makes it: a ring is only
/// ever allocated at a start), or the NVTX ranges with nothing to open.
LAPTIME_ALWAYS_INLINE bool start_idle(const ThreadRecord& rec, const Slot& s, unsigned feats,
                                      std::size_t record_capacity) noexcept {
  feats &= ~kFeatLeftover;  // for the ends only
  if (feats == 0) return true;
  if (feats == kFeatRecord) {
    const IntervalRing* r = rec.ring.load(std::memory_order_relaxed);
    return r != nullptr && r->capacity == record_capacity;
  }
  return nvtx_ranges_idle(s, feats);
}

inline ThreadRecord* StopwatchCore::start(std::string_view name) {
  ThreadRecord& rec = local_record();
  const NameCacheEntry* e = lookup(rec, name);
  if (LAPTIME_UNLIKELY(e == nullptr)) return nullptr;
  const std::uint32_t id = e->value->id;
  Slot& s = *e->value;
  if (LAPTIME_UNLIKELY(!s.prepared)) prepare(s);
  const std::uint32_t ep = epoch.load(std::memory_order_relaxed);
  if (const std::uint32_t r = s.run.load(std::memory_order_relaxed); LAPTIME_UNLIKELY(r != 0)) {
    if (r == ep) {
      start_running_error(name);
      return nullptr;
    }
    drop_interval(s);  // started before a disable(), reset() or enable(): never ended
  }
  std::atomic<std::uint8_t>& flags = name_flags[id];
  if (LAPTIME_UNLIKELY(!(flags.load(std::memory_order_relaxed) & kNameSeen))) {
    flags.fetch_or(kNameSeen, std::memory_order_relaxed);
  }
  const bool measuring = iter_gate().measuring();
  s.measuring.store(measuring, std::memory_order_relaxed);
  ++rec.running;
  const unsigned feats = features.load(std::memory_order_relaxed);
  if (LAPTIME_UNLIKELY(feats != 0) &&
      !start_idle(rec, s, feats, record_capacity.load(std::memory_order_relaxed))) {
    start_features(s, id, feats, measuring);  // takes the start timestamp itself
  } else {
    s.start_ns.store(now_ns(), std::memory_order_relaxed);
  }
  s.run.store(ep, std::memory_order_release);
  return &rec;
}

inline void StopwatchCore::end(std::string_view name, ThreadRecord* owner) {
  const unsigned feats = features.load(std::memory_order_relaxed);
  if (LAPTIME_UNLIKELY(feats & kFeatCudaSync)) sync_before_end(name);
  const std::int64_t t = now_ns();
  ThreadRecord& rec = local_record();
  if (LAPTIME_UNLIKELY(owner != nullptr && owner != &rec)) {
    end_started_on(rec, *owner, name, t, feats);  // a scope resumed here (a coroutine)
    return;
  }
  const NameCacheEntry* e = lookup(rec, name);
  if (LAPTIME_UNLIKELY(e == nullptr)) return;
  Slot& s = *e->value;
  if (LAPTIME_UNLIKELY(s.run.load(std::memory_order_relaxed) !=
                       epoch.load(std::memory_order_relaxed))) {
    end_elsewhere(rec, s, e->value->id, name, t, feats);  // not running here, or from an old epoch
    return;
  }
  s.run.store(0, std::memory_order_relaxed);
  --rec.running;
  add_interval(rec, s, s, e->value->id, t, feats);
}

/// Adds the interval that ran on `run_slot` (of thread `owner`) and ended at `t` to `stats_slot`
/// (the ending thread's slot for the name: statistics are written by one thread only).
LAPTIME_ALWAYS_INLINE void StopwatchCore::add_interval(ThreadRecord& owner, Slot& run_slot,
                                                       Slot& stats_slot, std::uint32_t id,
                                                       std::int64_t t, unsigned feats) {
  // A tracked interval's time encloses its two /proc samples, as a timer around start_meas and
  // end_meas does: its end timestamp is taken again after the end sample.
  if (LAPTIME_UNLIKELY(feats & kFeatTracked) && run_slot.sampled.load(std::memory_order_relaxed)) {
    t = end_sample(run_slot);
  }
  const std::int64_t t0 = run_slot.start_ns.load(std::memory_order_relaxed);
  const std::int64_t dt = t > t0 ? t - t0 : 0;
  const IterationGate& g = iter_gate();
  const std::uint32_t gen = g.generation.load(std::memory_order_relaxed);
  if (LAPTIME_UNLIKELY(stats_slot.generation.load(std::memory_order_relaxed) != gen)) {
    drop_stale(owner, stats_slot, gen);
  }
  // An interval belongs to the iteration in which it ends: warm-up is decided now.
  const bool measuring = g.measuring();
  if (LAPTIME_LIKELY(measuring)) stats_slot.stats.add(static_cast<std::uint64_t>(dt));
  std::atomic<std::uint8_t>& flags = name_flags[id];
  if (LAPTIME_UNLIKELY(!(flags.load(std::memory_order_relaxed) & kNameSeen))) {
    flags.fetch_or(kNameSeen, std::memory_order_relaxed);
  }
  if (LAPTIME_UNLIKELY(feats != 0)) {
    if (feats & kFeatRecord) record_interval(id, t0, dt);
    // end_features' work: a resource window, GPU events, an NVTX range; none, no call.
    if ((feats & ~kFeatRecord) &&
        (run_slot.sampled.load(std::memory_order_relaxed) ||
         run_slot.gpu_token.load(std::memory_order_relaxed) != kNoGpuToken ||
         run_slot.nvtx.load(std::memory_order_relaxed) != 0)) {
      end_features(owner, run_slot, id, measuring, dt);
    }
  }
}

// This copy of the code's pointer to the process-wide state, set at its first use. Constant-
// initialised (no guard variable), so the hot path below inlines to one load and a branch, where
// process_singleton's guarded static is an out-of-line call on every start_meas and end_meas.
inline std::atomic<StopwatchCore*>& stopwatch_core_pointer() noexcept {
  static std::atomic<StopwatchCore*> p{nullptr};
  return p;
}

/// Makes (or finds, in a process where another copy of laptime made it) the process-wide state,
/// and sets this copy's pointer to it.
StopwatchCore& stopwatch_core_slow();

/// The process-wide Stopwatch state, hot part.
LAPTIME_ALWAYS_INLINE StopwatchCore& stopwatch_core() {
  StopwatchCore* s = stopwatch_core_pointer().load(std::memory_order_acquire);
  if (LAPTIME_LIKELY(s != nullptr)) return *s;
  return stopwatch_core_slow();
}

/// ScopedMeasurement's destructor, when end_meas threw: a usage error goes to stderr (a destructor
/// must not throw), anything else ends the program as an exception out of a destructor does.
/// Called from the catch block (it rethrows to look at the exception).
void scoped_end_failed() noexcept;

/// Whether the next finish_iter() prints the periodic report (the Python module lets go of the
/// GIL for that one); the rule itself is StopwatchState::prints_after.
bool finish_iter_will_print();

/// Tests only: back to the state before the first enable() (names stay interned).
void testing_reset_stopwatch();

}  // namespace detail
LAPTIME_END_NAMESPACE
