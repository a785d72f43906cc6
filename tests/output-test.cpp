// laptime's own output never hurts the process that carries it (docs/guarantees.md): a report or
// progress line into a closed stdout neither raises SIGPIPE nor ends the program, and the JSON is
// still written; the last LAPTIME_OUTPUT file written holds the final figures, also while signals
// keep arriving at exit; no temporary file survives a process that ends while a JSON file is
// written (short of SIGKILL); a symbolic link is followed as open() follows it, dangling or not;
// a full file system or a full device costs one warning, never the old file.
//
// Each case about a process's end runs this binary again as a helper ("--helper MODE").
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "laptime/impl/atomic_file.hpp"  // temporary_path_for: the temporary file's name
#include "laptime/laptime.hpp"
#include "reliability_support.hpp"
#include "test_support.hpp"

namespace {

constexpr int kIters = 200;

#if LAPTIME_ENABLED

void measure_iterations(laptime::Stopwatch& sw, int iters) {
  for (int i = 0; i < iters; ++i) {
    sw.start_meas("main loop");
    sw.end_meas("main loop");
    sw.finish_iter();
  }
}

// Exit code 3 (with the reason on stderr) unless SIGPIPE is as the program left it: the default
// action, not blocked, none pending.
int check_sigpipe_untouched() {
  struct sigaction act;
  sigset_t mask, pending;
  ::sigaction(SIGPIPE, nullptr, &act);
  ::pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  ::sigpending(&pending);
  if ((act.sa_flags & SA_SIGINFO) != 0 || act.sa_handler != SIG_DFL) {
    std::fprintf(stderr, "host: SIGPIPE's action was changed\n");
    return 3;
  }
  if (sigismember(&mask, SIGPIPE) == 1 || sigismember(&pending, SIGPIPE) == 1) {
    std::fprintf(stderr, "host: SIGPIPE left blocked or pending\n");
    return 3;
  }
  return 0;
}

// Prints 200 periodic reports (`how`: "report", "line", "print_eval_times") into whatever stdout
// is; with `redirect` "dev-full" first, stdout is /dev/full (a full device); with "stderr-too",
// stderr is stdout (`2>&1`).
int helper_print_loop(std::string_view how, std::string_view redirect) {
  if (redirect == "dev-full") {
    const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::dup2(fd, 1) < 0) return 77;
    ::close(fd);
  }
  if (redirect == "stderr-too" && ::dup2(1, 2) < 0) return 77;
  ::signal(SIGPIPE, SIG_DFL);
  auto& sw = laptime::Stopwatch::instance();
  if (how == "line") sw.set_progress(laptime::ProgressMode::Line);
  sw.enable(0, how == "print_eval_times" ? std::nullopt : std::optional<int>(1), false);
  for (int i = 0; i < kIters; ++i) {
    measure_iterations(sw, 1);
    if (how == "print_eval_times") sw.print_eval_times();
  }
  return check_sigpipe_untouched();
}

// The program catches SIGINT and goes on; a thread sends SIGINT to the process without pause, and
// handles it (laptime's handler asks for a write each time), while the main thread measures and
// returns from main. The main thread holds SIGINT back: a handler that interrupted it while it
// holds one of laptime's locks would wait its 2 s bound for the writer (docs/guarantees.md).
int helper_signal_storm() {
  struct sigaction act = {};
  act.sa_handler = [](int) {};
  ::sigaction(SIGINT, &act, nullptr);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  std::thread([] {
    for (;;) ::kill(::getpid(), SIGINT);
  }).detach();
  sigset_t sigint;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &sigint, nullptr);
  for (int i = 0; i < kIters; ++i) {
    const std::string name = "name " + std::to_string(i % 100);
    sw.start_meas(name);
    sw.end_meas(name);
    sw.finish_iter();
  }
  return 0;
}

