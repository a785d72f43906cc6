// laptime._laptime: the Python extension (docs/python.md).
//
// Written against the CPython C API, not nanobind or pybind11, because of what a call costs
// (bench/python_bench.py; docs/python.md has the numbers that chose this):
//   - the hot methods are METH_O / METH_NOARGS / METH_FASTCALL builtins, which CPython 3.11+ calls
//     through specialised instructions. Those check the *exact* type of `self`, so Stopwatch and
//     NVTXRangeWrapper are the C types themselves: a Python subclass would cost ~8 ns per call;
//   - a name reaches laptime as the UTF-8 buffer inside the str object, never copied. A str
//     literal in the caller's code is one object, so the buffer has a stable address and laptime's
//     per-thread name cache (keyed by pointer and length) hits on every call;
//   - not enabled, a call is one relaxed load, whatever its argument (the seed's methods were
//     empty then). Names that are not compact ASCII str (other str, any other object) take an
//     out-of-line path: the identity cache (other_name), then the str's UTF-8 or a cached str()
//     of the object (fallback_name), which the ASCII path never touches;
//   - `with stopwatch.measure(name):` allocates nothing once the name was used on the thread
//     (the scope cache; see _Scope).
// Nothing releases the GIL on the hot path: the calls take nanoseconds. The exception is a
// finish_iter that is about to print the periodic report (see sw_finish_iter).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <laptime/detail/stopwatch_config.hpp>  // what it reaches under the API; not the impl
#include <laptime/detail/stopwatch_state.hpp>
#include <laptime/laptime.hpp>
#include "closed_stdout.hpp"
#include "stopwatch_gate.hpp"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#if PY_VERSION_HEX < 0x030A0000
static inline PyObject* Py_NewRef(PyObject* obj) {
  Py_INCREF(obj);
  return obj;
}
#endif

namespace {

// laptime.UsageError: a subclass of AssertionError, as the seed raised AssertionError.
PyObject* g_usage_error = nullptr;
// This module: _Scope.__call__ finds laptime's Python decorator helper in it.
PyObject* g_module = nullptr;
// The one instance of each facade type (the state itself is laptime's, process-wide).
PyObject* g_stopwatch = nullptr;
PyObject* g_nvtx = nullptr;
PyTypeObject* g_scope_type = nullptr;
// Names that are not str (or str without a UTF-8 form): the object -> the bytes laptime records.
PyObject* g_name_cache = nullptr;
// Instances of Python subclasses of Stopwatch / NVTXRangeWrapper: one per subclass.
PyObject* g_subclass_instances = nullptr;

template <class F>
PyCFunction as_cfunction(F* f) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f));
}

LAPTIME_ALWAYS_INLINE laptime::Stopwatch& stopwatch() {
  return laptime::Stopwatch::instance();
}

LAPTIME_ALWAYS_INLINE laptime::NVTXRangeWrapper& nvtx() {
  return laptime::NVTXRangeWrapper::instance();
}

// ---------------------------------------------------------------------------------------------
// Conversions and errors

/// utf8_view of a str that is not compact ASCII. One with lone surrogates has no UTF-8 form and
/// would raise (an exception object, ~1 µs) on every call: once converted by fallback_name, its
/// bytes are found in the name cache first. Lone surrogates make a str 2- or 4-byte wide, so
/// Latin-1 names skip the lookup.
LAPTIME_NOINLINE bool utf8_view_other(PyObject* str, std::string_view& out) {
#if PY_VERSION_HEX < 0x030C0000
  if (PyUnicode_READY(str) < 0) return false;  // a legacy str made by the deprecated C API
#endif
  if (PyUnicode_KIND(str) != PyUnicode_1BYTE_KIND) {
    if (PyObject* bytes = PyDict_GetItemWithError(g_name_cache, str)) {  // kept alive by the cache
      out = std::string_view(PyBytes_AS_STRING(bytes),
                             static_cast<std::size_t>(PyBytes_GET_SIZE(bytes)));
      return true;
    }
    if (PyErr_Occurred()) return false;
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(str, &size);
  if (data == nullptr) return false;
  out = std::string_view(data, static_cast<std::size_t>(size));
  return true;
}

/// The text of a str as UTF-8, without a copy: the bytes of a compact ASCII str (what names
/// almost always are), else the UTF-8 buffer CPython caches inside the object.
LAPTIME_ALWAYS_INLINE bool utf8_view(PyObject* str, std::string_view& out) {
  if (LAPTIME_LIKELY(PyUnicode_IS_COMPACT_ASCII(str))) {
    out = std::string_view(static_cast<const char*>(PyUnicode_DATA(str)),
                           static_cast<std::size_t>(PyUnicode_GET_LENGTH(str)));
    return true;
  }
  return utf8_view_other(str, out);
}

[[gnu::cold]] PyObject* not_a_str(const char* call, PyObject* arg) {
  PyErr_Format(PyExc_TypeError, "laptime: %s: the name must be a str, not %.100s", call,
               Py_TYPE(arg)->tp_name);
  return nullptr;
}

/// The bytes laptime records for a str: UTF-8, where a lone surrogate U+DC80..U+DCFF (a file
/// name decoded with surrogateescape) becomes its original byte again; any other lone surrogate
/// is written as `\udxxx`. New reference, or nullptr with an exception set.
PyObject* name_bytes(PyObject* str) {
  PyObject* bytes = PyUnicode_AsEncodedString(str, "utf-8", "surrogateescape");
  if (bytes == nullptr && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
    PyErr_Clear();
    bytes = PyUnicode_AsEncodedString(str, "utf-8", "backslashreplace");
  }
  return bytes;
}

// Bounds the cache: objects used as names are kept alive by it, so a program that makes a new
// object per call (each with its own identity) must not grow it forever.
constexpr Py_ssize_t kNameCacheSize = LAPTIME_MAX_NAMES;

/// The name of `obj`, which is not a str with a UTF-8 form: the bytes of str(obj), as the seed
/// displayed its names with str(). Cached by the object itself (hash and ==, as the seed's dict
/// of names did), so a name used again costs a dict lookup, no str() and no allocation, and its
/// bytes keep one address (laptime's per-thread name cache hits). A new reference to a bytes
/// object, or nullptr with TypeError for an unhashable object (the seed's dict refused it too).
[[gnu::cold]] PyObject* fallback_name(const char* call, PyObject* obj) {
  if (PyObject* cached = PyDict_GetItemWithError(g_name_cache, obj)) return Py_NewRef(cached);
  if (PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "laptime: %s: a name is a str or a hashable object (named by its str()), not "
                   "%.100s",
                   call, Py_TYPE(obj)->tp_name);
    }
    return nullptr;
  }
  PyObject* text = PyUnicode_Check(obj) ? Py_NewRef(obj) : PyObject_Str(obj);
  if (text == nullptr) return nullptr;
  PyObject* bytes = name_bytes(text);
  Py_DECREF(text);
  if (bytes == nullptr) return nullptr;
  if (PyDict_GET_SIZE(g_name_cache) >= kNameCacheSize) PyDict_Clear(g_name_cache);
  if (PyDict_SetItem(g_name_cache, obj, bytes) < 0) {
    Py_DECREF(bytes);
    return nullptr;
  }
  return bytes;
}

/// Whether `obj` can be a name (a str, or hashable); clears the error of the check.
bool usable_name(PyObject* obj) {
  if (PyUnicode_Check(obj) || PyObject_Hash(obj) != -1) return true;
  PyErr_Clear();
  return false;
}

/// A str from bytes that may not be valid UTF-8 (names given in C++ can be anything, and a file
/// name recorded from Python keeps its original bytes): an invalid byte shows as `\xe9`, as
/// `ls -b` shows it, and the text stays printable on any stream.
PyObject* text_to_str(std::string_view text) {
  return PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()),
                              "backslashreplace");
}

/// Turns the C++ exception being handled into a Python one; returns nullptr. Only in a catch.
[[gnu::cold]] PyObject* set_python_error() {
  try {
    throw;
  } catch (const laptime::UsageError& e) {
    if (PyObject* message = text_to_str(e.what())) {
      PyErr_SetObject(g_usage_error, message);
      Py_DECREF(message);
    }
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "laptime: %s", e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "laptime: unknown C++ exception");
  }
  return nullptr;
}

/// Runs `f` (a laptime call) and returns None, or nullptr with the C++ exception translated.
template <class F>
LAPTIME_ALWAYS_INLINE PyObject* call_none(F&& f) {
  try {
    f();
  } catch (...) {
    return set_python_error();
  }
  Py_RETURN_NONE;
}

