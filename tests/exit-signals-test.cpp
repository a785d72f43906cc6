// The usual ways a job ends other than returning from main (docs/guarantees.md): SIGTERM,
// SIGINT, SIGHUP, abort() (LAPTIME_ON_ERROR=abort among them) and quick_exit() leave a complete
// results file, at once, and the process still ends as it would have; a program's own handler
// still runs; an ignored signal stays ignored; LAPTIME_SIGNAL_HANDLERS=0 leaves signals alone.
//
// Each case runs this binary again as a helper process ("--helper MODE", exit_helpers.hpp) and
// checks what it left.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "exit_checks.hpp"
#include "exit_helpers.hpp"
#include "laptime/laptime.hpp"
#include "reliability_support.hpp"
#include "test_support.hpp"

namespace {
using exit_test::check_json_file;
using exit_test::helper_env;
using exit_test::kLoopIters;

/// Opens the FIFO `path` as its reader and reads what one writer writes, until it closes; gives
/// up after `timeout_s` without a byte (the writer may never come).
std::string read_one_writer(const std::string& path, int timeout_s) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  for (int waited_ms = 0; waited_ms < timeout_s * 1000;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) == 0) {
      waited_ms += 100;
      continue;
    }
    char buf[65536];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 && !text.empty()) {
      break;  // its writer closed it
    } else {
      ::usleep(10000);  // no writer yet (EOF before any byte), or EAGAIN
      waited_ms += 10;
    }
  }
  ::close(fd);
  return text;
}
}  // namespace

TEST_CASE(
    "SIGTERM, SIGINT, SIGHUP, abort() and quick_exit() leave a complete JSON, and the process "
    "still ends with the signal's status or quick_exit's code" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  struct Case {
    const char* how;
    int signal;     // the signal that must end it, or 0
    int exit_code;  // otherwise
  };
  for (const Case& c :
       {Case{"SIGTERM", SIGTERM, -1}, Case{"SIGINT", SIGINT, -1}, Case{"SIGHUP", SIGHUP, -1},
        Case{"abort", SIGABRT, -1}, Case{"quick_exit", 0, 3}}) {
    for (int run = 0; run < 10; ++run) {
      CAPTURE(std::string(c.how));
      CAPTURE(run);
      const auto r = reliability::run_self(
          {"--helper", "end-by", c.how},
          helper_env({{"LAPTIME_OUTPUT", path}, {"LAPTIME_PRINT_AT_EXIT", "1"}}), dir);
      REQUIRE_MESSAGE(!r.timed_out, r.describe());
      CHECK_MESSAGE(r.signal == c.signal, r.describe());
      CHECK_MESSAGE(r.exit_code == c.exit_code, r.describe());
      check_json_file(path, kLoopIters);
      CHECK(r.err.find("laptime") == std::string::npos);
      std::remove(path.c_str());
    }
  }
}

TEST_CASE(
    "a SIGTERM that lands while the at-exit output is being made still leaves the file, "
    "at once" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  for (const char* delay_us : {"0", "300", "1000", "3000"}) {
    for (int run = 0; run < 3; ++run) {
      CAPTURE(std::string(delay_us));
      CAPTURE(run);
      const auto r = reliability::run_self({"--helper", "sigterm-during-exit-output", delay_us},
                                           helper_env({{"LAPTIME_OUTPUT", path}}), dir);
      REQUIRE_MESSAGE(!r.timed_out, r.describe());
      // The signal may also come after the process has ended (exit status 0).
      CHECK_MESSAGE((r.signal == SIGTERM || r.exit_code == 0), r.describe());
      check_json_file(path, kLoopIters);
      // Not the writer thread's 2 s wait for a lock the interrupted thread holds.
      CHECK_MESSAGE(r.seconds < 1.5, r.describe());
      std::remove(path.c_str());
    }
  }
}

