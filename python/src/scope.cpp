// _Scope: `with stopwatch.measure("x"):`, `with nvtx.range("x"):`, and both as decorators.
//
// A `with` block costs what the protocol costs (bench/python_bench.py, docs/performance.md, section
// 5): CPython looks __enter__ and __exit__ up on the type and binds each, which for methods in a
// PyMethodDef allocates two bound-method objects per block, then calls them. Here:
//   - __enter__ and __exit__ are descriptors of our own (_ScopeMethodDescr) whose binding returns
//     the builtin method the scope bound once: no allocation, and the call of __exit__ at the
//     block's end is one that CPython specialises (a METH_FASTCALL builtin);
//   - measure(name) / range(name) return the calling thread's scope for that name object, kept
//     in a small table (the scope cache): no allocation either once the name was used.
// A scope and its bound methods refer to each other, so _Scope is a garbage-collected type.
#include "extension.hpp"

#include <cstdint>
#include <new>
#include <string_view>

namespace pyext {
namespace {

enum class ScopeKind { Measure, Range };
enum ScopeOp { kEnter = 0, kExit = 1 };

struct Scope {
  // The name: a str (its UTF-8 buffer stays put, so laptime's name cache hits) or any other name.
  PyObject_HEAD PyObject* name;
  ScopeKind kind;
  // Blocks entered while the tool was enabled and not yet exited: __exit__ ends one of them. A
  // count, not a flag, so that one object shared by threads (`with timer:` in each loader
  // thread) ends every thread's measurement; each thread ends its own.
  Py_ssize_t open;
  PyObject* bound[2];  // scope.__enter__ and scope.__exit__, builtin methods (strong references)
  // The bytes laptime records for the name, found at the first block entered while enabled (not
  // before: a name that cannot be one raises only then, as start_meas does) and kept, held by
  // text_owner (the str itself, or the bytes of another name). A block then passes them without
  // looking at the name again; a range passes them as an NVTXRangeName, which keeps NVTX's
  // registered string, so that its push and its checked pop look nothing up.
  PyObject* text_owner;  // nullptr: not found yet
  std::string_view text;
  alignas(laptime::NVTXRangeName) unsigned char range_name[sizeof(laptime::NVTXRangeName)];
};

LAPTIME_ALWAYS_INLINE laptime::NVTXRangeName& range_name(Scope* self) {
  return *std::launder(reinterpret_cast<laptime::NVTXRangeName*>(self->range_name));
}

/// Finds the scope's text (see Scope::text_owner); false with an exception set.
LAPTIME_NOINLINE bool resolve_text(Scope* self) {
  PyObject* name = self->name;
  std::string_view text;
  PyObject* owner = nullptr;
  if (PyUnicode_Check(name) && PyUnicode_IS_COMPACT_ASCII(name)) {
    text = std::string_view(static_cast<const char*>(PyUnicode_DATA(name)),
                            static_cast<std::size_t>(PyUnicode_GET_LENGTH(name)));
    owner = Py_NewRef(name);
  } else {
    owner = other_name(self->kind == ScopeKind::Measure ? "measure" : "range", name, text);
    if (owner == nullptr) return false;
  }
  self->text = text;
  new (self->range_name) laptime::NVTXRangeName(text);  // trivially destructible
  self->text_owner = owner;
  return true;
}

/// _Scope.__enter__ / _Scope.__exit__ in the type's dict.
struct ScopeMethodDescr {
  PyObject_HEAD ScopeOp op;
};

PyTypeObject* g_scope_type = nullptr;
PyTypeObject* g_scope_descr_type = nullptr;

PyObject* scope_enter(PyObject* obj, PyObject*) {
  Scope* self = reinterpret_cast<Scope*>(obj);
  if (self->kind == ScopeKind::Measure) {
    if (laptime::binding::stopwatch_never_enabled()) Py_RETURN_NONE;
  } else if (!laptime::binding::nvtx_needs_call()) {
    Py_RETURN_NONE;  // not enabled, or quiet (no profiler, no sync, no order tracking)
  }
  if (LAPTIME_UNLIKELY(self->text_owner == nullptr) && !resolve_text(self)) return nullptr;
  try {
    if (self->kind == ScopeKind::Measure) {
      stopwatch().start_meas(self->text);
    } else {
      nvtx().range_push(range_name(self));
    }
  } catch (...) {
    return set_python_error();
  }
  ++self->open;
  Py_RETURN_NONE;
}

// Ends what __enter__ started, also when the block raised (it then propagates). A block entered
// before the first enable() ends nothing; the arguments (exc_type, exc, traceback) are not needed.
PyObject* scope_exit(PyObject* obj, PyObject* const*, Py_ssize_t) {
  Scope* self = reinterpret_cast<Scope*>(obj);
  if (self->open == 0) Py_RETURN_FALSE;
  --self->open;  // text_owner is set: a block was entered
  try {
    if (self->kind == ScopeKind::Measure) {
      stopwatch().end_meas(self->text);
    } else {
      nvtx().range_pop(range_name(self));
    }
  } catch (...) {
    return set_python_error();
  }
  Py_RETURN_FALSE;
}

// What each scope binds once (PyCFunction_New), as `scope.__enter__` and `scope.__exit__`.
PyMethodDef g_scope_method_defs[] = {
    {"__enter__", scope_enter, METH_NOARGS, nullptr},
    {"__exit__", as_cfunction(scope_exit), METH_FASTCALL, nullptr}};

// Binding: scope.__enter__ is the scope's own callable; _Scope.__enter__ is the descriptor.
PyObject* scope_descr_get(PyObject* descr, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(descr);
  if (LAPTIME_UNLIKELY(Py_TYPE(obj) != g_scope_type)) {
    PyErr_Format(PyExc_TypeError, "laptime: a _Scope method bound to %.100s",
                 Py_TYPE(obj)->tp_name);
    return nullptr;
  }
  PyObject* bound =
      reinterpret_cast<Scope*>(obj)->bound[reinterpret_cast<ScopeMethodDescr*>(descr)->op];
  if (LAPTIME_UNLIKELY(bound == nullptr)) {  // only in a finaliser of the scope's own garbage
    PyErr_SetString(PyExc_RuntimeError, "laptime: this scope was garbage-collected");
    return nullptr;
  }
  return Py_NewRef(bound);
}

// _Scope.__enter__(scope) and _Scope.__exit__(scope, *exc_info), as contextlib.ExitStack calls
// them.
PyObject* scope_descr_call(PyObject* descr, PyObject* args, PyObject* kwargs) {
  const ScopeOp op = reinterpret_cast<ScopeMethodDescr*>(descr)->op;
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n < 1 || Py_TYPE(PyTuple_GET_ITEM(args, 0)) != g_scope_type ||
      (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) || (op == kEnter && n != 1)) {
    PyErr_Format(PyExc_TypeError, "laptime: _Scope.%s takes a _Scope%s",
                 op == kEnter ? "__enter__" : "__exit__", op == kEnter ? "" : " and exc_info");
    return nullptr;
  }
  PyObject* scope = PyTuple_GET_ITEM(args, 0);
  return op == kEnter ? scope_enter(scope, nullptr) : scope_exit(scope, nullptr, 0);
}

void scope_descr_dealloc(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  PyObject_Free(obj);
  Py_DECREF(type);
}

PyType_Slot g_scope_descr_slots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(scope_descr_dealloc)},
                                     {Py_tp_descr_get, reinterpret_cast<void*>(scope_descr_get)},
                                     {Py_tp_call, reinterpret_cast<void*>(scope_descr_call)},
                                     {0, nullptr}};