/// Same for a call that may block: runs it without the GIL.
template <class F>
PyObject* call_none_without_gil(F&& f) {
  std::exception_ptr error;
  Py_BEGIN_ALLOW_THREADS try { f(); } catch (...) {
    error = std::current_exception();
  }
  Py_END_ALLOW_THREADS if (error) {
    try {
      std::rethrow_exception(error);
    } catch (...) {
      return set_python_error();
    }
  }
  Py_RETURN_NONE;
}

/// The identity cache: names that are not compact ASCII str (other str, any other object) ->
/// the bytes laptime records for them, direct-mapped by the object's address, so that a name used
/// again costs no UTF-8 conversion, no str() and no hash. An entry holds a reference to its name
/// object: while cached, the object is alive, and no other object can be at its address. The
/// bytes are the str's own UTF-8 buffer, or a bytes object (fallback_name) held by the entry.
struct IdentityName {
  PyObject* key;    // strong
  PyObject* owner;  // strong: the object whose buffer `text` is (the str itself, or bytes)
  std::string_view text;
};
constexpr std::size_t kIdentityNameBits = 8;
IdentityName g_identity_names[std::size_t{1} << kIdentityNameBits];

LAPTIME_ALWAYS_INLINE IdentityName& identity_entry(PyObject* obj) {
  const std::uint64_t key = reinterpret_cast<std::uintptr_t>(obj) >> 4;
  return g_identity_names[(key * 0x9e3779b97f4a7c15ULL) >> (64 - kIdentityNameBits)];
}

/// The name of `arg` when it is not a compact ASCII str: the identity cache, else the str's
/// UTF-8 (utf8_view_other) or, for a str without one and any other object, fallback_name. Sets
/// `name` to the bytes of the returned object (a new reference that keeps them alive; nullptr
/// with an exception set). Out of line and not a template, so that the hot methods stay small.
LAPTIME_NOINLINE PyObject* other_name(const char* call, PyObject* arg, std::string_view& name) {
  IdentityName& e = identity_entry(arg);
  if (e.key == arg) {
    name = e.text;
    return Py_NewRef(e.owner);
  }
  PyObject* owner = nullptr;
  if (PyUnicode_Check(arg)) {
    if (utf8_view_other(arg, name)) {
      owner = Py_NewRef(arg);
    } else if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
      return nullptr;
    } else {
      PyErr_Clear();  // a str with lone surrogates
    }
  }
  if (owner == nullptr) {
    owner = fallback_name(call, arg);
    if (owner == nullptr) return nullptr;
    name = std::string_view(PyBytes_AS_STRING(owner),
                            static_cast<std::size_t>(PyBytes_GET_SIZE(owner)));
  }
  const IdentityName old = e;
  e = IdentityName{Py_NewRef(arg), Py_NewRef(owner), name};
  Py_XDECREF(old.key);  // last: a __del__ may run, and call laptime again
  Py_XDECREF(old.owner);
  return owner;
}

/// `f(name)` for the name `arg` of `call`: a compact ASCII str is read in place (its bytes are
/// its UTF-8); anything else through other_name and its identity cache. One call of `f`, so that
/// the compiler inlines laptime's call as before.
template <class F>
LAPTIME_ALWAYS_INLINE PyObject* with_name(const char* call, PyObject* arg, F&& f) {
  std::string_view name;
  PyObject* holder = nullptr;  // keeps the bytes of a name that is not a str alive
  if (LAPTIME_LIKELY(PyUnicode_Check(arg) && PyUnicode_IS_COMPACT_ASCII(arg))) {
    name = std::string_view(static_cast<const char*>(PyUnicode_DATA(arg)),
                            static_cast<std::size_t>(PyUnicode_GET_LENGTH(arg)));
  } else {
    holder = other_name(call, arg, name);
    if (holder == nullptr) return nullptr;
  }
  PyObject* r = call_none([&] { f(name); });
  Py_XDECREF(holder);
  return r;
}

template <class F>
PyObject* string_result(F&& f) {
  std::string text;
  try {
    text = f();
  } catch (...) {
    return set_python_error();
  }
  return text_to_str(text);
}

/// The one argument of `call(keyword)` (`required`) or `call(keyword=None)` from a vectorcall,
/// positional or by keyword (also spelled `alias`, where not null); nullptr if absent. False
/// (TypeError set) for anything else.
[[gnu::cold]] bool parse_one_arg(const char* call, const char* keyword, const char* alias,
                                 bool required, PyObject* const* args, Py_ssize_t nargs,
                                 PyObject* kwnames, PyObject*& out) {
  out = nargs > 0 ? args[0] : nullptr;
  const Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  bool ok = nargs + nkw <= 1;
  if (ok && nkw == 1) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, 0);
    ok = PyUnicode_CompareWithASCIIString(key, keyword) == 0 ||
         (alias != nullptr && PyUnicode_CompareWithASCIIString(key, alias) == 0);
    out = args[nargs];
  }
  if (!ok || (required && out == nullptr)) {
    PyErr_Format(PyExc_TypeError,
                 required ? "laptime: %s() takes one argument, %s"
                          : "laptime: %s() takes at most one argument, %s=None",
                 call, keyword);
    return false;
  }
  return true;
}

/// `call(keyword=None)`.
bool optional_arg(const char* call, const char* keyword, PyObject* const* args, Py_ssize_t nargs,
                  PyObject* kwnames, PyObject*& out) {
  return parse_one_arg(call, keyword, nullptr, false, args, nargs, kwnames, out);
}

[[gnu::cold]] PyObject* required_arg(const char* call, const char* keyword, PyObject* const* args,
                                     Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* out = nullptr;
  return parse_one_arg(call, keyword, nullptr, true, args, nargs, kwnames, out) ? out : nullptr;
}

/// The argument of `call(keyword)` (borrowed), or nullptr with TypeError set: the common case
/// (one positional argument) inline, returned in a register.
LAPTIME_ALWAYS_INLINE PyObject* one_arg(const char* call, const char* keyword,
                                        PyObject* const* args, Py_ssize_t nargs,
                                        PyObject* kwnames) {
  if (LAPTIME_LIKELY(nargs == 1 && kwnames == nullptr)) return args[0];
  return required_arg(call, keyword, args, nargs, kwnames);
}

/// A number of iterations: an int (also a bool, which the seed's arithmetic took as 0 or 1, and
/// anything with __index__) or a float with an integral value (5.0, as configuration files give
/// numbers), within int. False with TypeError, ValueError or OverflowError set.
bool iteration_count(const char* keyword, PyObject* obj, int& out) {
  if (PyFloat_Check(obj)) {
    const double d = PyFloat_AS_DOUBLE(obj);
    if (!std::isfinite(d) || d != std::floor(d)) {
      PyErr_Format(PyExc_ValueError, "laptime: enable(): %s=%R is not a whole number", keyword,
                   obj);
      return false;
    }
    if (d < INT_MIN || d > INT_MAX) {
      PyErr_Format(PyExc_OverflowError, "laptime: enable(): %s is out of range", keyword);
      return false;
    }
    out = static_cast<int>(d);
    return true;
  }
  if (!PyIndex_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "laptime: enable(): %s must be an int, not %.100s", keyword,
                 Py_TYPE(obj)->tp_name);
    return false;
  }
  PyObject* index = PyNumber_Index(obj);
  if (index == nullptr) return false;
  int overflow = 0;
  const long v = PyLong_AsLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (v == -1 && PyErr_Occurred()) return false;
  if (overflow != 0 || v < INT_MIN || v > INT_MAX) {
    PyErr_Format(PyExc_OverflowError, "laptime: enable(): %s is out of range", keyword);
    return false;
  }
  out = static_cast<int>(v);
  return true;
}

/// A CUDA stream handle: None (the legacy default stream), an int (a cudaStream_t as integer),
/// or an object with an int attribute `cuda_stream` (torch.cuda.Stream; torch is not imported).
bool stream_handle(PyObject* obj, void*& out) {
  out = nullptr;
  if (obj == nullptr || obj == Py_None) return true;
  PyObject* value = nullptr;
  if (PyLong_Check(obj)) {
    value = Py_NewRef(obj);
  } else {
    value = PyObject_GetAttrString(obj, "cuda_stream");
    if (value == nullptr) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return false;
      PyErr_Clear();
    }
  }
  if (value == nullptr) {
    PyErr_Format(PyExc_TypeError,
                 "laptime: a CUDA stream is None, an int handle or an object with an int "
                 "attribute 'cuda_stream' (torch.cuda.Stream), not %.100s",
                 Py_TYPE(obj)->tp_name);
    return false;
  }
  out = PyLong_AsVoidPtr(value);
  Py_DECREF(value);
  return !(out == nullptr && PyErr_Occurred());
}

