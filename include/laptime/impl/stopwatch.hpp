// laptime internals: the out-of-line half of the Stopwatch's facade (stopwatch.hpp). Each call
// forwards to the machinery: the rules in stopwatch_config.hpp, the state and reports in
// stopwatch_state.hpp, the files in exit_output.hpp. The implementation part (LAPTIME_IMPL):
// compiled once by src/laptime.cpp (the CMake target), or carried by <laptime/laptime.hpp>.
#pragma once

#include <cerrno>
#include <iostream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>

#include "laptime/config.hpp"
#include "laptime/stopwatch.hpp"
#if LAPTIME_ENABLED
#include "laptime/impl/exit_output.hpp"
#include "laptime/impl/own_output.hpp"
#include "laptime/impl/seed_report.hpp"
#include "laptime/impl/stopwatch_config.hpp"
#include "laptime/impl/stopwatch_features.hpp"
#include "laptime/impl/stopwatch_intervals.hpp"
#include "laptime/impl/stopwatch_state.hpp"
#endif

LAPTIME_BEGIN_NAMESPACE

#if LAPTIME_ENABLED

LAPTIME_IMPL void Stopwatch::enable(int num_warmup_iters, std::optional<int> print_every_n_iters,
                                    bool do_cuda_sync) {
  const detail::WriterLocksGuard guard;
  detail::enable_stopwatch(num_warmup_iters, print_every_n_iters, do_cuda_sync, "std::nullopt");
}
LAPTIME_IMPL void Stopwatch::disable() noexcept {
  const detail::WriterLocksGuard guard;
  detail::disable_stopwatch();
}
LAPTIME_IMPL void Stopwatch::reset() {
  const detail::WriterLocksGuard guard;
  detail::stopwatch_state().reset();
}
LAPTIME_IMPL void Stopwatch::track_cpu_usage(std::string_view name) {
  const detail::WriterLocksGuard guard;
  detail::track_cpu_usage(name);
}
LAPTIME_IMPL std::size_t Stopwatch::set_max_names(std::size_t n) {
  const detail::WriterLocksGuard guard;
  return detail::set_max_names(n);
}
LAPTIME_IMPL void Stopwatch::enable_gpu_timing(void* stream) {
  const detail::WriterLocksGuard guard;
  detail::enable_gpu_timing(stream);
}
LAPTIME_IMPL void Stopwatch::enable_gpu_timing_for(std::string_view name) {
  const detail::WriterLocksGuard guard;
  detail::enable_gpu_timing_for(name);
}
LAPTIME_IMPL void Stopwatch::set_gpu_stream(void* stream) noexcept {
  detail::stopwatch_state().gpu_stream.store(stream, std::memory_order_relaxed);
}
LAPTIME_IMPL void Stopwatch::disable_gpu_timing() {
  const detail::WriterLocksGuard guard;
  detail::disable_gpu_timing();
}
LAPTIME_IMPL void Stopwatch::wait_for_gpu_timings() {
  const detail::WriterLocksGuard guard;
  detail::StopwatchState& s = detail::stopwatch_state();
  s.collect_gpu(/*wait=*/true, s.iter_gate());
}
LAPTIME_IMPL void Stopwatch::enable_recording(std::size_t max_intervals) {
  constexpr auto bound = static_cast<std::size_t>(detail::kMaxRecordIntervals);
  if (max_intervals > bound) {  // the rings are allocated at start_meas, which must not throw
    detail::warn_once("enable_recording",
                      "enable_recording(" + std::to_string(max_intervals) + ") is above " +
                          std::to_string(bound) +
                          ", the bound of intervals per thread (32 bytes each); " +
                          std::to_string(bound) + " is used");
    max_intervals = bound;
  }
  const detail::WriterLocksGuard guard;
  detail::stopwatch_state().set_recording(max_intervals, false);
}
LAPTIME_IMPL void Stopwatch::set_nvtx_ranges(bool on) {
  const detail::WriterLocksGuard guard;
  detail::stopwatch_state().set_nvtx_ranges(on, false);
}
LAPTIME_IMPL void Stopwatch::set_rank(int rank, int world_size) {
  const detail::WriterLocksGuard guard;
  detail::set_rank(rank, world_size);
}
LAPTIME_IMPL void Stopwatch::set_print_rank0_only(bool on) noexcept {
  detail::set_print_rank0_only(detail::stopwatch_state(), on, detail::Rank0Source::code);
}
LAPTIME_IMPL void Stopwatch::set_worker_label(std::string_view label) {
  detail::stopwatch_state().share.set_label(label);
}
LAPTIME_IMPL bool Stopwatch::is_worker() const noexcept {
  return detail::stopwatch_state().share.is_worker();
}
LAPTIME_IMPL void Stopwatch::set_print_function(PrintFunction fn, void* user_data) noexcept {
  detail::set_print_function(fn, user_data);
}
LAPTIME_IMPL void Stopwatch::set_exit_signal_handlers(bool on) {
  detail::choose_exit_signal_handlers(on);
}
LAPTIME_IMPL void Stopwatch::set_data_name(std::string_view name) {
  const detail::WriterLocksGuard guard;
  detail::stopwatch_state().set_data_name(name, /*from_env=*/false);
}
LAPTIME_IMPL void Stopwatch::set_total_iters(std::int64_t n) noexcept {
  detail::stopwatch_state().total_iters.store(n > 0 ? n : 0, std::memory_order_relaxed);
}
LAPTIME_IMPL void Stopwatch::set_progress(ProgressMode mode) {
  const detail::WriterLocksGuard guard;
  detail::stopwatch_state().set_progress(mode, /*from_env=*/false);
}
LAPTIME_IMPL void Stopwatch::set_report_format(ReportFormat format) noexcept {
  detail::Printer& p = detail::stopwatch_state();
  if (!p.report_format_from_env.load()) p.report_format.store(static_cast<int>(format));
}
LAPTIME_IMPL void Stopwatch::discard_meas(std::string_view name) {
  const detail::WriterLocksGuard guard;
  detail::discard_interval(name);
}
LAPTIME_IMPL void Stopwatch::start_one_time_measurement(std::string_view name) {
  const detail::WriterLocksGuard guard;
  detail::start_one_time(name);
}
LAPTIME_IMPL void Stopwatch::end_one_time_measurement(std::string_view name) {
  const detail::WriterLocksGuard guard;
  detail::end_one_time(name);
}
LAPTIME_IMPL std::int64_t Stopwatch::get_num_nonwarmup_iters_measured() const {
  return detail::stopwatch_state().iterations_measured();
}
LAPTIME_IMPL Results Stopwatch::results() const {
  return detail::stopwatch_state().results();
}
LAPTIME_IMPL void Stopwatch::print_eval_times() const {
  print_eval_times(std::cout);
}
LAPTIME_IMPL void Stopwatch::print_eval_times(std::ostream& os) const {
  const Results r = results();
  // Nothing when not enabled and nothing was measured, as the seed printed nothing before enable.
  if (!is_enabled() && detail::nothing_measured(r)) {
    return;
  }
  // Into a closed pipe: no SIGPIPE (the stream fails, as the program finds by its state), and
  // into std::cout, std::cerr or std::clog the first failure is told on the other stream.
  const detail::SigpipeBlocked blocked;
  const bool was_good = os.good();
  errno = 0;
  // Below a progress line rewritten in place on the terminal, not over it.
  if (&os == &std::cout && detail::stopwatch_state().take_open_line()) os << '\n';
  os << detail::report_text(r, detail::stopwatch_state().report_format.load()) << std::flush;
  const bool standard = &os == &std::cout || &os == &std::cerr || &os == &std::clog;
  if (was_good && !os.good() && standard) {
    detail::warn_own_output_failed(&os == &std::cout ? stdout : stderr,
                                   "a report could not be printed", errno != 0 ? errno : EIO);
  }
}
LAPTIME_IMPL std::string Stopwatch::report() const {
  return detail::report_text(results(), detail::stopwatch_state().report_format.load());
}
LAPTIME_IMPL std::string Stopwatch::to_json() const {
  return results().to_json();
}
LAPTIME_IMPL void Stopwatch::write_json(const std::string& path) const {
  if (const detail::WriteFailure f = detail::write_file_atomically(path, to_json())) {
    throw std::system_error(f.code, std::generic_category(),
                            "laptime: could not write results to '" + detail::escaped(path) + "'" +
                                (f.step != nullptr ? std::string(" (") + f.step + ")" : ""));
  }
}