PyType_Spec g_scope_descr_spec = {"laptime._ScopeMethodDescr", sizeof(ScopeMethodDescr), 0,
                                  Py_TPFLAGS_DEFAULT, g_scope_descr_slots};

/// Puts the descriptors __enter__ and __exit__ into _Scope; false with an exception set.
bool add_scope_methods(PyTypeObject* scope_type) {
  for (const ScopeOp op : {kEnter, kExit}) {
    ScopeMethodDescr* d = PyObject_New(ScopeMethodDescr, g_scope_descr_type);
    if (d == nullptr) return false;
    d->op = op;
    const int r = PyObject_SetAttrString(reinterpret_cast<PyObject*>(scope_type),
                                         op == kEnter ? "__enter__" : "__exit__",
                                         reinterpret_cast<PyObject*>(d));
    Py_DECREF(d);
    if (r < 0) return false;
  }
  return true;
}

PyObject* scope_new(PyObject* name, ScopeKind kind) {
  Scope* self = PyObject_GC_New(Scope, g_scope_type);
  if (self == nullptr) return nullptr;
  self->name = Py_NewRef(name);
  self->kind = kind;
  self->open = 0;
  self->bound[kEnter] = self->bound[kExit] = nullptr;
  self->text_owner = nullptr;
  PyObject_GC_Track(self);
  PyObject* obj = reinterpret_cast<PyObject*>(self);
  for (const ScopeOp op : {kEnter, kExit}) {
    self->bound[op] = PyCFunction_New(&g_scope_method_defs[op], obj);
    if (self->bound[op] == nullptr) {
      Py_DECREF(obj);
      return nullptr;
    }
  }
  return obj;
}

