// laptime internals: one object per process, shared by every copy of the header.
//
// A header-only library gets one copy of its code, and of its function-local statics, in each
// shared object that includes it. Python loads every extension with RTLD_LOCAL, so the dynamic
// linker never unifies those statics (and GCC's STB_GNU_UNIQUE trick needs default visibility,
// which nanobind and pybind11 modules turn off). laptime therefore keeps a small table, the
// anchor, that every copy of the code in the process finds without sharing a symbol:
//
//   - the anchor is a private mapping of a memfd named "laptime-anchor-<layout>": every copy
//     finds it by its name in /proc/self/maps, so clearenv() or a stripped environment cannot
//     hide it; it is gone after exec() (a new image starts a new table) and a forked child gets
//     its own copy of it, whose addresses are valid in the child's copy of the memory;
//   - its address and a random nonce are also published in LAPTIME_SINGLETON_ANCHOR_<layout>
//     (setenv with overwrite = 0, atomic under glibc's lock): the tie-breaker when two copies
//     create an anchor at once, and the way to find it where /proc is not mounted;
//   - whatever is found is validated before use: the header (magic, layout, its own address,
//     the nonce) is read through process_vm_readv, which reports EFAULT for unmapped memory
//     instead of crashing. An address inherited through exec() with address-space randomisation
//     off (setarch -R, debuggers) may point at mapped memory of the new image, but not at an
//     anchor with the nonce the variable names: it is ignored and replaced.
//
// The table maps "<key>_<version>_<size>" to the address of the object. Objects are never
// destroyed: code running during static destruction (atexit handlers, thread exits) may still
// use them. docs/design.md describes this with its limits.
#pragma once

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "laptime/config.hpp"
#include "laptime/detail/descriptors.hpp"
#include "laptime/detail/env_vars.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::uint64_t kSingletonMagic = 0x6c617074696d6531ULL;  // "laptime1"
// Change with any change of ProcessAnchor, and the names below with it: the mapping's, and the
// variable's (LAPTIME_SINGLETON_ANCHOR_2, Env::singleton_anchor in detail/env_vars.hpp).
inline constexpr std::uint32_t kAnchorLayout = 2;
#define LAPTIME_ANCHOR_NAME "laptime-anchor-2"

/// What the table points at. T's constructor may be private with this as its friend.
template <class Type>
struct SingletonHolder {
  SingletonHolder() {}  // NOLINT: user-provided, so that `value` is default-initialised
  Type value;
};

/// The table every copy of laptime in the process shares.
struct ProcessAnchor {
  struct Header {
    std::uint64_t magic;
    std::uint64_t layout;
    std::uint64_t nonce;  ///< random, made by the copy that created the anchor
    std::uintptr_t self;  ///< the anchor's own address
  } header;
  std::atomic<long> lock;  ///< thread id of the holder, 0 when free
  std::atomic<std::uint32_t> count;
  static constexpr std::size_t kEntries = 62;
  struct Entry {
    char key[56];
    std::atomic<std::uintptr_t> address;
  } entries[kEntries];
};

/// Reads `size` bytes at `addr` without faulting: false where nothing is mapped.
inline bool read_guarded(std::uintptr_t addr, void* out, std::size_t size) noexcept {
  if (addr == 0) return false;
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(addr), size};
  const ssize_t n = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(size)) return true;
  if (n >= 0 || errno == EFAULT) return false;
  // Where process_vm_readv is refused (seccomp, old kernels), a pipe write also fails with
  // EFAULT instead of faulting.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  fds[0] = above_std_streams(fds[0]);  // another thread's stdout must not reach the pipe
  fds[1] = above_std_streams(fds[1]);
  const bool ok =
      fds[0] >= 0 && fds[1] >= 0 &&
      ::write(fds[1], reinterpret_cast<void*>(addr), size) == static_cast<ssize_t>(size) &&
      ::read(fds[0], out, size) == static_cast<ssize_t>(size);
  for (const int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  return ok;
}

