// The Stopwatch methods defined outside stopwatch_type.cpp, which lists them in the type's table:
// settings (stopwatch_settings.cpp) and results (stopwatch_results.cpp).
#pragma once

#include "extension.hpp"

namespace pyext {

// stopwatch_settings.cpp
PyObject* sw_set_worker_label(PyObject*, PyObject* label);
PyObject* sw_set_cpu_usage_meas_name(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                                     PyObject* kwnames);
PyObject* sw_track_cpu_usage(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* sw_start_one_time(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* sw_end_one_time(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* sw_discard_meas(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* sw_reset(PyObject*, PyObject*);
PyObject* sw_disable(PyObject*, PyObject*);
PyObject* sw_set_print_rank0_only(PyObject*, PyObject* on);
PyObject* sw_enable_gpu_timing(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                               PyObject* kwnames);
PyObject* sw_enable_gpu_timing_for(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                                   PyObject* kwnames);
PyObject* sw_set_rank(PyObject*, PyObject* args, PyObject* kwargs);
PyObject* sw_enable_recording(PyObject*, PyObject* n_obj);
PyObject* sw_set_data_name(PyObject*, PyObject* name);
PyObject* sw_set_total_iters(PyObject*, PyObject* n_obj);
PyObject* sw_set_progress(PyObject*, PyObject* mode_obj);
PyObject* sw_set_report_format(PyObject*, PyObject* format_obj);
PyObject* sw_set_gpu_stream(PyObject*, PyObject* stream_obj);
PyObject* sw_disable_gpu_timing(PyObject*, PyObject*);
PyObject* sw_wait_for_gpu_timings(PyObject*, PyObject*);

// stopwatch_results.cpp
PyObject* sw_get_num_nonwarmup_iters_measured(PyObject*, PyObject*);
PyObject* sw_report(PyObject*, PyObject*);
PyObject* sw_to_json(PyObject*, PyObject*);
PyObject* sw_write_json(PyObject*, PyObject* path);
PyObject* sw_results(PyObject* self, PyObject*);
PyObject* sw_print_eval_times(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                              PyObject* kwnames);

}  // namespace pyext