int scope_traverse(PyObject* obj, visitproc visit, void* arg) {
  Scope* self = reinterpret_cast<Scope*>(obj);
  Py_VISIT(self->name);
  Py_VISIT(self->bound[kEnter]);
  Py_VISIT(self->bound[kExit]);
#if PY_VERSION_HEX >= 0x03090000
  Py_VISIT(Py_TYPE(obj));
#endif
  return 0;
}

// Breaks the scope <-> callables cycle. The name stays: the scope may still be entered.
int scope_clear(PyObject* obj) {
  Scope* self = reinterpret_cast<Scope*>(obj);
  Py_CLEAR(self->bound[kEnter]);
  Py_CLEAR(self->bound[kExit]);
  return 0;
}

void scope_dealloc(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  PyObject_GC_UnTrack(obj);
  scope_clear(obj);
  Py_XDECREF(reinterpret_cast<Scope*>(obj)->name);
  Py_XDECREF(reinterpret_cast<Scope*>(obj)->text_owner);
  PyObject_GC_Del(obj);
  Py_DECREF(type);  // an instance of a heap type owns a reference to it
}

// The scope cache: the scope measure(name) / range(name) returned last to this thread for this
// name object, direct-mapped by (name, thread, kind). Per thread, so that blocks of one name on
// several threads keep separate open counts, as separate objects did. An entry holds its scope,
// which holds its name: a name in the table is alive, so no other object can have its address.
// A thread state's address can be reused by a thread started after one ended, which then gets
// the ended thread's scopes: their open counts are 0 (a thread leaves its blocks before it ends).
// Everything here runs with the GIL held.
struct ScopeCacheEntry {
  PyThreadState* thread;
  Scope* scope;
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
/// cache's and its two bound methods', each held only by the scope) is unlinked from its methods
/// first, so that reference counting frees it now rather than the cycle collector later.
void release_scope(Scope* scope) {
  PyObject* obj = reinterpret_cast<PyObject*>(scope);
  if (Py_REFCNT(obj) == 3 && scope->bound[kEnter] != nullptr &&
      Py_REFCNT(scope->bound[kEnter]) == 1 && scope->bound[kExit] != nullptr &&
      Py_REFCNT(scope->bound[kExit]) == 1) {
    scope_clear(obj);
  }
  Py_DECREF(obj);
}

LAPTIME_NOINLINE PyObject* scope_cache_miss(ScopeCacheEntry& e, PyObject* name,
                                            PyThreadState* thread, ScopeKind kind) {
  PyObject* scope = scope_new(name, kind);
  if (scope == nullptr) return nullptr;
  Scope* old = e.scope;
  e.thread = thread;
  e.scope = reinterpret_cast<Scope*>(Py_NewRef(scope));
  if (old != nullptr) release_scope(old);  // last: its name's __del__ may call measure()
  return scope;
}

LAPTIME_ALWAYS_INLINE PyObject* cached_scope(PyObject* name, ScopeKind kind) {
  PyThreadState* thread = PyThreadState_Get();
  ScopeCacheEntry& e = g_scope_cache[scope_cache_index(name, thread, kind)];
  if (LAPTIME_LIKELY(e.scope != nullptr && e.scope->name == name && e.thread == thread &&
                     e.scope->kind == kind)) {
    return Py_NewRef(reinterpret_cast<PyObject*>(e.scope));
  }
  return scope_cache_miss(e, name, thread, kind);
}

// As a decorator: laptime._decorate (Python, functools.wraps) builds the wrapper, which opens
// its scope per call (measure(name) on the calling thread).
PyObject* scope_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* func = nullptr;
  if (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "laptime: a decorator takes one function");
    return nullptr;
  }
  if (!PyArg_ParseTuple(args, "O:decorator", &func)) return nullptr;
  PyObject* decorate = PyObject_GetAttrString(g_module, "_decorate");
  if (decorate == nullptr) return nullptr;
  PyObject* r = PyObject_CallFunctionObjArgs(decorate, self, func, nullptr);
  Py_DECREF(decorate);
  return r;
}