/// Whether `addr` holds an anchor made in this address space (with `nonce`, unless 0).
inline bool anchor_is_valid(std::uintptr_t addr, std::uint64_t nonce) noexcept {
  if (addr == 0 || addr % alignof(ProcessAnchor) != 0) return false;
  ProcessAnchor::Header h{};
  if (!read_guarded(addr, &h, sizeof h)) return false;
  return h.magic == kSingletonMagic && h.layout == kAnchorLayout && h.self == addr &&
         (nonce == 0 || h.nonce == nonce);
}

/// "address:nonce" in hex -> both; {0, 0} for anything else.
inline void anchor_parse(const char* text, std::uintptr_t& addr, std::uint64_t& nonce) noexcept {
  addr = 0;
  nonce = 0;
  if (text == nullptr) return;
  char* end = nullptr;
  const unsigned long long a = std::strtoull(text, &end, 16);
  if (end == text || *end != ':') return;
  const char* n = end + 1;
  const unsigned long long b = std::strtoull(n, &end, 16);
  if (end == n || *end != '\0' || b == 0) return;
  addr = static_cast<std::uintptr_t>(a);
  nonce = b;
}

/// The anchor named in the environment, if valid.
inline ProcessAnchor* anchor_from_env() noexcept {
  std::uintptr_t addr;
  std::uint64_t nonce;
  const auto text = env_text<Env::singleton_anchor>();
  anchor_parse(text ? text->data() : nullptr, addr, nonce);
  return anchor_is_valid(addr, nonce) ? reinterpret_cast<ProcessAnchor*>(addr) : nullptr;
}

/// The anchor found by its mapping's name in /proc/self/maps (lowest address first), if any.
inline ProcessAnchor* anchor_from_maps() noexcept {
  std::FILE* f = std::fopen("/proc/self/maps", "re");
  if (f == nullptr) return nullptr;
  ProcessAnchor* found = nullptr;
  char line[512];
  static constexpr char kSuffix[] = "/memfd:" LAPTIME_ANCHOR_NAME " (deleted)\n";
  while (found == nullptr && std::fgets(line, sizeof line, f) != nullptr) {
    const std::size_t len = std::strlen(line);
    if (len < sizeof kSuffix - 1 || std::strcmp(line + len - (sizeof kSuffix - 1), kSuffix) != 0) {
      continue;
    }
    const std::uintptr_t addr = std::strtoull(line, nullptr, 16);
    if (anchor_is_valid(addr, 0)) found = reinterpret_cast<ProcessAnchor*>(addr);
  }
  std::fclose(f);
  return found;
}

/// Publishes `a` in the environment (overwriting a stale value when `overwrite`).
inline void anchor_publish(const ProcessAnchor* a, bool overwrite) noexcept {
  char text[48];
  std::snprintf(text, sizeof text, "%llx:%llx",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(a)),
                static_cast<unsigned long long>(a->header.nonce));
  ::setenv(env_var(Env::singleton_anchor).name, text, overwrite ? 1 : 0);
}

/// The anchor's mapping size, whole pages.
inline std::size_t anchor_size() noexcept {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (sizeof(ProcessAnchor) + page - 1) / page * page;
}

/// A new anchor, mapped where every copy finds it by name.
inline ProcessAnchor* anchor_create() noexcept {
  const std::size_t size = anchor_size();
  void* mem = MAP_FAILED;
  const int fd = static_cast<int>(::syscall(SYS_memfd_create, LAPTIME_ANCHOR_NAME, 1u /*CLOEXEC*/));
  if (fd >= 0) {
    // Past the file size limit (ulimit -f) ftruncate would raise SIGXFSZ, ending the process.
    if (!over_file_size_limit(size) && ::ftruncate(fd, static_cast<off_t>(size)) == 0) {
      mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    }
    ::close(fd);
  }
  if (mem == MAP_FAILED) {  // no memfd: found through the environment only
    mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  if (mem == MAP_FAILED) return nullptr;
  auto* a = new (mem) ProcessAnchor{};
  std::uint64_t nonce = 0;
  if (::getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof nonce)) {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    nonce = (static_cast<std::uint64_t>(ts.tv_nsec) << 20) ^ static_cast<std::uint64_t>(ts.tv_sec) ^
            (static_cast<std::uint64_t>(::getpid()) << 40) ^ reinterpret_cast<std::uintptr_t>(a);
  }
  a->header.nonce = nonce | 1;  // never 0
  a->header.self = reinterpret_cast<std::uintptr_t>(a);
  a->header.layout = kAnchorLayout;
  // Last, with release (a builtin on the plain field: no fence, which ThreadSanitizer does not
  // model): a half-made anchor is never valid.
  __atomic_store_n(&a->header.magic, kSingletonMagic, __ATOMIC_RELEASE);
  return a;
}

