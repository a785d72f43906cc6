// Results are never lost at a normal exit (docs/reliability.md): LAPTIME_OUTPUT=path writes the
// JSON and LAPTIME_PRINT_AT_EXIT=1 prints the report, whatever the order of static destruction,
// with threads still measuring, when exit() comes from another thread, and when the output
// cannot be written (one clear message, exit code unchanged); into a closed stdout; and the file
// is replaced atomically, never seen torn. The signals, abort() and quick_exit() are
// exit-signals-test's.
//
// The variables are read at the first enable(), and exit is what is tested: each case runs this
// binary again as a helper process ("--helper MODE") and checks what it left.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "exit_checks.hpp"               // helper_env, check_json_file
#include "exit_helpers.hpp"              // the programs the cases start
#include "laptime/impl/exit_output.hpp"  // expand_output_path: the exit output's own rule
#include "laptime/laptime.hpp"
#include "reliability_support.hpp"
#include "test_support.hpp"

namespace {

using exit_test::check_json_file;
using exit_test::helper_env;
using exit_test::kLoopIters;
constexpr int kRuns = 100;

#if LAPTIME_ENABLED
using exit_test::main_loop;

// Constructed before main, so destroyed after laptime's atexit handler (registered at enable()):
// measuring then must be harmless, though it is too late to be in the results (the "detached"
// helper program's run).
struct EarlyStatic {
  ~EarlyStatic() {
    auto& sw = laptime::Stopwatch::instance();
    sw.start_meas("early static");
    sw.end_meas("early static");
    (void)sw.results();
  }
} g_early_static;

#endif  // LAPTIME_ENABLED

// The checks every normal exit must pass: the report printed once, the JSON complete.
void check_results(const reliability::RunResult& r, const std::string& json_path,
                   bool expect_worker) {
  REQUIRE_MESSAGE(r.ok(), r.describe());
  CHECK(reliability::count_of(r.out, "laptime stopwatch: 20 measured iterations") == 1);
  CHECK(r.out.find("main loop") != std::string::npos);
  std::string error;
  const auto json = reliability::parse_json(reliability::read_file(json_path), &error);
  REQUIRE_MESSAGE(json != nullptr, "LAPTIME_OUTPUT is not complete, valid JSON: " << error);
  CHECK(json->get("iterations_measured")->number == kLoopIters);
  const reliability::Json* loop = reliability::find_measurement(*json, "main loop");
  REQUIRE(loop != nullptr);
  CHECK(loop->get("count")->number == kLoopIters);
  if (expect_worker) {
    const reliability::Json* worker = reliability::find_measurement(*json, "worker");
    REQUIRE(worker != nullptr);
    CHECK(worker->get("count")->number >= 100);
    const reliability::Json* late = reliability::find_measurement(*json, "late static");
    REQUIRE(late != nullptr);
    CHECK(late->get("count")->number == 1);
  }
}

long helper_pid(const std::string& out) {
  const auto pos = out.find("exit-helper pid ");
  return pos == std::string::npos ? -1 : std::atol(out.c_str() + pos + 16);
}

}  // namespace

TEST_CASE(
    "at a normal exit the JSON is written and the report printed, with a detached thread "
    "still measuring (100 runs)" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string pattern = dir.file("results-{pid}.json");
  double slowest = 0;
  for (int run = 0; run < kRuns; ++run) {
    CAPTURE(run);
    const auto r = reliability::run_self(
        {"--helper", "detached"},
        helper_env({{"LAPTIME_OUTPUT", pattern}, {"LAPTIME_PRINT_AT_EXIT", "1"}}), dir, 60);
    slowest = std::max(slowest, r.seconds);
    // "{pid}" in LAPTIME_OUTPUT is the process id.
    const std::string path = dir.file("results-" + std::to_string(helper_pid(r.out)) + ".json");
    check_results(r, path, true);
    CHECK(r.err.empty());
    std::remove(path.c_str());
  }
  MESSAGE("slowest of " << kRuns << " runs: " << slowest << " s");
}

TEST_CASE("exit() from another thread while the main thread measures still writes the results" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  for (int run = 0; run < 20; ++run) {
    CAPTURE(run);
    const auto r = reliability::run_self(
        {"--helper", "exit-from-thread"},
        helper_env({{"LAPTIME_OUTPUT", path}, {"LAPTIME_PRINT_AT_EXIT", "1"}}), dir, 60);
    check_results(r, path, false);
    std::remove(path.c_str());
  }
}

