// laptime's reports through sys.stdout when sys.stdout is closed or full (a pipe whose reader has
// gone, a full disk): the OSError is cleared, the text dropped and the first failure told in one
// line on stderr, never a traceback per report (docs/guarantees.md,
// python/tests/test_closed_stdout.py).
#pragma once

#include <Python.h>

#include <cerrno>
#include <cstdio>
#include <string_view>

#include <laptime/binding_hooks.hpp>

/// The first words of the line that tells a failure.
inline constexpr const char* kReportNotPrinted = "a report could not be printed";

/// After a failed write to sys.stdout, with its exception set: an OSError is cleared and told
/// once (true); another exception is left set (false).
inline bool dropped_os_error() {
  if (!PyErr_ExceptionMatches(PyExc_OSError)) return false;
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  int err = EIO;
  if (PyObject* code = value != nullptr ? PyObject_GetAttrString(value, "errno") : nullptr) {
    if (PyLong_Check(code)) err = static_cast<int>(PyLong_AsLong(code));
    Py_DECREF(code);
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  const laptime::binding::SigpipeBlocked blocked;  // stderr may be the same closed pipe
  laptime::binding::warn_own_output_failed(stdout, kReportNotPrinted, err);
  return true;
}

/// After a write to sys.stdout `out` failed (its exception set; none where there is no
/// sys.stdout: the text is dropped, as print() drops it): a closed or full stream drops the text
/// (told once); another failure is shown (the first one, as an exception ignored in `out`), and
/// the text goes to the C stdout.
inline void after_failed_sys_stdout_write(PyObject* out, std::string_view text) {
  if (!PyErr_Occurred()) return;
  if (dropped_os_error()) return;
  // Ctrl-C while the report was written: the interrupt stays the program's (raised at its next
  // instruction, PyErr_SetInterrupt), and the report is dropped.
  if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
    PyErr_Clear();
    PyErr_SetInterrupt();
    return;
  }
  static bool shown = false;  // under the GIL
  if (shown) {
    PyErr_Clear();
  } else {
    shown = true;
    PyErr_WriteUnraisable(out);
  }
  laptime::binding::write_own_output(stdout, text, kReportNotPrinted);
}