TEST_CASE(
    "a SIGTERM whose results take longer than 2 s to write (a FIFO nobody reads for 3 s) still "
    "leaves them whole, and the process then ends by the signal" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.fifo");
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  // The writer gathers the results, then waits in open() for a reader: as a long recording's
  // serialisation does, it holds no lock of the program's, and the handler waits for it.
  const reliability::Spawned sp = reliability::spawn_self(
      {"--helper", "end-by", "SIGTERM"}, helper_env({{"LAPTIME_OUTPUT", path}}), dir);
  ::sleep(3);
  const std::string text = read_one_writer(path, 10);
  const auto r = reliability::finish(sp);
  REQUIRE_MESSAGE(!r.timed_out, r.describe());
  CHECK_MESSAGE(r.signal == SIGTERM, r.describe());
  std::string error;
  const auto json = reliability::parse_json(text, &error);
  REQUIRE_MESSAGE(json != nullptr, "not complete, valid JSON: " << error << "; " << r.describe());
  CHECK(json->get("iterations_measured")->number == kLoopIters);
  CHECK(r.err.find("laptime") == std::string::npos);
}

TEST_CASE(
    "a SIGTERM whose results cannot be written within 20 s (a FIFO nobody reads) ends the process "
    "by the signal then, with one line that says the results were not written" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.fifo");
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  const auto r = reliability::run_self({"--helper", "end-by", "SIGTERM"},
                                       helper_env({{"LAPTIME_OUTPUT", path}}), dir);
  REQUIRE_MESSAGE(!r.timed_out, r.describe());
  CHECK_MESSAGE(r.signal == SIGTERM, r.describe());
  CHECK_MESSAGE((r.seconds > 19 && r.seconds < 40), r.describe());
  CHECK_MESSAGE(r.err.find("results not written at the signal: writing them took more than 20 s") !=
                    std::string::npos,
                r.describe());
}

namespace {
// Runs helper `mode` with `delay_us` (a SIGTERM lands on its main thread meanwhile): it ends by the
// signal, leaving a whole results file at once, not after the handler's 2 s wait for a lock the
// interrupted call holds.
void sigterm_leaves_the_file_at_once(const reliability::TempDir& dir, const std::string& path,
                                     const char* mode, const char* delay_us) {
  CAPTURE(std::string(mode));
  CAPTURE(std::string(delay_us));
  const auto r = reliability::run_self({"--helper", mode, delay_us},
                                       helper_env({{"LAPTIME_OUTPUT", path}}), dir);
  REQUIRE_MESSAGE(!r.timed_out, r.describe());
  CHECK_MESSAGE(r.signal == SIGTERM, r.describe());
  std::string error;
  const auto json = reliability::parse_json(reliability::read_file(path), &error);
  REQUIRE_MESSAGE(json != nullptr, "no complete results file: " << error);
  CHECK(reliability::find_measurement(*json, "main loop")->get("count")->number == kLoopIters);
  CHECK_MESSAGE(r.seconds < 1.5, r.describe());
  std::remove(path.c_str());
}
}  // namespace

TEST_CASE("a SIGTERM that lands while a periodic report is made still leaves the file, at once" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  for (const char* delay_us : {"1000", "5000", "20000"}) {
    for (int run = 0; run < 4; ++run) {
      CAPTURE(run);
      sigterm_leaves_the_file_at_once(dir, path, "sigterm-during-report", delay_us);
    }
  }
}

TEST_CASE(
    "a SIGTERM that lands while finish_iter(), disable() or enable() holds a lock still leaves the "
    "file, at once" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  for (const char* mode : {"sigterm-during-finish-iter", "sigterm-during-toggle"}) {
    for (const char* delay_us : {"2000", "7000", "13000", "29000"}) {
      for (int run = 0; run < 3; ++run) {
        CAPTURE(run);
        sigterm_leaves_the_file_at_once(dir, path, mode, delay_us);
      }
    }
  }
}

