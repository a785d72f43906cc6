// The live progress line (Stopwatch::set_progress(ProgressMode::Line), LAPTIME_PROGRESS=line):
// its figures and text on constructed data, and what a real pseudo-terminal, a pipe, TERM=dumb,
// CI=true and a print function receive.

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "laptime/impl/progress.hpp"  // pure: tested in the compiled-out build too
#include "laptime/laptime.hpp"
#include "stopwatch_support.hpp"
#include "test_support.hpp"

namespace {

[[maybe_unused]] bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

[[maybe_unused]] std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("LAPTIME_PROGRESS takes report, line or off, in any case") {
  using laptime::ProgressMode;
  using laptime::detail::parse_progress;
  CHECK(parse_progress("report") == ProgressMode::Report);
  CHECK(parse_progress("Line") == ProgressMode::Line);
  CHECK(parse_progress("OFF") == ProgressMode::Off);
  CHECK_FALSE(parse_progress("bar"));
  CHECK_FALSE(parse_progress(""));
}

TEST_CASE("the line is rewritten only on a terminal, without a print function, TERM=dumb or CI") {
  using laptime::detail::rewrites_line;
  CHECK(rewrites_line(true, false, "xterm-256color", nullptr));
  CHECK(rewrites_line(true, false, "xterm", ""));
  CHECK(rewrites_line(true, false, "xterm", "false"));
  CHECK_FALSE(rewrites_line(false, false, "xterm", nullptr));  // a pipe, a file
  CHECK_FALSE(rewrites_line(true, true, "xterm", nullptr));    // the user's print function
  CHECK_FALSE(rewrites_line(true, false, "dumb", nullptr));    // an editor's shell, a launcher
  CHECK_FALSE(rewrites_line(true, false, nullptr, nullptr));
  CHECK_FALSE(rewrites_line(true, false, "", nullptr));
  CHECK_FALSE(rewrites_line(true, false, "xterm", "true"));  // CI logs keep every line
  CHECK_FALSE(rewrites_line(true, false, "xterm", "1"));
}

TEST_CASE("the loop's time: iterations after warm-up in the statistics, all in the window") {
  laptime::detail::LoopTimes t;
  t.add(1000, false);  // the first finish_iter: nothing before it to time it from
  CHECK(t.window_size == 0);
  CHECK_FALSE(t.figures());
  t.add(3000, false);  // warm-up: the window only
  CHECK(t.window_size == 1);
  CHECK_FALSE(t.figures());
  t.add(7000, true);
  t.add(8000, true);
  const auto f = t.figures();
  REQUIRE(f);
  CHECK(f->count == 2);
  CHECK(f->mean_ns == doctest::Approx(2500));
  CHECK(f->min_ns == doctest::Approx(1000));
  CHECK(f->max_ns == doctest::Approx(4000));
  t.clear();
  CHECK_FALSE(t.figures());
  t.add(9000, true);  // after a clear, the next one again has nothing before it
  CHECK_FALSE(t.figures());
}

TEST_CASE("the rolling figures are the last 100 iterations, quantiles exact") {
  laptime::detail::LoopTimes t;
  std::int64_t now = 1;
  t.add(now, false);
  for (int i = 0; i < 50; ++i) t.add(now += 999'000'000, true);  // pushed out of the window
  for (int ms = 100; ms >= 1; --ms) t.add(now += ms * 1'000'000, true);
  laptime::detail::ProgressFigures f;
  laptime::detail::window_figures(t, f);
  CHECK(f.window == 100);
  // numpy.percentile(range(1, 101), [50, 90]) ms: linear between the closest ranks
  CHECK(f.p50_ns == doctest::Approx(50.5e6));
  CHECK(f.p90_ns == doctest::Approx(90.1e6));
  CHECK(f.window_total_ns == doctest::Approx(5050e6));
  laptime::detail::LoopTimes two;
  two.add(now, false);
  two.add(now += 10'100'000, true);
  two.add(now += 30'100'000, true);
  laptime::detail::window_figures(two, f);
  CHECK(f.p50_ns == doctest::Approx(20.1e6));  // the mean of the middle two, as the report's
}

TEST_CASE("the progress line: iterations, it/s, ETA with a total, rolling p50/p90, CPU") {
  laptime::detail::ProgressFigures f;
  f.finished = 1200;
  f.total = 5000;
  f.window = 100;
  f.window_total_ns = 100 * 24e6;
  f.p50_ns = 23.9e6;
  f.p90_ns = 25.1e6;
  f.cpu_percent = 112.4;
  CHECK(laptime::detail::progress_line(f) ==
        "laptime: iter 1200/5000 | 41.7 it/s | ETA 1m31s | loop p50 23.9 ms p90 25.1 ms (last "
        "100) | CPU 112 %");
  f.total.reset();
  f.cpu_percent.reset();
  CHECK(laptime::detail::progress_line(f) ==
        "laptime: iter 1200 | 41.7 it/s | loop p50 23.9 ms p90 25.1 ms (last 100) | CPU n/a");
  f.window = 0;
  f.total = 10;
  CHECK(laptime::detail::progress_line(f) ==
        "laptime: iter 1200/10 | n/a it/s | ETA n/a | loop p50 n/a p90 n/a (last 0) | CPU n/a");
  // A fast loop's rate in whole iterations, never in exponent form ("1.5e+06 it/s").
  f.window = 100;
  f.window_total_ns = 100 * 666.0;
  CHECK(laptime::detail::progress_line(f).find("| 1501502 it/s |") != std::string::npos);
  f.window_total_ns = 100 * 1.5e6;
  CHECK(laptime::detail::progress_line(f).find("| 667 it/s |") != std::string::npos);
  f.window_total_ns = 100 * 1'000'400.0;  // 999.6 it/s
  CHECK(laptime::detail::progress_line(f).find("| 1000 it/s |") != std::string::npos);
  CHECK(laptime::detail::format_eta(3725) == "1h02m");
  CHECK(laptime::detail::format_eta(306) == "5m06s");
  CHECK(laptime::detail::format_eta(0.2) == "0s");
}

TEST_CASE("an ETA of 100000 hours or more (or not a number) prints as '> 99999h', never wraps") {
  using laptime::detail::format_eta;
  CHECK(format_eta(99999.0 * 3600 + 59 * 60) == "99999h59m");
  CHECK(format_eta(100000.0 * 3600) == "> 99999h");
  CHECK(format_eta(100000.0 * 3600 - 0.4) == "> 99999h");  // rounds to 100000h
  CHECK(format_eta(1e30) == "> 99999h");
  CHECK(format_eta(std::numeric_limits<double>::infinity()) == "> 99999h");
  CHECK(format_eta(std::numeric_limits<double>::quiet_NaN()) == "> 99999h");
  // set_total_iters(INT64_MAX) with 1.1 s iterations.
  laptime::detail::ProgressFigures f;
  f.finished = 3;
  f.total = std::numeric_limits<std::int64_t>::max();
  f.window = 3;
  f.window_total_ns = 3 * 1.1e9;
  f.p50_ns = f.p90_ns = 1.1e9;
  CHECK(laptime::detail::progress_line(f).find(" | ETA > 99999h | ") != std::string::npos);
}

#if LAPTIME_ENABLED

TEST_CASE("LAPTIME_PROGRESS is read with the other settings; a malformed value is warned about") {
  auto env = [](const char* value) {
    return laptime::settings_from_env([value](const char* name) -> const char* {
      return std::string(name) == "LAPTIME_PROGRESS" ? value : nullptr;
    });
  };
  CHECK(env("line").progress == "line");
  const laptime::Settings bad = env("bar");
  CHECK(bad.progress.empty());
  REQUIRE(bad.warnings.size() == 1);
  CHECK(contains(bad.warnings[0], "LAPTIME_PROGRESS"));
}

namespace {

std::vector<std::string> g_printed;
void collect(const char* text, std::size_t size, void*) {
  g_printed.emplace_back(text, size);
}

void iterate(int n, int ms) {
  auto& sw = laptime::Stopwatch::instance();
  for (int i = 0; i < n; ++i) {
    sw.start_meas("step");
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    sw.end_meas("step");
    sw.finish_iter();
  }
}

}  // namespace

TEST_CASE("in line mode without print_every_n_iters the line comes at most twice a second") {
  laptime_test::Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  g_printed.clear();
  sw.set_print_function(collect, nullptr);
  sw.enable(2);
  sw.set_progress(laptime::ProgressMode::Line);
  iterate(2, 1);
  CHECK(g_printed.empty());  // warm-up
  iterate(20, 1);
  REQUIRE(g_printed.size() == 1);
  CHECK(g_printed[0].rfind("laptime: iter 3 | ", 0) == 0);
  CHECK(g_printed[0].back() == '\n');  // a print function gets plain lines
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  iterate(1, 1);
  CHECK(g_printed.size() == 2);
  sw.set_print_function(nullptr, nullptr);
}

TEST_CASE("off: periodic printing prints nothing; report: the whole report, as before") {
  laptime_test::Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  g_printed.clear();
  sw.set_print_function(collect, nullptr);
  sw.enable(0, 2);
  sw.set_progress(laptime::ProgressMode::Off);
  iterate(4, 0);
  CHECK(g_printed.empty());
  sw.set_progress(laptime::ProgressMode::Report);
  iterate(2, 0);
  REQUIRE(g_printed.size() == 1);
  CHECK(g_printed[0].rfind("laptime stopwatch: 6 measured iterations", 0) == 0);
  // LAPTIME_PROGRESS wins over the code's calls (docs/configuration.md).
  laptime::Settings s;
  s.progress = "off";
  laptime::apply_settings(s, 0);
  sw.set_progress(laptime::ProgressMode::Report);
  iterate(2, 0);
  CHECK(g_printed.size() == 1);
  sw.set_print_function(nullptr, nullptr);
}

namespace {

enum class Dest { Pty, Pipe };

// Runs `body` in a forked child whose stdout is a pseudo-terminal (raw: no "\n" -> "\r\n") or a
// pipe, with TERM and CI as given (nullptr: unset); returns every byte the child wrote there.
template <class Body>
std::string child_output(Dest dest, const char* term, const char* ci, Body&& body) {
  int reader = -1;
  int writer = -1;
  if (dest == Dest::Pty) {
    reader = ::posix_openpt(O_RDWR | O_NOCTTY);
    REQUIRE(reader >= 0);
    REQUIRE(::grantpt(reader) == 0);
    REQUIRE(::unlockpt(reader) == 0);
    writer = ::open(::ptsname(reader), O_RDWR | O_NOCTTY);
    REQUIRE(writer >= 0);
    termios tio{};
    REQUIRE(::tcgetattr(writer, &tio) == 0);
    ::cfmakeraw(&tio);
    REQUIRE(::tcsetattr(writer, TCSANOW, &tio) == 0);
    REQUIRE(::isatty(writer) == 1);
  } else {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    reader = fds[0];
    writer = fds[1];
  }
  std::cout.flush();
  std::fflush(stdout);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(writer, 1);
    ::close(writer);
    ::close(reader);
    if (term != nullptr) {
      ::setenv("TERM", term, 1);
    } else {
      ::unsetenv("TERM");
    }
    if (ci != nullptr) {
      ::setenv("CI", ci, 1);
    } else {
      ::unsetenv("CI");
    }
    body();
    std::fflush(stdout);
    ::_exit(0);
  }
  ::close(writer);
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(reader, buf, sizeof buf);
    if (n <= 0) break;  // a pipe: EOF; a pseudo-terminal: EIO once the child closed it
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(reader);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  return out;
}

// Line mode every 2 measured iterations of a 13-iteration run (1 warm-up): lines at 3, 5, 7, 9;
// the whole periodic report at 11; a line at 13; then print_eval_times().
void progress_steps() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, 2);
  sw.set_progress(laptime::ProgressMode::Line);
  sw.set_total_iters(13);
  iterate(9, 2);
  sw.set_progress(laptime::ProgressMode::Report);
  iterate(2, 2);
  sw.set_progress(laptime::ProgressMode::Line);
  iterate(2, 2);
  sw.print_eval_times();
}

