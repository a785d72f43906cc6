// laptime internals: measurements made in worker processes, in the parent's report
// (docs/workers.md).
//
// A data loader's work happens in child processes: fork()ed (DataLoader's default on Linux),
// spawned or forkserver'ed, and their children. Each would keep its own copy of the Stopwatch, and
// the parent's report would never see it. So the parent, when it enables the Stopwatch, maps one
// shared memory file (memfd) cut into regions; a child claims one region once (at its first
// measurement) and keeps its statistics there: the slots of its threads and their histograms are
// allocated from the region instead of the heap, so the child's start/end pair is the parent's,
// lock-free, writing only the child's own memory. The parent reads the regions when it makes a
// report; it never writes them while their child lives.
//
//   - fork: the child inherits the mapping (same address); the fork handler forgets the parent's
//     slots in the child, and the child's next measurement claims a region.
//   - spawn / forkserver / exec: the child finds the parent's file through the environment
//     (LAPTIME_WORKER_SHARE="<pid>:<fd>:<nonce>", set at enable) and opens /proc/<pid>/fd/<fd>.
//     Its pointers are of its own address space; the parent translates those that fall in the
//     child's view of the region (histogram.hpp, Foreign).
//   - warm-up and reset(): the hot path reads iterations, warm-up and the statistics generation
//     through StopwatchCore::gate, which points into the shared header once the file exists, so
//     a worker's intervals count exactly when the parent's would.
//   - a worker that ends (or is killed) keeps what it completed: the parent folds a dead worker's
//     region into its own memory and frees the region for the next worker (DataLoader forks new
//     workers every epoch unless persistent_workers).
// The file (its layout, its making, a worker's checked attach) is impl/worker_share_file.hpp's.
// Implementation part.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/env_vars.hpp"
#include "laptime/detail/histogram.hpp"
#include "laptime/detail/leak_check.hpp"
#include "laptime/detail/stopwatch_hot.hpp"
#include "laptime/impl/worker_share_file.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// What a worker measured for one name on one of its threads, for the parent's report: the
/// statistics where they lie (a live worker's region, read in place through `where`, or the
/// parent's folded copy), not copied.
struct WorkerFigures {
  long pid = 0;
  std::string_view label;
  bool alive = false;
  const IntervalStats* stats = nullptr;
  Foreign where;
};

/// A finished worker's figures, folded into the parent's memory (its region is reused).
struct FoldedWorker {
  long pid = 0;
  std::string label;
  std::uint32_t generation = 0;
  std::uint64_t pairs_dropped = 0;
  // By name, in the worker's first-seen order (its ids' order): the report lists names only
  // workers measured in that order.
  std::vector<std::pair<std::string, std::unique_ptr<IntervalStats>>> names;
};

/// The longest start of `text` of at most `max` bytes that does not end inside a UTF-8 character:
/// where the first byte left out continues a character (10xxxxxx), that character is left out
/// whole. Text that is not UTF-8 there (more than three such bytes in a row) is cut at `max`.
inline std::string_view utf8_prefix(std::string_view text, std::size_t max) noexcept {
  if (text.size() <= max) return text;
  auto continues = [&](std::size_t i) {
    return (static_cast<unsigned char>(text[i]) & 0xc0) == 0x80;
  };
  std::size_t n = max;
  for (int back = 0; back < 3 && n > 0 && continues(n); ++back) --n;
  return text.substr(0, continues(n) ? max : n);
}

/// The process's side of the shared file: the parent's (create) or a worker's (inherited or
/// attached). Owned by StopwatchState; its mutex guards everything but the child's own region,
/// which only the child writes (allocation under the mutex, slots by their threads).
class WorkerShare {
 public:
  WorkerShare() = default;
  WorkerShare(const WorkerShare&) = delete;
  WorkerShare& operator=(const WorkerShare&) = delete;

  bool active() const noexcept { return header_ != nullptr; }
  bool is_parent() const noexcept { return header_ != nullptr && parent_; }
  bool is_worker() const noexcept { return header_ != nullptr && !parent_; }
  ShareHeader* header() const noexcept { return header_; }

