// laptime internals: the worker share's file (docs/workers.md): its layout, its making by the
// parent, and a worker's checked attach to it. The regions' use (claiming, allocating, reading)
// is impl/worker_share.hpp's.
//
// Two ways a file could end a process that maps it with SIGBUS, and why neither can happen here:
//   - a worker shrinks it (ftruncate on the descriptor it inherits, a bug in user code): the
//     parent's hot path reads the iteration gate in the file's first page on every start_meas.
//     The file is a memfd sealed against shrinking (and growing) once sized: ftruncate fails.
//   - LAPTIME_WORKER_SHARE names a file that is not a live share (a variable left over from
//     another run: an empty or short regular file, /dev/zero, a pipe). Before mapping anything, a
//     worker checks the file's type, size and seals (stat, fcntl) and its header (pread): any
//     other file is ignored with one warning, and the process measures on its own.
// Implementation part.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/detail/descriptors.hpp"
#include "laptime/detail/env_vars.hpp"
#include "laptime/detail/histogram.hpp"
#include "laptime/detail/names.hpp"
#include "laptime/detail/pid_liveness.hpp"
#include "laptime/detail/stopwatch_hot.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

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
  // The most children measuring at one time, counted by each child as it claims its region
  // (live regions, its own included): loader workers that end with each epoch all the same.
  std::atomic<std::uint32_t> most_live{0};
  alignas(kCacheLine) IterationGate gate;  // the parent's: read by every worker's hot path
};

/// One child's region: this header, then what the child allocates (slot chunks, histograms and
/// their blocks, name texts), at offsets from the region's start.
struct ShareRegion {
  // kClaiming: a child is setting the region up (pid, start time, fields of a reused region);
  // the parent reads and reaps only kOwned regions, published once whole.
  static constexpr std::uint32_t kFree = 0, kOwned = 1, kClaiming = 2;
  std::atomic<std::uint32_t> state{kFree};
  std::atomic<std::int64_t> pid{0};
  std::uint64_t start_time = 0;  // /proc/<pid>/stat field 22: tells the child from a later pid
  std::uint64_t base = 0;        // the region's address in the child
  char label[48] = {};
  std::uint8_t label_size = 0;         // the label's bytes (a NUL byte among them is kept)
  std::atomic<std::uint64_t> used{0};  // bytes allocated, from the region's start
  // Bytes promised to the histograms' blocks not taken yet: a pair is admitted only with room
  // for all of its blocks, which its thread then takes without a lock.
  std::atomic<std::uint64_t> reserved{0};
  std::atomic<std::uint64_t> pairs_dropped{0};  // (thread, name) pairs that found no room
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

inline constexpr std::size_t share_header_bytes() noexcept {
  return (sizeof(ShareHeader) + 4095) / 4096 * 4096;
}
inline constexpr std::size_t share_total_bytes() noexcept {
  return share_header_bytes() + std::size_t{kShareRegions} * kShareRegionBytes;
}
inline ShareRegion* share_region_at(void* header, std::uint32_t i) noexcept {
  return reinterpret_cast<ShareRegion*>(static_cast<unsigned char*>(header) + share_header_bytes() +
                                        std::size_t{i} * kShareRegionBytes);
}

inline std::uint64_t share_layout() noexcept {
  std::uint64_t h = 1469598103934665603ULL;
  for (const std::uint64_t v :
       {std::uint64_t{sizeof(ShareHeader)}, std::uint64_t{sizeof(ShareRegion)},
        std::uint64_t{sizeof(Slot)}, std::uint64_t{sizeof(SlotChunk)},
        std::uint64_t{sizeof(IntervalStats)}, std::uint64_t{IntervalStats::kStorageBytes},
        std::uint64_t{Histogram::kStorageBytes}, std::uint64_t{kShareRegions},
        std::uint64_t{kShareRegionBytes}, std::uint64_t{LAPTIME_MAX_NAMES}}) {
    h = (h ^ v) * 1099511628211ULL;
  }
  return h;
}

/// One warning through laptime's warning table (defined with the Stopwatch's implementation, so
/// that this header needs no public one).
void worker_share_warn(std::string_view key, std::string_view message) noexcept;

/// The parent's new file, mapped, its header written and published; nullptr when impossible (no
/// memfd, no seals, no room: one warning says why, and the report has no worker figures). `*fd`
/// gets the descriptor.
inline ShareHeader* create_share_file(const IterationGate& current, int* fd_out) {
  constexpr unsigned kCloexec = 1u, kAllowSealing = 2u;  // MFD_CLOEXEC, MFD_ALLOW_SEALING
  const std::size_t bytes = share_total_bytes();
  const char* step = nullptr;  // the call that failed
  int fd = -1;
  void* p = MAP_FAILED;
  if (over_file_size_limit(bytes)) {  // ftruncate would raise SIGXFSZ, ending the process
    step = "the file size limit, ulimit -f";
    errno = EFBIG;
  } else if ((fd = above_std_streams(static_cast<int>(
                  ::syscall(SYS_memfd_create, "laptime-workers", kCloexec | kAllowSealing)))) < 0) {
    step = "memfd_create";
  } else if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    step = "ftruncate";
  } else if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    step = "sealing";
  } else if ((p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd,
                         0)) == MAP_FAILED) {
    step = "mmap";
  }
  if (step != nullptr) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    worker_share_warn("workers.share", std::string("workers: cannot make the region forked "
                                                   "worker processes measure into (") +
                                           step + ": " + std::strerror(error) + ", " +
                                           std::to_string(bytes >> 20) +
                                           " MiB): what a worker measures is not in this report");
    return nullptr;
  }
  auto* h = new (p) ShareHeader();
  h->layout = share_layout();
  h->owner_pid = ::getpid();
  h->nonce = static_cast<std::uint64_t>(now_ns()) ^ (static_cast<std::uint64_t>(::getpid()) << 40);
  h->gate.finished.store(current.finished.load());
  h->gate.warmup.store(current.warmup.load());
  h->gate.generation.store(current.generation.load());
  for (std::uint32_t i = 0; i < kShareRegions; ++i) new (share_region_at(p, i)) ShareRegion();
  h->magic.store(kShareMagic, std::memory_order_release);
  *fd_out = fd;
  return h;
}

