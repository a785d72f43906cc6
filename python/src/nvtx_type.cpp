// laptime.NVTXRangeWrapper: the facade of laptime::NVTXRangeWrapper. The hot pair range_push /
// range_pop, as start_meas / end_meas: the method itself is the common case (one positional
// argument) and the "nothing to do" test; everything else is a tail call.
#include "extension.hpp"

#include <cstdint>
#include <string_view>

namespace pyext {
namespace {

// range_push(range_name), the seed's keyword; names as in start_meas.
// As start_meas: the method is the common case, the rest tail calls.
LAPTIME_NOINLINE PyObject* range_push_enabled(PyObject* name) {
  return with_name("range_push", name, [](std::string_view n) { nvtx().range_push(n); });
}

[[gnu::cold]] LAPTIME_NOINLINE PyObject* range_push_other_args(PyObject* const* args,
                                                               Py_ssize_t nargs,
                                                               PyObject* kwnames) {
  PyObject* name = required_arg("range_push", "range_name", args, nargs, kwnames);
  if (name == nullptr) return nullptr;
  if (!nvtx().is_enabled()) Py_RETURN_NONE;
  return range_push_enabled(name);
}

PyObject* nvtx_range_push(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (LAPTIME_UNLIKELY(nargs != 1 || kwnames != nullptr)) {
    return range_push_other_args(args, nargs, kwnames);
  }
  if (LAPTIME_LIKELY(!laptime::binding::nvtx_needs_call()))
    Py_RETURN_NONE;  // off, or nothing to do
  return range_push_enabled(args[0]);
}

// range_pop(range_name=None) (the seed's keyword; `expected` is laptime 0.1's spelling): with an
// expected name and order tracking on, the innermost range is checked before anything is popped.
LAPTIME_NOINLINE PyObject* range_pop_enabled(PyObject* expected) {
  if (expected == nullptr || expected == Py_None) return call_none([] { nvtx().range_pop(); });
  return with_name("range_pop", expected, [](std::string_view n) { nvtx().range_pop(n); });
}

[[gnu::cold]] LAPTIME_NOINLINE PyObject* range_pop_other_args(PyObject* const* args,
                                                              Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* expected = nullptr;
  if (!parse_one_arg("range_pop", "range_name", "expected", false, args, nargs, kwnames,
                     expected)) {
    return nullptr;
  }
  if (!nvtx().is_enabled()) Py_RETURN_NONE;
  return range_pop_enabled(expected);
}

PyObject* nvtx_range_pop(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (LAPTIME_UNLIKELY(kwnames != nullptr || nargs > 1)) {
    return range_pop_other_args(args, nargs, kwnames);
  }
  if (LAPTIME_LIKELY(!laptime::binding::nvtx_needs_call())) Py_RETURN_NONE;
  return range_pop_enabled(nargs == 1 ? args[0] : nullptr);
}

PyObject* nvtx_enable(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"sync_on_push", "sync_on_pop", "keep_track_of_range_order",
                                   "domain",       "colors",      nullptr};
  int sync_on_push = 0, sync_on_pop = 0, track = 0;
  PyObject* domain = Py_None;
  PyObject* colors = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ppp|$OO:enable", const_cast<char**>(keywords),
                                   &sync_on_push, &sync_on_pop, &track, &domain, &colors)) {
    return nullptr;
  }
  laptime::NVTXOptions options;
  if (domain != Py_None) {
    if (!PyUnicode_Check(domain)) return not_a_str("enable(domain=...)", domain);
    // Its bytes as a name's (a lone surrogate from a file name is its original byte again).
    PyObject* done = with_name("enable(domain=...)", domain, [&options](std::string_view d) {
      options.domain.assign(d.data(), d.size());
    });
    if (done == nullptr) return nullptr;
    Py_DECREF(done);
  }
  if (colors != Py_None) {
    PyObject* seq = PySequence_Fast(colors, "laptime: colors is a sequence of ARGB ints");
    if (seq == nullptr) return nullptr;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; ++i) {
      const unsigned long c = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, i));
      const bool failed = c == static_cast<unsigned long>(-1) && PyErr_Occurred();
      if (failed || c > 0xffffffffUL) {
        if (!failed) PyErr_SetString(PyExc_OverflowError, "laptime: a colour is 32-bit ARGB");
        Py_DECREF(seq);
        return nullptr;
      }
      options.colors.push_back(static_cast<std::uint32_t>(c));
    }
    Py_DECREF(seq);
  }
  return call_none(
      [&] { nvtx().enable(sync_on_push != 0, sync_on_pop != 0, track != 0, options); });
}

