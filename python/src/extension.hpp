// laptime._laptime, the Python extension (docs/python.md): what its files share.
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
//     out-of-line path (names.cpp), which the ASCII path never touches;
//   - `with stopwatch.measure(name):` allocates nothing once the name was used on the thread
//     (the scope cache, scope_cache.cpp).
// Nothing releases the GIL on the hot path: the calls take nanoseconds. The exception is a
// finish_iter that is about to print the periodic report (stopwatch_type.cpp).
//
// The files, one concern each: _laptime.cpp (module functions, PyInit), names.cpp (a Python
// object -> the bytes laptime records), arguments.cpp (argument parsing, errors, conversions),
// printing.cpp (reports through sys.stdout), interpreters.cpp (what each interpreter has of its
// own), scope.cpp (the `with` / decorator type, scope.hpp), scope_cache.cpp (the scope measure() /
// range() return), stopwatch_type.cpp, stopwatch_settings.cpp, stopwatch_results.cpp,
// nvtx_type.cpp, worker_role.cpp (a worker or a program of its own). They reach laptime through
// its public headers and <laptime/binding_hooks.hpp> only.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <laptime/binding_hooks.hpp>
#include <laptime/laptime.hpp>

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#if PY_VERSION_HEX < 0x030A0000
static inline PyObject* Py_NewRef(PyObject* obj) {
  Py_INCREF(obj);
  return obj;
}
#endif

namespace pyext {

// The objects PyInit__laptime makes (these, the facade types and the _Scope types of scope.cpp)
// are made by its first run since Python started and shared by every interpreter that imports
// laptime (interpreters.cpp). CPython 3.8-3.12 run it again in the next interpreter that imports
// laptime once the interpreter that ran it has ended; that run adds these same objects to its
// module, so that `except laptime.UsageError`, and a scope made before, hold in every interpreter.
// They are safe to use from any of those interpreters for the process's life: the interpreters
// share one GIL, these objects and their methods are C code that runs no interpreter's Python
// code, and laptime never drops its references to them, so that none is freed after the
// interpreter that made it ended (_laptime.cpp says why that matters).

// laptime.UsageError: a subclass of AssertionError, as the seed raised AssertionError.
inline PyObject* g_usage_error = nullptr;
// The one instance of each facade type (the state itself is laptime's, process-wide).
inline PyObject* g_stopwatch = nullptr;
inline PyObject* g_nvtx = nullptr;

// This module's definition: PyState_FindModule finds the calling interpreter's module by it.
extern PyModuleDef g_module_def;

// The types' specs, made into types by PyInit__laptime.
extern PyType_Spec g_stopwatch_spec;
extern PyType_Spec g_nvtx_spec;

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

// ---- names (names.cpp) ----------------------------------------------------------------------

/// utf8_view's slow path; `owner`, where given, gets the object whose buffer `out` is (borrowed:
/// the str itself, or the bytes the name cache keeps for a str with lone surrogates).
bool utf8_view_other(PyObject* str, std::string_view& out, PyObject** owner = nullptr);

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

/// TypeError "the name must be a str"; returns nullptr.
PyObject* not_a_str(const char* call, PyObject* arg);
/// Whether `obj` can be a name (a str, or hashable); clears the error of the check.
bool usable_name(PyObject* obj);
/// The name of `arg` when it is not a compact ASCII str; sets `name` to the bytes of the returned
/// object (a new reference that keeps them alive; nullptr with an exception set).
PyObject* other_name(const char* call, PyObject* arg, std::string_view& name);
/// A str from bytes that may not be valid UTF-8 (an invalid byte shows as `\xe9`).
PyObject* text_to_str(std::string_view text);

// ---- errors and arguments (arguments.cpp) ---------------------------------------------------

/// Turns the C++ exception being handled into a Python one; returns nullptr. Only in a catch.
PyObject* set_python_error();

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

/// Releases the GIL for its lifetime, as Py_BEGIN/END_ALLOW_THREADS do, around a laptime call that
/// may wait for the report lock or print, and marks the thread meanwhile: its report takes the GIL
/// back itself, where a thread whose GIL another extension released hands the report over
/// (printing.cpp).
class WithoutGil {
 public:
  WithoutGil();
  ~WithoutGil();
  WithoutGil(const WithoutGil&) = delete;
  WithoutGil& operator=(const WithoutGil&) = delete;