/// Writes `text` to the Python file object `file` and flushes it; false with an exception set.
bool write_to(PyObject* file, std::string_view text) {
  PyObject* str = text_to_str(text);
  if (str == nullptr) return false;
  PyObject* r = PyObject_CallMethod(file, "write", "O", str);
  Py_DECREF(str);
  if (r == nullptr) return false;
  Py_DECREF(r);
  r = PyObject_CallMethod(file, "flush", nullptr);
  if (r == nullptr) return false;
  Py_DECREF(r);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Periodic reports through sys.stdout

bool interpreter_usable() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

/// laptime::PrintFunction: writes to sys.stdout (notebooks and loggers capture it) with the GIL
/// held, from any thread (PyGILState_Ensure gives a C++ thread a thread state). A closed or full
/// sys.stdout drops the text (told once), whatever the program's SIGPIPE disposition.
void print_to_sys_stdout(const char* text, std::size_t size, void* /*user_data*/) {
  const std::string_view s(text, size);
  const laptime::detail::SigpipeBlocked blocked;
  if (!interpreter_usable()) {
    laptime::detail::print_own_output(stdout, s, kReportNotPrinted);
    return;
  }
  const PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);     // keep an exception the caller may have set
  PyObject* out = PySys_GetObject("stdout");  // borrowed
  if (out == nullptr || out == Py_None || !write_to(out, s)) after_failed_sys_stdout_write(s);
  PyErr_Restore(type, value, traceback);
  PyGILState_Release(gil);
}

PyObject* mod_install_print_function(PyObject*, PyObject*) {
#if LAPTIME_ENABLED
  // It writes the program's stdout: a progress line may rewrite itself there on a terminal.
  laptime::detail::stopwatch_state().stdout_print_fn.store(print_to_sys_stdout);
#endif
  stopwatch().set_print_function(print_to_sys_stdout, nullptr);
  Py_RETURN_NONE;
}

// The package registers this with atexit: afterwards reports go to the C stdout, so that a C++
// thread or laptime's own at-exit report never calls into a finalised interpreter.
PyObject* mod_uninstall_print_function(PyObject*, PyObject*) {
  stopwatch().set_print_function(nullptr, nullptr);
  Py_RETURN_NONE;
}

// ---------------------------------------------------------------------------------------------
// _Scope: `with stopwatch.measure("x"):`, `with nvtx.range("x"):`, and both as decorators
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
};

/// _Scope.__enter__ / _Scope.__exit__ in the type's dict.
struct ScopeMethodDescr {
  PyObject_HEAD ScopeOp op;
};

PyTypeObject* g_scope_descr_type = nullptr;

PyObject* scope_enter(PyObject* obj, PyObject*) {
  Scope* self = reinterpret_cast<Scope*>(obj);
  PyObject* r;
  if (self->kind == ScopeKind::Measure) {
    if (stopwatch_never_enabled()) Py_RETURN_NONE;
    r = with_name("measure", self->name, [](std::string_view n) { stopwatch().start_meas(n); });
  } else {
    // Not enabled, or quiet (no profiler, no sync, no order tracking): nothing to push or pop.
    if (!laptime::detail::nvtx_busy()) Py_RETURN_NONE;
    r = with_name("range", self->name, [](std::string_view n) { nvtx().range_push(n); });
  }
  if (r != nullptr) ++self->open;
  return r;
}

// Ends what __enter__ started, also when the block raised (it then propagates). A block entered
// before the first enable() ends nothing; the arguments (exc_type, exc, traceback) are not needed.
PyObject* scope_exit(PyObject* obj, PyObject* const*, Py_ssize_t) {
  Scope* self = reinterpret_cast<Scope*>(obj);
  if (self->open == 0) Py_RETURN_FALSE;
  --self->open;
  PyObject* r;
  if (self->kind == ScopeKind::Measure) {
    r = with_name("measure", self->name, [](std::string_view n) { stopwatch().end_meas(n); });
  } else {
    r = with_name("range", self->name, [](std::string_view n) { nvtx().range_pop(n); });
  }
  if (r == nullptr) return nullptr;
  Py_DECREF(r);
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

/// Empties the scope cache (tests: _testing_reset).
void clear_scope_cache() {
  for (ScopeCacheEntry& e : g_scope_cache) {
    Scope* old = e.scope;
    e = ScopeCacheEntry{nullptr, nullptr};
    if (old != nullptr) release_scope(old);
  }
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

// ---------------------------------------------------------------------------------------------
// laptime.Stopwatch: the facade of laptime::Stopwatch

// The hot pair, METH_FASTCALL | METH_KEYWORDS for the seed's spelling start_meas(name=...).
// Never enabled: one relaxed load, whatever the name (the seed's methods were empty then).
// Enabled: a str's UTF-8 view and laptime's own path; other names take the cold fallback.
// The method itself is only the common case (one positional argument) and the not-enabled
// test: everything else is a tail call: it needs no stack frame (docs/performance.md, section 5).
LAPTIME_NOINLINE PyObject* start_meas_enabled(PyObject* name) {
  return with_name("start_meas", name, [](std::string_view n) { stopwatch().start_meas(n); });
}

LAPTIME_NOINLINE PyObject* end_meas_enabled(PyObject* name) {
  return with_name("end_meas", name, [](std::string_view n) { stopwatch().end_meas(n); });
}

/// A hot method called other than with one positional argument: its argument by keyword, or
/// TypeError; then the same as the method.
[[gnu::cold]] LAPTIME_NOINLINE PyObject* sw_pair_other_args(const char* call,
                                                            PyObject* (*enabled)(PyObject*),
                                                            PyObject* const* args, Py_ssize_t nargs,
                                                            PyObject* kwnames) {
  PyObject* name = required_arg(call, "name", args, nargs, kwnames);
  if (name == nullptr) return nullptr;
  if (stopwatch_never_enabled()) Py_RETURN_NONE;
  return enabled(name);
}

PyObject* sw_start_meas(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (LAPTIME_UNLIKELY(nargs != 1 || kwnames != nullptr)) {
    return sw_pair_other_args("start_meas", start_meas_enabled, args, nargs, kwnames);
  }
  if (LAPTIME_LIKELY(stopwatch_never_enabled())) Py_RETURN_NONE;
  return start_meas_enabled(args[0]);
}

PyObject* sw_end_meas(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (LAPTIME_UNLIKELY(nargs != 1 || kwnames != nullptr)) {
    return sw_pair_other_args("end_meas", end_meas_enabled, args, nargs, kwnames);
  }
  if (LAPTIME_LIKELY(stopwatch_never_enabled())) Py_RETURN_NONE;
  return end_meas_enabled(args[0]);
}

// Whether this finish_iter will print the periodic report (laptime's own test, read ahead).
bool finish_iter_will_print() {
#if LAPTIME_ENABLED
  return laptime::detail::finish_iter_will_print();  // the rule's one home: prints_after
#else
  return false;  // compiled out (LAPTIME_DISABLE): nothing is ever printed
#endif
}

// finish_iter keeps the GIL, except when it is about to print. laptime prints under its report
// lock and the print function takes the GIL: waiting for that lock with the GIL held could
// deadlock against a thread that holds the lock and waits for the GIL (a C++ thread printing, or
// a Python thread whose sys.stdout.write released the GIL).
PyObject* sw_finish_iter(PyObject*, PyObject*) {
  if (LAPTIME_LIKELY(!finish_iter_will_print())) {
    return call_none([] { stopwatch().finish_iter(); });
  }
  return call_none_without_gil([] { stopwatch().finish_iter(); });
}

// nvtx=True/False (keyword only): Stopwatch::set_nvtx_ranges, after a successful enable; None (or
// left out): the setting stays as it is.
PyObject* sw_enable(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"num_warmup_iters", "print_every_n_iters", "do_cuda_sync",
                                   "nvtx", nullptr};
  PyObject* warmup_obj = nullptr;
  PyObject* every_obj = Py_None;
  int cuda_sync = 0;
  PyObject* nvtx_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|Op$O:enable", const_cast<char**>(keywords),
                                   &warmup_obj, &every_obj, &cuda_sync, &nvtx_obj)) {
    return nullptr;
  }
  const int nvtx_ranges = nvtx_obj == Py_None ? -1 : PyObject_IsTrue(nvtx_obj);
  if (nvtx_ranges == -1 && PyErr_Occurred()) return nullptr;
  int warmup = 0;
  if (!iteration_count("num_warmup_iters", warmup_obj, warmup)) return nullptr;
  std::optional<int> every;
  if (every_obj != Py_None) {
    int v = 0;
    if (!iteration_count("print_every_n_iters", every_obj, v)) return nullptr;
    every = v;
  }
#if LAPTIME_ENABLED
  // Messages in Python's words: None, not std::nullopt.
  PyObject* r =
      call_none([&] { laptime::detail::enable_stopwatch(warmup, every, cuda_sync != 0, "None"); });
