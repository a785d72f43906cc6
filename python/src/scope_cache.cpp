// The scope cache behind `stopwatch.measure(name)` and `nvtx.range(name)`: a `with` block
// allocates nothing once its name was used on the thread (the _Scope type: scope.cpp).
#include "scope.hpp"

#include <cstddef>
#include <cstdint>

namespace pyext {
namespace {

// The scope cache: the scope measure(name) / range(name) returned last to this thread for this
// name object, in a table keyed by (name, thread, kind). Per thread, so that blocks of one name on
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
//
// The table: 4096 entries, each key at its hash or one of the next kProbes entries (linear
// probing), so that keys whose hashes meet each keep their scope: a block allocates nothing once
// its name was used on the thread while the table holds fewer than about a thousand (name,
// thread) pairs (test_name_cache.py). Entries are replaced, never removed: where a key's probes
// are all taken, it takes its hash's entry (the scope there is released), and a lookup stops at
// the first empty entry.
struct ScopeCacheEntry {
  PyThreadState* thread;
  PyObject* name;  // the scope's, kept here so that probing reads no scope
  Scope* scope;
  std::int64_t interpreter;  // the ID of the thread's interpreter
};
constexpr std::size_t kScopeCacheBits = 12;
constexpr std::size_t kScopeCacheMask = (std::size_t{1} << kScopeCacheBits) - 1;
constexpr std::size_t kProbes = 8;
ScopeCacheEntry g_scope_cache[std::size_t{1} << kScopeCacheBits];

LAPTIME_ALWAYS_INLINE std::size_t scope_cache_index(PyObject* name, PyThreadState* thread,
                                                    ScopeKind kind) {
  const std::uint64_t key = (reinterpret_cast<std::uintptr_t>(name) >> 4) ^
                            (reinterpret_cast<std::uintptr_t>(thread) << 7) ^
                            static_cast<std::uint64_t>(kind);
  return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ULL) >> (64 - kScopeCacheBits));
}

LAPTIME_ALWAYS_INLINE bool holds(const ScopeCacheEntry& e, PyObject* name, PyThreadState* thread,
                                 ScopeKind kind) {
  return e.name == name && e.thread == thread && e.scope->kind == kind;
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

/// A hit's scope; a scope of its own where a measured block of the name is open on the thread
/// (recursion, a generator or a coroutine suspended inside it), so that each block ends what it
/// started. Only a measurement: its second start is an error anyway, while ranges of one name
/// nest legitimately and keep the cached scope (its open count pops them in order).
LAPTIME_ALWAYS_INLINE PyObject* hit(Scope* scope, PyObject* name, ScopeKind kind) {
  if (kind == ScopeKind::Measure && LAPTIME_UNLIKELY((scope->open | scope->refused) != 0)) {
    return scope_new(name, kind);
  }
  return Py_NewRef(reinterpret_cast<PyObject*>(scope));
}

/// The key's scope from the entries after its hash's, or a new one kept in the first empty entry
/// from its hash's on (its hash's entry where none of them is empty).
LAPTIME_NOINLINE PyObject* scope_cache_miss(std::size_t home, PyObject* name, PyThreadState* thread,
                                            ScopeKind kind) {
  ScopeCacheEntry* slot = &g_scope_cache[home];  // replaced where every probe is taken
  for (std::size_t i = 1; slot->scope != nullptr && i <= kProbes; ++i) {
    ScopeCacheEntry& e = g_scope_cache[(home + i) & kScopeCacheMask];
    if (e.scope == nullptr) {
      slot = &e;
    } else if (holds(e, name, thread, kind)) {
      return hit(e.scope, name, kind);
    }
  }
  PyObject* scope = scope_new(name, kind);
  if (scope == nullptr) return nullptr;
  const std::int64_t here = interpreter_id();
  const ScopeCacheEntry old = *slot;
  *slot = ScopeCacheEntry{thread, name, reinterpret_cast<Scope*>(Py_NewRef(scope)), here};
  release_entry(old, here);  // last: its name's __del__ may call measure()
  return scope;
}

LAPTIME_ALWAYS_INLINE PyObject* cached_scope(PyObject* name, ScopeKind kind) {
  PyThreadState* thread = PyThreadState_Get();
  const std::size_t home = scope_cache_index(name, thread, kind);
  const ScopeCacheEntry& e = g_scope_cache[home];
  if (LAPTIME_LIKELY(holds(e, name, thread, kind))) {  // an empty entry's name is null
    return hit(e.scope, name, kind);
  }
  return scope_cache_miss(home, name, thread, kind);
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
    e = ScopeCacheEntry{nullptr, nullptr, nullptr, 0};
    release_entry(old, here);
  }
}

/// Forgets the scope cache without touching its scopes: at the module's first initialisation since
/// Python started, where they may belong to a Python that was finalised since (an embedding
/// program's Py_FinalizeEx then Py_Initialize). Its statically allocated names and its thread
/// states may sit at the same addresses in the new one, which would then get the dead one's
/// scopes.
void forget_scope_cache() {
  for (ScopeCacheEntry& e : g_scope_cache) e = ScopeCacheEntry{nullptr, nullptr, nullptr, 0};
}

}  // namespace pyext