 private:
  PyThreadState* saved_;
  bool was_marked_;
};

/// Same for a call that may block: runs it without the GIL.
template <class F>
PyObject* call_none_without_gil(F&& f) {
  std::exception_ptr error;
  {
    const WithoutGil released;
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (...) {
      return set_python_error();
    }
  }
  Py_RETURN_NONE;
}

/// A str from the text `f()` returns, or nullptr with the C++ exception translated.
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

/// with_name for a name that is not a compact ASCII str: through other_name and its identity
/// cache, out of the caller's way.
template <class F>
[[gnu::cold]] LAPTIME_NOINLINE PyObject* with_other_name(const char* call, PyObject* arg, F f) {
  std::string_view name;
  PyObject* holder = other_name(call, arg, name);  // keeps the bytes alive
  if (holder == nullptr) return nullptr;
  PyObject* r = call_none([&] { f(name); });
  Py_DECREF(holder);
  return r;
}

/// `f(name)` for the name `arg` of `call`: a compact ASCII str is read in place (its bytes are
/// its UTF-8), its view kept in registers and `f` inlined; anything else is with_other_name's.
template <class F>
LAPTIME_ALWAYS_INLINE PyObject* with_name(const char* call, PyObject* arg, F&& f) {
  if (LAPTIME_LIKELY(PyUnicode_Check(arg) && PyUnicode_IS_COMPACT_ASCII(arg))) {
    const std::string_view name(static_cast<const char*>(PyUnicode_DATA(arg)),
                                static_cast<std::size_t>(PyUnicode_GET_LENGTH(arg)));
    return call_none([&] { f(name); });
  }
  return with_other_name(call, arg, f);
}

/// The one argument of `call(keyword)` (`required`) or `call(keyword=None)` from a vectorcall,
/// positional or by keyword (also spelled `alias`, where not null); nullptr if absent. False
/// (TypeError set) for anything else.
bool parse_one_arg(const char* call, const char* keyword, const char* alias, bool required,
                   PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject*& out);
/// `call(keyword=None)`.
bool optional_arg(const char* call, const char* keyword, PyObject* const* args, Py_ssize_t nargs,
                  PyObject* kwnames, PyObject*& out);
/// The argument of `call(keyword)`, or nullptr with TypeError set.
PyObject* required_arg(const char* call, const char* keyword, PyObject* const* args,
                       Py_ssize_t nargs, PyObject* kwnames);

/// The argument of `call(keyword)` (borrowed), or nullptr with TypeError set: the common case
/// (one positional argument) inline, returned in a register.
LAPTIME_ALWAYS_INLINE PyObject* one_arg(const char* call, const char* keyword,
                                        PyObject* const* args, Py_ssize_t nargs,
                                        PyObject* kwnames) {
  if (LAPTIME_LIKELY(nargs == 1 && kwnames == nullptr)) return args[0];
  return required_arg(call, keyword, args, nargs, kwnames);
}

/// A number of iterations (an int, a bool, or a float with an integral value) within int.
bool iteration_count(const char* keyword, PyObject* obj, int& out);
/// A CUDA stream handle: None, an int, or an object with an int attribute `cuda_stream`.
bool stream_handle(PyObject* obj, void*& out);
/// Writes `text` to the Python file object `file` and flushes it; false with an exception set.
bool write_to(PyObject* file, std::string_view text);
/// d[key] = value, stealing `value`; false with an exception set.
bool set_item(PyObject* d, const char* key, PyObject* value);

// ---- each interpreter's own (interpreters.cpp) -----------------------------------------------

/// The interpreter of the calling thread.
inline PyInterpreterState* current_interpreter() {
#if PY_VERSION_HEX >= 0x03090000
  return PyInterpreterState_Get();
#else
  return PyThreadState_Get()->interp;  // 3.8: no PyInterpreterState_Get yet
#endif
}

/// The ID of the calling thread's interpreter, unique in the process (a later interpreter may sit
/// at the address of one that ended).
inline std::int64_t interpreter_id() {
  return PyInterpreterState_GetID(current_interpreter());
}

/// Whether the calling interpreter may load this single-phase module; false with ImportError set
/// where it refuses it (interpreters.cpp).
bool loads_single_phase_modules();
/// The keys of what laptime keeps in each interpreter's dict (with the shared objects); false
/// with an exception set.
bool make_interpreter_keys();
/// The package's `name` (_decorate, _scope_from) that it put on this module as the calling
/// interpreter has it: a new reference, or nullptr with an exception set.
PyObject* package_function(const char* name);
/// json.loads of the calling interpreter (borrowed), or nullptr with an exception set.
PyObject* json_loads();
/// The name cache of the calling interpreter (names.cpp; a dict, borrowed), or nullptr with an
/// exception set.
PyObject* name_cache();
PyObject* mod_prepare_interpreter(PyObject*, PyObject*);

// ---- the pieces the types and the module share ----------------------------------------------

/// laptime::PrintFunction writing to sys.stdout (printing.cpp).
void print_to_sys_stdout(const char* text, std::size_t size, void* user_data);
PyObject* mod_install_print_function(PyObject*, PyObject*);
PyObject* mod_uninstall_print_function(PyObject*, PyObject*);
PyObject* mod_run_exit_output(PyObject*, PyObject*);

/// The _Scope types, made and added to `objects` (the shared objects, by name); false with an
/// exception set (scope.cpp).
bool add_scope_types(PyObject* objects);
/// `stopwatch.measure(name)` / `nvtx.range(name)` (the METH_O methods themselves, so that the call
/// reaches the scope cache without another call): the calling thread's scope for `name`
/// (scope_cache.cpp).
PyObject* measure_scope(PyObject* self, PyObject* name);
PyObject* range_scope(PyObject* self, PyObject* name);
/// Empties the scope cache (tests: _testing_reset).
void clear_scope_cache();
void forget_scope_cache();

/// Before enable(), set_rank() and configure_from_env(): in a worker process, a call made from
/// no module's import makes it a program of its own (worker_role.cpp).
void note_program_call();

/// Creates the type, adds it to `objects` (a dict) as `name`; a new reference (nullptr: error).
PyTypeObject* add_type(PyObject* objects, PyType_Spec* spec, const char* name);

/// tp_new of a facade type: the singleton `instance`, or one instance per Python subclass.
PyObject* facade_new(PyTypeObject* type, PyObject* instance);

}  // namespace pyext