TEST_CASE("a print function that throws at exit loses neither the JSON nor the exit code" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  const auto r = reliability::run_self(
      {"--helper", "throwing-print"},
      helper_env({{"LAPTIME_OUTPUT", path}, {"LAPTIME_PRINT_AT_EXIT", "1"}}), dir);
  REQUIRE_MESSAGE(r.ok(), r.describe());
  CHECK(reliability::lines_with(r.err, "laptime: warning:") == 1);
  CHECK(r.err.find("print function failed") != std::string::npos);
  std::string error;
  CHECK_MESSAGE(reliability::parse_json(reliability::read_file(path), &error) != nullptr, error);
}

TEST_CASE("an output path that cannot be written gives one clear message and exit code 0" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  struct Case {
    const char* what;
    std::string path;
    const char* mode;
  };
  std::vector<Case> cases = {
      {"a directory that does not exist", dir.file("no-such-dir/results.json"), "plain"},
      {"a directory", dir.path(), "plain"},
      {"a full device (the error comes at flush)", "/dev/full", "plain"},
      // In a directory of its own: a bind mount cannot turn read-only while files in it are open
      // for writing (the helper's captured stdout and stderr).
      {"a read-only mount", dir.file("ro/results.json"), "read-only-mount"},
  };
  ::mkdir(dir.file("ro").c_str(), 0700);
  if (::geteuid() != 0) {  // root may write a read-only file
    const std::string ro = dir.file("read-only.json");
    std::FILE* f = std::fopen(ro.c_str(), "w");
    if (f != nullptr) std::fclose(f);
    ::chmod(ro.c_str(), 0444);
    cases.push_back({"a read-only file", ro, "plain"});
  }
  for (const Case& c : cases) {
    CAPTURE(std::string(c.what));
    const auto r = reliability::run_self(
        {"--helper", c.mode, dir.file("ro")},
        helper_env({{"LAPTIME_OUTPUT", c.path}, {"LAPTIME_PRINT_AT_EXIT", "1"}}), dir);
    if (r.exit_code == 77) {
      MESSAGE("skipped (no private mount namespace here): " << c.what << "; " << r.err);
      continue;
    }
    CHECK_MESSAGE(r.ok(), r.describe());
    // One line, naming the variable, the path and the reason.
    CHECK(reliability::lines_with(r.err, "laptime") == 1);
    CHECK(reliability::lines_with(
              r.err, "could not write results to LAPTIME_OUTPUT='" + c.path + "': ") == 1);
    // The report is printed all the same.
    CHECK(reliability::count_of(r.out, "laptime stopwatch: 20 measured iterations") == 1);
  }
}

TEST_CASE("at exit into a closed pipe the JSON is written and the exit status stays 0" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  // `./train | head -1`: stdout is a pipe whose reader has gone, SIGPIPE at its default action.
  const auto r = reliability::run_self(
      {"--helper", "plain"}, helper_env({{"LAPTIME_OUTPUT", path}, {"LAPTIME_PRINT_AT_EXIT", "1"}}),
      dir, 60,
      /*stdout_to_closed_pipe=*/true);
  REQUIRE_MESSAGE(r.ok(), r.describe());
  check_json_file(path, kLoopIters);
  // One line says why the report is missing.
  CHECK(reliability::lines_with(r.err, "laptime") == 1);
  CHECK(reliability::lines_with(
            r.err, "laptime: warning: the report could not be printed at exit: stdout: ") == 1);
}

TEST_CASE(
    "with stdin, stdout and stderr closed the figures stay right, and no file of laptime's "
    "takes their numbers" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  // Before, the workers' shared region took descriptor 1 and the periodic reports were written
  // into its counters: the JSON said 3545795474923211089 measured iterations.
  const auto r = reliability::run_self({"--helper", "closed-streams"},
                                       helper_env({{"LAPTIME_OUTPUT", path}}), dir);
  REQUIRE_MESSAGE(r.ok(), r.describe());
  check_json_file(path, kLoopIters);
}

TEST_CASE("LAPTIME_OUTPUT=/dev/stdout into a closed pipe: one line, and the exit status stays 0" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  // `LAPTIME_OUTPUT=/dev/stdout ./train | head -1`: the JSON is written into the pipe in place.
  const auto r = reliability::run_self({"--helper", "plain"},
                                       helper_env({{"LAPTIME_OUTPUT", "/dev/stdout"}}), dir, 60,
                                       /*stdout_to_closed_pipe=*/true);
  REQUIRE_MESSAGE(r.ok(), r.describe());  // not killed by SIGPIPE
  CHECK(reliability::lines_with(r.err, "laptime") == 1);
  CHECK(reliability::lines_with(r.err, "/dev/stdout") == 1);
}

