// laptime.Stopwatch: its results as Python sees them: the report (a str, or printed to a Python
// file), the JSON, the dict mirroring it, the atomic JSON file.
#include "stopwatch_methods.hpp"

#include <cerrno>
#include <sstream>
#include <system_error>

namespace pyext {

PyObject* sw_get_num_nonwarmup_iters_measured(PyObject*, PyObject*) {
  return PyLong_FromLongLong(stopwatch().get_num_nonwarmup_iters_measured());
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
  {
    const WithoutGil released;
    try {
      stopwatch().write_json(p);
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!error) Py_RETURN_NONE;
  try {
    std::rethrow_exception(error);
  } catch (const std::system_error& e) {
    errno = e.code().value();
    return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
  } catch (...) {
    return set_python_error();
  }
}

// results(): json.loads(to_json()), so the dict mirrors the JSON by construction. The calling
// interpreter's json.loads, which it keeps for a __del__ late in its shutdown (interpreters.cpp).
PyObject* sw_results(PyObject* self, PyObject*) {
  PyObject* loads = json_loads();
  if (loads == nullptr) return nullptr;
  PyObject* json = sw_to_json(self, nullptr);
  if (json == nullptr) return nullptr;
  PyObject* r = PyObject_CallFunctionObjArgs(loads, json, nullptr);
  Py_DECREF(json);
  return r;
}

namespace {
// Whether a progress line ends stdout now, asked without the GIL: the answer waits for a report
// in progress on another thread, whose print function may be waiting for the GIL.
bool take_open_line_without_gil() {
  const WithoutGil released;
  return laptime::binding::take_open_progress_line();
}
}  // namespace

// print_eval_times(file=None): to sys.stdout by default, looked up at each call (redirections,
// notebooks and pytest's capture replace it).
PyObject* sw_print_eval_times(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                              PyObject* kwnames) {
  PyObject* file = nullptr;
  if (!optional_arg("print_eval_times", "file", args, nargs, kwnames, file)) return nullptr;
  if (file == nullptr || file == Py_None) {
    file = PySys_GetObject("stdout");  // borrowed
    // No sys.stdout (pythonw, a daemon that set it to None): nothing, as print() does.
    if (file == nullptr || file == Py_None) Py_RETURN_NONE;
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
  // Below a progress line rewritten in place on the terminal, not over it.
  if (file == PySys_GetObject("stdout") && take_open_line_without_gil()) {
    text.insert(text.begin(), '\n');
  }
  if (!write_to(file, text)) return nullptr;
  Py_RETURN_NONE;
}

}  // namespace pyext