#else
  PyObject* r = call_none([&] { stopwatch().enable(warmup, every, cuda_sync != 0); });
#endif
  if (r == nullptr || nvtx_ranges < 0) return r;
  Py_DECREF(r);
  return call_none([&] { stopwatch().set_nvtx_ranges(nvtx_ranges != 0); });
}

PyObject* sw_set_nvtx_ranges(PyObject*, PyObject* on) {
  const int v = PyObject_IsTrue(on);
  if (v < 0) return nullptr;
  return call_none([&] { stopwatch().set_nvtx_ranges(v != 0); });
}

/// tp_new of a facade type: `instance` (the singleton) for the type itself; for a Python
/// subclass (seed users subclass the tools), one instance per subclass, made on first use. Every
/// instance talks to the same process-wide state.
PyObject* facade_new(PyTypeObject* type, PyObject* instance) {
  if (LAPTIME_LIKELY(type == Py_TYPE(instance))) return Py_NewRef(instance);
  PyObject* key = reinterpret_cast<PyObject*>(type);
  if (PyObject* mine = PyDict_GetItemWithError(g_subclass_instances, key)) return Py_NewRef(mine);
  if (PyErr_Occurred()) return nullptr;
  PyObject* mine = type->tp_alloc(type, 0);
  if (mine == nullptr) return nullptr;
  if (PyDict_SetItem(g_subclass_instances, key, mine) < 0) {
    Py_DECREF(mine);
    return nullptr;
  }
  return mine;
}

PyObject* sw_new(PyTypeObject* type, PyObject*, PyObject*) {
  return facade_new(type, g_stopwatch);
}

// Stopwatch(*args, **kwargs): the singleton, enabled with these arguments (as the seed did).
int sw_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) == 0 && (kwargs == nullptr || PyDict_GET_SIZE(kwargs) == 0)) return 0;
  PyObject* r = sw_enable(self, args, kwargs);
  if (r == nullptr) return -1;
  Py_DECREF(r);
  return 0;
}

PyObject* sw_is_enabled(PyObject*, void*) {
  return PyBool_FromLong(stopwatch().is_enabled());
}

PyObject* sw_is_worker(PyObject*, void*) {
  return PyBool_FromLong(stopwatch().is_worker());
}

PyObject* sw_set_worker_label(PyObject*, PyObject* label) {
  return with_name("set_worker_label", label,
                   [](std::string_view l) { stopwatch().set_worker_label(l); });
}

// CPU tracking is recorded also before enable (laptime allows it; the seed ignored the call): a
// name that cannot be a name (unhashable) is ignored then, as the seed ignored everything.
PyObject* sw_set_cpu_usage_meas_name(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                                     PyObject* kwnames) {
  PyObject* name = one_arg("set_cpu_usage_meas_name", "name", args, nargs, kwnames);
  if (name == nullptr) return nullptr;
  if (!stopwatch().is_enabled() && !usable_name(name)) Py_RETURN_NONE;
  return with_name("set_cpu_usage_meas_name", name,
                   [](std::string_view n) { stopwatch().set_cpu_usage_meas_name(n); });
}

PyObject* sw_track_cpu_usage(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                             PyObject* kwnames) {
  PyObject* name = one_arg("track_cpu_usage", "name", args, nargs, kwnames);
  if (name == nullptr) return nullptr;
  if (!stopwatch().is_enabled() && !usable_name(name)) Py_RETURN_NONE;
  return with_name("track_cpu_usage", name,
                   [](std::string_view n) { stopwatch().track_cpu_usage(n); });
}

PyObject* sw_start_one_time(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* name = one_arg("start_one_time_measurement", "name", args, nargs, kwnames);
  if (name == nullptr) return nullptr;
  if (!stopwatch().is_enabled()) Py_RETURN_NONE;
  return with_name("start_one_time_measurement", name,
                   [](std::string_view n) { stopwatch().start_one_time_measurement(n); });
}

PyObject* sw_end_one_time(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* name = one_arg("end_one_time_measurement", "name", args, nargs, kwnames);
  if (name == nullptr) return nullptr;
  if (!stopwatch().is_enabled()) Py_RETURN_NONE;
  return with_name("end_one_time_measurement", name,
                   [](std::string_view n) { stopwatch().end_one_time_measurement(n); });
}

PyObject* sw_get_num_nonwarmup_iters_measured(PyObject*, PyObject*) {
  return PyLong_FromLong(stopwatch().get_num_nonwarmup_iters_measured());
}

PyObject* sw_report(PyObject*, PyObject*) {
  return string_result([] { return stopwatch().report(); });
}

PyObject* sw_to_json(PyObject*, PyObject*) {
  return string_result([] { return stopwatch().to_json(); });
}

// write_json(path): the atomic writer of LAPTIME_OUTPUT, without the GIL (it fsyncs). Failure is
// an OSError with errno and the path, so Python picks FileNotFoundError, PermissionError, ...
PyObject* sw_write_json(PyObject*, PyObject* path) {
  PyObject* encoded = nullptr;
  if (!PyUnicode_FSConverter(path, &encoded)) return nullptr;
  const std::string p(PyBytes_AS_STRING(encoded),
                      static_cast<std::size_t>(PyBytes_GET_SIZE(encoded)));
  Py_DECREF(encoded);
  std::exception_ptr error;
  Py_BEGIN_ALLOW_THREADS try { stopwatch().write_json(p); } catch (...) {
    error = std::current_exception();
  }
  Py_END_ALLOW_THREADS if (!error) Py_RETURN_NONE;
  try {
    std::rethrow_exception(error);
  } catch (const std::system_error& e) {
    errno = e.code().value();
    return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
  } catch (...) {
    return set_python_error();
  }
}

// results(): json.loads(to_json()), so the dict mirrors the JSON by construction.
PyObject* sw_results(PyObject* self, PyObject*) {
  PyObject* json = sw_to_json(self, nullptr);
  if (json == nullptr) return nullptr;
  PyObject* module = PyImport_ImportModule("json");
  PyObject* r = module != nullptr ? PyObject_CallMethod(module, "loads", "O", json) : nullptr;
  Py_XDECREF(module);
  Py_DECREF(json);
  return r;
}

// print_eval_times(file=None): to sys.stdout by default, looked up at each call (redirections,
// notebooks and pytest's capture replace it).
PyObject* sw_print_eval_times(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                              PyObject* kwnames) {
  PyObject* file = nullptr;
  if (!optional_arg("print_eval_times", "file", args, nargs, kwnames, file)) return nullptr;
  if (file == nullptr || file == Py_None) {
    file = PySys_GetObject("stdout");  // borrowed
    if (file == nullptr || file == Py_None) {
      PyErr_SetString(PyExc_RuntimeError, "laptime: print_eval_times: sys.stdout is not set");
      return nullptr;
    }
  }
  // laptime's own print_eval_times decides what is printed (nothing when not enabled and
  // nothing was measured, as the seed printed nothing before enable).
  std::string text;
  try {
    std::ostringstream out;
    stopwatch().print_eval_times(out);
    text = out.str();
  } catch (...) {
    return set_python_error();
  }
  if (text.empty()) Py_RETURN_NONE;
#if LAPTIME_ENABLED
  // Below a progress line rewritten in place on the terminal, not over it.
  if (file == PySys_GetObject("stdout") && laptime::detail::stopwatch_state().take_open_line()) {
    text.insert(text.begin(), '\n');
  }
#endif
  if (!write_to(file, text)) return nullptr;
  Py_RETURN_NONE;
}

PyObject* sw_reset(PyObject*, PyObject*) {
  return call_none([] { stopwatch().reset(); });
}

PyObject* sw_disable(PyObject*, PyObject*) {
  return call_none([] { stopwatch().disable(); });
}

PyObject* sw_set_print_rank0_only(PyObject*, PyObject* on) {
  const int v = PyObject_IsTrue(on);
  if (v < 0) return nullptr;
  stopwatch().set_print_rank0_only(v != 0);
  Py_RETURN_NONE;
}

PyObject* sw_enable_gpu_timing(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                               PyObject* kwnames) {
  PyObject* stream_obj = nullptr;
  void* stream = nullptr;
  if (!optional_arg("enable_gpu_timing", "stream", args, nargs, kwnames, stream_obj) ||
      !stream_handle(stream_obj, stream)) {
    return nullptr;
  }
  return call_none([&] { stopwatch().enable_gpu_timing(stream); });
}

PyObject* sw_enable_gpu_timing_for(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                                   PyObject* kwnames) {
  PyObject* name = one_arg("enable_gpu_timing_for", "name", args, nargs, kwnames);
  if (name == nullptr) return nullptr;
  return with_name("enable_gpu_timing_for", name,
                   [](std::string_view n) { stopwatch().enable_gpu_timing_for(n); });
}