/// This process's anchor: from the environment, else by name, else a new one. Once per copy.
inline ProcessAnchor* find_or_create_anchor() noexcept {
  if (ProcessAnchor* a = anchor_from_env()) return a;
  if (ProcessAnchor* a = anchor_from_maps()) {
    anchor_publish(a, /*overwrite=*/true);  // the variable was cleared (clearenv) or is stale
    return a;
  }
  ProcessAnchor* mine = anchor_create();
  if (mine == nullptr) return nullptr;
  anchor_publish(mine, /*overwrite=*/false);
  if (ProcessAnchor* winner = anchor_from_env(); winner != nullptr && winner != mine) {
    // Another copy published first; nobody has seen ours.
    ::munmap(mine, anchor_size());
    return winner;
  }
  anchor_publish(mine, /*overwrite=*/true);  // a stale value inherited through exec()
  return mine;
}

/// This process's anchor as this copy of the code found it (nullptr: no memory to map).
inline ProcessAnchor* process_anchor() noexcept {
  static ProcessAnchor* const anchor = find_or_create_anchor();
  return anchor;
}

/// Holds the anchor's lock. A holder that no longer exists (a thread of the parent, after
/// fork) does not block the child: its lock is taken over.
class AnchorLock {
 public:
  explicit AnchorLock(ProcessAnchor* a) noexcept : a_(a) {
    const long me = ::syscall(SYS_gettid);
    for (unsigned spins = 0;; ++spins) {
      long owner = 0;
      if (a_->lock.compare_exchange_weak(owner, me, std::memory_order_acquire)) return;
      if (spins % 1024 == 1023 && owner != 0 && ::syscall(SYS_tgkill, ::getpid(), owner, 0) != 0 &&
          errno == ESRCH &&
          a_->lock.compare_exchange_strong(owner, me, std::memory_order_acquire)) {
        return;
      }
      if (spins > 64) ::sched_yield();
    }
  }
  ~AnchorLock() { a_->lock.store(0, std::memory_order_release); }
  AnchorLock(const AnchorLock&) = delete;
  AnchorLock& operator=(const AnchorLock&) = delete;

 private:
  ProcessAnchor* a_;
};

/// The address the anchor holds for `key`, or 0.
inline std::uintptr_t anchor_find(ProcessAnchor* a, const char* key) noexcept {
  const std::uint32_t n = a->count.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < n && i < ProcessAnchor::kEntries; ++i) {
    if (std::strcmp(key, a->entries[i].key) == 0)
      return a->entries[i].address.load(std::memory_order_acquire);
  }
  return 0;
}