TEST_CASE("after disable() the results stay: the file and the report at exit, the file at SIGTERM" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  for (const char* how : {"disabled-exit", "disabled-SIGTERM"}) {
    CAPTURE(std::string(how));
    const auto r = reliability::run_self(
        {"--helper", "end-by", how},
        helper_env({{"LAPTIME_OUTPUT", path}, {"LAPTIME_PRINT_AT_EXIT", "1"}}), dir);
    REQUIRE_MESSAGE(!r.timed_out, r.describe());
    check_json_file(path, kLoopIters);
    if (std::string(how) == "disabled-exit") {
      CHECK_MESSAGE(r.exit_code == 0, r.describe());
      CHECK(r.out.find("laptime stopwatch: 20 measured iterations") != std::string::npos);
    } else {
      CHECK_MESSAGE(r.signal == SIGTERM, r.describe());
    }
    std::remove(path.c_str());
  }
}

TEST_CASE(
    "LAPTIME_ON_ERROR=abort: a usage error of enable() or of a one-time measurement leaves "
    "the file, at once" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  for (const char* which : {"one-time", "one-time-end", "enable"}) {
    CAPTURE(std::string(which));
    const auto r = reliability::run_self(
        {"--helper", "abort-by-usage-error", which},
        helper_env({{"LAPTIME_OUTPUT", path}, {"LAPTIME_ON_ERROR", "abort"}}), dir);
    REQUIRE_MESSAGE(!r.timed_out, r.describe());
    CHECK_MESSAGE(r.signal == SIGABRT, r.describe());
    check_json_file(path, kLoopIters);
    // Not the writer thread's 2 s wait for a lock the aborting thread holds.
    CHECK_MESSAGE(r.seconds < 1.5, r.describe());
    std::remove(path.c_str());
  }
}

TEST_CASE("a SIGTERM handler the program installed is still called, after the JSON is written" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  const auto r =
      reliability::run_self({"--helper", "chained"}, helper_env({{"LAPTIME_OUTPUT", path}}), dir);
  CHECK_MESSAGE(r.exit_code == 42, r.describe());
  CHECK(reliability::lines_with(r.err, "the program's SIGTERM handler ran") == 1);
  check_json_file(path, kLoopIters);
}

TEST_CASE("a program that catches SIGINT and goes on still gets the file of its whole run at exit" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  const auto r = reliability::run_self({"--helper", "interrupted-then-continues"},
                                       helper_env({{"LAPTIME_OUTPUT", path}}), dir);
  REQUIRE_MESSAGE(r.ok(), r.describe());
  check_json_file(path, kLoopIters + 5);
}

TEST_CASE(
    "LAPTIME_SIGNAL_HANDLERS=0 or set_exit_signal_handlers(false) leave signals to the program: "
    "SIGTERM then saves nothing" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  SUBCASE("the variable") {
    const auto r = reliability::run_self(
        {"--helper", "end-by", "SIGTERM"},
        helper_env({{"LAPTIME_OUTPUT", path}, {"LAPTIME_SIGNAL_HANDLERS", "0"}}), dir);
    CHECK_MESSAGE(r.signal == SIGTERM, r.describe());
    CHECK(r.err.empty());
  }
  SUBCASE("the call, after enable()") {
    const auto r = reliability::run_self({"--helper", "end-by", "SIGTERM-code-off"},
                                         helper_env({{"LAPTIME_OUTPUT", path}}), dir);
    CHECK_MESSAGE(r.signal == SIGTERM, r.describe());
  }
  CHECK_FALSE(reliability::file_exists(path));
}

TEST_CASE("a signal the program ignores stays ignored" * LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  const auto r = reliability::run_self({"--helper", "end-by", "SIGHUP-ignored"},
                                       helper_env({{"LAPTIME_OUTPUT", path}}), dir);
  REQUIRE_MESSAGE(r.ok(), r.describe());
  check_json_file(path, kLoopIters);  // at the normal exit
}

int main(int argc, char** argv) {
  if (argc >= 3 && std::string_view(argv[1]) == "--helper") {
    return exit_test::run_helper_program(argv[2], argc >= 4 ? argv[3] : nullptr);
  }
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