// set_rank(rank, world_size=0): for programs that learn their rank from MPI or NCCL.
PyObject* sw_set_rank(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* const keywords[] = {"rank", "world_size", nullptr};
  int rank = 0;
  int world_size = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i|i:set_rank", const_cast<char**>(keywords),
                                   &rank, &world_size)) {
    return nullptr;
  }
  return call_none([&] { stopwatch().set_rank(rank, world_size); });
}

PyObject* sw_enable_recording(PyObject*, PyObject* n_obj) {
  const long long n = PyLong_AsLongLong(n_obj);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  if (n < 0) {
    PyErr_SetString(PyExc_ValueError,
                    "laptime: enable_recording(max_intervals): must be >= 0 (0: off)");
    return nullptr;
  }
  return call_none([&] { stopwatch().enable_recording(static_cast<std::size_t>(n)); });
}

// set_data_name(name): the verdict's data-wait name ("" or None: the default rule).
PyObject* sw_set_data_name(PyObject*, PyObject* name) {
  if (name == Py_None) return call_none([] { stopwatch().set_data_name(""); });
  return with_name("set_data_name", name, [](std::string_view n) { stopwatch().set_data_name(n); });
}

// set_total_iters(n): the iterations of the run, for the progress line's ETA (0 or None: unknown).
PyObject* sw_set_total_iters(PyObject*, PyObject* n_obj) {
  long long n = 0;
  if (n_obj != Py_None) {
    n = PyLong_AsLongLong(n_obj);
    if (n == -1 && PyErr_Occurred()) return nullptr;
  }
  if (n < 0) {
    PyErr_SetString(PyExc_ValueError, "laptime: set_total_iters(n): must be >= 0 (0: unknown)");
    return nullptr;
  }
  stopwatch().set_total_iters(static_cast<std::int64_t>(n));
  Py_RETURN_NONE;
}

// set_progress(mode): "report", "line" or "off".
PyObject* sw_set_progress(PyObject*, PyObject* mode_obj) {
  const char* mode = PyUnicode_Check(mode_obj) ? PyUnicode_AsUTF8(mode_obj) : nullptr;
  if (mode == nullptr) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "laptime: set_progress(mode): a str");
    return nullptr;
  }
  const std::string_view m(mode);
  laptime::ProgressMode pm = laptime::ProgressMode::Report;
  if (m == "line") {
    pm = laptime::ProgressMode::Line;
  } else if (m == "off") {
    pm = laptime::ProgressMode::Off;
  } else if (m != "report") {
    PyErr_Format(PyExc_ValueError,
                 "laptime: set_progress(mode): '%s' is not one of 'report', 'line', 'off'", mode);
    return nullptr;
  }
  return call_none([&] { stopwatch().set_progress(pm); });
}

PyObject* sw_set_gpu_stream(PyObject*, PyObject* stream_obj) {
  void* stream = nullptr;
  if (!stream_handle(stream_obj, stream)) return nullptr;
  stopwatch().set_gpu_stream(stream);
  Py_RETURN_NONE;
}

PyObject* sw_disable_gpu_timing(PyObject*, PyObject*) {
  return call_none([] { stopwatch().disable_gpu_timing(); });
}

// Waits for the GPU: other Python threads may run meanwhile.
PyObject* sw_wait_for_gpu_timings(PyObject*, PyObject*) {
  return call_none_without_gil([] { stopwatch().wait_for_gpu_timings(); });
}

PyObject* sw_measure(PyObject*, PyObject* name) {
  return cached_scope(name, ScopeKind::Measure);
}

// Does nothing: the floor of a METH_O call taking a str, for bench/python_bench.py.
PyObject* sw_noop(PyObject*, PyObject*) {
  Py_RETURN_NONE;
}

// Another method doing next to nothing (returns its argument; a body of its own, so that the
// compiler does not fold it into _noop): `_noop(x); _noop2(x)` calls two C functions from the
// same interpreter instruction, as start_meas and end_meas do (bench/python_bench.py).
PyObject* sw_noop2(PyObject*, PyObject* arg) {
  return Py_NewRef(arg);
}

PyObject* sw_repr(PyObject*) {
  return PyUnicode_FromFormat("<laptime.Stopwatch (%s)>",
                              stopwatch().is_enabled() ? "enabled" : "not enabled");
}