TEST_CASE("an interval open at a normal exit is running in the at-exit JSON, on any thread" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  const auto r = reliability::run_self({"--helper", "open-at-exit"},
                                       helper_env({{"LAPTIME_OUTPUT", path}}), dir);
  REQUIRE_MESSAGE(r.ok(), r.describe());
  check_json_file(path, kLoopIters);
  const auto json = reliability::parse_json(reliability::read_file(path));
  REQUIRE(json != nullptr);
  for (const char* name : {"open at exit", "left by a thread"}) {
    CAPTURE(name);
    const reliability::Json* m = reliability::find_measurement(*json, name);
    REQUIRE(m != nullptr);
    REQUIRE(m->get("running") != nullptr);
    CHECK(m->get("running")->boolean);
  }
  CHECK_FALSE(reliability::find_measurement(*json, "main loop")->get("running")->boolean);
}

TEST_CASE("the at-exit JSON replaces an existing file by rename, never rewriting it in place" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  const std::string old_text = "{\"old\": true}\n";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(old_text.c_str(), f);
    std::fclose(f);
  }
  ::chmod(path.c_str(), 0640);
  // A reader that opened the old file before the writer started.
  const int reader = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(reader >= 0);
  struct stat before, after;
  REQUIRE(::fstat(reader, &before) == 0);
  const auto r =
      reliability::run_self({"--helper", "plain"}, helper_env({{"LAPTIME_OUTPUT", path}}), dir);
  REQUIRE_MESSAGE(r.ok(), r.describe());
  check_json_file(path, kLoopIters);
  REQUIRE(::stat(path.c_str(), &after) == 0);
  // A new file took the name: the old one was never truncated or written, so a reader (or a
  // crash) at any moment sees one of the two whole.
  CHECK(after.st_ino != before.st_ino);
  char buf[256];
  const ssize_t n = ::pread(reader, buf, sizeof buf, 0);
  ::close(reader);
  CHECK(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0) == old_text);
  // Its permissions are kept, and no temporary file is left behind.
  CHECK((after.st_mode & 0777) == 0640);
  CHECK(reliability::files_containing(dir.path(), ".tmp.").empty());
}

