// _Scope: `with stopwatch.measure("x"):`, `with nvtx.range("x"):`, and both as decorators.
//
// A `with` block costs what the protocol costs (bench/python_bench.py, docs/performance.md, section
// 5): CPython looks __enter__ and __exit__ up on the type and binds each, which for methods in a
// PyMethodDef allocates two bound-method objects per block, then calls them. Here:
//   - __enter__ and __exit__ are descriptors of our own (_ScopeEnterDescr, _ScopeExitDescr) whose
//     binding returns the callable the scope made once: no allocation;
//   - scope.__enter__ is called through its own vectorcall slot (_ScopeEnter) straight into the
//     enter of the scope's kind, without CPython's METH_NOARGS trampoline; scope.__exit__ is a
//     METH_FASTCALL builtin method, whose call at the block's end CPython specialises;
//   - each kind (measure, range) has its own enter and exit, so that no call tests the kind;
//   - measure(name) / range(name) return the calling thread's scope for that name object, kept
//     in a small table (the scope cache, scope_cache.cpp): no allocation either once the name was
//     used.
// A scope and its __enter__ and __exit__ refer to each other: _Scope is garbage-collected.
#include "scope.hpp"

#include <structmember.h>  // PyMemberDef, T_PYSSIZET, T_OBJECT, READONLY

#include <cstddef>
#include <new>
#include <string_view>
#include <vector>

