// Whether a process that Python's multiprocessing started (spawn, forkserver) is a worker of the
// process that started it or a program of its own (docs/workers.md).
//
// Such a process re-imports the main module (and the modules its target lives in): a top-level
// enable() or configure_from_env() then runs again in every DataLoader worker, which must stay a
// worker, merged into its parent's report. A call made from no import, from the target function
// itself, is the program's own: a torch.multiprocessing.spawn rank that calls enable() or
// set_rank(rank, world_size) in its training function measures its own run and writes its own
// results (LAPTIME_OUTPUT with {rank}). The Python stack tells the two apart: during an import,
// some frame runs a module's top level ("<module>") under a name other than "__main__" (the
// re-imported main module is "__mp_main__"; the child's own "-c" bootstrap is "__main__").
#include "extension.hpp"

namespace pyext {
namespace {

// Whether `frame` runs a module's top-level code during its import. Never sets an exception.
bool imports(PyObject* frame) {
  bool result = false;
  PyObject* code = PyObject_GetAttrString(frame, "f_code");
  PyObject* globals = code != nullptr ? PyObject_GetAttrString(frame, "f_globals") : nullptr;
  PyObject* co_name = code != nullptr ? PyObject_GetAttrString(code, "co_name") : nullptr;
  if (co_name != nullptr && globals != nullptr && PyDict_Check(globals) &&
      PyUnicode_Check(co_name) && PyUnicode_CompareWithASCIIString(co_name, "<module>") == 0) {
    PyObject* name = PyDict_GetItemString(globals, "__name__");  // borrowed
    result = name == nullptr || !PyUnicode_Check(name) ||
             PyUnicode_CompareWithASCIIString(name, "__main__") != 0;
  }
  Py_XDECREF(co_name);
  Py_XDECREF(globals);
  Py_XDECREF(code);
  PyErr_Clear();
  return result;
}

bool called_during_import() {
  PyObject* frame = reinterpret_cast<PyObject*>(PyEval_GetFrame());  // borrowed
  Py_XINCREF(frame);
  bool found = false;
  while (frame != nullptr && !found) {
    found = imports(frame);
    PyObject* back = PyObject_GetAttrString(frame, "f_back");
    Py_DECREF(frame);
    frame = back != Py_None ? back : nullptr;
    if (back == Py_None) Py_DECREF(back);
  }
  Py_XDECREF(frame);
  PyErr_Clear();
  return found;
}

}  // namespace

void note_program_call() {
  if (!stopwatch().is_worker() || called_during_import()) return;
  try {
    (void)laptime::binding::stopwatch_is_own_program();
  } catch (...) {  // no memory: it stays a worker
  }
}

}  // namespace pyext
