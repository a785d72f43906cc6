// laptime internals: measurements made in worker processes, in the parent's report (SPEC §1,
// "Worker processes"; docs/workers.md).
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
// Implementation part.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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
#include "laptime/detail/env.hpp"
#include "laptime/detail/histogram.hpp"
#include "laptime/detail/procfs.hpp"
#include "laptime/detail/stopwatch_hot.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

inline constexpr const char* kWorkerShareEnv = "LAPTIME_WORKER_SHARE";
inline constexpr std::uint64_t kShareMagic = 0x31656d69'7470616cULL;  // "laptime1"
inline constexpr std::uint32_t kShareRegions = 64;
inline constexpr std::size_t kShareRegionBytes = std::size_t{8} << 20;  // sparse: pages on use
inline constexpr std::uint32_t kShareChunks = 512;                      // slot chunks per region

/// The shared file's first page.
struct alignas(kCacheLine) ShareHeader {
  std::atomic<std::uint64_t> magic{0};  // set last (release): the rest is written before
  std::uint64_t layout = 0;             // a child of another build (other sizes) does not attach
  std::int64_t owner_pid = 0;
  std::uint64_t nonce = 0;
  std::atomic<std::uint32_t> claimed{0};    // regions owned by a child now
  std::atomic<std::uint32_t> unclaimed{0};  // children that found no free region
  alignas(kCacheLine) IterationGate gate;   // the parent's: read by every worker's hot path
};

/// One child's region: this header, then what the child allocates (slot chunks, histograms,
/// name texts), at offsets from the region's start.
struct ShareRegion {
  // kClaiming: a child is setting the region up (pid, start time, fields of a reused region);
  // the parent reads and reaps only kOwned regions, published once whole.
  static constexpr std::uint32_t kFree = 0, kOwned = 1, kClaiming = 2;
  std::atomic<std::uint32_t> state{kFree};
  std::atomic<std::int64_t> pid{0};
  std::uint64_t start_time = 0;  // /proc/<pid>/stat field 22: tells the child from a later pid
  std::uint64_t base = 0;        // the region's address in the child
  char label[48] = {};
  std::atomic<std::uint64_t> used{0};  // bytes allocated, from the region's start
  std::atomic<std::uint64_t> lost{0};  // slots that found no room (not reported)
  std::atomic<std::uint32_t> chunk_count{0};
  struct ChunkRef {
    std::uint32_t offset;
    std::uint32_t first_id;
  } chunks[kShareChunks] = {};
  struct NameRef {
    std::atomic<std::uint32_t> offset{0};  // 0: not published yet
    std::uint32_t size = 0;
  } names[LAPTIME_MAX_NAMES];
};

static_assert(sizeof(ShareRegion) < kShareRegionBytes / 4, "the region's header leaves room");

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
  std::unordered_map<std::string, std::unique_ptr<IntervalStats>> names;
};

/// /proc/<pid>/stat's state and start time; false when the process is gone or a zombie.
inline bool process_alive(long pid, std::uint64_t* start_time) noexcept {
  char path[48];
  std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return false;
  const auto st = procfs::parse_process_stat(std::string_view(buf, static_cast<std::size_t>(n)));
  if (!st || st->state == 'Z' || st->state == 'X' || st->state == 'x') return false;
  if (start_time != nullptr) *start_time = st->start_time;
  return true;
}

