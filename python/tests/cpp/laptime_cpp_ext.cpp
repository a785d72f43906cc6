// laptime_cpp_ext: a second Python extension with its own copy of laptime's headers, as a C++
// library bound to Python (a data loader, a trainer) would have. Compiled by the tests
// (conftest.py) with hidden visibility and loaded RTLD_LOCAL, like every extension: it shares
// laptime's singletons with laptime._laptime only through laptime's process-wide state.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <laptime/laptime.hpp>

#include <atomic>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <thread>

namespace {

std::string_view text(PyObject* str) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(str, &size);
  return data != nullptr ? std::string_view(data, static_cast<std::size_t>(size))
                         : std::string_view();
}

template <class F>
PyObject* call(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "C++: %s", e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* start(PyObject*, PyObject* name) {
  return call([&] { laptime::Stopwatch::instance().start_meas(text(name)); });
}

PyObject* end(PyObject*, PyObject* name) {
  return call([&] { laptime::Stopwatch::instance().end_meas(text(name)); });
}

PyObject* finish_iter(PyObject*, PyObject*) {
  return call([] { laptime::Stopwatch::instance().finish_iter(); });
}

PyObject* is_enabled(PyObject*, PyObject*) {
  return PyBool_FromLong(laptime::Stopwatch::instance().is_enabled());
}

PyObject* nvtx_is_enabled(PyObject*, PyObject*) {
  return PyBool_FromLong(laptime::NVTXRangeWrapper::instance().is_enabled());
}

PyObject* range_push(PyObject*, PyObject* name) {
  return call([&] { laptime::NVTXRangeWrapper::instance().range_push(text(name)); });
}

PyObject* report(PyObject*, PyObject*) {
  const std::string r = laptime::Stopwatch::instance().report();
  return PyUnicode_FromStringAndSize(r.data(), static_cast<Py_ssize_t>(r.size()));
}

// The same with the GIL held while the thread runs, as a pybind11 op that does not release it:
// a report that thread prints must not wait for the GIL.
PyObject* finish_on_cpp_thread_holding_gil(PyObject*, PyObject*) {
  std::thread([] { laptime::Stopwatch::instance().finish_iter(); }).join();
  Py_RETURN_NONE;
}

// Two ops of one extension on two Python threads: one releases the GIL and finishes an iteration
// (which prints), the other holds the GIL until that is done, as an op that waits for a worker of
// its own without releasing it. g_stage: 1 the first released the GIL, 2 the second holds it,
// 3 the first finished.
std::atomic<int> g_stage{0};

PyObject* finish_with_gil_released(PyObject*, PyObject*) {
  Py_BEGIN_ALLOW_THREADS g_stage.store(1);
  while (g_stage.load() != 2) std::this_thread::yield();
  laptime::Stopwatch::instance().finish_iter();
  g_stage.store(3);
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject* stage(PyObject*, PyObject*) {
  return PyLong_FromLong(g_stage.load());
}

PyObject* hold_gil_until_finished(PyObject*, PyObject*) {
  g_stage.store(2);
  while (g_stage.load() != 3) std::this_thread::yield();
  g_stage.store(0);
  Py_RETURN_NONE;
}

// The program's own print function, as a C++ extension's logger sets it: appends every report
// to the file `path`.
PyObject* log_reports_to(PyObject*, PyObject* path) {
  static std::string file;
  file = std::string(text(path));
  laptime::Stopwatch::instance().set_print_function(
      [](const char* report, std::size_t size, void*) {
        if (std::FILE* f = std::fopen(file.c_str(), "a")) {
          std::fwrite(report, 1, size, f);
          std::fclose(f);
        }
      },
      nullptr);
  Py_RETURN_NONE;
}

// A C++ thread (never ran Python) times `name` and finishes an iteration; the GIL is released
// while we wait, so a periodic report printed from that thread can reach sys.stdout.
PyObject* measure_and_finish_on_cpp_thread(PyObject*, PyObject* name) {
  const std::string n(text(name));
  std::exception_ptr error;
  Py_BEGIN_ALLOW_THREADS std::thread t([&] {
    try {
      auto& sw = laptime::Stopwatch::instance();
      sw.start_meas(n);
      sw.end_meas(n);
      sw.finish_iter();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  Py_END_ALLOW_THREADS if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      PyErr_Format(PyExc_RuntimeError, "C++ thread: %s", e.what());
      return nullptr;
    }
  }
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"start", start, METH_O, nullptr},
    {"end", end, METH_O, nullptr},
    {"finish_iter", finish_iter, METH_NOARGS, nullptr},
    {"is_enabled", is_enabled, METH_NOARGS, nullptr},
    {"nvtx_is_enabled", nvtx_is_enabled, METH_NOARGS, nullptr},
    {"range_push", range_push, METH_O, nullptr},
    {"report", report, METH_NOARGS, nullptr},
    {"measure_and_finish_on_cpp_thread", measure_and_finish_on_cpp_thread, METH_O, nullptr},
    {"finish_on_cpp_thread_holding_gil", finish_on_cpp_thread_holding_gil, METH_NOARGS, nullptr},
    {"log_reports_to", log_reports_to, METH_O, nullptr},
    {"finish_with_gil_released", finish_with_gil_released, METH_NOARGS, nullptr},
    {"stage", stage, METH_NOARGS, nullptr},
    {"hold_gil_until_finished", hold_gil_until_finished, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                          "laptime_cpp_ext",
                          nullptr,
                          -1,
                          methods,
                          nullptr,
                          nullptr,
                          nullptr,
                          nullptr};

}  // namespace

// Exported explicitly: before Python 3.9, PyMODINIT_FUNC has no visibility attribute, and the
// module is built with hidden visibility.
extern "C" __attribute__((visibility("default"))) PyObject* PyInit_laptime_cpp_ext() {
  return PyModule_Create(&module_def);
}
