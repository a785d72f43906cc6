// laptime: what a language binding (the Python extension, python/src) needs beyond the public API,
// in one small room, so that the binding itself never reaches into detail::. Each hook is a thin
// inline call into the implementation; nothing here is for programs that measure.
//
//   #include <laptime/binding_hooks.hpp>
//   if (laptime::binding::stopwatch_never_enabled()) return;   // before any argument is read
//
// Compiled out (LAPTIME_DISABLE), every hook keeps its signature and does nothing.
#pragma once

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/impl/own_output.hpp"
#include "laptime/nvtx.hpp"
#include "laptime/stopwatch.hpp"
#if LAPTIME_ENABLED
#include "laptime/impl/exit_output.hpp"
#include "laptime/impl/stopwatch_config.hpp"
#include "laptime/impl/stopwatch_state.hpp"
#endif

LAPTIME_BEGIN_NAMESPACE
namespace binding {

/// Whether the Stopwatch was never enabled: then start_meas and end_meas do nothing at all, so a
/// binding may skip reading its arguments (the seed's methods were empty then). After a
/// disable() they still reach laptime, which remembers what started while off.
inline bool stopwatch_never_enabled() noexcept {
#if LAPTIME_ENABLED
  return !detail::stopwatch_core().ever_enabled();
#else
  return true;
#endif
}

/// Whether an NVTX push or pop has anything to do: the wrapper is enabled and not quiet (a tool
/// is attached, a CUDA sync or order tracking is asked for). False: the call may be skipped
/// before its name is converted.
inline bool nvtx_needs_call() noexcept {
#if LAPTIME_ENABLED
  return detail::nvtx_busy();
#else
  return false;
#endif
}

/// Whether the next Stopwatch::finish_iter() prints the periodic report (a binding lets go of its
/// interpreter lock for that one: the print function takes it again).
inline bool finish_iter_will_print() {
#if LAPTIME_ENABLED
  return detail::finish_iter_will_print();
#else
  return false;
#endif
}

/// Stopwatch::enable, with `none` as the caller's language spells "no value" in error messages
/// ("None" from Python; C++ says "std::nullopt").
inline void enable_stopwatch(int num_warmup_iters, std::optional<int> print_every_n_iters,
                             bool do_cuda_sync, const char* none) {
#if LAPTIME_ENABLED
  detail::enable_stopwatch(num_warmup_iters, print_every_n_iters, do_cuda_sync, none);
#else
  (void)none;
  Stopwatch::instance().enable(num_warmup_iters, print_every_n_iters, do_cuda_sync);
#endif
}

/// Stopwatch::set_print_function for a function that writes this process's stdout (a binding's
/// sys.stdout), unless the program set a print function of its own (a C++ extension's logger):
/// the progress line may then rewrite itself in place on a terminal, as on stdout.
inline void install_stdout_print_function(PrintFunction fn) noexcept {
#if LAPTIME_ENABLED
  detail::StopwatchState& s = detail::stopwatch_state();
  s.stdout_print_fn.store(fn);
  (void)s.replace_print_target(nullptr, fn, nullptr);
#else
  (void)fn;
#endif
}

/// Removes `fn` where it is still the print function (reports then go to the C stdout); a print
/// function the program set since stays.
inline void uninstall_stdout_print_function(PrintFunction fn) noexcept {
#if LAPTIME_ENABLED
  (void)detail::stopwatch_state().replace_print_target(fn, nullptr, nullptr);
#else
  (void)fn;
#endif
}

/// Whether a progress line rewritten in place ends stdout now (a report written there then starts
/// with a line end); forgets it.
inline bool take_open_progress_line() {
#if LAPTIME_ENABLED
  return detail::stopwatch_state().take_open_line();
#else
  return false;
#endif
}

/// The limit on distinct measurement names in force (Stopwatch::set_max_names sets it).
inline std::size_t max_names() noexcept {
#if LAPTIME_ENABLED
  return detail::stopwatch_state().max_names.load(std::memory_order_relaxed);
#else
  return LAPTIME_MAX_NAMES;
#endif
}

/// The caller knows that this process is a program of its own, not a worker of the process that
/// started it: Python's enable() or set_rank() called from no module's import in a process that
/// multiprocessing started (a torch.multiprocessing.spawn rank, where a DataLoader worker's
/// re-import of the main module runs a top-level enable()). A worker that measured nothing into
/// its parent's share leaves it (docs/workers.md). True where it left.
inline bool stopwatch_is_own_program() {
#if LAPTIME_ENABLED
  return detail::become_own_program(detail::stopwatch_state());
#else
  return false;
#endif
}

/// The at-exit output (LAPTIME_OUTPUT's file, LAPTIME_PRINT_AT_EXIT's report) now, once, for an
/// interpreter about to end its process without the C atexit handlers: Python, after an
/// unhandled KeyboardInterrupt, runs its own exit handlers and then kills itself with SIGINT.
inline void run_exit_output_now() noexcept {
#if LAPTIME_ENABLED
  detail::run_exit_output();
#endif
}

/// Tests only: the Stopwatch and the NVTX wrapper as before their first enable (names stay
/// interned). Never while other threads measure.
inline void reset_for_testing() {
#if LAPTIME_ENABLED
  detail::testing_reset_stopwatch();
#endif
  detail::nvtx_reset_for_testing();
}

/// laptime's own output to a C stream, written so that a closed or full stream never hurts the
/// program: SIGPIPE blocked in the writing thread for the object's life (write_own_output and
/// warn_own_output_failed expect it), the text dropped on failure and the first failure per
/// stream told once on the other stream (docs/guarantees.md).
using SigpipeBlocked = detail::SigpipeBlocked;

/// Writes `text` to `stream` (stdout or stderr) as laptime writes its reports; `what` names the
/// output in the one line told on failure ("a report could not be printed").
/// False when it failed (and was told).
inline bool write_own_output(std::FILE* stream, std::string_view text, const char* what) {
  return detail::print_own_output(stream, text, what);
}

/// Tells once per stream and process that laptime's output to `stream` failed with `err`.
inline void warn_own_output_failed(std::FILE* stream, const char* what, int err) {
  detail::warn_own_output_failed(stream, what, err);
}

}  // namespace binding
LAPTIME_END_NAMESPACE