// Rewrites `path` with write_json without pause, on the main thread or (with "thread") on
// another one while the main thread measures, until the process is ended from outside; with
// "exit" or "abort" the main thread ends it after the first file is written.
int helper_write_json_loop(const char* path, std::string_view how) {
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  std::srand(static_cast<unsigned>(::getpid()));
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  for (int i = 0; i < 300; ++i) {
    const std::string name = "name " + std::to_string(i);
    sw.start_meas(name);
    sw.end_meas(name);
  }
  auto loop = [&sw, path] {
    for (;;) {
      measure_iterations(sw, 1);
      try {
        sw.write_json(path);
      } catch (const std::system_error& e) {  // refused once the process is ending
        if (e.code().value() != ECANCELED) throw;
      }
    }
  };
  if (how == "main") loop();
  std::thread(loop).detach();
  while (!reliability::file_exists(path)) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::microseconds(std::rand() % 3000));
  if (how == "exit") std::exit(0);
  if (how == "abort") std::abort();
  for (;;) measure_iterations(sw, 1);
}

// On a full file system (a 64 KiB tmpfs mounted at `dir` in a private mount namespace, filled up),
// write_json throws ENOSPC, the old file stays whole and no temporary file is left; then the
// at-exit writer (LAPTIME_OUTPUT, the same path) fails too, and a handler that runs after it
// checks the same. Exit code 77 where the mount is not allowed; the checks' failures go to
// stderr with "full-disk: ".
std::string g_full_dir, g_full_path;
const char kOldText[] = "{\"old\": true}\n";

void check_full_disk_left_alone() {
  if (reliability::read_file(g_full_path) != kOldText) {
    std::fprintf(stderr, "full-disk: the old file was changed\n");
  }
  if (!reliability::files_containing(g_full_dir, ".tmp.").empty()) {
    std::fprintf(stderr, "full-disk: a temporary file was left\n");
  }
}

int helper_full_disk(const char* dir) {
  if (!reliability::enter_private_mount_namespace() ||
      ::mount("tmpfs", dir, "tmpfs", 0, "size=64k") != 0) {
    std::perror("full-disk: tmpfs");
    return 77;
  }
  g_full_dir = dir;
  g_full_path = g_full_dir + "/results.json";
  std::FILE* f = std::fopen(g_full_path.c_str(), "w");
  if (f == nullptr || std::fputs(kOldText, f) < 0 || std::fclose(f) != 0) return 4;
  const std::string filler = g_full_dir + "/filler";
  const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  const std::string block(4096, 'x');
  while (::write(fd, block.data(), block.size()) > 0) {
  }
  ::close(fd);
  std::atexit(check_full_disk_left_alone);  // before enable(): runs after laptime's handler
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  for (int i = 0; i < 300; ++i) {  // a file of tens of KiB
    const std::string name = "name " + std::to_string(i);
    sw.start_meas(name);
    sw.end_meas(name);
  }
  measure_iterations(sw, kIters);
  try {
    sw.write_json(g_full_path);
    std::fprintf(stderr, "full-disk: write_json did not throw\n");
  } catch (const std::system_error& e) {
    if (e.code().value() != ENOSPC) std::fprintf(stderr, "full-disk: write_json: %s\n", e.what());
  }
  check_full_disk_left_alone();
  return 0;
}

#endif  // LAPTIME_ENABLED

std::map<std::string, std::string> helper_env(std::map<std::string, std::string> vars) {
  const char* tsan = std::getenv("TSAN_OPTIONS");
  vars["TSAN_OPTIONS"] = std::string(tsan != nullptr ? tsan : "") + ":atexit_sleep_ms=50";
  vars.emplace("LAPTIME_PROFILE", "");
  vars.emplace("LAPTIME_PROGRESS", "");
  vars.emplace("LAPTIME_PRINT_EVERY", "");
  return vars;
}

// A complete, valid results file with `iters` measured iterations.
void check_json_file(const std::string& path, int iters) {
  std::string error;
  const auto json = reliability::parse_json(reliability::read_file(path), &error);
  REQUIRE_MESSAGE(json != nullptr, path << " is not complete, valid JSON: " << error);
  CHECK(json->get("iterations_measured")->number == iters);
}

}  // namespace

