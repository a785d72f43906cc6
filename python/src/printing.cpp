// Periodic reports through sys.stdout: laptime's print function, installed by the package at
// import and removed at exit (docs/python.md, Printing).
#include "extension.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

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
  return current_interpreter() == PyInterpreterState_Main();
}

}  // namespace

namespace {

/// Writes `s` to sys.stdout; the GIL held.
void write_to_sys_stdout(std::string_view s) {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);     // keep an exception the caller may have set
  PyObject* out = PySys_GetObject("stdout");  // borrowed
  if (out != nullptr && out != Py_None && !write_to(out, s)) after_failed_sys_stdout_write(out, s);
  PyErr_Restore(type, value, traceback);
}

/// A report handed from a thread Python never ran on to a thread that waits for the GIL: claimed
/// under `mutex` by exactly one of them, and written by it outside the lock (a write to sys.stdout
/// may release the GIL, and whoever takes it then may wait for the caller).
struct HandedReport {
  std::mutex mutex;
  std::condition_variable cv;
  bool taken = false;    // by the helper, which writes it to sys.stdout
  bool dropped = false;  // by the caller, which writes it to the C stdout
  bool written = false;  // the helper's write is done
  std::string text;
};

/// Helpers waiting for the GIL: at most one, so that a GIL held for long costs one wait of
/// kGilWait and leaves one thread behind, not one per report.
std::atomic<int> g_helpers_waiting{0};

/// How long a thread Python never ran on waits for the GIL to print (docs/python.md, Printing).
constexpr std::chrono::milliseconds kGilWait{500};

/// Set on a thread while laptime's binding has released its GIL (WithoutGil).
thread_local bool t_released_by_laptime = false;

/// A report from a thread Python never ran on (a C++ thread of an extension or of an embedding
/// program), or from a Python thread whose GIL another extension released: whoever holds the GIL
/// may be waiting for this very thread (a pybind11 op that joins its C++ thread without releasing
/// the GIL, an embedding program's main thread), so taking the GIL here could wait forever, with
/// laptime's report lock held. A helper thread takes the GIL and writes to sys.stdout; past
/// kGilWait this thread writes to the C stdout instead.
void print_from_foreign_thread(std::string_view s) {
  std::shared_ptr<HandedReport> handed;
  if (g_helpers_waiting.fetch_add(1) != 0) {  // one still waits for the GIL: not another
    g_helpers_waiting.fetch_sub(1);
    laptime::binding::write_own_output(stdout, s, kReportNotPrinted);
    return;
  }
  try {
    handed = std::make_shared<HandedReport>();
    handed->text = std::string(s);
    std::thread([handed] {
      const PyGILState_STATE gil = PyGILState_Ensure();
      g_helpers_waiting.fetch_sub(1);
      bool mine = false;
      {
        const std::lock_guard<std::mutex> lock(handed->mutex);
        mine = !handed->dropped;
        handed->taken = mine;
      }
      if (mine) write_to_sys_stdout(handed->text);
      PyGILState_Release(gil);
      {
        const std::lock_guard<std::mutex> lock(handed->mutex);
        handed->written = true;
      }
      handed->cv.notify_all();
    }).detach();
  } catch (...) {  // no memory, no thread
    g_helpers_waiting.fetch_sub(1);
    laptime::binding::write_own_output(stdout, s, kReportNotPrinted);
    return;
  }
  std::unique_lock<std::mutex> lock(handed->mutex);
  // Taken and not written within the wait: the helper writes it when it can (the write may wait
  // for the GIL again, whose holder may keep it until this thread goes on).
  handed->cv.wait_for(lock, kGilWait, [&] { return handed->written; });
  if (handed->taken) return;
  handed->dropped = true;
  lock.unlock();
  laptime::binding::write_own_output(stdout, s, kReportNotPrinted);
}

/// Whether the calling thread, whose state is `mine`, holds the GIL now. Not PyGILState_Check():
/// CPython turns that check off once a subinterpreter was made, and it then always answers yes.
bool holds_gil(PyThreadState* mine) {
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked() == mine;
#else
  return _PyThreadState_UncheckedGet() == mine;
#endif
}

}  // namespace

WithoutGil::WithoutGil() : saved_(PyEval_SaveThread()), was_marked_(t_released_by_laptime) {
  t_released_by_laptime = true;
}

WithoutGil::~WithoutGil() {
  t_released_by_laptime = was_marked_;
  PyEval_RestoreThread(saved_);
}

/// laptime::PrintFunction: writes to sys.stdout (notebooks and loggers capture it) with the GIL
/// held, from any thread. A thread that holds the GIL, or whose GIL laptime released, takes it
/// (again); any other thread hands the text to one that does (print_from_foreign_thread). A closed
/// or full sys.stdout drops the text (told once), whatever the program's SIGPIPE disposition.
void print_to_sys_stdout(const char* text, std::size_t size, void* /*user_data*/) {
  const std::string_view s(text, size);
  const laptime::binding::SigpipeBlocked blocked;
  if (!interpreter_usable()) {
    laptime::binding::write_own_output(stdout, s, kReportNotPrinted);
    return;
  }
  PyThreadState* mine = PyGILState_GetThisThreadState();
  if (mine == nullptr || (!t_released_by_laptime && !holds_gil(mine))) {
    print_from_foreign_thread(s);
    return;
  }
  const PyGILState_STATE gil = PyGILState_Ensure();
  write_to_sys_stdout(s);
  PyGILState_Release(gil);
}

// Both set the print function without the GIL: setting it waits for a report in progress, whose
// print function may be waiting for the GIL on another thread.
PyObject* mod_install_print_function(PyObject*, PyObject*) {
  if (!in_main_interpreter()) Py_RETURN_NONE;
  // It writes the program's stdout: a progress line may rewrite itself there on a terminal.
  const WithoutGil released;
  laptime::binding::install_stdout_print_function(print_to_sys_stdout);
  Py_RETURN_NONE;
}

// The package registers this with atexit: afterwards reports go to the C stdout, so that a C++
// thread or laptime's own at-exit report never calls into a finalised interpreter. A print
// function a C++ extension set stays.
PyObject* mod_uninstall_print_function(PyObject*, PyObject*) {
  if (!in_main_interpreter()) Py_RETURN_NONE;
  const WithoutGil released;
  laptime::binding::uninstall_stdout_print_function(print_to_sys_stdout);
  Py_RETURN_NONE;
}

// The at-exit output now (once): the package calls it from its atexit handler when Python is
// about to end the process by SIGINT (an unhandled KeyboardInterrupt), which skips C atexit.
PyObject* mod_run_exit_output(PyObject*, PyObject*) {
  if (!in_main_interpreter()) Py_RETURN_NONE;
  {
    const WithoutGil released;  // the report's print function takes it again
    laptime::binding::run_exit_output_now();
  }
  Py_RETURN_NONE;
}

}  // namespace pyext