namespace pyext {
namespace {

PyTypeObject* g_scope_type = nullptr;

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

// ---- Entering and leaving a block, one function of each per kind ------------------------------

// The blocks of this thread whose start was refused (the name ran already, and the error policy
// let the start return), innermost last: their __exit__ ends nothing. Per thread, so that a scope
// object held and re-entered (`with timer:` in a recursion) or shared by threads ends only what
// each block started. Touched only on a refusal and by the exits that follow one. Strong
// references: a block whose exit never comes here (a generator closed from another thread) keeps
// its scope alive, so that no later scope at the same address is taken for it.
thread_local std::vector<Scope*> t_refused;
// All threads' refused blocks not yet exited (under the GIL): 0, the common case, spares every
// exit the thread-local lookup.
Py_ssize_t g_refused = 0;

/// Whether this exit of `self` is a refused block's, which it then forgets: the thread's
/// innermost refused block is the scope's, or none of the scope's blocks is open and a deeper one
/// is (generators closed in another order than they were suspended in).
bool take_refused(Scope* self) {
  for (std::size_t i = t_refused.size(); i-- > 0;) {
    if (t_refused[i] != self) continue;
    if (i + 1 != t_refused.size() && self->open != 0) return false;
    t_refused.erase(t_refused.begin() + static_cast<std::ptrdiff_t>(i));
    --g_refused;
    --self->refused;
    Py_DECREF(self);  // not the last reference: the caller's bound __exit__ holds one
    return true;
  }
  return false;
}

template <ScopeKind K>
PyObject* scope_enter_kind(Scope* self) {
  if constexpr (K == ScopeKind::Measure) {
    if (laptime::binding::stopwatch_never_enabled()) Py_RETURN_NONE;
  } else if (!laptime::binding::nvtx_needs_call()) {
    Py_RETURN_NONE;  // not enabled, or quiet (no profiler, no sync, no order tracking)
  }
  if (LAPTIME_UNLIKELY(self->text_owner == nullptr) && !resolve_text(self)) return nullptr;
  try {
    if constexpr (K == ScopeKind::Measure) {
      // Nothing to end where the name ran already on this thread (recursion, two generators
      // suspended in one name) and the error policy let the start return. (Its thread: unkept.)
      laptime::detail::ThreadRecord* started_on = nullptr;
      if (!laptime::detail::start_for_scope(self->text, started_on)) {
        t_refused.push_back(self);
        Py_INCREF(self);
        ++g_refused;
        ++self->refused;
        Py_RETURN_NONE;
      }
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
template <ScopeKind K>
PyObject* scope_exit_kind(PyObject* obj, PyObject* const*, Py_ssize_t) {
  Scope* self = reinterpret_cast<Scope*>(obj);
  if constexpr (K == ScopeKind::Measure) {
    if (LAPTIME_UNLIKELY(g_refused != 0) && take_refused(self)) Py_RETURN_FALSE;
  }
  if (self->open == 0) Py_RETURN_FALSE;
  --self->open;  // text_owner is set: a block was entered
  try {
    if constexpr (K == ScopeKind::Measure) {
      stopwatch().end_meas(self->text);
    } else {
      nvtx().range_pop(range_name(self));
    }
  } catch (...) {
    return set_python_error();
  }
  Py_RETURN_FALSE;
}

PyObject* scope_enter(PyObject* obj) {
  Scope* self = reinterpret_cast<Scope*>(obj);
  return self->kind == ScopeKind::Measure ? scope_enter_kind<ScopeKind::Measure>(self)
                                          : scope_enter_kind<ScopeKind::Range>(self);
}

PyObject* scope_exit(PyObject* obj) {
  return reinterpret_cast<Scope*>(obj)->kind == ScopeKind::Measure
             ? scope_exit_kind<ScopeKind::Measure>(obj, nullptr, 0)
             : scope_exit_kind<ScopeKind::Range>(obj, nullptr, 0);
}

// ---- scope.__enter__ and scope.__exit__, made once per scope ------------------------------------

template <ScopeKind K>
PyObject* scope_enter_noargs(PyObject* obj, PyObject*) {
  return scope_enter_kind<K>(reinterpret_cast<Scope*>(obj));
}

// By kind, then __enter__ (bound as a builtin method before Python 3.9 only), __exit__.
PyMethodDef g_scope_method_defs[2][2] = {
    {{"__enter__", scope_enter_noargs<ScopeKind::Measure>, METH_NOARGS, nullptr},
     {"__exit__", as_cfunction(scope_exit_kind<ScopeKind::Measure>), METH_FASTCALL, nullptr}},
    {{"__enter__", scope_enter_noargs<ScopeKind::Range>, METH_NOARGS, nullptr},
     {"__exit__", as_cfunction(scope_exit_kind<ScopeKind::Range>), METH_FASTCALL, nullptr}}};

#if PY_VERSION_HEX >= 0x03090000
// scope.__enter__ from Python 3.9 on (heap types get a vectorcall slot then): `with` calls it
// through that slot straight into the enter of the scope's kind. As a builtin method it went
// through CPython's METH_NOARGS trampoline (argument checks, a recursion check) first. It looks
// like the builtin method it replaces: repr, __self__, __name__, __qualname__, the same errors.
struct ScopeEnter {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* scope;  // strong, never null: the scope holds this object too (a cycle, hence GC)
};

PyTypeObject* g_scope_enter_type = nullptr;

[[gnu::cold]] LAPTIME_NOINLINE PyObject* scope_enter_checked(PyObject* callable, std::size_t nargsf,
                                                             PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs != 0) {
    PyErr_Format(PyExc_TypeError, "_Scope.__enter__() takes no arguments (%zd given)", nargs);
    return nullptr;
  }
  if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0) {
    PyErr_SetString(PyExc_TypeError, "_Scope.__enter__() takes no keyword arguments");
    return nullptr;
  }
  return scope_enter(reinterpret_cast<ScopeEnter*>(callable)->scope);
}

template <ScopeKind K>
PyObject* scope_enter_vectorcall(PyObject* callable, PyObject* const*, std::size_t nargsf,
                                 PyObject* kwnames) {
  if (LAPTIME_UNLIKELY(nargsf != 0 || kwnames != nullptr)) {
    return scope_enter_checked(callable, nargsf, kwnames);
  }
  return scope_enter_kind<K>(
      reinterpret_cast<Scope*>(reinterpret_cast<ScopeEnter*>(callable)->scope));
}

int scope_enter_traverse(PyObject* obj, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<ScopeEnter*>(obj)->scope);
  Py_VISIT(Py_TYPE(obj));
  return 0;
}

// No tp_clear: the scope's breaks the cycle, as a builtin method keeps its __self__.
void scope_enter_dealloc(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  PyObject_GC_UnTrack(obj);
  Py_DECREF(reinterpret_cast<ScopeEnter*>(obj)->scope);
  PyObject_GC_Del(obj);
  Py_DECREF(type);
}

PyObject* scope_enter_repr(PyObject* obj) {
  PyObject* scope = reinterpret_cast<ScopeEnter*>(obj)->scope;
  return PyUnicode_FromFormat("<built-in method __enter__ of %s object at %p>",
                              Py_TYPE(scope)->tp_name, static_cast<void*>(scope));
}

PyObject* scope_enter_name(PyObject*, void* qualified) {
  return PyUnicode_FromString(qualified != nullptr ? "_Scope.__enter__" : "__enter__");
}

PyMemberDef g_scope_enter_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(ScopeEnter, vectorcall), READONLY, nullptr},
    {"__self__", T_OBJECT, offsetof(ScopeEnter, scope), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef g_scope_enter_getset[] = {
    {"__name__", scope_enter_name, nullptr, nullptr, nullptr},
    {"__qualname__", scope_enter_name, nullptr, nullptr, const_cast<char*>("qualified")},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot g_scope_enter_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(scope_enter_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(scope_enter_traverse)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_repr, reinterpret_cast<void*>(scope_enter_repr)},
    {Py_tp_members, g_scope_enter_members},
    {Py_tp_getset, g_scope_enter_getset},
    {0, nullptr}};

PyType_Spec g_scope_enter_spec = {
    "laptime._ScopeEnter", sizeof(ScopeEnter), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, g_scope_enter_slots};
#endif

/// scope.__enter__ for a new scope (a new reference; nullptr with an exception set).
PyObject* bound_enter_new(Scope* scope) {
  PyObject* obj = reinterpret_cast<PyObject*>(scope);
#if PY_VERSION_HEX >= 0x03090000
  ScopeEnter* self = PyObject_GC_New(ScopeEnter, g_scope_enter_type);
  if (self == nullptr) return nullptr;
  self->vectorcall = scope->kind == ScopeKind::Measure ? scope_enter_vectorcall<ScopeKind::Measure>
                                                       : scope_enter_vectorcall<ScopeKind::Range>;
  self->scope = Py_NewRef(obj);
  PyObject_GC_Track(self);
  return reinterpret_cast<PyObject*>(self);
#else
  return PyCFunction_New(&g_scope_method_defs[static_cast<int>(scope->kind)][kEnter], obj);
#endif
}

// ---- _Scope.__enter__ and _Scope.__exit__: descriptors binding to the scope's callables -------

PyTypeObject* g_scope_descr_type[2] = {nullptr, nullptr};

[[gnu::cold]] LAPTIME_NOINLINE PyObject* scope_descr_get_other(PyObject* descr, PyObject* obj) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(descr);
  if (Py_TYPE(obj) != g_scope_type) {
    PyErr_Format(PyExc_TypeError, "laptime: a _Scope method bound to %.100s",
                 Py_TYPE(obj)->tp_name);
    return nullptr;
  }
  // Only in a finaliser of the scope's own garbage.
  PyErr_SetString(PyExc_RuntimeError, "laptime: this scope was garbage-collected");
  return nullptr;
}

// scope.__enter__ is the scope's own callable; _Scope.__enter__ is the descriptor. One type, so
// one function, per method: the callable's load depends on the scope only, not on the descriptor.
template <ScopeOp op>
PyObject* scope_descr_get(PyObject* descr, PyObject* obj, PyObject*) {
  if (LAPTIME_LIKELY(obj != nullptr && Py_TYPE(obj) == g_scope_type)) {
    PyObject* bound = reinterpret_cast<Scope*>(obj)->bound[op];
    if (LAPTIME_LIKELY(bound != nullptr)) return Py_NewRef(bound);
  }
  return scope_descr_get_other(descr, obj);
}

// _Scope.__enter__(scope) and _Scope.__exit__(scope, *exc_info), as contextlib.ExitStack calls
// them.
template <ScopeOp op>
PyObject* scope_descr_call(PyObject*, PyObject* args, PyObject* kwargs) {
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n < 1 || Py_TYPE(PyTuple_GET_ITEM(args, 0)) != g_scope_type ||
      (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) || (op == kEnter && n != 1)) {
    PyErr_Format(PyExc_TypeError, "laptime: _Scope.%s takes a _Scope%s",
                 op == kEnter ? "__enter__" : "__exit__", op == kEnter ? "" : " and exc_info");
    return nullptr;
  }
  PyObject* scope = PyTuple_GET_ITEM(args, 0);
  return op == kEnter ? scope_enter(scope) : scope_exit(scope);
}