TEST_CASE(
    "a report or progress line into a closed stdout costs one warning, never the process, its "
    "SIGPIPE disposition or the JSON" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  for (const char* how : {"report", "line", "print_eval_times"}) {
    CAPTURE(std::string(how));
    // `./train | head -1`: stdout is a pipe whose reader has gone, SIGPIPE at its default action.
    const auto r = reliability::run_self(
        {"--helper", "print-loop", how},
        helper_env({{"LAPTIME_OUTPUT", path}, {"LAPTIME_PRINT_AT_EXIT", "1"}}), dir, 60,
        /*stdout_to_closed_pipe=*/true);
    REQUIRE_MESSAGE(r.ok(), r.describe());
    check_json_file(path, kIters);
    // One line for 200 reports and the one at exit.
    CHECK_MESSAGE(reliability::lines_with(r.err, "laptime") == 1, r.err);
    CHECK(reliability::lines_with(r.err, ": stdout: " + std::string(std::strerror(EPIPE))) == 1);
    std::remove(path.c_str());
  }
  SUBCASE("stderr the same closed pipe (`./train 2>&1 | head -1`): the warning is dropped too") {
    const auto r = reliability::run_self(
        {"--helper", "print-loop", "report", "stderr-too"},
        helper_env({{"LAPTIME_OUTPUT", path}, {"LAPTIME_PRINT_AT_EXIT", "1"}}), dir, 60,
        /*stdout_to_closed_pipe=*/true);
    REQUIRE_MESSAGE(r.ok(), r.describe());
    check_json_file(path, kIters);
  }
}

TEST_CASE("reports into a full device (/dev/full as stdout) cost one warning, never the process" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  const auto r = reliability::run_self({"--helper", "print-loop", "report", "dev-full"},
                                       helper_env({{"LAPTIME_OUTPUT", path}}), dir);
  REQUIRE_MESSAGE(r.ok(), r.describe());
  check_json_file(path, kIters);
  CHECK_MESSAGE(reliability::lines_with(r.err, "laptime") == 1, r.err);
  CHECK(reliability::lines_with(r.err, ": stdout: " + std::string(std::strerror(ENOSPC))) == 1);
}

TEST_CASE(
    "the last JSON written at exit holds the final figures, also while signals keep arriving "
    "(200 runs)" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  int stale = 0;
  for (int run = 0; run < 200; ++run) {
    CAPTURE(run);
    const auto r = reliability::run_self({"--helper", "signal-storm"},
                                         helper_env({{"LAPTIME_OUTPUT", path}}), dir);
    REQUIRE_MESSAGE(r.ok(), r.describe());
    std::string error;
    const auto json = reliability::parse_json(reliability::read_file(path), &error);
    REQUIRE_MESSAGE(json != nullptr, error);
    if (json->get("iterations_measured")->number != kIters) ++stale;
    const auto temps = reliability::files_containing(dir.path(), ".tmp.");
    CHECK(temps.empty());
    for (const std::string& t : temps) std::remove(dir.file(t).c_str());
    std::remove(path.c_str());
  }
  CHECK_MESSAGE(stale == 0, stale << " of 200 final files held older figures");
}

