// laptime.Stopwatch: its settings (CPU tracking, GPU timing, rank, recording, the verdict's data
// name, progress printing), one-time measurements, reset and disable.
#include "stopwatch_methods.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pyext {

PyObject* sw_set_worker_label(PyObject*, PyObject* label) {
  return with_name("set_worker_label", label,
                   [](std::string_view l) { stopwatch().set_worker_label(l); });
}

// The seed's spelling does what the seed's empty method did before the first enable(): nothing,
// whatever the name (no str() taken, no name kept). laptime's own track_cpu_usage below is kept
// from before enable(); a name that cannot be a name (unhashable) is ignored then.
PyObject* sw_set_cpu_usage_meas_name(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                                     PyObject* kwnames) {
  PyObject* name = one_arg("set_cpu_usage_meas_name", "name", args, nargs, kwnames);
  if (name == nullptr) return nullptr;
  if (laptime::binding::stopwatch_never_enabled()) Py_RETURN_NONE;
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
  // Kept across disable(): ended while disabled, it is counted.
  if (laptime::binding::stopwatch_never_enabled()) Py_RETURN_NONE;
  return with_name("end_one_time_measurement", name,
                   [](std::string_view n) { stopwatch().end_one_time_measurement(n); });
}

PyObject* sw_discard_meas(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* name = one_arg("discard_meas", "name", args, nargs, kwnames);
  if (name == nullptr) return nullptr;
  if (!stopwatch().is_enabled()) Py_RETURN_NONE;
  return with_name("discard_meas", name, [](std::string_view n) { stopwatch().discard_meas(n); });
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
  note_program_call();
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

namespace {
// The index of `obj` among `choices` (a str argument `what` of a setter whose enum lists them in
// this order), or -1 with a TypeError or ValueError naming the choices.
template <std::size_t N>
int choice_arg(const char* what, PyObject* obj, const char* const (&choices)[N]) {
  if (!PyUnicode_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "laptime: %s: a str", what);
    return -1;
  }
  std::string listed;
  for (std::size_t i = 0; i < N; ++i) {
    // The whole str (one with a NUL inside or no UTF-8 form is none of them); never raises.
    if (PyUnicode_CompareWithASCIIString(obj, choices[i]) == 0) return static_cast<int>(i);
    listed += (i == 0 ? "'" : ", '") + std::string(choices[i]) + "'";
  }
  PyErr_Format(PyExc_ValueError, "laptime: %s: %R is not one of %s", what, obj, listed.c_str());
  return -1;
}
}  // namespace

// set_progress(mode): "report", "line" or "off" (ProgressMode's order).
PyObject* sw_set_progress(PyObject*, PyObject* mode_obj) {
  const int i = choice_arg("set_progress(mode)", mode_obj, {"report", "line", "off"});
  if (i < 0) return nullptr;
  return call_none([&] { stopwatch().set_progress(static_cast<laptime::ProgressMode>(i)); });
}

// set_report_format(layout): "table" or "seed" (ReportFormat's order).
PyObject* sw_set_report_format(PyObject*, PyObject* format_obj) {
  const int i = choice_arg("set_report_format(layout)", format_obj, {"table", "seed"});
  if (i < 0) return nullptr;
  stopwatch().set_report_format(static_cast<laptime::ReportFormat>(i));
  Py_RETURN_NONE;
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

}  // namespace pyext