void scope_descr_dealloc(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  PyObject_Free(obj);
  Py_DECREF(type);
}

PyType_Slot g_scope_descr_slots[2][4] = {
    {{Py_tp_dealloc, reinterpret_cast<void*>(scope_descr_dealloc)},
     {Py_tp_descr_get, reinterpret_cast<void*>(scope_descr_get<kEnter>)},
     {Py_tp_call, reinterpret_cast<void*>(scope_descr_call<kEnter>)},
     {0, nullptr}},
    {{Py_tp_dealloc, reinterpret_cast<void*>(scope_descr_dealloc)},
     {Py_tp_descr_get, reinterpret_cast<void*>(scope_descr_get<kExit>)},
     {Py_tp_call, reinterpret_cast<void*>(scope_descr_call<kExit>)},
     {0, nullptr}}};

// A descriptor has no state of its own: its type says which method it is.
PyType_Spec g_scope_descr_specs[2] = {{"laptime._ScopeEnterDescr", sizeof(PyObject), 0,
                                       Py_TPFLAGS_DEFAULT, g_scope_descr_slots[kEnter]},
                                      {"laptime._ScopeExitDescr", sizeof(PyObject), 0,
                                       Py_TPFLAGS_DEFAULT, g_scope_descr_slots[kExit]}};