TEST_CASE("no temporary file survives a process that ends while write_json runs, short of SIGKILL" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string path = dir.file("results.json");
  struct Case {
    const char* what;
    const char* loop_on;  // the helper's mode
    int signal;           // sent from here, or 0: the helper ends itself
    int expect_signal;
    const char* handlers = "";  // LAPTIME_SIGNAL_HANDLERS
  };
  for (const Case& c : {Case{"SIGTERM, write_json on the main thread", "main", SIGTERM, SIGTERM},
                        Case{"SIGTERM, write_json on another thread", "thread", SIGTERM, SIGTERM},
                        Case{"SIGINT, write_json on another thread", "thread", SIGINT, SIGINT},
                        Case{"exit() while another thread runs write_json", "exit", 0, 0},
                        Case{"abort() while another thread runs write_json", "abort", 0, SIGABRT},
                        // One thread, no handler of laptime's: the signal waits for the rename.
                        Case{"SIGTERM without laptime's handlers, write_json on the only thread",
                             "main", SIGTERM, SIGTERM, "0"}}) {
    int left = 0;
    for (int run = 0; run < 10; ++run) {
      CAPTURE(std::string(c.what));
      CAPTURE(run);
      const auto sp = reliability::spawn_self(
          {"--helper", "write-json-loop", path, c.loop_on},
          helper_env({{"LAPTIME_OUTPUT", path}, {"LAPTIME_SIGNAL_HANDLERS", c.handlers}}), dir);
      REQUIRE(sp.pid > 0);
      if (c.signal != 0) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!reliability::file_exists(path) && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        std::this_thread::sleep_for(std::chrono::microseconds(std::rand() % 3000));
        reliability::send_signal(sp.pid, c.signal);
      }
      const auto r = reliability::finish(sp);
      REQUIRE_MESSAGE(!r.timed_out, r.describe());
      CHECK_MESSAGE(r.signal == c.expect_signal, r.describe());
      if (c.expect_signal == 0) CHECK_MESSAGE(r.exit_code == 0, r.describe());
      std::string error;
      CHECK_MESSAGE(reliability::parse_json(reliability::read_file(path), &error) != nullptr,
                    error);
      const auto temps = reliability::files_containing(dir.path(), ".tmp.");
      if (!temps.empty()) ++left;
      for (const std::string& t : temps) std::remove(dir.file(t).c_str());
      std::remove(path.c_str());
    }
    CHECK_MESSAGE(left == 0, std::string(c.what)
                                 << ": a temporary file was left in " << left << " of 10 runs");
  }
}

TEST_CASE(
    "a full file system: write_json and the at-exit JSON fail with one warning, leave the old "
    "file whole and no temporary file" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string full = dir.file("full");
  ::mkdir(full.c_str(), 0700);
  const auto r =
      reliability::run_self({"--helper", "full-disk", full},
                            helper_env({{"LAPTIME_OUTPUT", full + "/results.json"}}), dir);
  if (r.exit_code == 77) {
    MESSAGE("skipped (no tmpfs mount in a private mount namespace here): " << r.err);
    return;
  }
  REQUIRE_MESSAGE(r.ok(), r.describe());
  CHECK_MESSAGE(reliability::lines_with(r.err, "full-disk: ") == 0, r.err);
  CHECK(reliability::lines_with(r.err, "laptime") == 1);
  CHECK(reliability::lines_with(r.err, std::strerror(ENOSPC)) == 1);
}