/// Finds or creates the process-wide object named `key` of `size` bytes, made by `make` (and
/// given to `discard` if another copy of the code made one meanwhile). Not a template, so the
/// anchor code is compiled once per file however many singletons it uses; cold: called once per
/// copy of the code and singleton.
/// The dynamic loader's own r_debug, the one its DT_DEBUG entry points at (what debuggers read).
/// `_r_debug` may be the main program's copy of it instead (a copy relocation, where the program
/// compiled laptime without -fPIC: header-only, or the Makefile recipe's laptime.o), which the
/// loader never updates.
inline const r_debug* loader_r_debug() noexcept {
  const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(::getauxval(AT_PHDR));
  const unsigned long count = ::getauxval(AT_PHNUM);
  if (ph == nullptr) return &_r_debug;
  const ElfW(Phdr)* dynamic = nullptr;
  const ElfW(Phdr)* self = nullptr;
  for (unsigned long i = 0; i < count; ++i) {
    if (ph[i].p_type == PT_PHDR) self = &ph[i];
    if (ph[i].p_type == PT_DYNAMIC) dynamic = &ph[i];
  }
  // No PT_PHDR (a static-pie program, which has no loader either): no load bias to be had here.
  if (dynamic == nullptr || self == nullptr) return &_r_debug;
  const std::uintptr_t bias = reinterpret_cast<std::uintptr_t>(ph) - self->p_vaddr;
  for (auto* d = reinterpret_cast<const ElfW(Dyn)*>(bias + dynamic->p_vaddr); d->d_tag != DT_NULL;
       ++d) {
    if (d->d_tag == DT_DEBUG && d->d_un.d_ptr != 0) {
      return reinterpret_cast<const r_debug*>(d->d_un.d_ptr);
    }
  }
  return &_r_debug;
}

/// Keeps the shared object that holds `code` (an address in it) mapped until the process exits:
/// a dlclose of it then leaves it loaded. The process-wide objects keep pointers into the code of
/// each copy that uses them (fork handlers, the at-exit output and its signal handlers, NVTX's
/// table of functions, background threads); unmapped, they would point at nothing
/// (docs/design.md). Call before any of laptime's locks is taken: dladdr and dlopen take the
/// dynamic loader's lock, which a thread in dlopen holds while a plugin's constructor runs. While
/// the loader is changing its list (another thread's dlopen, or a child forked during one, where
/// dlopen would assert), it does nothing.
LAPTIME_COLD inline void keep_loaded(const void* code) noexcept {
  // Another thread's dlopen ends soon: wait for it a little (20 ms), as a first use that left
  // its copy unpinned never comes again. A child forked during one waits for nothing.
  const volatile r_debug* loader = loader_r_debug();  // the loader writes it meanwhile
  for (int i = 0; i < 20 && loader->r_state != r_debug::RT_CONSISTENT; ++i) ::usleep(1000);
  if (loader->r_state != r_debug::RT_CONSISTENT) return;
  Dl_info info;
  // A name without a slash is the main program's (argv[0] from PATH): never unloaded, and
  // dlopen would search the library path for it.
  if (::dladdr(code, &info) == 0 || info.dli_fname == nullptr ||
      std::strchr(info.dli_fname, '/') == nullptr) {
    return;
  }
  // RTLD_NOLOAD: only an object already loaded (the main program's path finds none: it is never
  // unloaded anyway). The reference is never dropped; RTLD_NODELETE makes that moot.
  (void)::dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
}

/// keep_loaded for the object of the code that calls this: by each copy's first use of the
/// Stopwatch or the NVTX wrapper, and by the fork plan for the copy that registers it.
LAPTIME_NOINLINE LAPTIME_COLD inline void keep_caller_loaded() noexcept {
  keep_loaded(__builtin_extract_return_addr(__builtin_return_address(0)));
}

/// Another copy of laptime in this process keeps the Stopwatch or the NVTX wrapper under another
/// layout (another version, LAPTIME_MAX_NAMES or libstdc++ ABI: `-D_GLIBCXX_USE_CXX11_ABI=0`
/// beside the default): the two cannot share a state, and their measurements stay apart. Said
/// once, by the copy that makes the second state, on stderr. Under the anchor's lock.
inline void warn_if_split(const ProcessAnchor* anchor, const char* key, const char* name,
                          std::uint32_t before) noexcept {
  if (std::strcmp(key, "stopwatch") != 0 && std::strcmp(key, "nvtx") != 0) return;
  const std::size_t k = std::strlen(key);
  for (std::uint32_t i = 0; i < before; ++i) {
    const char* other = anchor->entries[i].key;
    // "<key>_<version>_<size>": the key itself, not a longer one ("nvtx_counters" for "nvtx").
    if (std::strncmp(other, key, k) != 0 || other[k] != '_' || other[k + 1] < '0' ||
        other[k + 1] > '9') {
      continue;
    }
    std::fprintf(stderr,
                 "laptime: warning: this process has two copies of laptime whose %s state "
                 "differs in layout (%s and %s: another laptime version, LAPTIME_MAX_NAMES or "
                 "libstdc++ ABI); each keeps its own measurements and reports (docs/build.md)\n",
                 key, other, name);
    return;
  }
}

