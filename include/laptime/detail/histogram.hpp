// laptime internals: bounded-memory statistics of interval lengths.
//
// Plain arithmetic, apart from any clock or OS access, so that it is tested with known data
// (tests/stats-test.cpp). Thread model: one writer (the thread that owns the statistics) and any
// number of concurrent readers (reports). Counters are relaxed atomics written with plain
// load+store, which costs the same as a non-atomic add on x86 and ARM, and lets a reader see each
// counter whole (a live report may be a few intervals behind; a final one is exact).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

template <class Type>
LAPTIME_ALWAYS_INLINE void single_writer_add(std::atomic<Type>& a, Type delta) noexcept {
  a.store(a.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

/// Where another process's statistics lie in this one's memory: statistics a worker process keeps
/// in shared memory (impl/worker_share.hpp) hold pointers of the worker's address space, valid
/// here once moved by `shift` when they fall in [lo, hi) (the worker's view of the region); a
/// pointer outside it is the worker's private memory and is not followed. The default is this
/// process's own memory.
struct Foreign {
  std::uintptr_t lo = 0;
  std::uintptr_t hi = ~std::uintptr_t{0};
  std::ptrdiff_t shift = 0;

  template <class Type>
  const Type* map(const Type* p) const noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    if (p == nullptr || a < lo || a + sizeof(Type) > hi) return nullptr;
    return reinterpret_cast<const Type*>(a + static_cast<std::uintptr_t>(shift));
  }
};

/// Where a histogram in shared memory takes its blocks: a worker's region of the shared file
/// (impl/worker_share.hpp), where its parent reads them. `take(context, bytes)` returns zeroed
/// memory, without a lock (the writer's add() calls it), or nullptr when there is none.
struct BlockSource {
  void* (*take)(void* context, std::size_t bytes) noexcept = nullptr;
  void* context = nullptr;
};

/// A log-linear histogram of nanosecond values (the HDR histogram layout): values below 64 have a
/// bucket each; above, every power of two is split into 64 equal buckets. Reporting a bucket's
/// midpoint is then within 1/128 (0.8 %) of any value in it, up to 2^48 ns (78 h); longer values
/// share the last bucket (a known limit: their percentiles read low, docs/stopwatch.md).
///
/// Small: the 64 buckets of a power of two (a block: 64 32-bit counts, 256 B) are allocated the
/// first time a value falls in it, so a name whose intervals span a few powers of two costs the
/// 368 B of the histogram itself (its table of blocks; sizeof, checked by
/// tests/guarantees-test.cpp) plus 256 B per power of two touched (tests/histogram-test.cpp,
/// BM_MemoryPerThreadName), not 22 KiB. That allocation is the only one, and it happens once per
/// block: the writer's add() of a value in a new power of two allocates (off the steady state).
/// A count passing 2^32 carries into a high word table allocated on the first carry (after 4
/// billion values in one bucket of one thread); a live report that reads a count at that very
/// moment may see it 2^32 low, a final one is exact.
class Histogram {
 public:
  static constexpr int kSubBits = 6;
  static constexpr std::uint64_t kSub = 1u << kSubBits;  // 64
  static constexpr int kMaxExponent = 47;
  static constexpr std::size_t kBuckets = kSub + (kMaxExponent - kSubBits + 1) * kSub;
  static constexpr std::size_t kBlocks = kBuckets / kSub;  // 43: values < 64, 2^6 .. 2^48 - 1

  static constexpr std::size_t bucket_of(std::uint64_t v) noexcept {
    if (v < kSub) return std::size_t{v};
    const int e = 63 - __builtin_clzll(v);  // floor(log2 v), >= kSubBits
    if (e > kMaxExponent) return kBuckets - 1;
    const std::uint64_t sub = (v >> (e - kSubBits)) & (kSub - 1);
    return std::size_t{kSub + static_cast<std::uint64_t>(e - kSubBits) * kSub + sub};
  }
  /// The smallest value in bucket b.
  static constexpr std::uint64_t bucket_low(std::size_t b) noexcept {
    if (b < kSub) return b;
    const std::size_t e = (b - kSub) / kSub + kSubBits;
    const std::uint64_t sub = (b - kSub) % kSub;
    return (std::uint64_t{1} << e) + (sub << (e - kSubBits));
  }
  static constexpr std::uint64_t bucket_width(std::size_t b) noexcept {
    if (b < kSub) return 1;
    const std::size_t e = (b - kSub) / kSub + kSubBits;
    return std::uint64_t{1} << (e - kSubBits);
  }

  Histogram() = default;
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;
  ~Histogram() {
    if (source_ == nullptr) {
      for (auto& b : blocks_) delete b.load(std::memory_order_relaxed);
    }
    delete[] high_.load(std::memory_order_relaxed);
  }

  /// One value. The writer only (see the class comment for the one allocation).
  LAPTIME_ALWAYS_INLINE void add(std::uint64_t v) {
    const std::size_t b = bucket_of(v);
    Block* blk = blocks_[b / kSub].load(std::memory_order_relaxed);
    if (LAPTIME_UNLIKELY(blk == nullptr)) {
      blk = add_block(b / kSub);
      if (LAPTIME_UNLIKELY(blk == nullptr)) return lose(1);
    }
    std::atomic<std::uint32_t>& c = blk->counts[b % kSub];
    const std::uint32_t n = c.load(std::memory_order_relaxed) + 1;
    c.store(n, std::memory_order_relaxed);
    if (LAPTIME_UNLIKELY(n == 0)) carry(b, 1);
  }
  /// Zeroes every count; the blocks stay allocated for reuse (the writer calls this).
  void clear() noexcept {
    for (auto& b : blocks_) {
      if (Block* blk = b.load(std::memory_order_relaxed)) {
        for (auto& c : blk->counts) c.store(0, std::memory_order_relaxed);
      }
    }
    if (auto* h = high_.load(std::memory_order_relaxed)) {
      for (std::size_t i = 0; i < kBuckets; ++i) h[i].store(0, std::memory_order_relaxed);
    }
    lost_.store(0, std::memory_order_relaxed);
  }
  /// Values left out of the counts: no memory for the block they fell in (or the high words).
  std::uint64_t lost() const noexcept { return lost_.load(std::memory_order_relaxed); }
  /// Adds other's counts into this one, whose only writer is the caller (a report merging the
  /// threads' statistics into its own copy). `where`: other's pointers are another process's.
  void merge_from(const Histogram& other, const Foreign& where = Foreign()) {
    const auto* h = where.map(other.high_.load(std::memory_order_acquire));
    for (std::size_t k = 0; k < kBlocks; ++k) {
      const Block* blk = where.map(other.blocks_[k].load(std::memory_order_acquire));
      if (blk == nullptr) continue;
      for (std::size_t i = 0; i < kSub; ++i) {
        std::uint64_t n = blk->counts[i].load(std::memory_order_relaxed);
        if (h != nullptr) n += std::uint64_t{h[k * kSub + i].load(std::memory_order_relaxed)} << 32;
        if (n != 0) add_count(k * kSub + i, n);
      }
    }
    lose(other.lost_.load(std::memory_order_relaxed));
  }
  /// The bytes of every block: the most a histogram's blocks take.
  static constexpr std::size_t kStorageBytes = kBlocks * kSub * sizeof(std::uint32_t);
  /// Blocks come from `source` from now on (never freed by this histogram): a histogram in shared
  /// memory, whose add() then never allocates. Before any value.
  void take_blocks_from(const BlockSource* source) noexcept { source_ = source; }
  /// The number of values in bucket b.
  std::uint64_t count(std::size_t b) const noexcept {
    const Block* blk = blocks_[b / kSub].load(std::memory_order_acquire);
    if (blk == nullptr) return 0;
    std::uint64_t n = blk->counts[b % kSub].load(std::memory_order_relaxed);
    if (const auto* h = high_.load(std::memory_order_acquire)) {
      n += std::uint64_t{h[b].load(std::memory_order_relaxed)} << 32;
    }
    return n;
  }
  std::uint64_t total_count() const noexcept {
    std::uint64_t n = 0;
    for_each_bucket([&n](std::size_t, std::uint64_t c) {
      n += c;
      return false;
    });
    return n;
  }
  /// The q-quantile (0 <= q <= 1), linear between the two closest ranks as numpy's default (the
  /// median of an even count is the mean of the middle two), each rank's value the midpoint of
  /// its bucket (exact below 64 ns). 0 when empty.
  double quantile(double q) const noexcept {
    const std::uint64_t n = total_count();
    if (n == 0) return 0.0;
    const double h = std::clamp(q, 0.0, 1.0) * static_cast<double>(n - 1);
    const auto lo = std::min(static_cast<std::uint64_t>(h), n - 1);  // 0-based ranks lo, lo + 1
    const double low = value_at_rank(lo);
    const double frac = h - static_cast<double>(lo);
    return frac > 0.0 ? low + frac * (value_at_rank(std::min(lo + 1, n - 1)) - low) : low;
  }
  /// Bytes allocated for this histogram (the object and its blocks).
  std::size_t memory_bytes() const noexcept {
    std::size_t bytes = sizeof(*this);
    for (const auto& b : blocks_) bytes += b.load(std::memory_order_relaxed) ? sizeof(Block) : 0;
    if (high_.load(std::memory_order_relaxed)) bytes += kBuckets * sizeof(std::uint32_t);
    return bytes;
  }

 private:
  struct Block {
    std::atomic<std::uint32_t> counts[kSub] = {};
  };

  /// The value of 0-based rank `rank`: the midpoint of the bucket that holds it.
  double value_at_rank(std::uint64_t rank) const noexcept {
    std::uint64_t seen = 0;
    std::size_t found = kBuckets - 1;
    for_each_bucket([&](std::size_t b, std::uint64_t c) {
      seen += c;
      if (seen <= rank) return false;
      found = b;
      return true;
    });
    const double width = static_cast<double>(bucket_width(found));
    return static_cast<double>(bucket_low(found)) + (width - 1.0) / 2.0;
  }

  // f(bucket, count) for every allocated block's buckets in order, until f returns true.
  template <class Fn>
  void for_each_bucket(Fn&& f) const noexcept {
    const auto* h = high_.load(std::memory_order_acquire);
    for (std::size_t k = 0; k < kBlocks; ++k) {
      const Block* blk = blocks_[k].load(std::memory_order_acquire);
      if (blk == nullptr) continue;
      for (std::size_t i = 0; i < kSub; ++i) {
        std::uint64_t c = blk->counts[i].load(std::memory_order_relaxed);
        if (h != nullptr) c += std::uint64_t{h[k * kSub + i].load(std::memory_order_relaxed)} << 32;
        if (c != 0 && f(k * kSub + i, c)) return;
      }
    }
  }
  // nullptr where there is no memory for it: the value is then counted in lost() only (an
  // interval's end never throws).
  LAPTIME_NOINLINE Block* add_block(std::size_t k) noexcept {
    void* shared = source_ != nullptr ? source_->take(source_->context, sizeof(Block)) : nullptr;
    // A source with no room (its owner reserves every block first: not expected) leaves the
    // block private, where a reader in another process does not follow it.
    auto* blk = shared != nullptr ? new (shared) Block() : new (std::nothrow) Block();
    if (blk != nullptr) blocks_[k].store(blk, std::memory_order_release);
    return blk;
  }
  LAPTIME_NOINLINE void lose(std::uint64_t n) noexcept {
    single_writer_add<std::uint64_t>(lost_, n);
  }
  // The low word of bucket b wrapped (or a merge overflowed it): `n` more in its high word.
  LAPTIME_NOINLINE void carry(std::size_t b, std::uint64_t n) noexcept {
    auto* h = high_.load(std::memory_order_relaxed);
    if (h == nullptr) {
      h = new (std::nothrow) std::atomic<std::uint32_t>[kBuckets]();
      if (h == nullptr) return lose(n << 32);
      high_.store(h, std::memory_order_release);
    }
    h[b].store(h[b].load(std::memory_order_relaxed) + static_cast<std::uint32_t>(n),
               std::memory_order_relaxed);
  }
  void add_count(std::size_t b, std::uint64_t n) noexcept {
    Block* blk = blocks_[b / kSub].load(std::memory_order_relaxed);
    if (blk == nullptr) blk = add_block(b / kSub);
    if (blk == nullptr) return lose(n);
    std::atomic<std::uint32_t>& c = blk->counts[b % kSub];
    const std::uint64_t sum = std::uint64_t{c.load(std::memory_order_relaxed)} + (n & 0xffffffffu);
    c.store(static_cast<std::uint32_t>(sum), std::memory_order_relaxed);
    if (const std::uint64_t hi = (sum >> 32) + (n >> 32)) carry(b, hi);
  }

  std::atomic<Block*> blocks_[kBlocks] = {};
  std::atomic<std::atomic<std::uint32_t>*> high_{nullptr};
  std::atomic<std::uint64_t> lost_{0};   // values left out: no memory for their block
  const BlockSource* source_ = nullptr;  // the blocks are its (not this histogram's to free)
};

/// Exact count, total, min and max, plus a Histogram for the percentiles.
/// Single writer; the histogram is allocated on the first value (368 B, and 256 B per power of
/// two its values touch).
class IntervalStats {
 public:
  IntervalStats() = default;
  IntervalStats(const IntervalStats&) = delete;
  IntervalStats& operator=(const IntervalStats&) = delete;
  ~IntervalStats() {
    if (!placed_) delete hist_.load(std::memory_order_relaxed);
  }

  LAPTIME_ALWAYS_INLINE void add(std::uint64_t ns) {
    Histogram* h = hist_.load(std::memory_order_relaxed);
    if (LAPTIME_UNLIKELY(h == nullptr)) h = allocate();
    h->add(ns);
    // min and max before the count: a reader that sees the count sees them (x86's store order).
    if (ns < min_.load(std::memory_order_relaxed)) min_.store(ns, std::memory_order_relaxed);
    if (ns > max_.load(std::memory_order_relaxed)) max_.store(ns, std::memory_order_relaxed);
    single_writer_add<std::uint64_t>(count_, 1);
    single_writer_add<std::uint64_t>(total_, ns);
  }
  /// The histogram, allocated before the first value (the Stopwatch does it at a thread's first
  /// start of a name, so that end_meas never allocates). Out of line: not the hot path.
  LAPTIME_NOINLINE Histogram* allocate() {
    Histogram* h = hist_.load(std::memory_order_relaxed);
    if (h == nullptr) {
      h = new Histogram();
      hist_.store(h, std::memory_order_release);
    }
    return h;
  }

  /// Puts the histogram in `storage` (kStorageBytes; never freed here) and takes its blocks, as
  /// values need them, from `source`: the statistics of a worker process, in memory its parent
  /// reads. Before any value.
  static constexpr std::size_t kStorageBytes = sizeof(Histogram);
  void place(void* storage, const BlockSource* source) noexcept {
    auto* h = new (storage) Histogram();
    h->take_blocks_from(source);
    hist_.store(h, std::memory_order_release);
    placed_ = true;
  }

  /// Forget everything (the writer calls this; the histogram memory is kept for reuse).
  void clear() noexcept {
    count_.store(0, std::memory_order_relaxed);
    total_.store(0, std::memory_order_relaxed);
    min_.store(std::numeric_limits<std::uint64_t>::max(), std::memory_order_relaxed);
    max_.store(0, std::memory_order_relaxed);
    if (Histogram* h = hist_.load(std::memory_order_relaxed)) h->clear();
  }
  /// Adds other's figures into this one (a reader merging per-thread statistics). `where`:
  /// other lies in shared memory and its pointers are another process's.
  void merge_from(const IntervalStats& other, const Foreign& where = Foreign()) {
    const std::uint64_t n = other.count_.load(std::memory_order_relaxed);
    const std::uint64_t other_min = other.min_.load(std::memory_order_relaxed);
    const std::uint64_t other_max = other.max_.load(std::memory_order_relaxed);
    // A writer's first value under way (its count seen, its min or max not yet): left for the
    // next report, never a min above the max (the percentiles are clamped between them).
    if (n == 0 || other_min > other_max) return;
    count_.fetch_add(n, std::memory_order_relaxed);
    total_.fetch_add(other.total_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    min_.store(std::min(min_.load(std::memory_order_relaxed), other_min),
               std::memory_order_relaxed);
    max_.store(std::max(max_.load(std::memory_order_relaxed), other_max),
               std::memory_order_relaxed);
    if (const Histogram* oh = where.map(other.hist_.load(std::memory_order_acquire))) {
      Histogram* h = hist_.load(std::memory_order_relaxed);
      if (h == nullptr) {
        h = new Histogram();
        hist_.store(h, std::memory_order_release);
      }
      h->merge_from(*oh, where);
    }
  }

  std::uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
  const Histogram* histogram() const noexcept { return hist_.load(std::memory_order_acquire); }
  std::uint64_t total_ns() const noexcept { return total_.load(std::memory_order_relaxed); }
  std::uint64_t min_ns() const noexcept {
    return count() ? min_.load(std::memory_order_relaxed) : 0;
  }
  std::uint64_t max_ns() const noexcept { return max_.load(std::memory_order_relaxed); }
  double mean_ns() const noexcept {
    const std::uint64_t n = count();
    return n ? static_cast<double>(total_ns()) / static_cast<double>(n) : 0.0;
  }
  /// The q-quantile, clamped to the exact [min, max] (so p0 and p100 are exact).
  double quantile_ns(double q) const noexcept {
    const Histogram* h = hist_.load(std::memory_order_acquire);
    if (h == nullptr || count() == 0) return 0.0;
    if (q <= 0.0) return static_cast<double>(min_ns());
    if (q >= 1.0) return static_cast<double>(max_ns());
    const double lo = static_cast<double>(min_ns());
    const double hi = static_cast<double>(max_ns());
    if (lo > hi) return h->quantile(q);  // a racy read of a live one: std::clamp would be UB
    return std::clamp(h->quantile(q), lo, hi);
  }

 private:
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> total_{0};
  std::atomic<std::uint64_t> min_{std::numeric_limits<std::uint64_t>::max()};
  std::atomic<std::uint64_t> max_{0};
  std::atomic<Histogram*> hist_{nullptr};
  bool placed_ = false;  // hist_ is place()'s storage
};

}  // namespace detail
LAPTIME_END_NAMESPACE
