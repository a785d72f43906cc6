// laptime internals: one object per process, shared by every copy of the header.
//
// A header-only library gets one copy of its code, and of its function-local statics, in each
// shared object that includes it. Python loads every extension with RTLD_LOCAL, so the dynamic
// linker never unifies those statics (and GCC's STB_GNU_UNIQUE trick needs default visibility,
// which nanobind and pybind11 modules turn off). laptime therefore keeps the address of each
// process-wide object in the process environment, which every copy can see:
//
//   1. a copy looks up LAPTIME_SINGLETON_<key>_<abi>; if it holds the address of a live object
//      (checked without touching unmapped memory, see is_live), it uses that object;
//   2. otherwise it creates one and publishes it with setenv(..., overwrite = 0), which glibc does
//      atomically under its environment lock: when two copies race, exactly one address wins and
//      the loser deletes its unused object;
//   3. an address inherited through exec() (same variable, new address space) fails the liveness
//      check and is replaced.
//
// A forked child inherits both the variable and the memory it points to, so it keeps sharing its
// own copy of the parent's object, as a forked child should. Objects are never destroyed: code
// running during static destruction (atexit handlers, thread exits) may still use them.
// docs/design.md describes this with its limits.
#pragma once

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::uint64_t kSingletonMagic = 0x6c617074696d6531ULL;  // "laptime1"

template <class T>
struct SingletonHolder {
  explicit SingletonHolder() : cookie(kSingletonMagic ^ reinterpret_cast<std::uintptr_t>(this)) {}
  std::uint64_t cookie;
  T value;
};

/// Whether `addr` points at a SingletonHolder made in this address space. Reads through
/// process_vm_readv, which reports EFAULT for unmapped memory instead of crashing.
inline bool singleton_is_live(std::uintptr_t addr) noexcept {
  if (addr == 0 || addr % alignof(std::uint64_t) != 0) return false;
  std::uint64_t cookie = 0;
  iovec local{&cookie, sizeof cookie};
  iovec remote{reinterpret_cast<void*>(addr), sizeof cookie};
  const ssize_t n = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
  if (n != static_cast<ssize_t>(sizeof cookie)) {
    // Where process_vm_readv is refused (seccomp, old kernels), fall back to a pipe write, which
    // also fails with EFAULT instead of faulting.
    if (n < 0 && errno != EFAULT) {
      int fds[2];
      if (::pipe(fds) != 0) return false;
      const bool ok = ::write(fds[1], reinterpret_cast<void*>(addr), sizeof cookie) ==
                      static_cast<ssize_t>(sizeof cookie);
      if (ok) (void)!::read(fds[0], &cookie, sizeof cookie);
      ::close(fds[0]);
      ::close(fds[1]);
      if (!ok) return false;
    } else {
      return false;
    }
  }
  return cookie == (kSingletonMagic ^ addr);
}

inline std::uintptr_t singleton_parse(const char* text) noexcept {
  if (text == nullptr) return 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 16);
  return (end != text && *end == '\0') ? static_cast<std::uintptr_t>(v) : 0;
}

/// Finds or creates the process-wide T named `key`. Slow path: call once per copy and cache.
template <class T>
T& find_or_create_process_singleton(const char* key) {
  std::string var = "LAPTIME_SINGLETON_";
  var += key;
  var += "_" LAPTIME_VERSION_STRING "_";
  var += std::to_string(sizeof(SingletonHolder<T>));
  for (char& c : var) {
    if (c == '.') c = '_';
  }
  if (const std::uintptr_t existing = singleton_parse(std::getenv(var.c_str()));
      singleton_is_live(existing)) {
    return reinterpret_cast<SingletonHolder<T>*>(existing)->value;
  }
  auto* mine = new SingletonHolder<T>();
  char text[32];
  std::snprintf(text, sizeof text, "%" PRIxPTR, reinterpret_cast<std::uintptr_t>(mine));
  ::setenv(var.c_str(), text, /*overwrite=*/0);
  const std::uintptr_t winner = singleton_parse(std::getenv(var.c_str()));
  if (winner == reinterpret_cast<std::uintptr_t>(mine)) return mine->value;
  if (singleton_is_live(winner)) {
    delete mine;  // another copy published first; nobody has seen ours
    return reinterpret_cast<SingletonHolder<T>*>(winner)->value;
  }
  ::setenv(var.c_str(), text, /*overwrite=*/1);  // a stale address inherited through exec()
  return mine->value;
}

/// The process-wide T named `key`, cached per copy of the code after the first call.
template <class T>
T& process_singleton(const char* key) {
  static T& instance = find_or_create_process_singleton<T>(key);
  return instance;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
