// The scope cache behind `stopwatch.measure(name)` and `nvtx.range(name)`: a `with` block
// allocates nothing once its name was used on the thread (the _Scope type: scope.cpp).
#include "scope.hpp"

#include <cstddef>
#include <cstdint>

namespace pyext {
namespace {

// The scope cache: the scope measure(name) / range(name) returned last to this thread for this
// name object, direct-mapped by (name, thread, kind). Per thread, so that blocks of one name on
// several threads keep separate open counts, as separate objects did. An entry holds its scope,
// which holds its name: a name in the table is alive, so no other object can have its address.
// A thread state's address can be reused by a thread started after one ended, which then gets
// the ended thread's scopes: their open counts are 0 (a thread leaves its blocks before it ends).
// Everything here runs with the GIL held, which all interpreters that load laptime share. The cache
// is theirs together: a thread state is its interpreter's own, so a thread finds the scopes of
// another interpreter only where an ended one's thread state sat at the same address and the name
// is the same object, which both interpreters hold (an interned str); a scope is C code and runs no
// interpreter's Python code. Replacing an entry of another interpreter leaves its scope alive: that
// interpreter may have ended, and freeing its objects then crashes CPython 3.12.1 (_laptime.cpp).
struct ScopeCacheEntry {
  PyThreadState* thread;
  Scope* scope;
  std::int64_t interpreter;  // the ID of the thread's interpreter
};
constexpr std::size_t kScopeCacheBits = 10;
ScopeCacheEntry g_scope_cache[std::size_t{1} << kScopeCacheBits];

LAPTIME_ALWAYS_INLINE std::size_t scope_cache_index(PyObject* name, PyThreadState* thread,
                                                    ScopeKind kind) {
  const std::uint64_t key = (reinterpret_cast<std::uintptr_t>(name) >> 4) ^
                            (reinterpret_cast<std::uintptr_t>(thread) << 7) ^
                            static_cast<std::uint64_t>(kind);
  return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ULL) >> (64 - kScopeCacheBits));
}

/// Drops the cache's reference to `scope`. A scope nobody else holds (its references: the
/// cache's and those of its __enter__ and __exit__, each held only by the scope) is unlinked from
/// them first, so that reference counting frees it now rather than the cycle collector later.
void release_scope(Scope* scope) {
  PyObject* obj = reinterpret_cast<PyObject*>(scope);
  if (Py_REFCNT(obj) == 3 && scope->bound[kEnter] != nullptr &&
      Py_REFCNT(scope->bound[kEnter]) == 1 && scope->bound[kExit] != nullptr &&
      Py_REFCNT(scope->bound[kExit]) == 1) {
    scope_clear(obj);
  }
  Py_DECREF(obj);
}

/// Drops the entry's scope, where it is the interpreter's `here` (see ScopeCacheEntry).
void release_entry(const ScopeCacheEntry& e, std::int64_t here) {
  if (e.scope != nullptr && e.interpreter == here) release_scope(e.scope);
}

LAPTIME_NOINLINE PyObject* scope_cache_miss(ScopeCacheEntry& e, PyObject* name,
                                            PyThreadState* thread, ScopeKind kind) {
  PyObject* scope = scope_new(name, kind);
  if (scope == nullptr) return nullptr;
  const std::int64_t here = interpreter_id();
  const ScopeCacheEntry old = e;
  e = ScopeCacheEntry{thread, reinterpret_cast<Scope*>(Py_NewRef(scope)), here};
  release_entry(old, here);  // last: its name's __del__ may call measure()
  return scope;
}

LAPTIME_ALWAYS_INLINE PyObject* cached_scope(PyObject* name, ScopeKind kind) {
  PyThreadState* thread = PyThreadState_Get();
  ScopeCacheEntry& e = g_scope_cache[scope_cache_index(name, thread, kind)];
  if (LAPTIME_LIKELY(e.scope != nullptr && e.scope->name == name && e.thread == thread &&
                     e.scope->kind == kind)) {
    // A measured block of this name is open on the thread (recursion, a generator or a
    // coroutine suspended inside it): a scope of its own, so that each block ends what it
    // started. Only a measurement: its second start is an error anyway, while ranges of one name
    // nest legitimately and keep the cached scope (its open count pops them in order).
    if (kind == ScopeKind::Measure && LAPTIME_UNLIKELY((e.scope->open | e.scope->refused) != 0)) {
      return scope_new(name, kind);
    }
    return Py_NewRef(reinterpret_cast<PyObject*>(e.scope));
  }
  return scope_cache_miss(e, name, thread, kind);
}

}  // namespace

PyObject* measure_scope(PyObject*, PyObject* name) {
  return cached_scope(name, ScopeKind::Measure);
}

PyObject* range_scope(PyObject*, PyObject* name) {
  return cached_scope(name, ScopeKind::Range);
}

/// Empties the scope cache (tests: _testing_reset).
void clear_scope_cache() {
  const std::int64_t here = interpreter_id();
  for (ScopeCacheEntry& e : g_scope_cache) {
    const ScopeCacheEntry old = e;
    e = ScopeCacheEntry{nullptr, nullptr, 0};
    release_entry(old, here);
  }
}

/// Forgets the scope cache without touching its scopes: at the module's first initialisation since
/// Python started, where they may belong to a Python that was finalised since (an embedding
/// program's Py_FinalizeEx then Py_Initialize). Its statically allocated names and its thread
/// states may sit at the same addresses in the new one, which would then get the dead one's
/// scopes.
void forget_scope_cache() {
  for (ScopeCacheEntry& e : g_scope_cache) e = ScopeCacheEntry{nullptr, nullptr, 0};
}

}  // namespace pyext