/// Why the file open as `fd` is not the share named by (pid, nonce); empty when it is. Reads it
/// with fstat, fcntl and pread only: a file too short for the mapping never gets mapped.
inline std::string share_file_mismatch(int fd, long pid, std::uint64_t nonce) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::string("fstat: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (static_cast<std::uint64_t>(st.st_size) < share_total_bytes()) {
    return std::to_string(st.st_size) + " bytes, where a share has " +
           std::to_string(share_total_bytes());
  }
  // Only a file that cannot shrink is safe to map for good.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) return "not sealed against shrinking";
  struct {
    std::uint64_t magic, layout;
    std::int64_t owner_pid;
    std::uint64_t nonce;
  } head{};
  static_assert(offsetof(ShareHeader, nonce) + sizeof(std::uint64_t) == sizeof head);
  if (::pread(fd, &head, sizeof head, 0) != static_cast<ssize_t>(sizeof head)) {
    return "its header cannot be read";
  }
  if (head.magic != kShareMagic || head.layout != share_layout()) {
    return "not a share of this laptime build";
  }
  if (head.owner_pid != pid || head.nonce != nonce) return "another process's share";
  return {};
}

/// A worker's mapping of the share that `value` (LAPTIME_WORKER_SHARE) names, checked before it
/// is mapped; nullptr, with one warning, when it names no live share of another process.
inline ShareHeader* attach_share_file(std::string_view value) {
  long pid = 0;
  int fd = -1;
  unsigned long long nonce = 0;
  const std::string text(value);
  std::string why;
  if (std::sscanf(text.c_str(), "%ld:%d:%llu", &pid, &fd, &nonce) != 3) {
    why = "not <pid>:<fd>:<nonce>";
  } else if (pid == static_cast<long>(::getpid())) {
    return nullptr;  // this process's own (it made a share, then exec'd): nothing to attach to
  }
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/fd/%d", pid, fd);
  int mine = -1;
  if (why.empty()) {
    // Checked by path first, so that a device or a pipe is never opened.
    struct stat st {};
    if (::stat(path, &st) != 0) {
      why = std::string(path) + ": " + std::strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
      why = std::string(path) + " is not a regular file";
    } else if ((mine = above_std_streams(::open(path, O_RDWR | O_CLOEXEC))) < 0) {
      why = std::string(path) + ": " + std::strerror(errno);
    } else {
      why = share_file_mismatch(mine, pid, nonce);
    }
  }
  void* p = MAP_FAILED;
  if (why.empty()) {
    p = ::mmap(nullptr, share_total_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
               mine, 0);
    if (p == MAP_FAILED) why = std::string("mmap: ") + std::strerror(errno);
  }
  if (mine >= 0) ::close(mine);
  if (!why.empty()) {
    worker_share_warn("worker-share-stale",
                      std::string(env_var(Env::worker_share).name) + "='" +
                          escaped(value.substr(0, 96)) +
                          "' names no live worker share of this process tree (" + escaped(why) +
                          "): ignored, this process measures on its own");
    return nullptr;
  }
  return static_cast<ShareHeader*>(p);
}

}  // namespace detail
LAPTIME_END_NAMESPACE