  /// The parent, at enable: makes the file and publishes it to children. false when impossible
  /// (no sealed memfd: the report then shows no worker figures). LAPTIME_WORKERS is read by the
  /// caller.
  bool create(const IterationGate& current) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (header_ != nullptr) return parent_;
    int fd = -1;
    ShareHeader* h = create_share_file(current, &fd);
    if (h == nullptr) return false;
    char value[96];
    std::snprintf(value, sizeof value, "%ld:%d:%llu", static_cast<long>(::getpid()), fd,
                  static_cast<unsigned long long>(h->nonce));
    ::setenv(env_var(Env::worker_share).name, value, 1);
    fd_ = fd;
    header_ = h;
    parent_ = true;
    return true;
  }

  /// A process that did not inherit the mapping (spawn, forkserver, exec): attaches to the file
  /// the environment names, if it is another process's live share of this build (checked before
  /// it is mapped; anything else is warned about once). Once per process.
  bool attach_from_env() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (header_ != nullptr) return !parent_;
    const auto v = env_text<Env::worker_share>();
    if (!v) return false;
    header_ = attach_share_file(*v);
    parent_ = false;
    return header_ != nullptr;
  }

  /// In a forked child: the parent's (or its parent's) region is not this process's; the next
  /// allocation claims one. The mapping stays (same address).
  void after_fork_in_child() noexcept {
    new (&mutex_) std::mutex();
    mine_ = nullptr;
    claim_failed_ = false;
    if (header_ != nullptr) parent_ = false;
    // Another thread of the parent may have been changing these at the fork: started over, not
    // cleared (the copies are forgotten, detail/leak_check.hpp).
    forgotten_on_purpose(pending_label_.data());
    forgotten_on_purpose(folded_.data());
    new (&pending_label_) std::string();
    new (&folded_) std::vector<std::unique_ptr<FoldedWorker>>();
  }

  /// A worker that calls enable() itself is a program of its own (a training script started by
  /// another): it leaves the share if it has measured nothing into it yet. Not a process that
  /// Python's multiprocessing started (spawn, forkserver: "multiprocessing" in its command line),
  /// which re-imports the main module, and with it a top-level enable() or configure_from_env();
  /// unless the caller knows better (`own_program`: the binding saw the call come from no import,
  /// as in a torch.multiprocessing.spawn rank).
  bool leave_if_unused(bool own_program = false) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (header_ == nullptr || parent_ || mine_ != nullptr) return false;
    if (!own_program && started_by_multiprocessing()) return false;
    ::munmap(header_, share_total_bytes());
    header_ = nullptr;
    return true;
  }

  // ---- the worker's side (cold: a thread's first chunk, a name's first use) ----

  /// A chunk of slots for ids from `first_id` in the worker's region (claimed on first use),
  /// zeroed and listed for the parent; nullptr when there is no region, no room or no room in the
  /// list (the caller then uses its private heap, and admit_pair counts the pairs it holds).
  void* allocate_chunk(std::size_t first_id) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!claim_locked()) return nullptr;
    const std::uint32_t n = mine_->chunk_count.load(std::memory_order_relaxed);
    if (n >= kShareChunks || !has_room(round_up(sizeof(SlotChunk)))) return nullptr;
    void* p = bump_locked(sizeof(SlotChunk));
    mine_->chunks[n] = {offset_of(p), static_cast<std::uint32_t>(first_id)};
    mine_->chunk_count.store(n + 1, std::memory_order_release);  // zeroed slots: none counted yet
    return p;
  }

  /// A worker's (thread, name) pair at its first use, its slot `s` in the worker's region:
  /// places its histogram there and publishes the name's text, when the region has room for
  /// both and for every block the histogram may take; otherwise the pair is dropped (its figures
  /// stay in this process) and counted, for the parent's report. A slot outside the region
  /// (its chunk found no room) is such a pair too.
  void admit_pair(Slot& s, std::string_view text) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (mine_ == nullptr || s.id >= LAPTIME_MAX_NAMES) return;  // no region: workers_unrecorded
    const bool named = mine_->names[s.id].offset.load(std::memory_order_relaxed) != 0;
    const std::size_t need = round_up(IntervalStats::kStorageBytes) +
                             (named ? 0 : round_up(text.size()) + 64) + Histogram::kStorageBytes;
    if (!owns(&s) || !has_room(need)) {
      mine_->pairs_dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (!named) {
      void* p = bump_locked(text.size() + 64);
      std::memcpy(p, text.data(), text.size());
      mine_->names[s.id].size = static_cast<std::uint32_t>(text.size());
      mine_->names[s.id].offset.store(offset_of(p), std::memory_order_release);
    }
    void* stats = bump_locked(IntervalStats::kStorageBytes);
    mine_->reserved.fetch_add(Histogram::kStorageBytes, std::memory_order_relaxed);
    s.stats.place(stats, &blocks_);
  }

  /// Bytes of this worker's region in use (its header, chunks, histograms, blocks, names).
  std::uint64_t region_bytes_used() const noexcept {
    return mine_ != nullptr ? mine_->used.load(std::memory_order_relaxed) : 0;
  }

  /// Whether `p` lies in this worker's region (its slots come from there).
  bool owns(const void* p) const noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    const auto r = reinterpret_cast<std::uintptr_t>(mine_);
    return mine_ != nullptr && a >= r && a < r + kShareRegionBytes;
  }

  void set_label(std::string_view label) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_label_ = std::string(utf8_prefix(label, sizeof(ShareRegion::label) - 1));
    if (mine_ != nullptr) write_label();
  }

  // ---- the parent's side ----

  /// Folds the regions of workers that ended into the parent's memory and frees them. Called by
  /// reports, and by finish_iter when regions run short.
  void reap() {
    std::lock_guard<std::mutex> lock(mutex_);
    reap_locked();
  }
  bool regions_short() const noexcept {
    return header_ != nullptr &&
           header_->claimed.load(std::memory_order_relaxed) > kShareRegions * 3 / 4;
  }

  /// What the report counts besides the figures: children that found no free region, and
  /// (thread, name) pairs of workers that found no room in theirs.
  struct Missing {
    std::uint32_t unclaimed = 0;
    std::uint64_t pairs_dropped = 0;
  };

  /// Calls f(name, figures) for what each worker measured in generation `gen`, live or finished
  /// (once per worker thread and name: the caller merges by worker); returns what is missing.
  template <class Fn>
  Missing for_each_worker_name(std::uint32_t gen, Fn&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    Missing missing;
    if (header_ == nullptr || !parent_) return missing;
    reap_locked();
    for (const auto& w : folded_) {
      missing.pairs_dropped += w->pairs_dropped;
      if (w->generation != gen) continue;
      for (const auto& [name, st] : w->names) {
        WorkerFigures fig;
        fig.pid = w->pid;
        fig.label = w->label;
        fig.stats = st.get();
        f(std::string_view(name), fig);
      }
    }
    for (std::uint32_t i = 0; i < kShareRegions; ++i) {
      ShareRegion* r = region(i);
      if (r->state.load(std::memory_order_acquire) != ShareRegion::kOwned) continue;
      missing.pairs_dropped += r->pairs_dropped.load(std::memory_order_relaxed);
      read_region(*r, gen,
                  [&](std::string_view name, const IntervalStats& st, const Foreign& where) {
                    WorkerFigures fig;
                    fig.pid = long{r->pid.load(std::memory_order_relaxed)};
                    fig.label = std::string_view(r->label, r->label_size);
                    fig.alive = true;
                    fig.stats = &st;
                    fig.where = where;
                    f(name, fig);
                  });
    }
    missing.unclaimed = header_->unclaimed.load(std::memory_order_relaxed);
    if (missing.pairs_dropped > 0) {
      worker_share_warn("workers-pairs-dropped",
                        "worker processes had more (thread, name) pairs than their region of the "
                        "shared file holds: the report counts those missing (docs/workers.md)");
    }
    return missing;
  }

  /// reset(): what finished workers measured is dropped (live ones drop theirs lazily, through
  /// the generation).
  void drop_folded() {
    std::lock_guard<std::mutex> lock(mutex_);
    folded_.clear();
    if (header_ != nullptr) header_->most_live.store(0, std::memory_order_relaxed);
  }

  /// The most worker processes that measured at one time (since the last reset()); 0: none.
  int most_live() const noexcept {
    return header_ == nullptr
               ? 0
               : static_cast<int>(header_->most_live.load(std::memory_order_relaxed));
  }

 private:
  static bool started_by_multiprocessing() noexcept {
    const int fd = ::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    return n > 0 && std::string_view(buf, static_cast<std::size_t>(n)).find("multiprocessing") !=
                        std::string_view::npos;
  }
  static constexpr std::size_t round_up(std::size_t bytes) noexcept {
    return (bytes + 63) / 64 * 64;
  }
  ShareRegion* region(std::uint32_t i) const noexcept { return share_region_at(header_, i); }
  std::uint32_t offset_of(const void* p) const noexcept {
    return static_cast<std::uint32_t>(static_cast<const unsigned char*>(p) -
                                      reinterpret_cast<const unsigned char*>(mine_));
  }

  void write_label() noexcept {
    std::memset(mine_->label, 0, sizeof mine_->label);
    std::memcpy(mine_->label, pending_label_.data(), pending_label_.size());
    mine_->label_size = static_cast<std::uint8_t>(pending_label_.size());
  }

  bool claim_locked() {
    if (mine_ != nullptr) return true;
    if (header_ == nullptr || parent_ || claim_failed_) return false;
    const long me = static_cast<long>(::getpid());
    std::uint64_t start_time = 0;
    (void)process_liveness(me, &start_time);  // stays 0 where /proc cannot tell
    for (std::uint32_t i = 0; i < kShareRegions; ++i) {
      ShareRegion* r = region(i);
      std::uint32_t expected = ShareRegion::kFree;
      if (!r->state.compare_exchange_strong(expected, ShareRegion::kClaiming,
                                            std::memory_order_acq_rel)) {
        continue;
      }
      // A freed region may hold an earlier worker's data: start it over (only we write it now).
      r->pid.store(me, std::memory_order_relaxed);
      r->start_time = start_time;
      r->base = reinterpret_cast<std::uint64_t>(r);
      r->used.store((sizeof(ShareRegion) + 63) / 64 * 64, std::memory_order_relaxed);
      r->reserved.store(0, std::memory_order_relaxed);
      r->pairs_dropped.store(0, std::memory_order_relaxed);
      r->chunk_count.store(0, std::memory_order_relaxed);
      for (auto& n : r->names) n.offset.store(0, std::memory_order_relaxed);
      mine_ = r;
      if (pending_label_.empty()) pending_label_ = "pid " + std::to_string(me);
      write_label();
      // Pages of an earlier worker are zeroed again on allocation (bump_locked, take_block).
      header_->claimed.fetch_add(1, std::memory_order_relaxed);
      r->state.store(ShareRegion::kOwned, std::memory_order_release);  // whole: the parent reads
      note_live_regions();
      return true;
    }
    claim_failed_ = true;
    header_->unclaimed.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  // Whether the child that owns `r` runs still: its pid alive with the start time it claimed
  // with (not a later process that got the pid). Where /proc cannot tell (detail/pid_liveness.hpp)
  // a process that exists is taken as alive: folding a live worker would lose its measurements.
  static bool owner_alive(const ShareRegion& r) noexcept {
    std::uint64_t start = 0;
    switch (process_liveness(long{r.pid.load(std::memory_order_relaxed)}, &start)) {
      case Liveness::Gone:
        return false;
      case Liveness::AliveStartUnknown:
        return true;
      case Liveness::Alive:
        return r.start_time == 0 || start == r.start_time;
    }
    return false;
  }

  // Raises the header's most_live to the regions whose child is alive now (a region of a child
  // that ended and was not reaped yet is not counted). Once per worker process.
  void note_live_regions() noexcept {
    std::uint32_t live = 0;
    for (std::uint32_t i = 0; i < kShareRegions; ++i) {
      const ShareRegion* r = region(i);
      if (r->state.load(std::memory_order_acquire) == ShareRegion::kOwned && owner_alive(*r)) {
        ++live;
      }
    }
    std::uint32_t seen = header_->most_live.load(std::memory_order_relaxed);
    while (live > seen &&
           !header_->most_live.compare_exchange_weak(seen, live, std::memory_order_relaxed)) {
    }
  }

  // Whether `bytes` more fit beside what is allocated and what is promised to blocks. `reserved`
  // first: a thread taking a block adds to `used` before it takes from `reserved`, so the sum
  // read here is never below the truth.
  bool has_room(std::size_t bytes) const noexcept {
    const std::uint64_t promised = mine_->reserved.load(std::memory_order_acquire);
    return mine_->used.load(std::memory_order_acquire) + promised + bytes <= kShareRegionBytes;
  }

  // `bytes` (rounded up to 64), zeroed, where has_room said they fit.
  void* bump_locked(std::size_t bytes) noexcept {
    bytes = round_up(bytes);
    const std::uint64_t at = mine_->used.fetch_add(bytes, std::memory_order_acq_rel);
    void* p = reinterpret_cast<unsigned char*>(mine_) + at;
    std::memset(p, 0, bytes);  // a reused region holds an earlier worker's bytes
    return p;
  }

  // BlockSource::take for the histograms of this worker's pairs: a block promised at admit_pair,
  // taken by the pair's own thread in its add() (no lock: an atomic add).
  static void* take_block(void* context, std::size_t bytes) noexcept {
    ShareRegion* r = static_cast<WorkerShare*>(context)->mine_;
    if (r == nullptr) return nullptr;
    const std::uint64_t at = r->used.fetch_add(bytes, std::memory_order_acq_rel);
    r->reserved.fetch_sub(bytes, std::memory_order_acq_rel);
    if (at + bytes > kShareRegionBytes) return nullptr;  // never, while admit_pair reserves
    void* p = reinterpret_cast<unsigned char*>(r) + at;
    std::memset(p, 0, bytes);
    return p;
  }

  // f(name, stats) for each (thread, name) slot of the region with figures of generation `gen`.
  template <class Fn>
  void read_region(ShareRegion& r, std::uint32_t gen, Fn&& f) const {
    auto* base = reinterpret_cast<unsigned char*>(&r);
    Foreign where;
    where.lo = r.base;
    where.hi = r.base + kShareRegionBytes;
    where.shift = static_cast<std::ptrdiff_t>(reinterpret_cast<std::uintptr_t>(base) - r.base);
    const std::uint32_t n = std::min(r.chunk_count.load(std::memory_order_acquire), kShareChunks);
    const std::uint64_t used = r.used.load(std::memory_order_relaxed);
    for (std::uint32_t c = 0; c < n; ++c) {
      const ShareRegion::ChunkRef ref = r.chunks[c];
      if (ref.offset + sizeof(SlotChunk) > used) continue;
      const auto* slots = reinterpret_cast<const SlotChunk*>(base + ref.offset)->slots;
      for (std::uint32_t i = 0; i < kChunk; ++i) {
        const Slot& s = slots[i];
        const std::uint32_t id = ref.first_id + i;
        if (id >= LAPTIME_MAX_NAMES || s.stats.count() == 0) continue;
        // A dropped pair's histogram is in the worker's own memory: counted, not reported.
        if (where.map(s.stats.histogram()) == nullptr) continue;
        if (s.generation.load(std::memory_order_acquire) != gen) continue;
        const std::uint32_t off = r.names[id].offset.load(std::memory_order_acquire);
        const std::uint32_t size = r.names[id].size;
        if (off == 0 || off + size > used) continue;
        f(std::string_view(reinterpret_cast<const char*>(base + off), size), s.stats, where);
      }
    }
  }

  void reap_locked() {
    if (header_ == nullptr || !parent_) return;
    const std::uint32_t gen = header_->gate.generation.load(std::memory_order_relaxed);
    for (std::uint32_t i = 0; i < kShareRegions; ++i) {
      ShareRegion* r = region(i);
      if (r->state.load(std::memory_order_acquire) != ShareRegion::kOwned) continue;
      if (owner_alive(*r)) continue;
      auto w = std::make_unique<FoldedWorker>();
      w->pid = long{r->pid.load(std::memory_order_relaxed)};
      w->label.assign(r->label, r->label_size);
      w->generation = gen;
      w->pairs_dropped = r->pairs_dropped.load(std::memory_order_relaxed);
      // Name (its text in the region, there until the region is freed below) -> its place.
      std::unordered_map<std::string_view, std::size_t> index;
      read_region(*r, gen,
                  [&](std::string_view name, const IntervalStats& st, const Foreign& where) {
                    const auto [at, added] = index.emplace(name, w->names.size());
                    if (added) w->names.emplace_back(name, std::make_unique<IntervalStats>());
                    w->names[at->second].second->merge_from(st, where);
                  });
      if (!w->names.empty() || w->pairs_dropped != 0) folded_.push_back(std::move(w));
      header_->claimed.fetch_sub(1, std::memory_order_relaxed);
      r->state.store(ShareRegion::kFree, std::memory_order_release);
    }
  }

  std::mutex mutex_;
  ShareHeader* header_ = nullptr;
  bool parent_ = false;
  int fd_ = -1;
  ShareRegion* mine_ = nullptr;
  bool claim_failed_ = false;
  BlockSource blocks_{&WorkerShare::take_block, this};
  std::string pending_label_;
  std::vector<std::unique_ptr<FoldedWorker>> folded_;
};

}  // namespace detail
LAPTIME_END_NAMESPACE
