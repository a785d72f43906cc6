// laptime._laptime, the Python extension (docs/python.md): the module's functions (error policy,
// configuration from the environment, build information, the name limit, NVTX counters, the test
// reset) and its initialisation. extension.hpp says how the extension is written and lists its
// other files.
#include "extension.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pyext {
namespace {

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
  note_program_call();
  laptime::Settings s;
  try {
    s = laptime::configure_from_env();
  } catch (...) {
    return set_python_error();
  }
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  auto boolean = [](bool b) { return PyBool_FromLong(b); };
  const bool ok =
      set_item(d, "stopwatch", boolean(s.stopwatch)) &&
      set_item(d, "num_warmup_iters", PyLong_FromLong(s.num_warmup_iters)) &&
      set_item(
          d, "print_every_n_iters",
          s.print_every_n_iters ? PyLong_FromLong(*s.print_every_n_iters) : Py_NewRef(Py_None)) &&
      set_item(d, "do_cuda_sync", boolean(s.do_cuda_sync)) &&
      set_item(d, "gpu_timing", boolean(s.gpu_timing)) &&
      set_item(d, "stopwatch_all_ranks", boolean(s.stopwatch_all_ranks)) &&
      set_item(d, "print_rank0_only", boolean(s.print_rank0_only)) &&
      set_item(d, "track_cpu", str_list(s.track_cpu)) && set_item(d, "nvtx", boolean(s.nvtx)) &&
      set_item(d, "nvtx_sync_on_push", boolean(s.nvtx_sync_on_push)) &&
      set_item(d, "nvtx_sync_on_pop", boolean(s.nvtx_sync_on_pop)) &&
      set_item(d, "nvtx_check_order", boolean(s.nvtx_check_order)) &&
      set_item(d, "nvtx_domain", text_to_str(s.nvtx_domain)) &&
      set_item(d, "nvtx_ranges", boolean(s.nvtx_ranges)) &&
      set_item(d, "nvtx_counters", boolean(s.nvtx_counters)) &&
      set_item(d, "nvtx_counters_hz", PyFloat_FromDouble(s.nvtx_counters_hz)) &&
      set_item(d, "gpu_timing_names", str_list(s.gpu_timing_names)) &&
      set_item(d, "data_name", s.data_name ? text_to_str(*s.data_name) : Py_NewRef(Py_None)) &&
      set_item(d, "progress", s.progress.empty() ? Py_NewRef(Py_None) : text_to_str(s.progress)) &&
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
  // Whether cuda.h was visible (information only: CUDA timing needs no header).
  const bool cuda_headers = LAPTIME_HAVE_CUDA_HEADERS != 0;
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
  return PyLong_FromSize_t(laptime::binding::max_names());
}

PyObject* mod_cuda_status(PyObject*, PyObject*) {
  return string_result([] { return laptime::cuda::status(); });
}