void progress_run() {
  laptime::detail::testing_reset_stopwatch();
  progress_steps();
}

}  // namespace

TEST_CASE("on a pseudo-terminal the line rewrites itself with '\\r'; the report starts below it") {
  const std::string out = child_output(Dest::Pty, "xterm", nullptr, progress_run);
  INFO(out);
  CHECK(out.rfind("\rlaptime: iter 3/13 | ", 0) == 0);
  for (const char* it : {"\rlaptime: iter 5/13 | ", "\rlaptime: iter 7/13 | ",
                         "\rlaptime: iter 9/13 | ", "\rlaptime: iter 13/13 | "}) {
    CHECK(contains(out, it));
  }
  CHECK(occurrences(out, "\x1b[K") == 5);  // each clears what a longer line left
  CHECK(contains(out, "| ETA 0s | loop p50 "));
  CHECK(contains(out, "(last 8) | CPU "));
  // The periodic report, and print_eval_times(), start below the line, not over it.
  const std::size_t report = out.find("laptime stopwatch: 10 measured iterations");
  REQUIRE(report != std::string::npos);
  CHECK(out.substr(report - 4, 4) == "\x1b[K\n");
  CHECK(out.substr(0, report - 1).find('\n') == std::string::npos);  // no line end before
  const std::size_t last = out.find("laptime stopwatch: 12 measured iterations");
  REQUIRE(last != std::string::npos);
  CHECK(out.substr(last - 4, 4) == "\x1b[K\n");
}