PyMethodDef g_stopwatch_methods[] = {
    {"start_meas", as_cfunction(sw_start_meas), METH_FASTCALL | METH_KEYWORDS,
     "start_meas($self, name)\n--\n\nStarts the interval `name` on the calling thread."},
    {"end_meas", as_cfunction(sw_end_meas), METH_FASTCALL | METH_KEYWORDS,
     "end_meas($self, name)\n--\n\nEnds the interval `name` running on the calling thread."},
    {"finish_iter", sw_finish_iter, METH_NOARGS,
     "finish_iter($self)\n--\n\nEnds an iteration: warm-up, NVTX mark, periodic report."},
    {"enable", as_cfunction(sw_enable), METH_VARARGS | METH_KEYWORDS,
     "enable($self, num_warmup_iters, print_every_n_iters=None, do_cuda_sync=False, *, "
     "nvtx=None)\n--\n\nTurns measuring on; nvtx=True also makes every interval an NVTX range "
     "(set_nvtx_ranges)."},
    {"set_nvtx_ranges", sw_set_nvtx_ranges, METH_O,
     "set_nvtx_ranges($self, on, /)\n--\n\nEvery interval also an NVTX range of its name, "
     "through the NVTX wrapper while it is enabled (LAPTIME_NVTX_RANGES, when set, wins)."},
    {"set_cpu_usage_meas_name", as_cfunction(sw_set_cpu_usage_meas_name),
     METH_FASTCALL | METH_KEYWORDS,
     "set_cpu_usage_meas_name($self, name)\n--\n\nSamples CPU and I/O during the intervals of "
     "`name`."},
    {"track_cpu_usage", as_cfunction(sw_track_cpu_usage), METH_FASTCALL | METH_KEYWORDS,
     "track_cpu_usage($self, name)\n--\n\nSamples CPU and I/O during the intervals of `name`; "
     "several names may be tracked."},
    {"start_one_time_measurement", as_cfunction(sw_start_one_time), METH_FASTCALL | METH_KEYWORDS,
     "start_one_time_measurement($self, name)\n--\n\nStarts a single interval outside the "
     "iterations."},
    {"end_one_time_measurement", as_cfunction(sw_end_one_time), METH_FASTCALL | METH_KEYWORDS,
     "end_one_time_measurement($self, name)\n--\n\nEnds a one-time measurement."},
    {"get_num_nonwarmup_iters_measured", sw_get_num_nonwarmup_iters_measured, METH_NOARGS,
     "get_num_nonwarmup_iters_measured($self)\n--\n\nIterations finished after warm-up."},
    {"print_eval_times", as_cfunction(sw_print_eval_times), METH_FASTCALL | METH_KEYWORDS,
     "print_eval_times($self, file=None)\n--\n\nPrints the report to `file` (default sys.stdout)."},
    {"report", sw_report, METH_NOARGS, "report($self)\n--\n\nThe report print_eval_times prints."},
    {"to_json", sw_to_json, METH_NOARGS, "to_json($self)\n--\n\nThe results as JSON (schema 1)."},
    {"write_json", sw_write_json, METH_O,
     "write_json($self, path, /)\n--\n\nWrites to_json() to path atomically (a temporary file "
     "in the same folder, then a rename); OSError on failure."},
    {"results", sw_results, METH_NOARGS,
     "results($self)\n--\n\nThe results as a dict mirroring to_json()."},
    {"reset", sw_reset, METH_NOARGS,
     "reset($self)\n--\n\nDrops all results and warm-up progress; the configuration stays."},
    {"disable", sw_disable, METH_NOARGS,
     "disable($self)\n--\n\nTurns measuring off; results stay, enable() may be called again."},
    {"set_print_rank0_only", sw_set_print_rank0_only, METH_O,
     "set_print_rank0_only($self, on, /)\n--\n\nPeriodic and at-exit reports only on rank 0."},
    {"enable_gpu_timing", as_cfunction(sw_enable_gpu_timing), METH_FASTCALL | METH_KEYWORDS,
     "enable_gpu_timing($self, stream=None)\n--\n\nAlso times every interval on the GPU with CUDA "
     "events recorded on `stream` (a torch.cuda.Stream, an int handle, or None: the legacy "
     "default stream)."},
    {"enable_gpu_timing_for", as_cfunction(sw_enable_gpu_timing_for), METH_FASTCALL | METH_KEYWORDS,
     "enable_gpu_timing_for($self, name)\n--\n\nTimes only the intervals of `name` on the GPU "
     "(call once per name), on the stream given to set_gpu_stream."},
    {"set_rank", as_cfunction(sw_set_rank), METH_VARARGS | METH_KEYWORDS,
     "set_rank($self, rank, world_size=0)\n--\n\nThis process's rank (and world size; 0 keeps "
     "the detected one) for reports, output paths and rank-0-only printing."},
    {"enable_recording", sw_enable_recording, METH_O,
     "enable_recording($self, max_intervals, /)\n--\n\nKeeps each thread's last `max_intervals` "
     "intervals for `laptime plot` / `laptime trace` (the JSON's \"samples\"); 0: off. "
     "LAPTIME_RECORD=N, when set, wins."},
    {"set_data_name", sw_set_data_name, METH_O,
     "set_data_name($self, name, /)\n--\n\nThe name whose intervals are the loop's wait for data, "
     "for the bottleneck verdict (None: the default rule). LAPTIME_DATA_NAME wins."},
    {"set_total_iters", sw_set_total_iters, METH_O,
     "set_total_iters($self, n, /)\n--\n\nThe iterations of the run (warm-up included), for the "
     "progress line's ETA (0: unknown)."},
    {"set_progress", sw_set_progress, METH_O,
     "set_progress($self, mode, /)\n--\n\nWhat periodic printing prints: 'report' (default), "
     "'line' (a compact line, rewritten in place on a terminal) or 'off'. LAPTIME_PROGRESS wins."},
    {"set_gpu_stream", sw_set_gpu_stream, METH_O,
     "set_gpu_stream($self, stream, /)\n--\n\nChanges the stream GPU timing records on."},
    {"disable_gpu_timing", sw_disable_gpu_timing, METH_NOARGS,
     "disable_gpu_timing($self)\n--\n\nStops recording CUDA events."},
    {"wait_for_gpu_timings", sw_wait_for_gpu_timings, METH_NOARGS,
     "wait_for_gpu_timings($self)\n--\n\nWaits for every pending GPU timing (at report time)."},
    {"measure", sw_measure, METH_O,
     "measure($self, name, /)\n--\n\nA context manager and decorator timing `name`."},
    {"set_worker_label", sw_set_worker_label, METH_O,
     "set_worker_label($self, label, /)\n--\n\nIn a worker process, the label its figures carry "
     "in the parent's report (default \"pid N\"); e.g. from a DataLoader worker_init_fn."},
    {"_noop", sw_noop, METH_O, "_noop($self, name, /)\n--\n\nDoes nothing (benchmark floor)."},
    {"_noop2", sw_noop2, METH_O,
     "_noop2($self, name, /)\n--\n\nReturns name (benchmark floor: another function)."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef g_stopwatch_getset[] = {
    {"is_enabled", sw_is_enabled, nullptr, "Whether enable() was called.", nullptr},
    {"is_worker", sw_is_worker, nullptr,
     "Whether this process measures for a parent (a worker: its figures go to the parent's "
     "report).",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot g_stopwatch_slots[] = {
    {Py_tp_doc, const_cast<char*>(
                    "Stopwatch(*args, **kwargs)\n--\n\n"
                    "The process-wide stopwatch (laptime::Stopwatch): named intervals per "
                    "iteration, warm-up, percentiles, CPU and I/O of tracked names, GPU time.\n"
                    "Stopwatch() returns the singleton; with arguments it also calls enable().")},
    {Py_tp_methods, g_stopwatch_methods},
    {Py_tp_getset, g_stopwatch_getset},
    {Py_tp_new, reinterpret_cast<void*>(sw_new)},
    {Py_tp_init, reinterpret_cast<void*>(sw_init)},
    {Py_tp_repr, reinterpret_cast<void*>(sw_repr)},
    {0, nullptr}};

// BASETYPE: seed users subclass the tools. An instance of a subclass is not the exact type, so
// CPython's specialised call instructions do not apply to it (a few ns per call more).
PyType_Spec g_stopwatch_spec = {"laptime.Stopwatch", sizeof(PyObject), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, g_stopwatch_slots};

// ---------------------------------------------------------------------------------------------
// laptime.NVTXRangeWrapper: the facade of laptime::NVTXRangeWrapper

// range_push(range_name), the seed's keyword; names as in start_meas.
// As start_meas: the method is the common case, the rest tail calls.
LAPTIME_NOINLINE PyObject* range_push_enabled(PyObject* name) {
  return with_name("range_push", name, [](std::string_view n) { nvtx().range_push(n); });
}

[[gnu::cold]] LAPTIME_NOINLINE PyObject* range_push_other_args(PyObject* const* args,
                                                               Py_ssize_t nargs,
                                                               PyObject* kwnames) {
  PyObject* name = required_arg("range_push", "range_name", args, nargs, kwnames);
  if (name == nullptr) return nullptr;
  if (!nvtx().is_enabled()) Py_RETURN_NONE;
  return range_push_enabled(name);
}

PyObject* nvtx_range_push(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (LAPTIME_UNLIKELY(nargs != 1 || kwnames != nullptr)) {
    return range_push_other_args(args, nargs, kwnames);
  }
  if (LAPTIME_LIKELY(!laptime::detail::nvtx_busy())) Py_RETURN_NONE;  // off, or nothing to do
  return range_push_enabled(args[0]);
}

// range_pop(range_name=None) (the seed's keyword; `expected` is laptime 0.1's spelling): with an
// expected name and order tracking on, the innermost range is checked before anything is popped.
LAPTIME_NOINLINE PyObject* range_pop_enabled(PyObject* expected) {
  if (expected == nullptr || expected == Py_None) return call_none([] { nvtx().range_pop(); });
  return with_name("range_pop", expected, [](std::string_view n) { nvtx().range_pop(n); });
}

[[gnu::cold]] LAPTIME_NOINLINE PyObject* range_pop_other_args(PyObject* const* args,
                                                              Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* expected = nullptr;
  if (!parse_one_arg("range_pop", "range_name", "expected", false, args, nargs, kwnames,
                     expected)) {
    return nullptr;
  }
  if (!nvtx().is_enabled()) Py_RETURN_NONE;
  return range_pop_enabled(expected);
}

PyObject* nvtx_range_pop(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (LAPTIME_UNLIKELY(kwnames != nullptr || nargs > 1)) {
    return range_pop_other_args(args, nargs, kwnames);
  }
  if (LAPTIME_LIKELY(!laptime::detail::nvtx_busy())) Py_RETURN_NONE;
  return range_pop_enabled(nargs == 1 ? args[0] : nullptr);
}

PyObject* nvtx_enable(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"sync_on_push", "sync_on_pop", "keep_track_of_range_order",
                                   "domain",       "colors",      nullptr};
  int sync_on_push = 0, sync_on_pop = 0, track = 0;
  PyObject* domain = Py_None;
  PyObject* colors = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ppp|$OO:enable", const_cast<char**>(keywords),
                                   &sync_on_push, &sync_on_pop, &track, &domain, &colors)) {
    return nullptr;
  }
  laptime::NVTXOptions options;
  if (domain != Py_None) {
    if (!PyUnicode_Check(domain)) return not_a_str("enable(domain=...)", domain);
    std::string_view d;
    if (!utf8_view(domain, d)) return nullptr;
    options.domain.assign(d.data(), d.size());
  }
  if (colors != Py_None) {
    PyObject* seq = PySequence_Fast(colors, "laptime: colors is a sequence of ARGB ints");
    if (seq == nullptr) return nullptr;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; ++i) {
      const unsigned long c = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, i));
      const bool failed = c == static_cast<unsigned long>(-1) && PyErr_Occurred();
      if (failed || c > 0xffffffffUL) {
        if (!failed) PyErr_SetString(PyExc_OverflowError, "laptime: a colour is 32-bit ARGB");
        Py_DECREF(seq);
        return nullptr;
      }
      options.colors.push_back(static_cast<std::uint32_t>(c));
    }
    Py_DECREF(seq);
  }
  return call_none(
      [&] { nvtx().enable(sync_on_push != 0, sync_on_pop != 0, track != 0, options); });
}

PyObject* nvtx_new(PyTypeObject* type, PyObject*, PyObject*) {
  return facade_new(type, g_nvtx);
}

int nvtx_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) == 0 && (kwargs == nullptr || PyDict_GET_SIZE(kwargs) == 0)) return 0;
  PyObject* r = nvtx_enable(self, args, kwargs);
  if (r == nullptr) return -1;
  Py_DECREF(r);
  return 0;
}

PyObject* nvtx_is_enabled(PyObject*, void*) {
  return PyBool_FromLong(nvtx().is_enabled());
}