PyObject* nvtx_new(PyTypeObject* type, PyObject*, PyObject*) {
  return facade_new(type, g_nvtx);
}

int nvtx_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) == 0 && (kwargs == nullptr || PyDict_GET_SIZE(kwargs) == 0)) return 0;
  PyObject* r = nvtx_enable(self, args, kwargs);
  if (r == nullptr) return -1;
  Py_DECREF(r);
  return 0;
}

PyObject* nvtx_is_enabled(PyObject*, void*) {
  return PyBool_FromLong(nvtx().is_enabled());
}

PyObject* nvtx_mark(PyObject*, PyObject* message) {
  if (!nvtx().is_enabled()) Py_RETURN_NONE;
  return with_name("mark", message, [](std::string_view m) { nvtx().mark(m); });
}

PyObject* nvtx_name_current_thread(PyObject*, PyObject* name) {
  if (!PyUnicode_Check(name)) return not_a_str("name_current_thread", name);
  return with_name("name_current_thread", name,
                   [](std::string_view n) { nvtx().name_current_thread(n); });
}

PyObject* nvtx_profiler_start(PyObject*, PyObject*) {
  return PyBool_FromLong(nvtx().profiler_start());
}

PyObject* nvtx_profiler_stop(PyObject*, PyObject*) {
  return PyBool_FromLong(nvtx().profiler_stop());
}

PyObject* nvtx_repr(PyObject*) {
  return PyUnicode_FromFormat("<laptime.NVTXRangeWrapper (%s)>",
                              nvtx().is_enabled() ? "enabled" : "not enabled");
}

PyMethodDef g_nvtx_methods[] = {
    {"range_push", as_cfunction(nvtx_range_push), METH_FASTCALL | METH_KEYWORDS,
     "range_push($self, range_name)\n--\n\nOpens an NVTX range on the calling thread."},
    {"range_pop", as_cfunction(nvtx_range_pop), METH_FASTCALL | METH_KEYWORDS,
     "range_pop($self, range_name=None)\n--\n\nCloses the calling thread's innermost range; with "
     "order tracking, checks first that it is `range_name` (also spelled `expected`)."},
    {"enable", as_cfunction(nvtx_enable), METH_VARARGS | METH_KEYWORDS,
     "enable($self, sync_on_push, sync_on_pop, keep_track_of_range_order, *, domain=None, "
     "colors=None)\n--\n\nTurns the wrapper on."},
    {"mark", nvtx_mark, METH_O, "mark($self, message, /)\n--\n\nAn instantaneous NVTX marker."},
    {"name_current_thread", nvtx_name_current_thread, METH_O,
     "name_current_thread($self, name, /)\n--\n\nNames the calling OS thread for the profiler."},
    {"profiler_start", nvtx_profiler_start, METH_NOARGS,
     "profiler_start($self)\n--\n\ncuProfilerStart, when enabled and CUDA is available."},
    {"profiler_stop", nvtx_profiler_stop, METH_NOARGS,
     "profiler_stop($self)\n--\n\ncuProfilerStop, when enabled and CUDA is available."},
    {"range", range_scope, METH_O,
     "range($self, name, /)\n--\n\nA context manager and decorator: an NVTX range around the "
     "block."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef g_nvtx_getset[] = {
    {"is_enabled", nvtx_is_enabled, nullptr, "Whether enable() was called.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot g_nvtx_slots[] = {
    {Py_tp_doc,
     const_cast<char*>("NVTXRangeWrapper(*args, **kwargs)\n--\n\n"
                       "The process-wide NVTX range wrapper (laptime::NVTXRangeWrapper): NVTX "
                       "pushes, pops and marks with optional CUDA syncs and a per-thread check of "
                       "the range order.\nNVTXRangeWrapper() returns the singleton; with "
                       "arguments it also calls enable().")},
    {Py_tp_methods, g_nvtx_methods},
    {Py_tp_getset, g_nvtx_getset},
    {Py_tp_new, reinterpret_cast<void*>(nvtx_new)},
    {Py_tp_init, reinterpret_cast<void*>(nvtx_init)},
    {Py_tp_repr, reinterpret_cast<void*>(nvtx_repr)},
    {0, nullptr}};

}  // namespace

PyType_Spec g_nvtx_spec = {"laptime.NVTXRangeWrapper", sizeof(PyObject), 0,
                           Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, g_nvtx_slots};

}  // namespace pyext