/// Puts the descriptors __enter__ and __exit__ into _Scope; false with an exception set.
bool add_scope_methods(PyTypeObject* scope_type) {
  for (const ScopeOp op : {kEnter, kExit}) {
    PyObject* d = PyObject_New(PyObject, g_scope_descr_type[op]);
    if (d == nullptr) return false;
    const int r = PyObject_SetAttrString(reinterpret_cast<PyObject*>(scope_type),
                                         op == kEnter ? "__enter__" : "__exit__", d);
    Py_DECREF(d);
    if (r < 0) return false;
  }
  return true;
}

// ---- The _Scope type ----------------------------------------------------------------------------

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

void scope_dealloc(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  PyObject_GC_UnTrack(obj);
  scope_clear(obj);
  Py_XDECREF(reinterpret_cast<Scope*>(obj)->name);
  Py_XDECREF(reinterpret_cast<Scope*>(obj)->text_owner);
  PyObject_GC_Del(obj);
  Py_DECREF(type);  // an instance of a heap type owns a reference to it
}

const char* self_kind_name(PyObject* self) {
  return reinterpret_cast<Scope*>(self)->kind == ScopeKind::Measure ? "measure" : "range";
}

// As a decorator: laptime._decorate (Python, functools.wraps) of the calling interpreter builds
// the wrapper, which opens its scope per call (measure(name) on the calling thread).
PyObject* scope_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* func = nullptr;
  if (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "laptime: a decorator takes one function");
    return nullptr;
  }
  if (!PyArg_ParseTuple(args, "O:decorator", &func)) return nullptr;
  const char* what = self_kind_name(self);
  // `@stopwatch.measure` without its name: the function became the name, and each call of it
  // lands here with the call's argument, so the body would never run.
  PyObject* name = reinterpret_cast<Scope*>(self)->name;
  if (PyFunction_Check(name) || PyCFunction_Check(name) || PyMethod_Check(name)) {
    PyErr_Format(PyExc_TypeError,
                 "laptime: @%s needs a name: write @%s(\"name\"), not @%s (the function %R was "
                 "taken as the name, and its body would never run)",
                 what, what, what, name);
    return nullptr;
  }
  if (!PyCallable_Check(func)) {
    PyErr_Format(PyExc_TypeError, "laptime: %s(name) as a decorator takes a function, not %R", what,
                 func);
    return nullptr;
  }
  PyObject* decorate = package_function("_decorate");
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