namespace detail {

// ---- The state's entry points, out of line: the hot path's calls into it (stopwatch_hot.hpp).
// Defined here, not in stopwatch_state.hpp, so that a file that reads the state (a white-box
// test, the Python binding) compiles only what it uses, not the whole implementation again.

/// Stopwatch::finish_iter once enabled: what happens at the end of an iteration, one concern a
/// line.
LAPTIME_IMPL void StopwatchCore::finish_iter() {
  StopwatchState& s = whole(*this);
  std::int64_t finished = 0;
  std::int64_t now = 0;
  {
    // These locks are the signal writer's too. Not the report: results() holds the signals back
    // itself, and printing, which may block on a full pipe, must let them through.
    const WriterLocksGuard guard;
    if (!s.nothing_running_here()) return;  // a usage error: an interval still runs here
    // A worker's iterations are its parent's (the shared gate): it does not count its own.
    if (s.share.is_worker()) return;
    if (s.share.regions_short()) s.share.reap();  // regions of ended workers, folded
    finished = iter_gate().finished.fetch_add(1, std::memory_order_relaxed) + 1;
    now = now_ns();
    s.add_iteration(finished - 1, now,
                    finished > iter_gate().warmup.load(std::memory_order_relaxed),
                    s.iteration_ends_capacity());
    mark_iteration(finished);
    if (features.load(std::memory_order_relaxed) & (kFeatGpuTiming | kFeatGpuNames)) {
      (void)s.collect_gpu(/*wait=*/false, iter_gate());
    }
  }
  s.report_after_iteration(finished, now);
}

LAPTIME_IMPL LAPTIME_COLD void scoped_end_failed() noexcept {
  try {
    throw;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
  } catch (const std::exception& e) {  // std::bad_alloc: a destructor does not throw it on
    std::fprintf(stderr, "laptime: error: the end of a measured scope failed: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "laptime: error: the end of a measured scope failed\n");
  }
}

LAPTIME_IMPL bool finish_iter_will_print() {
  StopwatchState& s = stopwatch_state();
  return s.prints_after(s.iter_gate().finished.load(std::memory_order_relaxed) + 1);
}

LAPTIME_IMPL void testing_reset_stopwatch() {
  testing_reset_stopwatch_impl();
}

}  // namespace detail

#endif

LAPTIME_END_NAMESPACE
