// laptime internals: where the Stopwatch's reports and progress line go, one part of its
// process-wide state (stopwatch_parts.hpp): the print function, whether printing is limited to
// rank 0 and how often the periodic report prints, and whether a rewritten progress line ends the
// terminal's output now. report_mutex is this part's lock; it is held across the user's print
// function (which may wait for Python's GIL), so a forked child re-arms it instead of taking it
// across fork. It is recursive: the print function may call laptime on its own thread (a report
// made there goes to stdout, exit() there runs the at-exit output); it must not wait for another
// thread that prints (that thread waits for this lock). The function and its data
// change under it, so a report never pairs one's function with the other's data, and once
// set_print_function returns no other thread runs the old function. The implementation part.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <new>
#include <string>

#include "laptime/config.hpp"
#include "laptime/detail/env.hpp"
#include "laptime/impl/own_output.hpp"
#include "laptime/impl/progress.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// Where periodic and at-exit reports go: laptime::PrintFunction (stopwatch.hpp), spelled here.
using PrintFn = void (*)(const char* text, std::size_t size, void* user_data);

struct Printer {
  std::atomic<int> print_every{0};  // 0: never
  std::atomic<bool> print_rank0_only{false};
  std::atomic<int> report_format{0};                // ReportFormat
  std::atomic<bool> report_format_from_env{false};  // LAPTIME_REPORT_FORMAT: the code's yields
  PrintFn print_fn = nullptr;                       // under report_mutex, with its data
  void* print_user = nullptr;
  // A print function of laptime's own that writes this process's stdout (the Python module's
  // sys.stdout printer): the progress line may rewrite itself through it, never through a user's.
  std::atomic<PrintFn> stdout_print_fn{nullptr};
  std::recursive_mutex report_mutex;
  bool line_open = false;  // under report_mutex: a rewritten line ends the terminal's output

  /// Prints a report: through the print function, else to stdout (`what`: the warning's text
  /// when it cannot be written).
  void print(const std::string& report, const char* what = "a report could not be printed") {
    std::lock_guard<std::recursive_mutex> lock(report_mutex);
    // Below a rewritten progress line, not over it.
    const std::string& text = line_open ? "\n" + report : report;
    line_open = false;
    call(print_fn, text, what);
  }

  /// Prints a progress line: rewritten in place where rewrites_line (progress.hpp) says so, one
  /// line each otherwise.
  void print_line(const std::string& line) {
    std::lock_guard<std::recursive_mutex> lock(report_mutex);
    const PrintFn fn = print_fn;
    // A user's print function gets plain lines; laptime's own printers write this process's stdout.
    const bool user_fn = fn != nullptr && fn != stdout_print_fn.load();
    const bool rewrite =
        rewrites_line(::isatty(::fileno(stdout)) == 1, user_fn, env_raw("TERM"), env_raw("CI"));
    const std::string text = rewrite ? "\r" + line + "\x1b[K" : line + "\n";
    line_open = rewrite;
    call(fn, text, "the progress line could not be printed");
  }

  /// Under report_mutex: `text` through `fn`, or to stdout where there is none or where this
  /// thread is inside the print function already (a report it makes goes to stdout, not through
  /// the function again and again).
  void call(PrintFn fn, const std::string& text, const char* what) {
    static thread_local bool inside = false;
    if (fn == nullptr || inside) {
      print_own_output(stdout, text, what);
      return;
    }
    struct Inside {
      bool& flag;
      explicit Inside(bool& f) : flag(f) { flag = true; }
      ~Inside() { flag = false; }
    } mark(inside);
    fn(text.data(), text.size(), print_user);
  }

  /// Whether a rewritten progress line ends stdout now (then a report written there starts with
  /// a line end); forgets it.
  bool take_open_line() {
    std::lock_guard<std::recursive_mutex> lock(report_mutex);
    const bool open = line_open;
    line_open = false;
    return open;
  }

  /// Stopwatch::set_print_function: the pair changes at once, between reports.
  void set_print_target(PrintFn fn, void* user_data) {
    std::lock_guard<std::recursive_mutex> lock(report_mutex);
    print_user = user_data;
    print_fn = fn;
  }

  /// set_print_target only where the print function is `expected` now (nullptr: none): a
  /// binding's own printer neither replaces one the program set nor removes it.
  bool replace_print_target(PrintFn expected, PrintFn fn, void* user_data) {
    std::lock_guard<std::recursive_mutex> lock(report_mutex);
    if (print_fn != expected) return false;
    print_user = user_data;
    print_fn = fn;
    return true;
  }

  // A forked child: the thread that may have held the lock does not exist there.
  void rearm_printer_in_child() { new (&report_mutex) std::recursive_mutex(); }
};

}  // namespace detail
LAPTIME_END_NAMESPACE