PyObject* nvtx_mark(PyObject*, PyObject* message) {
  if (!nvtx().is_enabled()) Py_RETURN_NONE;
  return with_name("mark", message, [](std::string_view m) { nvtx().mark(m); });
}

PyObject* nvtx_name_current_thread(PyObject*, PyObject* name) {
  if (!PyUnicode_Check(name)) return not_a_str("name_current_thread", name);
  return with_name("name_current_thread", name,
                   [](std::string_view n) { nvtx().name_current_thread(n); });
}

PyObject* nvtx_profiler_start(PyObject*, PyObject*) {
  return PyBool_FromLong(nvtx().profiler_start());
}

PyObject* nvtx_profiler_stop(PyObject*, PyObject*) {
  return PyBool_FromLong(nvtx().profiler_stop());
}

PyObject* nvtx_range(PyObject*, PyObject* name) {
  return cached_scope(name, ScopeKind::Range);
}

PyObject* nvtx_repr(PyObject*) {
  return PyUnicode_FromFormat("<laptime.NVTXRangeWrapper (%s)>",
                              nvtx().is_enabled() ? "enabled" : "not enabled");
}

PyMethodDef g_nvtx_methods[] = {
    {"range_push", as_cfunction(nvtx_range_push), METH_FASTCALL | METH_KEYWORDS,
     "range_push($self, range_name)\n--\n\nOpens an NVTX range on the calling thread."},
    {"range_pop", as_cfunction(nvtx_range_pop), METH_FASTCALL | METH_KEYWORDS,
     "range_pop($self, range_name=None)\n--\n\nCloses the calling thread's innermost range; with "
     "order tracking, checks first that it is `range_name` (also spelled `expected`)."},
    {"enable", as_cfunction(nvtx_enable), METH_VARARGS | METH_KEYWORDS,
     "enable($self, sync_on_push, sync_on_pop, keep_track_of_range_order, *, domain=None, "
     "colors=None)\n--\n\nTurns the wrapper on."},
    {"mark", nvtx_mark, METH_O, "mark($self, message, /)\n--\n\nAn instantaneous NVTX marker."},
    {"name_current_thread", nvtx_name_current_thread, METH_O,
     "name_current_thread($self, name, /)\n--\n\nNames the calling OS thread for the profiler."},
    {"profiler_start", nvtx_profiler_start, METH_NOARGS,
     "profiler_start($self)\n--\n\ncuProfilerStart, when enabled and CUDA is available."},
    {"profiler_stop", nvtx_profiler_stop, METH_NOARGS,
     "profiler_stop($self)\n--\n\ncuProfilerStop, when enabled and CUDA is available."},
    {"range", nvtx_range, METH_O,
     "range($self, name, /)\n--\n\nA context manager and decorator: an NVTX range around the "
     "block."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef g_nvtx_getset[] = {
    {"is_enabled", nvtx_is_enabled, nullptr, "Whether enable() was called.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot g_nvtx_slots[] = {
    {Py_tp_doc,
     const_cast<char*>("NVTXRangeWrapper(*args, **kwargs)\n--\n\n"
                       "The process-wide NVTX range wrapper (laptime::NVTXRangeWrapper): NVTX "
                       "pushes, pops and marks with optional CUDA syncs and a per-thread check of "
                       "the range order.\nNVTXRangeWrapper() returns the singleton; with "
                       "arguments it also calls enable().")},
    {Py_tp_methods, g_nvtx_methods},
    {Py_tp_getset, g_nvtx_getset},
    {Py_tp_new, reinterpret_cast<void*>(nvtx_new)},
    {Py_tp_init, reinterpret_cast<void*>(nvtx_init)},
    {Py_tp_repr, reinterpret_cast<void*>(nvtx_repr)},
    {0, nullptr}};

PyType_Spec g_nvtx_spec = {"laptime.NVTXRangeWrapper", sizeof(PyObject), 0,
                           Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, g_nvtx_slots};

// ---------------------------------------------------------------------------------------------
// Module functions

PyObject* mod_set_error_policy(PyObject*, PyObject* arg) {
  if (!PyUnicode_Check(arg)) return not_a_str("set_error_policy", arg);
  std::string_view v;
  if (!utf8_view(arg, v)) return nullptr;
  const std::optional<laptime::ErrorPolicy> policy = laptime::parse_error_policy(v);  // error.hpp
  if (!policy) {
    PyErr_Format(PyExc_ValueError,
                 "laptime: set_error_policy(%R): the policy is 'throw', 'warn' or 'abort'", arg);
    return nullptr;
  }
  laptime::set_error_policy(*policy);
  Py_RETURN_NONE;
}

PyObject* mod_error_policy(PyObject*, PyObject*) {
  return PyUnicode_FromString(laptime::error_policy_name(laptime::error_policy()));
}

/// d[key] = value, stealing `value`; false with an exception set.
bool set_item(PyObject* d, const char* key, PyObject* value) {
  if (value == nullptr) return false;
  const int r = PyDict_SetItemString(d, key, value);
  Py_DECREF(value);
  return r == 0;
}

PyObject* str_list(const std::vector<std::string>& items) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(items.size()));
  if (list == nullptr) return nullptr;
  for (std::size_t i = 0; i < items.size(); ++i) {
    PyObject* s = text_to_str(items[i]);
    if (s == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), s);
  }
  return list;
}

// configure_from_env(): what was applied, as a dict with the fields of laptime::Settings.
PyObject* mod_configure_from_env(PyObject*, PyObject*) {
  laptime::Settings s;
  try {
    s = laptime::configure_from_env();
  } catch (...) {
    return set_python_error();
  }
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  auto boolean = [](bool b) { return PyBool_FromLong(b); };
  const bool ok = set_item(d, "stopwatch", boolean(s.stopwatch)) &&
                  set_item(d, "num_warmup_iters", PyLong_FromLong(s.num_warmup_iters)) &&
                  set_item(d, "print_every_n_iters",
                           s.print_every_n_iters ? PyLong_FromLong(*s.print_every_n_iters)
                                                 : Py_NewRef(Py_None)) &&
                  set_item(d, "do_cuda_sync", boolean(s.do_cuda_sync)) &&
                  set_item(d, "gpu_timing", boolean(s.gpu_timing)) &&
                  set_item(d, "stopwatch_all_ranks", boolean(s.stopwatch_all_ranks)) &&
                  set_item(d, "print_rank0_only", boolean(s.print_rank0_only)) &&
                  set_item(d, "track_cpu", str_list(s.track_cpu)) &&
                  set_item(d, "nvtx", boolean(s.nvtx)) &&
                  set_item(d, "nvtx_sync_on_push", boolean(s.nvtx_sync_on_push)) &&
                  set_item(d, "nvtx_sync_on_pop", boolean(s.nvtx_sync_on_pop)) &&
                  set_item(d, "nvtx_check_order", boolean(s.nvtx_check_order)) &&
                  set_item(d, "nvtx_domain", text_to_str(s.nvtx_domain)) &&
                  set_item(d, "warnings", str_list(s.warnings));
  // LAPTIME_RECORD: the intervals kept per thread, or None.
  PyObject* record =
      s.record_intervals ? PyLong_FromSize_t(*s.record_intervals) : Py_NewRef(Py_None);
  if (!set_item(d, "record_intervals", record) || !ok) {  // set_item takes `record` first
    Py_DECREF(d);
    return nullptr;
  }
  return d;
}

// Where the build found the NVTX3 headers (python/CMakeLists.txt defines these).
#ifndef LAPTIME_PY_NVTX_INCLUDE_DIR
#define LAPTIME_PY_NVTX_INCLUDE_DIR ""
#endif
#ifndef LAPTIME_PY_NVTX_SOURCE
#define LAPTIME_PY_NVTX_SOURCE ""
#endif

PyObject* optional_text(const char* text) {
  return *text != '\0' ? PyUnicode_DecodeFSDefault(text) : Py_NewRef(Py_None);
}

// build_info(): how this extension was built, to tell at a glance why NVTX or CUDA is missing.
PyObject* mod_build_info(PyObject*, PyObject*) {
#if defined(__clang__)
  const char* compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  const char* compiler = "gcc " __VERSION__;
#else
  const char* compiler = "unknown";
#endif
#ifdef LAPTIME_HAVE_CUDA_HEADERS
  const bool cuda_headers = true;
#else
  const bool cuda_headers = false;
#endif
  const bool nvtx_in = LAPTIME_HAVE_NVTX != 0;
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  const bool ok =
      set_item(d, "version", PyUnicode_FromString(LAPTIME_VERSION_STRING)) &&
      set_item(d, "nvtx", PyBool_FromLong(nvtx_in)) &&
      set_item(d, "nvtx_include_dir", optional_text(nvtx_in ? LAPTIME_PY_NVTX_INCLUDE_DIR : "")) &&
      set_item(d, "nvtx_source", optional_text(nvtx_in ? LAPTIME_PY_NVTX_SOURCE : "")) &&
      set_item(d, "cuda_headers", PyBool_FromLong(cuda_headers)) &&
      set_item(d, "compiler", PyUnicode_FromString(compiler)) &&
      set_item(d, "cplusplus", PyLong_FromLong(__cplusplus)) &&
      set_item(d, "disabled", PyBool_FromLong(!LAPTIME_ENABLED)) &&
      set_item(d, "max_names_capacity", PyLong_FromLong(LAPTIME_MAX_NAMES)) &&
      set_item(d, "python", PyUnicode_FromString(PY_VERSION));
  if (!ok) {
    Py_DECREF(d);
    return nullptr;
  }
  return d;
}

