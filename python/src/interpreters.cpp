// laptime._laptime in several interpreters of one process (docs/python.md, Subinterpreters): what
// each interpreter has of its own.
//
// The module is single-phase (m_size -1): PyInit__laptime runs for the first interpreter that
// imports it (in it; from 3.13 in the main interpreter, on its behalf), and each other one gets a
// copy of that module's dict. Only the main interpreter and legacy subinterpreters load such a
// module (an isolated one, with a GIL of its own, refuses it), so all of them share one GIL. The
// objects PyInit__laptime makes are shared (extension.hpp says why that is safe). What is not C
// code is each interpreter's own, looked up in the calling one:
//   - the Python functions laptime calls: the package's _decorate and _scope_from (on the module
//     as this interpreter has it) and json.loads. Another interpreter's would run its code with
//     its globals here, and once it ended, with its globals cleared (a crash);
//   - the name cache (names.cpp): a lookup compares names with ==, whose __eq__ may be Python
//     code (a pathlib.Path name).
// json.loads and the name cache are kept in the interpreter's dict (PyInterpreterState_GetDict),
// which the interpreter clears after its modules, late in its finalisation: results() works in a
// __del__ late in its shutdown, where importing json fails.
#include "extension.hpp"

namespace pyext {
namespace {

// The keys in each interpreter's dict: strs used as keys only, made with the shared objects.
PyObject* g_json_loads_key = nullptr;
PyObject* g_name_cache_key = nullptr;

/// The object under `key` in the calling interpreter's dict, made by `make` (a new reference) the
/// first time. Borrowed (the dict keeps it), or nullptr with an exception set.
PyObject* interpreter_object(PyObject* key, PyObject* (*make)()) {
  PyObject* dict = PyInterpreterState_GetDict(current_interpreter());
  if (dict == nullptr) {
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_RuntimeError, "laptime: this interpreter is being finalised");
    }
    return nullptr;
  }
  PyObject* obj = PyDict_GetItemWithError(dict, key);
  if (obj != nullptr || PyErr_Occurred()) return obj;
  obj = make();
  if (obj == nullptr) return nullptr;
  const int r = PyDict_SetItem(dict, key, obj);
  Py_DECREF(obj);
  return r < 0 ? nullptr : obj;
}

/// json.loads of the calling interpreter (through its sys.modules, importing json if need be).
PyObject* import_json_loads() {
  PyObject* json = PyImport_ImportModule("json");
  if (json == nullptr) return nullptr;
  PyObject* loads = PyObject_GetAttrString(json, "loads");
  Py_DECREF(json);
  return loads;
}

}  // namespace

// CPython refuses a single-phase module in an interpreter with a GIL of its own (3.12+), but only
// once PyInit__laptime has run there. Asked first, the same way (CPython's own check, which it runs
// for a module that declares it does not support several interpreters), so that such an
// interpreter neither makes nor touches the objects the others share.
bool loads_single_phase_modules() {
#if PY_VERSION_HEX >= 0x030C0000
  if (current_interpreter() == PyInterpreterState_Main()) return true;
  static PyModuleDef_Slot slots[] = {
      {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED}, {0, nullptr}};
  static PyModuleDef probe_def = {PyModuleDef_HEAD_INIT,
                                  "laptime._laptime",
                                  nullptr,
                                  0,
                                  nullptr,
                                  slots,
                                  nullptr,
                                  nullptr,
                                  nullptr};
  PyObject* spec = PyModule_New("laptime._laptime");  // anything with a `name`
  if (spec == nullptr) return false;
  PyObject* name = PyUnicode_FromString("laptime._laptime");
  PyObject* probe = nullptr;
  if (name != nullptr && PyObject_SetAttrString(spec, "name", name) == 0) {
    probe = PyModule_FromDefAndSpec(&probe_def, spec);
  }
  Py_XDECREF(name);
  Py_DECREF(spec);
  if (probe == nullptr) return false;
  Py_DECREF(probe);
#endif
  return true;
}

bool make_interpreter_keys() {
  g_json_loads_key = PyUnicode_FromString("laptime._laptime.json_loads");
  g_name_cache_key = PyUnicode_FromString("laptime._laptime.name_cache");
  return g_json_loads_key != nullptr && g_name_cache_key != nullptr;
}

PyObject* package_function(const char* name) {
  PyObject* module = PyState_FindModule(&g_module_def);  // as this interpreter has it
  if (module == nullptr) {
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_RuntimeError,
                      "laptime: laptime._laptime is not imported in this interpreter");
    }
    return nullptr;
  }
  return PyObject_GetAttrString(module, name);
}

PyObject* json_loads() {
  return interpreter_object(g_json_loads_key, import_json_loads);
}

PyObject* name_cache() {
  return interpreter_object(g_name_cache_key, PyDict_New);
}

// The package calls this at import, in each interpreter: json.loads is then at hand however late
// results() is called (an interpreter's first results() may come from a __del__ in its shutdown).
PyObject* mod_prepare_interpreter(PyObject*, PyObject*) {
  if (json_loads() == nullptr) return nullptr;
  Py_RETURN_NONE;
}

}  // namespace pyext
