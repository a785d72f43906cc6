// Periodic reports through sys.stdout: laptime's print function, installed by the package at
// import and removed at exit (docs/python.md, Printing).
#include "extension.hpp"

#include "closed_stdout.hpp"

namespace pyext {

namespace {

bool interpreter_usable() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

/// The print function and the exit output are the process's, set from the main interpreter only:
/// a subinterpreter that imports laptime and ends must not take the main one's sys.stdout away
/// (the print function enters the main interpreter: PyGILState).
bool in_main_interpreter() {
#if PY_VERSION_HEX >= 0x03090000
  return PyInterpreterState_Get() == PyInterpreterState_Main();
#else
  return PyThreadState_Get()->interp == PyInterpreterState_Main();  // 3.8: no _Get yet
#endif
}

}  // namespace

/// laptime::PrintFunction: writes to sys.stdout (notebooks and loggers capture it) with the GIL
/// held, from any thread (PyGILState_Ensure gives a C++ thread a thread state). A closed or full
/// sys.stdout drops the text (told once), whatever the program's SIGPIPE disposition.
void print_to_sys_stdout(const char* text, std::size_t size, void* /*user_data*/) {
  const std::string_view s(text, size);
  const laptime::binding::SigpipeBlocked blocked;
  if (!interpreter_usable()) {
    laptime::binding::write_own_output(stdout, s, kReportNotPrinted);
    return;
  }
  const PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);     // keep an exception the caller may have set
  PyObject* out = PySys_GetObject("stdout");  // borrowed
  if (out != nullptr && out != Py_None && !write_to(out, s)) after_failed_sys_stdout_write(out, s);
  PyErr_Restore(type, value, traceback);
  PyGILState_Release(gil);
}

// Both set the print function without the GIL: setting it waits for a report in progress, whose
// print function may be waiting for the GIL on another thread.
PyObject* mod_install_print_function(PyObject*, PyObject*) {
  if (!in_main_interpreter()) Py_RETURN_NONE;
  // It writes the program's stdout: a progress line may rewrite itself there on a terminal.
  PyThreadState* saved = PyEval_SaveThread();
  laptime::binding::set_stdout_print_function(print_to_sys_stdout, nullptr);
  PyEval_RestoreThread(saved);
  Py_RETURN_NONE;
}

// The package registers this with atexit: afterwards reports go to the C stdout, so that a C++
// thread or laptime's own at-exit report never calls into a finalised interpreter.
PyObject* mod_uninstall_print_function(PyObject*, PyObject*) {
  if (!in_main_interpreter()) Py_RETURN_NONE;
  PyThreadState* saved = PyEval_SaveThread();
  stopwatch().set_print_function(nullptr, nullptr);
  PyEval_RestoreThread(saved);
  Py_RETURN_NONE;
}

// The at-exit output now (once): the package calls it from its atexit handler when Python is
// about to end the process by SIGINT (an unhandled KeyboardInterrupt), which skips C atexit.
PyObject* mod_run_exit_output(PyObject*, PyObject*) {
  if (!in_main_interpreter()) Py_RETURN_NONE;
  PyThreadState* saved = PyEval_SaveThread();  // the report's print function takes it again
  laptime::binding::run_exit_output_now();
  PyEval_RestoreThread(saved);
  Py_RETURN_NONE;
}

}  // namespace pyext