#if LAPTIME_ENABLED
TEST_CASE(
    "write_json follows a symbolic link as open() does: the link stays, its target is written") {
  laptime::detail::testing_reset_stopwatch();
  reliability::TempDir dir;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  measure_iterations(sw, 5);
  const std::string link = dir.file("results.json");
  auto is_link = [](const std::string& p) {
    struct stat st;
    return ::lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
  };
  SUBCASE("a live link") {
    ::mkdir(dir.file("real").c_str(), 0700);
    std::FILE* f = std::fopen(dir.file("real/target.json").c_str(), "w");
    REQUIRE(f != nullptr);
    std::fclose(f);
    REQUIRE(::symlink("real/target.json", link.c_str()) == 0);
    sw.write_json(link);
    CHECK(is_link(link));
    check_json_file(dir.file("real/target.json"), 5);
    CHECK(reliability::files_containing(dir.file("real"), ".tmp.").empty());
  }
  SUBCASE("a dangling link, relative") {
    REQUIRE(::symlink("target.json", link.c_str()) == 0);
    sw.write_json(link);
    CHECK(is_link(link));
    check_json_file(dir.file("target.json"), 5);
  }
  SUBCASE("a chain of links ending in a missing file in another folder, absolute") {
    ::mkdir(dir.file("other").c_str(), 0700);
    REQUIRE(::symlink(dir.file("other/target.json").c_str(), dir.file("middle").c_str()) == 0);
    REQUIRE(::symlink("middle", link.c_str()) == 0);
    sw.write_json(link);
    CHECK(is_link(link));
    CHECK(is_link(dir.file("middle")));
    check_json_file(dir.file("other/target.json"), 5);
    CHECK(reliability::files_containing(dir.file("other"), ".tmp.").empty());
  }
  SUBCASE("a dangling link into a missing folder fails as open() would, and the link stays") {
    REQUIRE(::symlink("no-such-dir/target.json", link.c_str()) == 0);
    try {
      sw.write_json(link);
      FAIL("no exception");
    } catch (const std::system_error& e) {
      CHECK(e.code().value() == ENOENT);
    }
    CHECK(is_link(link));
  }
  SUBCASE("a loop of links fails with ELOOP, and the links stay") {
    REQUIRE(::symlink("results.json", dir.file("back").c_str()) == 0);
    REQUIRE(::symlink("back", link.c_str()) == 0);
    try {
      sw.write_json(link);
      FAIL("no exception");
    } catch (const std::system_error& e) {
      CHECK(e.code().value() == ELOOP);
    }
    CHECK(is_link(link));
  }
  CHECK(reliability::files_containing(dir.path(), ".tmp.").empty());
  laptime::detail::testing_reset_stopwatch();
}

TEST_CASE(
    "write_json writes every file name open() accepts (its temporary name fits NAME_MAX), and "
    "refuses a path with a NUL inside") {
  laptime::detail::testing_reset_stopwatch();
  reliability::TempDir dir;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  measure_iterations(sw, 5);
  for (const std::size_t length : {200, 230, 235, 245, 255}) {
    CAPTURE(length);
    const std::string path = dir.file(std::string(length - 5, 'n') + ".json");
    CHECK_NOTHROW(sw.write_json(path));
    check_json_file(path, 5);
  }
  CHECK(reliability::files_containing(dir.path(), ".tmp.").empty());
  // Cut, the name stays in the same folder and unique: the pid and the random part are whole.
  const std::string target = "/a/b/" + std::string(255, 'x');
  const std::string one = laptime::detail::temporary_path_for(target, 4194304, 1);
  const std::string two = laptime::detail::temporary_path_for(target, 4194304, 2);
  CHECK(one.size() - std::string("/a/b/").size() == NAME_MAX);
  CHECK(one.rfind("/a/b/xxx", 0) == 0);
  CHECK(one.find(".tmp.4194304.0000000000000001") != std::string::npos);
  CHECK(one != two);
  // A NUL inside the path: the system would write the file its first part names.
  const std::string with_nul = dir.file("results") + std::string(1, '\0') + ".json";
  try {
    sw.write_json(with_nul);
    FAIL("no exception");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == EINVAL);
    CHECK(std::string(e.what()).find("NUL") != std::string::npos);
  }
  CHECK(!reliability::file_exists(dir.file("results")));
  laptime::detail::testing_reset_stopwatch();
}
#endif

int main(int argc, char** argv) {
  if (argc >= 3 && std::string_view(argv[1]) == "--helper") {
#if LAPTIME_ENABLED
    const std::string_view mode = argv[2];
    if (mode == "print-loop" && argc >= 4) {
      return helper_print_loop(argv[3], argc >= 5 ? argv[4] : "");
    }
    if (mode == "signal-storm") return helper_signal_storm();
    if (mode == "write-json-loop" && argc >= 5) return helper_write_json_loop(argv[3], argv[4]);
    if (mode == "full-disk" && argc >= 4) return helper_full_disk(argv[3]);
#endif
    std::fprintf(stderr, "output-test: unknown helper %s\n", argv[2]);
    return 2;
  }
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