TEST_CASE("on a pipe, with TERM=dumb, with CI=true or through a print function: plain lines") {
  auto check_plain = [](const std::string& out) {
    INFO(out);
    CHECK(out.find('\r') == std::string::npos);
    CHECK(out.find("\x1b[K") == std::string::npos);
    CHECK(out.rfind("laptime: iter 3/13 | ", 0) == 0);
    CHECK(contains(out, " | CPU n/a\nlaptime: iter 5/13 | "));  // no CPU figure before a second
    CHECK(contains(out, "\nlaptime: iter 13/13 | "));
    CHECK(contains(out, "\nlaptime stopwatch: 10 measured iterations"));
    CHECK(contains(out, "\nlaptime stopwatch: 12 measured iterations"));
    CHECK_FALSE(contains(out, "\n\n"));  // no blank line: plain lines end themselves
  };
  SUBCASE("a pipe") {
    check_plain(child_output(Dest::Pipe, "xterm", nullptr, progress_run));
  }
  SUBCASE("TERM=dumb") {
    check_plain(child_output(Dest::Pty, "dumb", nullptr, progress_run));
  }
  SUBCASE("no TERM") {
    check_plain(child_output(Dest::Pty, nullptr, nullptr, progress_run));
  }
  SUBCASE("CI=true") {
    check_plain(child_output(Dest::Pty, "xterm", "true", progress_run));
  }
  SUBCASE("a print function, even one that writes the terminal") {
    check_plain(child_output(Dest::Pty, "xterm", nullptr, [] {
      laptime::detail::testing_reset_stopwatch();
      laptime::Stopwatch::instance().set_print_function(
          [](const char* text, std::size_t size, void*) {
            std::fwrite(text, 1, size, stdout);
            std::fflush(stdout);
          },
          nullptr);
      progress_steps();
    }));
  }
}

#endif  // LAPTIME_ENABLED
