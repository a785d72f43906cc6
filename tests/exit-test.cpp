// Results are never lost at a normal exit (docs/reliability.md): LAPTIME_OUTPUT=path writes the
// JSON and LAPTIME_PRINT_AT_EXIT=1 prints the report, whatever the order of static destruction,
// with threads still measuring, when exit() comes from another thread, and when the output
// cannot be written (one clear message, exit code unchanged).
//
// The variables are read at the first enable(), and exit is what is tested: each case runs this
// binary again as a helper process ("--helper MODE") and checks what it left.
#define DOCTEST_CONFIG_IMPLEMENT
#include <sys/mount.h>
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
#include <thread>

#include "laptime/laptime.hpp"
#include "reliability_support.hpp"
#include "test_support.hpp"

namespace {

constexpr int kRuns = 100;
constexpr int kLoopIters = 20;

#if LAPTIME_ENABLED

std::atomic<long> g_worker_intervals{0};

// Constructed before main, so destroyed after laptime's atexit handler (registered at enable()):
// measuring then must be harmless, though it is too late to be in the results.
struct EarlyStatic {
  ~EarlyStatic() {
    auto& sw = laptime::Stopwatch::instance();
    sw.start_meas("early static");
    sw.end_meas("early static");
    (void)sw.results();
  }
} g_early_static;

// Constructed after enable(), so destroyed before laptime's atexit handler: its measurement is in
// the results.
struct LateStatic {
  ~LateStatic() {
    auto& sw = laptime::Stopwatch::instance();
    sw.start_meas("late static");
    sw.end_meas("late static");
  }
};

// A thread that measures until the process ends.
void start_detached_worker() {
  std::thread([] {
    auto& sw = laptime::Stopwatch::instance();
    for (long i = 0;; ++i) {
      sw.start_meas("worker");
      sw.end_meas("worker");
      g_worker_intervals.fetch_add(1, std::memory_order_relaxed);
      if (i % 64 == 0) (void)sw.results();
    }
  }).detach();
  while (g_worker_intervals.load() < 100) std::this_thread::yield();
}

void main_loop(laptime::Stopwatch& sw) {
  for (int i = 0; i < kLoopIters; ++i) {
    sw.start_meas("main loop");
    sw.end_meas("main loop");
    sw.finish_iter();
  }
}

// Returns from main with a detached thread still measuring and statics on both sides of
// laptime's atexit handler.
int helper_detached() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  static LateStatic late;
  (void)late;
  start_detached_worker();
  main_loop(sw);
  std::printf("exit-helper pid %ld\n", static_cast<long>(::getpid()));
  return 0;
}

// exit() from another thread while the main thread keeps measuring.
int helper_exit_from_thread() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  std::printf("exit-helper pid %ld\n", static_cast<long>(::getpid()));
  std::fflush(stdout);
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::exit(0);
  }).detach();
  for (;;) {
    sw.start_meas("main after exit");
    sw.end_meas("main after exit");
  }
}

// A print function that throws (a user's, or a binding's whose stream is closed): the JSON must
// still be written and the process must not end in std::terminate.
int helper_throwing_print() {
  auto& sw = laptime::Stopwatch::instance();
  sw.set_print_function(
      [](const char*, std::size_t, void*) { throw std::runtime_error("print function failed"); },
      nullptr);
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  return 0;
}

// Measures and exits normally; LAPTIME_OUTPUT is set by the test to a path that cannot be
// written. With "read-only-mount", the helper first makes its directory a read-only bind mount
// in a private mount namespace (exit code 77 where namespaces are not allowed).
int helper_plain(bool read_only_mount, const char* dir) {
  if (read_only_mount) {
    if (!reliability::enter_private_mount_namespace()) return 77;
    if (::mount(dir, dir, nullptr, MS_BIND, nullptr) != 0 ||
        ::mount(nullptr, dir, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
      std::perror("read-only bind mount");
      return 77;
    }
  }
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  main_loop(sw);
  return 0;
}

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

// The environment of a helper: `vars`, and under ThreadSanitizer a shorter sleep at exit. TSan
// sleeps there (atexit_sleep_ms, default 1 s) to let threads still running race with exit; 50 ms
// keeps that window and makes 100 runs take seconds, not minutes.
std::map<std::string, std::string> helper_env(std::map<std::string, std::string> vars) {
  const char* tsan = std::getenv("TSAN_OPTIONS");
  vars["TSAN_OPTIONS"] = std::string(tsan != nullptr ? tsan : "") + ":atexit_sleep_ms=50";
  vars.emplace("LAPTIME_PROFILE", "");
  return vars;
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

int main(int argc, char** argv) {
  if (argc >= 3 && std::string_view(argv[1]) == "--helper") {
#if LAPTIME_ENABLED
    const std::string_view mode = argv[2];
    if (mode == "detached") return helper_detached();
    if (mode == "exit-from-thread") return helper_exit_from_thread();
    if (mode == "throwing-print") return helper_throwing_print();
    if (mode == "plain") return helper_plain(false, nullptr);
    if (mode == "read-only-mount" && argc >= 4) return helper_plain(true, argv[3]);
#endif
    std::fprintf(stderr, "exit-test: unknown helper %s\n", argv[2]);
    return 2;
  }
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