// Tests only: the Stopwatch and the NVTX wrapper as before their first enable (names stay
// interned), the error policy back to throw, and the sys.stdout printer reinstalled (the
// Stopwatch reset removes it). Never while other threads measure.
PyObject* mod_testing_reset(PyObject*, PyObject*) {
  try {
    laptime::binding::reset_for_testing();
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
    {"_prepare_interpreter", mod_prepare_interpreter, METH_NOARGS, nullptr},
    {"_install_print_function", mod_install_print_function, METH_NOARGS, nullptr},
    {"_uninstall_print_function", mod_uninstall_print_function, METH_NOARGS, nullptr},
    {"_run_exit_output", mod_run_exit_output, METH_NOARGS, nullptr},
    {"_testing_reset", mod_testing_reset, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

/// The one instance of a facade type (its tp_new returns it from then on).
PyObject* make_instance(PyTypeObject* type) {
  return type != nullptr ? PyType_GenericAlloc(type, 0) : nullptr;
}

// Whether the shared objects (extension.hpp) are this Python's: made since it started, and not
// finalised since (Py_FinalizeEx, after which a program that embeds Python may start it again and
// import laptime anew: test_embedding.py). Where Py_AtExit cannot tell (its 32 places taken), each
// PyInit__laptime makes them anew.
bool g_shared_made = false;

// The shared objects by their names in the module, which each PyInit__laptime adds to its module.
PyObject* g_shared_objects = nullptr;

// A list of the objects of each module PyInit__laptime made (a copy of its dict, which the end of
// its interpreter does not clear), kept for the process's life. Every interpreter that imports
// laptime later gets a copy of that dict, whose functions refer to the module, and would free them
// once it ends, perhaps after the interpreter that made them: CPython 3.12.1 then crashes (such
// an object still links into the ended interpreter's garbage-collector lists).
PyObject* g_kept_module_objects = nullptr;

void forget_shared_objects() {
  g_shared_made = false;
}

/// Makes the objects every interpreter's module shares; false with an exception set.
bool make_shared_objects() {
  forget_scope_cache();  // an earlier Python's (Py_FinalizeEx, then Py_Initialize)
  g_shared_objects = PyDict_New();
  g_kept_module_objects = PyList_New(0);
  if (g_shared_objects == nullptr || g_kept_module_objects == nullptr) return false;
  g_usage_error = PyErr_NewExceptionWithDoc(
      "laptime.UsageError",
      "Misuse of the laptime API (a measurement ended that never started, a range popped out of "
      "order, ...). A subclass of AssertionError, as the seed raised AssertionError.",
      PyExc_AssertionError, nullptr);
  if (g_usage_error == nullptr ||
      PyDict_SetItemString(g_shared_objects, "UsageError", g_usage_error) < 0) {
    return false;
  }
  PyTypeObject* type = add_type(g_shared_objects, &g_stopwatch_spec, "Stopwatch");
  g_stopwatch = make_instance(type);  // which holds its type
  Py_XDECREF(type);
  if (g_stopwatch == nullptr) return false;
  type = add_type(g_shared_objects, &g_nvtx_spec, "NVTXRangeWrapper");
  g_nvtx = make_instance(type);
  Py_XDECREF(type);
  if (g_nvtx == nullptr || !add_scope_types(g_shared_objects) || !make_interpreter_keys()) {
    return false;
  }
  g_shared_made = Py_AtExit(forget_shared_objects) == 0;
  return true;
}

}  // namespace

PyModuleDef g_module_def = {PyModuleDef_HEAD_INIT,
                            "laptime._laptime",
                            "laptime's extension module; use the package laptime.",
                            -1,
                            g_module_methods,
                            nullptr,
                            nullptr,
                            nullptr,
                            nullptr};

PyTypeObject* add_type(PyObject* objects, PyType_Spec* spec, const char* name) {
  PyObject* type = PyType_FromSpec(spec);
  if (type == nullptr) return nullptr;
  // Their __module__ is "laptime" (from the spec's name): where users find them.
  if (PyDict_SetItemString(objects, name, type) < 0) {
    Py_DECREF(type);
    return nullptr;
  }
  return reinterpret_cast<PyTypeObject*>(type);
}

}  // namespace pyext

// Exported explicitly: before Python 3.9, PyMODINIT_FUNC has no visibility attribute, and the
// module is built with hidden visibility.
extern "C" __attribute__((visibility("default"))) PyObject* PyInit__laptime() {
  using namespace pyext;
  if (!loads_single_phase_modules()) return nullptr;
  if (!g_shared_made && !make_shared_objects()) return nullptr;
  PyObject* module = PyModule_Create(&g_module_def);
  if (module == nullptr) return nullptr;
  if (PyDict_Update(PyModule_GetDict(module), g_shared_objects) < 0 ||
      PyModule_AddStringConstant(module, "__version__", LAPTIME_VERSION_STRING) < 0 ||
      PyModule_AddIntConstant(module, "HAVE_NVTX", LAPTIME_HAVE_NVTX) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  PyObject* objects = PyDict_Copy(PyModule_GetDict(module));
  if (objects == nullptr || PyList_Append(g_kept_module_objects, objects) < 0) {
    Py_XDECREF(objects);
    Py_DECREF(module);
    return nullptr;
  }
  Py_DECREF(objects);
  return module;
}