LAPTIME_COLD inline void* find_or_create_process_object(const char* key, std::size_t size,
                                                        void* (*make)(), void (*discard)(void*)) {
  // The key names the version and the size: two laptime versions in one process never share
  // an object whose layout they disagree on.
  char name[sizeof(ProcessAnchor::Entry::key)];
  std::snprintf(name, sizeof name, "%s_" LAPTIME_VERSION_STRING "_%zu", key, size);
  ProcessAnchor* const anchor = process_anchor();
  if (anchor == nullptr) return make();  // no memory to map at all
  {
    AnchorLock lock(anchor);
    if (const std::uintptr_t found = anchor_find(anchor, name)) {
      return reinterpret_cast<void*>(found);
    }
  }
  // Made outside the lock: its constructor may look up other singletons.
  void* const mine = make();
  AnchorLock lock(anchor);
  if (const std::uintptr_t found = anchor_find(anchor, name)) {
    discard(mine);  // another copy made one meanwhile; nobody has seen ours
    return reinterpret_cast<void*>(found);
  }
  const std::uint32_t n = anchor->count.load(std::memory_order_relaxed);
  if (n >= ProcessAnchor::kEntries) return mine;  // cannot happen: laptime has ~10 keys
  ProcessAnchor::Entry& e = anchor->entries[n];
  std::memcpy(e.key, name, sizeof name);
  e.address.store(reinterpret_cast<std::uintptr_t>(mine), std::memory_order_release);
  anchor->count.store(n + 1, std::memory_order_release);
  warn_if_split(anchor, key, name, n);
  return mine;
}

/// Finds or creates the process-wide T named `key`. Slow path: call once per copy and cache.
template <class Type>
Type& find_or_create_process_singleton(const char* key) {
  void* const p = find_or_create_process_object(
      key, sizeof(SingletonHolder<Type>), []() -> void* { return new SingletonHolder<Type>(); },
      [](void* q) { delete static_cast<SingletonHolder<Type>*>(q); });
  return static_cast<SingletonHolder<Type>*>(p)->value;
}

template <class Type>
LAPTIME_NOINLINE Type& process_singleton_slow(const char* key, std::atomic<Type*>& cached,
                                              void (*on_first_use)(Type&)) {
  Type& t = find_or_create_process_singleton<Type>(key);
  if (on_first_use != nullptr) on_first_use(t);
  cached.store(&t, std::memory_order_release);
  return t;
}

/// The one way to reach a process-wide object (every singleton of laptime goes through it): the
/// process-wide T named `key` (one key per T), found once per copy of the code. After that it is
/// one load and a branch: the cache is a constant-initialised pointer, so there is no guard
/// variable to check, and it inlines into hot paths. `on_first_use` (optional) runs once per copy
/// of the code, before the object is handed out, e.g. to join the fork plan (fork_participate).
///
///   ErrorState& s = process_singleton<ErrorState>("errors");
template <class Type>
LAPTIME_ALWAYS_INLINE Type& process_singleton(const char* key,
                                              void (*on_first_use)(Type&) = nullptr) {
  static std::atomic<Type*> cached{nullptr};
  Type* const p = cached.load(std::memory_order_acquire);
  if (LAPTIME_LIKELY(p != nullptr)) return *p;
  return process_singleton_slow<Type>(key, cached, on_first_use);
}

}  // namespace detail
LAPTIME_END_NAMESPACE