inline std::uint64_t share_layout() noexcept {
  std::uint64_t h = 1469598103934665603ULL;
  for (const std::uint64_t v :
       {std::uint64_t{sizeof(ShareHeader)}, std::uint64_t{sizeof(ShareRegion)},
        std::uint64_t{sizeof(Slot)}, std::uint64_t{sizeof(SlotChunk)},
        std::uint64_t{sizeof(IntervalStats)}, std::uint64_t{IntervalStats::kStorageBytes},
        std::uint64_t{kShareRegions}, std::uint64_t{kShareRegionBytes},
        std::uint64_t{LAPTIME_MAX_NAMES}}) {
    h = (h ^ v) * 1099511628211ULL;
  }
  return h;
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
  /// (no memfd: the report then shows no worker figures). LAPTIME_WORKERS is read by the caller.
  bool create(const IterationGate& current) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (header_ != nullptr) return parent_;
    const int fd = static_cast<int>(::syscall(SYS_memfd_create, "laptime-workers", 1u /*CLOEXEC*/));
    if (fd < 0) return false;
    const std::size_t bytes = total_bytes();
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      ::close(fd);
      return false;
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return false;
    }
    auto* h = new (p) ShareHeader();
    h->layout = share_layout();
    h->owner_pid = ::getpid();
    h->nonce =
        static_cast<std::uint64_t>(now_ns()) ^ (static_cast<std::uint64_t>(::getpid()) << 40);
    h->gate.finished.store(current.finished.load());
    h->gate.warmup.store(current.warmup.load());
    h->gate.generation.store(current.generation.load());
    for (std::uint32_t i = 0; i < kShareRegions; ++i) new (region_at(p, i)) ShareRegion();
    h->magic.store(kShareMagic, std::memory_order_release);
    char value[96];
    std::snprintf(value, sizeof value, "%ld:%d:%llu", static_cast<long>(::getpid()), fd,
                  static_cast<unsigned long long>(h->nonce));
    ::setenv(kWorkerShareEnv, value, 1);
    fd_ = fd;
    header_ = h;
    parent_ = true;
    return true;
  }

  /// A process that did not inherit the mapping (spawn, forkserver, exec): attaches to the file
  /// the environment names, if it is another process's and of this build. Once per process.
  bool attach_from_env() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (header_ != nullptr) return !parent_;
    const auto v = env_value(kWorkerShareEnv);
    if (!v) return false;
    long pid = 0;
    int fd = -1;
    unsigned long long nonce = 0;
    const std::string text(*v);
    if (std::sscanf(text.c_str(), "%ld:%d:%llu", &pid, &fd, &nonce) != 3) return false;
    if (pid == static_cast<long>(::getpid())) return false;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/fd/%d", pid, fd);
    const int mine = ::open(path, O_RDWR | O_CLOEXEC);
    if (mine < 0) return false;
    const std::size_t bytes = total_bytes();
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, mine, 0);
    ::close(mine);
    if (p == MAP_FAILED) return false;
    auto* h = static_cast<ShareHeader*>(p);
    if (h->magic.load(std::memory_order_acquire) != kShareMagic || h->layout != share_layout() ||
        h->owner_pid != pid || h->nonce != nonce) {
      ::munmap(p, bytes);
      return false;
    }
    header_ = h;
    parent_ = false;
    return true;
  }

  /// In a forked child: the parent's (or its parent's) region is not this process's; the next
  /// allocation claims one. The mapping stays (same address).
  void after_fork_in_child() noexcept {
    new (&mutex_) std::mutex();
    mine_ = nullptr;
    claim_failed_ = false;
    if (header_ != nullptr) parent_ = false;
    // Another thread of the parent may have been changing these at the fork: started over, not
    // cleared (the copies are leaked).
    new (&pending_label_) std::string();
    new (&folded_) std::vector<std::unique_ptr<FoldedWorker>>();
  }

  /// A worker that calls enable() itself is a program of its own (a training script started by
  /// another): it leaves the share if it has measured nothing into it yet. Not a process that
  /// Python's multiprocessing started (spawn, forkserver: "multiprocessing" in its command line),
  /// which re-imports the main module, and with it a top-level enable() or configure_from_env().
  bool leave_if_unused() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (header_ == nullptr || parent_ || mine_ != nullptr) return false;
    if (started_by_multiprocessing()) return false;
    ::munmap(header_, total_bytes());
    header_ = nullptr;
    return true;
  }

  // ---- the worker's side (cold: a thread's first chunk, a name's first use) ----

  /// `bytes` (a multiple of 64 at most, zeroed) from the worker's region, claimed on first use;
  /// nullptr when there is no region or no room (the caller then uses its private heap).
  void* allocate(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocate_locked(bytes);
  }

  /// Lists a chunk of slots (allocated from the region) for the parent.
  void publish_chunk(const void* chunk, std::uint32_t first_id) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (mine_ == nullptr) return;
    const std::uint32_t n = mine_->chunk_count.load(std::memory_order_relaxed);
    if (n >= kShareChunks) return;
    mine_->chunks[n] = {offset_of(chunk), first_id};
    mine_->chunk_count.store(n + 1, std::memory_order_release);
  }

  /// Publishes the text of name `id` (this process's id) once.
  void publish_name(std::uint32_t id, std::string_view text) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (mine_ == nullptr || id >= LAPTIME_MAX_NAMES) return;
    if (mine_->names[id].offset.load(std::memory_order_relaxed) != 0) return;
    void* p = allocate_locked((text.size() + 63) / 64 * 64 + 64);
    if (p == nullptr) return;
    std::memcpy(p, text.data(), text.size());
    mine_->names[id].size = static_cast<std::uint32_t>(text.size());
    mine_->names[id].offset.store(offset_of(p), std::memory_order_release);
  }

  /// Whether `p` lies in this worker's region (its slots come from there).
  bool owns(const void* p) const noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    const auto r = reinterpret_cast<std::uintptr_t>(mine_);
    return mine_ != nullptr && a >= r && a < r + kShareRegionBytes;
  }

  void set_label(std::string_view label) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_label_ = std::string(label.substr(0, sizeof(ShareRegion::label) - 1));
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

  /// Calls f(name, figures) for what each worker measured in generation `gen`, live or finished
  /// (once per worker thread and name: the caller merges by worker); returns how many children
  /// found no free region.
  template <class F>
  std::uint32_t for_each_worker_name(std::uint32_t gen, F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (header_ == nullptr || !parent_) return 0;
    reap_locked();
    for (const auto& w : folded_) {
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
      read_region(*r, gen,
                  [&](std::string_view name, const IntervalStats& st, const Foreign& where) {
                    WorkerFigures fig;
                    fig.pid = static_cast<long>(r->pid.load(std::memory_order_relaxed));
                    fig.label = std::string_view(r->label, ::strnlen(r->label, sizeof r->label));
                    fig.alive = true;
                    fig.stats = &st;
                    fig.where = where;
                    f(name, fig);
                  });
    }
    return header_->unclaimed.load(std::memory_order_relaxed);
  }

  /// reset(): what finished workers measured is dropped (live ones drop theirs lazily, through
  /// the generation).
  void drop_folded() {
    std::lock_guard<std::mutex> lock(mutex_);
    folded_.clear();
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
  static constexpr std::size_t header_bytes() noexcept {
    return (sizeof(ShareHeader) + 4095) / 4096 * 4096;
  }
  static constexpr std::size_t total_bytes() noexcept {
    return header_bytes() + std::size_t{kShareRegions} * kShareRegionBytes;
  }
  static void* region_at(void* base, std::uint32_t i) noexcept {
    return static_cast<unsigned char*>(base) + header_bytes() + std::size_t{i} * kShareRegionBytes;
  }
  ShareRegion* region(std::uint32_t i) const noexcept {
    return static_cast<ShareRegion*>(region_at(header_, i));
  }
  std::uint32_t offset_of(const void* p) const noexcept {
    return static_cast<std::uint32_t>(static_cast<const unsigned char*>(p) -
                                      reinterpret_cast<const unsigned char*>(mine_));
  }

  void write_label() noexcept {
    std::memset(mine_->label, 0, sizeof mine_->label);
    std::memcpy(mine_->label, pending_label_.data(), pending_label_.size());
  }

  bool claim_locked() {
    if (mine_ != nullptr) return true;
    if (header_ == nullptr || parent_ || claim_failed_) return false;
    const long me = static_cast<long>(::getpid());
    std::uint64_t start_time = 0;
    (void)process_alive(me, &start_time);
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
      r->lost.store(0, std::memory_order_relaxed);
      r->chunk_count.store(0, std::memory_order_relaxed);
      for (auto& n : r->names) n.offset.store(0, std::memory_order_relaxed);
      mine_ = r;
      if (pending_label_.empty()) pending_label_ = "pid " + std::to_string(me);
      write_label();
      // Pages of an earlier worker are zeroed again on allocation (allocate_locked).
      header_->claimed.fetch_add(1, std::memory_order_relaxed);
      r->state.store(ShareRegion::kOwned, std::memory_order_release);  // whole: the parent reads
      return true;
    }
    claim_failed_ = true;
    header_->unclaimed.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  void* allocate_locked(std::size_t bytes) {
    if (!claim_locked()) return nullptr;
    bytes = (bytes + 63) / 64 * 64;
    const std::uint64_t at = mine_->used.load(std::memory_order_relaxed);
    if (at + bytes > kShareRegionBytes) {
      mine_->lost.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    mine_->used.store(at + bytes, std::memory_order_relaxed);
    void* p = reinterpret_cast<unsigned char*>(mine_) + at;
    std::memset(p, 0, bytes);  // a reused region holds an earlier worker's bytes
    return p;
  }

  // f(name, stats) for each (thread, name) slot of the region with figures of generation `gen`.
  template <class F>
  void read_region(ShareRegion& r, std::uint32_t gen, F&& f) const {
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
      const long pid = static_cast<long>(r->pid.load(std::memory_order_relaxed));
      std::uint64_t start = 0;
      if (process_alive(pid, &start) && start == r->start_time) continue;
      auto w = std::make_unique<FoldedWorker>();
      w->pid = pid;
      w->label = r->label;
      w->generation = gen;
      read_region(*r, gen,
                  [&](std::string_view name, const IntervalStats& st, const Foreign& where) {
                    auto& slot = w->names[std::string(name)];
                    if (!slot) slot = std::make_unique<IntervalStats>();
                    slot->merge_from(st, where);
                  });
      if (!w->names.empty()) folded_.push_back(std::move(w));
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
  std::string pending_label_;
  std::vector<std::unique_ptr<FoldedWorker>> folded_;
};

}  // namespace detail
LAPTIME_END_NAMESPACE