TEST_CASE(
    "a reader never sees a torn JSON file while it is rewritten, nor after the writer is "
    "killed with SIGKILL" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  const auto sp =
      reliability::spawn_self({"--helper", "write-json-loop", path}, helper_env({}), dir);
  REQUIRE(sp.pid > 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!reliability::file_exists(path) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  int reads = 0, torn = 0;
  std::map<double, int> versions;  // iterations_measured -> times seen
  // At least 0.5 s and three versions seen (sanitizer builds read slowly), at most 20 s.
  const auto start = std::chrono::steady_clock::now();
  std::string first_error;
  for (;;) {
    const auto elapsed = std::chrono::steady_clock::now() - start;
    if ((elapsed > std::chrono::milliseconds(500) && versions.size() >= 3) ||
        elapsed > std::chrono::seconds(20)) {
      break;
    }
    std::string error;
    const auto json = reliability::parse_json(reliability::read_file(path), &error);
    ++reads;
    if (json == nullptr) {
      ++torn;
      if (first_error.empty()) first_error = error;
    } else {
      ++versions[json->get("iterations_measured")->number];
    }
  }
  ::kill(sp.pid, SIGKILL);  // most likely in the middle of a write
  const auto r = reliability::finish(sp);
  CHECK(r.signal == SIGKILL);
  MESSAGE(reads << " reads of " << versions.size() << " versions");
  CHECK_MESSAGE(torn == 0, torn << " of " << reads << " reads were torn: " << first_error);
  CHECK(versions.size() > 1);  // the file was replaced while it was read
  std::string error;
  CHECK_MESSAGE(reliability::parse_json(reliability::read_file(path), &error) != nullptr,
                "after SIGKILL: " << error);
}

#if LAPTIME_ENABLED
TEST_CASE("write_json writes the results atomically and throws naming the path and the reason") {
  laptime::detail::testing_reset_stopwatch();
  reliability::TempDir dir;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  const std::string path = dir.file("out.json");
  sw.write_json(path);
  check_json_file(path, kLoopIters);
  sw.write_json(path);  // over an existing file
  check_json_file(path, kLoopIters);
  CHECK(reliability::files_containing(dir.path(), ".tmp.").empty());
  // The path is used as given: {rank} and {pid} are LAPTIME_OUTPUT's, not write_json's.
  const std::string literal = dir.file("r{rank}_{pid}.json");
  sw.write_json(literal);
  check_json_file(literal, kLoopIters);

  SUBCASE("a missing directory") {
    const std::string bad = dir.file("no-such-dir/out.json");
    try {
      sw.write_json(bad);
      FAIL("no exception");
    } catch (const std::system_error& e) {
      CHECK(e.code().value() == ENOENT);
      const std::string what = e.what();
      CHECK(what.find("'" + bad + "'") != std::string::npos);
      CHECK(what.find(std::strerror(ENOENT)) != std::string::npos);
    }
  }
  SUBCASE("a directory") {
    try {
      sw.write_json(dir.path());
      FAIL("no exception");
    } catch (const std::system_error& e) {
      CHECK(e.code().value() == EISDIR);
    }
  }
  SUBCASE("a pipe named through /dev/fd or /proc/self/fd (as /dev/stdout is): written into") {
    for (const char* folder : {"/dev/fd/", "/proc/self/fd/"}) {
      CAPTURE(folder);
      int p[2];
      REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
      std::string error;
      try {
        sw.write_json(folder + std::to_string(p[1]));
      } catch (const std::exception& e) {
        error = e.what();
      }
      ::close(p[1]);
      CHECK(error.empty());
      std::string text;
      char buf[4096];
      for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) text.append(buf, n);
      ::close(p[0]);
      const auto json = reliability::parse_json(text);
      REQUIRE(json != nullptr);
      CHECK(json->get("iterations_measured")->number == kLoopIters);
    }
  }
  SUBCASE("a full device: the error comes from the write") {
    try {
      sw.write_json("/dev/full");
      FAIL("no exception");
    } catch (const std::system_error& e) {
      CHECK(e.code().value() == ENOSPC);
    }
  }
  laptime::detail::testing_reset_stopwatch();
}

TEST_CASE(
    "a relative LAPTIME_OUTPUT is the folder the first enable() ran in, whatever the "
    "program's folder at exit" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string moved = dir.file("moved");
  REQUIRE(::mkdir(moved.c_str(), 0700) == 0);
  const auto r = reliability::run_self({"--helper", "chdir-after-enable", dir.path().c_str()},
                                       helper_env({{"LAPTIME_OUTPUT", "rel-{pid}.json"}}), dir, 60);
  const std::string name = "rel-" + std::to_string(helper_pid(r.out)) + ".json";
  REQUIRE_MESSAGE(r.ok(), r.describe());
  check_json_file(dir.file(name), kLoopIters);
  CHECK_FALSE(reliability::file_exists(moved + "/" + name));
}

TEST_CASE("{rank} and {pid} in LAPTIME_OUTPUT are replaced wherever they occur") {
  using laptime::detail::expand_output_path;
  CHECK(expand_output_path("results.json", 3, 42) == "results.json");
  CHECK(expand_output_path("r{rank}.json", 3, 42) == "r3.json");
  CHECK(expand_output_path("/out/{rank}/{pid}-{rank}.json", 12, 4242) == "/out/12/4242-12.json");
  CHECK(expand_output_path("{pid}{pid}", 0, 7) == "77");
  CHECK(expand_output_path("{ran}{rank{pid}}", 1, 2) == "{ran}{rank2}");
  CHECK(expand_output_path("", 1, 2).empty());
  using laptime::detail::absolute_in;
  CHECK(absolute_in("r{rank}.json", "/run/dir") == "/run/dir/r{rank}.json");
  CHECK(absolute_in("out/r.json", "/") == "/out/r.json");
  CHECK(absolute_in("/abs/r.json", "/run") == "/abs/r.json");
  CHECK(absolute_in("r.json", "") == "r.json");  // the folder could not be read
  // The temporary file is in the same folder, so that the rename is atomic.
  const std::string temp = laptime::detail::temporary_path_for("/a/b/r.json", 42, 0xabcULL);
  CHECK(temp == "/a/b/r.json.tmp.42.0000000000000abc");
}
#endif

int main(int argc, char** argv) {
  if (argc >= 3 && std::string_view(argv[1]) == "--helper") {
    return exit_test::run_helper_program(argv[2], argc >= 4 ? argv[3] : nullptr);
  }
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