// set_max_names(n): the run-time limit on distinct measurement names (<= the capacity).
PyObject* mod_set_max_names(PyObject*, PyObject* arg) {
  if (PyBool_Check(arg) || !PyLong_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "laptime: set_max_names(n): n must be an int, not %.100s",
                 Py_TYPE(arg)->tp_name);
    return nullptr;
  }
  const long long n = PyLong_AsLongLong(arg);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  if (n < 1) {
    PyErr_Format(PyExc_ValueError, "laptime: set_max_names(%lld): the limit is at least 1", n);
    return nullptr;
  }
  const std::size_t limit = stopwatch().set_max_names(static_cast<std::size_t>(n));
  return PyLong_FromSize_t(limit);
}

PyObject* mod_max_names(PyObject*, PyObject*) {
#if LAPTIME_ENABLED
  return PyLong_FromUnsignedLong(
      laptime::detail::stopwatch_state().max_names.load(std::memory_order_relaxed));
#else
  return PyLong_FromLong(LAPTIME_MAX_NAMES);
#endif
}

PyObject* mod_cuda_status(PyObject*, PyObject*) {
  return string_result([] { return laptime::cuda::status(); });
}

// Tests only: the Stopwatch and the NVTX wrapper as before their first enable (names stay
// interned), the error policy back to throw, and the sys.stdout printer reinstalled (the
// Stopwatch reset removes it). Never while other threads measure.
PyObject* mod_testing_reset(PyObject*, PyObject*) {
  try {
#if LAPTIME_ENABLED
    laptime::detail::testing_reset_stopwatch();
#endif
    laptime::detail::nvtx_reset_for_testing();
  } catch (...) {
    return set_python_error();
  }
  laptime::set_error_policy(laptime::ErrorPolicy::Throw);
  stopwatch().set_print_function(print_to_sys_stdout, nullptr);
  clear_scope_cache();
  Py_RETURN_NONE;
}

// enable_nvtx_counters(sample_hz=0.0) / disable_nvtx_counters(): laptime/counters.hpp.
PyObject* mod_enable_nvtx_counters(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"sample_hz", nullptr};
  double hz = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|d:enable_nvtx_counters",
                                   const_cast<char**>(keywords), &hz)) {
    return nullptr;
  }
  try {
    laptime::enable_nvtx_counters(hz);
  } catch (...) {
    return set_python_error();
  }
  Py_RETURN_NONE;
}

PyObject* mod_disable_nvtx_counters(PyObject*, PyObject*) {
  laptime::disable_nvtx_counters();
  Py_RETURN_NONE;
}

PyMethodDef g_module_methods[] = {
    {"set_error_policy", mod_set_error_policy, METH_O,
     "set_error_policy(policy, /)\n--\n\nWhat a usage error does, process-wide: 'throw' (raise "
     "laptime.UsageError), 'warn' (one line on stderr) or 'abort'."},
    {"error_policy", mod_error_policy, METH_NOARGS,
     "error_policy()\n--\n\nThe policy in force: 'throw', 'warn' or 'abort'."},
    {"configure_from_env", mod_configure_from_env, METH_NOARGS,
     "configure_from_env()\n--\n\nEnables the tools the LAPTIME_* variables ask for; returns "
     "what was applied."},
    {"cuda_status", mod_cuda_status, METH_NOARGS,
     "cuda_status()\n--\n\nOne line: the CUDA driver laptime loaded, or why it is unavailable."},
    {"build_info", mod_build_info, METH_NOARGS,
     "build_info()\n--\n\nHow this extension was built: version, whether NVTX is compiled in and "
     "where its headers were found, compiler, C++ standard, LAPTIME_DISABLE, name capacity."},
    {"set_max_names", mod_set_max_names, METH_O,
     "set_max_names(n, /)\n--\n\nLimits the distinct measurement names to n (at most "
     "build_info()['max_names_capacity']; LAPTIME_MAX_NAMES in the environment wins). Returns "
     "the limit in force."},
    {"max_names", mod_max_names, METH_NOARGS,
     "max_names()\n--\n\nThe limit on distinct measurement names in force."},
    {"enable_nvtx_counters", as_cfunction(mod_enable_nvtx_counters), METH_VARARGS | METH_KEYWORDS,
     "enable_nvtx_counters(sample_hz=0.0)\n--\n\nPublishes the CPU % and storage MB/s of "
     "tracked names as NVTX counters at the end of each tracked interval; with sample_hz > 0 "
     "also the process tree's, that many times a second (also LAPTIME_NVTX_COUNTERS, "
     "LAPTIME_NVTX_COUNTERS_HZ)."},
    {"disable_nvtx_counters", mod_disable_nvtx_counters, METH_NOARGS,
     "disable_nvtx_counters()\n--\n\nStops publishing NVTX counters."},
    {"_install_print_function", mod_install_print_function, METH_NOARGS, nullptr},
    {"_uninstall_print_function", mod_uninstall_print_function, METH_NOARGS, nullptr},
    {"_testing_reset", mod_testing_reset, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef g_module_def = {PyModuleDef_HEAD_INIT,
                            "laptime._laptime",
                            "laptime's extension module; use the package laptime.",
                            -1,
                            g_module_methods,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr};

/// Creates the type, adds it to the module as `name`; returns a new reference (nullptr: error).
PyTypeObject* add_type(PyObject* module, PyType_Spec* spec, const char* name) {
  PyObject* type = PyType_FromSpec(spec);
  if (type == nullptr) return nullptr;
  // Their __module__ is "laptime" (from the spec's name): where users find them.
  if (PyModule_AddObject(module, name, Py_NewRef(type)) < 0) {
    Py_DECREF(type);
    return nullptr;
  }
  return reinterpret_cast<PyTypeObject*>(type);
}

/// The one instance of a facade type (its tp_new returns it from then on).
PyObject* make_instance(PyTypeObject* type) {
  return type != nullptr ? PyType_GenericAlloc(type, 0) : nullptr;
}

}  // namespace

// Exported explicitly: before Python 3.9, PyMODINIT_FUNC has no visibility attribute, and the
// module is built with hidden visibility.
extern "C" __attribute__((visibility("default"))) PyObject* PyInit__laptime() {
  PyObject* module = PyModule_Create(&g_module_def);
  if (module == nullptr) return nullptr;
  g_usage_error = PyErr_NewExceptionWithDoc(
      "laptime.UsageError",
      "Misuse of the laptime API (a measurement ended that never started, a range popped out of "
      "order, ...). A subclass of AssertionError, as the seed raised AssertionError.",
      PyExc_AssertionError, nullptr);
  PyTypeObject* stopwatch_type = add_type(module, &g_stopwatch_spec, "Stopwatch");
  PyTypeObject* nvtx_type = add_type(module, &g_nvtx_spec, "NVTXRangeWrapper");
  g_scope_type = add_type(module, &g_scope_spec, "_Scope");
  g_scope_descr_type = add_type(module, &g_scope_descr_spec, "_ScopeMethodDescr");
  g_name_cache = PyDict_New();
  g_subclass_instances = PyDict_New();
  g_stopwatch = make_instance(stopwatch_type);
  g_nvtx = make_instance(nvtx_type);
  Py_XDECREF(stopwatch_type);
  Py_XDECREF(nvtx_type);
  if (g_usage_error == nullptr || g_scope_type == nullptr || g_scope_descr_type == nullptr ||
      !add_scope_methods(g_scope_type) || g_stopwatch == nullptr || g_name_cache == nullptr ||
      g_subclass_instances == nullptr || g_nvtx == nullptr ||
      PyModule_AddObject(module, "UsageError", Py_NewRef(g_usage_error)) < 0 ||
      PyModule_AddStringConstant(module, "__version__", LAPTIME_VERSION_STRING) < 0 ||
      PyModule_AddIntConstant(module, "HAVE_NVTX", LAPTIME_HAVE_NVTX) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  g_module = module;  // borrowed: the module lives as long as the interpreter
  return module;
}