PyObject* scope_repr(PyObject* obj) {
  Scope* self = reinterpret_cast<Scope*>(obj);
  return PyUnicode_FromFormat(
      "<laptime %s %R>", self->kind == ScopeKind::Measure ? "measure" : "nvtx range", self->name);
}

PyObject* scope_get_name(PyObject* obj, void*) {
  return Py_NewRef(reinterpret_cast<Scope*>(obj)->name);
}

PyObject* scope_get_kind(PyObject* obj, void*) {
  return PyUnicode_FromString(reinterpret_cast<Scope*>(obj)->kind == ScopeKind::Measure ? "measure"
                                                                                        : "range");
}

PyGetSetDef g_scope_getset[] = {
    {"name", scope_get_name, nullptr, "The measured name or range.", nullptr},
    {"kind", scope_get_kind, nullptr, "'measure' (Stopwatch) or 'range' (NVTX).", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot g_scope_slots[] = {
    {Py_tp_doc, const_cast<char*>("A timed or NVTX-annotated block; also a decorator.")},
    {Py_tp_dealloc, reinterpret_cast<void*>(scope_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(scope_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(scope_clear)},
    {Py_tp_getset, g_scope_getset},
    {Py_tp_call, reinterpret_cast<void*>(scope_call)},
    {Py_tp_repr, reinterpret_cast<void*>(scope_repr)},
    {0, nullptr}};

PyType_Spec g_scope_spec = {"laptime._Scope", sizeof(Scope), 0,
                            Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, g_scope_slots};

}  // namespace

PyObject* measure_scope(PyObject*, PyObject* name) {
  return cached_scope(name, ScopeKind::Measure);
}

PyObject* range_scope(PyObject*, PyObject* name) {
  return cached_scope(name, ScopeKind::Range);
}

/// Empties the scope cache (tests: _testing_reset).
void clear_scope_cache() {
  for (ScopeCacheEntry& e : g_scope_cache) {
    Scope* old = e.scope;
    e = ScopeCacheEntry{nullptr, nullptr};
    if (old != nullptr) release_scope(old);
  }
}

/// Makes _Scope and _ScopeMethodDescr, adds them to `module` and puts the descriptors into
/// _Scope; false with an exception set.
bool add_scope_types(PyObject* module) {
  g_scope_type = add_type(module, &g_scope_spec, "_Scope");
  g_scope_descr_type = add_type(module, &g_scope_descr_spec, "_ScopeMethodDescr");
  return g_scope_type != nullptr && g_scope_descr_type != nullptr &&
         add_scope_methods(g_scope_type);
}

}  // namespace pyext
