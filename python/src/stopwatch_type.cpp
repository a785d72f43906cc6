// laptime.Stopwatch: the facade of laptime::Stopwatch. The hot pair start_meas / end_meas, enable,
// finish_iter, the singleton's construction, and the type's table of methods (those of
// stopwatch_settings.cpp and stopwatch_results.cpp included).
#include "stopwatch_methods.hpp"

#include <optional>

namespace pyext {
namespace {

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
  if (laptime::binding::stopwatch_never_enabled()) Py_RETURN_NONE;
  return enabled(name);
}

PyObject* sw_start_meas(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (LAPTIME_UNLIKELY(nargs != 1 || kwnames != nullptr)) {
    return sw_pair_other_args("start_meas", start_meas_enabled, args, nargs, kwnames);
  }
  if (LAPTIME_LIKELY(laptime::binding::stopwatch_never_enabled())) Py_RETURN_NONE;
  return start_meas_enabled(args[0]);
}

PyObject* sw_end_meas(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (LAPTIME_UNLIKELY(nargs != 1 || kwnames != nullptr)) {
    return sw_pair_other_args("end_meas", end_meas_enabled, args, nargs, kwnames);
  }
  if (LAPTIME_LIKELY(laptime::binding::stopwatch_never_enabled())) Py_RETURN_NONE;
  return end_meas_enabled(args[0]);
}

// finish_iter keeps the GIL, except when it is about to print. laptime prints under its report
// lock and the print function takes the GIL: waiting for that lock with the GIL held could
// deadlock against a thread that holds the lock and waits for the GIL (a C++ thread printing, or
// a Python thread whose sys.stdout.write released the GIL).
PyObject* sw_finish_iter(PyObject*, PyObject*) {
  if (LAPTIME_LIKELY(!laptime::binding::finish_iter_will_print())) {
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
  note_program_call();
  // Messages in Python's words: None, not std::nullopt.
  PyObject* r =
      call_none([&] { laptime::binding::enable_stopwatch(warmup, every, cuda_sync != 0, "None"); });
  if (r == nullptr || nvtx_ranges < 0) return r;
  Py_DECREF(r);
  return call_none([&] { stopwatch().set_nvtx_ranges(nvtx_ranges != 0); });
}

PyObject* sw_set_nvtx_ranges(PyObject*, PyObject* on) {
  const int v = PyObject_IsTrue(on);
  if (v < 0) return nullptr;
  return call_none([&] { stopwatch().set_nvtx_ranges(v != 0); });
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
    {"discard_meas", as_cfunction(sw_discard_meas), METH_FASTCALL | METH_KEYWORDS,
     "discard_meas($self, name)\n--\n\nEnds the interval `name` running on the calling thread "
     "without counting it (begun for work that never came)."},
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
    {"set_report_format", sw_set_report_format, METH_O,
     "set_report_format($self, layout, /)\n--\n\nThe printed report's layout: 'table' (default) "
     "or 'seed' (the seed tool's sections, in seconds). LAPTIME_REPORT_FORMAT wins."},
    {"set_gpu_stream", sw_set_gpu_stream, METH_O,
     "set_gpu_stream($self, stream, /)\n--\n\nChanges the stream GPU timing records on."},
    {"disable_gpu_timing", sw_disable_gpu_timing, METH_NOARGS,
     "disable_gpu_timing($self)\n--\n\nStops recording CUDA events."},
    {"wait_for_gpu_timings", sw_wait_for_gpu_timings, METH_NOARGS,
     "wait_for_gpu_timings($self)\n--\n\nWaits for every pending GPU timing (at report time)."},
    {"measure", measure_scope, METH_O,
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

}  // namespace

/// tp_new of a facade type: `instance` (the singleton) for the type itself; for a Python
/// subclass (seed users subclass the tools), one instance per subclass, made on first use and
/// kept in the subclass's own dict (not its bases'): the class and its instance form a cycle
/// the garbage collector frees with the class, so classes made at run time do not pile up.
/// Every instance talks to the same process-wide state.
PyObject* facade_new(PyTypeObject* type, PyObject* instance) {
  if (LAPTIME_LIKELY(type == Py_TYPE(instance))) return Py_NewRef(instance);
  // Made by the first interpreter that gets here and used by all as a dict key and an attribute
  // name only (no Python code runs): a str this reference keeps for the process's life.
  static PyObject* const key = PyUnicode_InternFromString("_laptime_instance");
  if (key == nullptr) return nullptr;
  PyObject* own = type->tp_dict;
  if (own != nullptr) {
    PyObject* mine = PyDict_GetItemWithError(own, key);
    if (mine != nullptr && Py_TYPE(mine) == type) return Py_NewRef(mine);
    if (PyErr_Occurred()) return nullptr;
  }
  PyObject* mine = type->tp_alloc(type, 0);
  if (mine == nullptr) return nullptr;
  if (PyObject_SetAttr(reinterpret_cast<PyObject*>(type), key, mine) < 0) {
    Py_DECREF(mine);
    return nullptr;
  }
  return mine;
}

// BASETYPE: seed users subclass the tools. An instance of a subclass is not the exact type, so
// CPython's specialised call instructions do not apply to it (a few ns per call more).
PyType_Spec g_stopwatch_spec = {"laptime.Stopwatch", sizeof(PyObject), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, g_stopwatch_slots};

}  // namespace pyext