// pickle and copy: laptime._scope_from(kind, name), the same measure(name) / range(name) where it
// is loaded (a spawned DataLoader worker); nothing open travels with it. The calling interpreter's
// _scope_from: pickle checks that it is the one its `laptime` has.
PyObject* scope_reduce(PyObject* obj, PyObject*) {
  PyObject* from = package_function("_scope_from");
  if (from == nullptr) return nullptr;
  Scope* self = reinterpret_cast<Scope*>(obj);
  return Py_BuildValue("(N(sO))", from, self_kind_name(obj), self->name);
}

PyMethodDef g_scope_methods[] = {{"__reduce__", scope_reduce, METH_NOARGS, nullptr},
                                 {nullptr, nullptr, 0, nullptr}};

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
    {Py_tp_methods, g_scope_methods},
    {Py_tp_call, reinterpret_cast<void*>(scope_call)},
    {Py_tp_repr, reinterpret_cast<void*>(scope_repr)},
    {0, nullptr}};

PyType_Spec g_scope_spec = {"laptime._Scope", sizeof(Scope), 0,
                            Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, g_scope_slots};

}  // namespace

PyObject* scope_new(PyObject* name, ScopeKind kind) {
  Scope* self = PyObject_GC_New(Scope, g_scope_type);
  if (self == nullptr) return nullptr;
  self->name = Py_NewRef(name);
  self->kind = kind;
  self->open = 0;
  self->refused = 0;
  self->bound[kEnter] = self->bound[kExit] = nullptr;
  self->text_owner = nullptr;
  PyObject_GC_Track(self);
  PyObject* obj = reinterpret_cast<PyObject*>(self);
  self->bound[kEnter] = bound_enter_new(self);
  if (self->bound[kEnter] != nullptr) {
    self->bound[kExit] = PyCFunction_New(&g_scope_method_defs[static_cast<int>(kind)][kExit], obj);
  }
  if (self->bound[kExit] == nullptr) {
    Py_DECREF(obj);
    return nullptr;
  }
  return obj;
}

// Breaks the scope <-> callables cycle. The name stays: the scope may still be entered.
int scope_clear(PyObject* obj) {
  Scope* self = reinterpret_cast<Scope*>(obj);
  Py_CLEAR(self->bound[kEnter]);
  Py_CLEAR(self->bound[kExit]);
  return 0;
}

/// Makes _Scope, _ScopeEnter and the descriptor types, adds them to `objects` (the shared objects)
/// and puts the descriptors into _Scope; false with an exception set.
bool add_scope_types(PyObject* objects) {
  g_scope_type = add_type(objects, &g_scope_spec, "_Scope");
#if PY_VERSION_HEX >= 0x03090000
  g_scope_enter_type = add_type(objects, &g_scope_enter_spec, "_ScopeEnter");
  if (g_scope_enter_type == nullptr) return false;
#endif
  g_scope_descr_type[kEnter] = add_type(objects, &g_scope_descr_specs[kEnter], "_ScopeEnterDescr");
  g_scope_descr_type[kExit] = add_type(objects, &g_scope_descr_specs[kExit], "_ScopeExitDescr");
  if (g_scope_type == nullptr || g_scope_descr_type[kEnter] == nullptr ||
      g_scope_descr_type[kExit] == nullptr) {
    return false;
  }
  // Made by laptime only: `type(scope)()` would make one with no name (a TypeError instead).
  for (PyTypeObject* t : {g_scope_type, g_scope_descr_type[kEnter], g_scope_descr_type[kExit]}) {
    t->tp_new = nullptr;
  }
#if PY_VERSION_HEX >= 0x03090000
  g_scope_enter_type->tp_new = nullptr;
#endif
  return add_scope_methods(g_scope_type);
}

}  // namespace pyext
