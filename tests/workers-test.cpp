// Worker processes in the parent's report (SPEC §1, "Worker processes"; docs/workers.md): what a
// child measures — forked, forked from a child, or a program started with exec (as spawn and
// forkserver start Python's workers) — is merged into the report of the process that enabled the
// Stopwatch, per name and per worker; a worker that dies keeps what it completed; warm-up and
// reset() follow the parent. Real processes, real shared memory.
#define DOCTEST_CONFIG_IMPLEMENT
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "laptime/laptime.hpp"
#include "reliability_support.hpp"
#include "test_support.hpp"

#if LAPTIME_ENABLED
namespace {

using laptime::Stopwatch;

const laptime::MeasurementResult* find(const laptime::Results& r, std::string_view name) {
  for (const auto& m : r.measurements) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

void measure(std::string_view name, int times, int sleep_us = 200) {
  for (int i = 0; i < times; ++i) {
    Stopwatch::instance().start_meas(name);
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    Stopwatch::instance().end_meas(name);
  }
}

/// A one-byte signal between the two processes.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { REQUIRE(::pipe(fd) == 0); }
  ~Pipe() {
    ::close(fd[0]);
    ::close(fd[1]);
  }
  void send() const {
    const char c = 1;
    (void)!::write(fd[1], &c, 1);
  }
  bool wait() const {
    char c = 0;
    return ::read(fd[0], &c, 1) == 1;
  }
};

/// Forks a child that runs `body` and exits with its result (0: ok).
template <class F>
pid_t fork_child(F&& body) {
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  REQUIRE(pid > 0);
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct Fresh {
  explicit Fresh(int warmup = 0) {
    laptime::detail::testing_reset_stopwatch();
    Stopwatch::instance().enable(warmup, std::nullopt, false);
  }
  ~Fresh() { laptime::detail::testing_reset_stopwatch(); }
};

}  // namespace

TEST_CASE("a forked worker's intervals are in the parent's report, merged and per worker") {
  Fresh fresh;
  measure("step", 2);  // the parent's own
  const pid_t pid = fork_child([] {
    measure("decode", 5);
    measure("step", 1);
    return 0;
  });
  REQUIRE(wait_exit(pid) == 0);
  const laptime::Results r = Stopwatch::instance().results();
  CHECK(r.worker_processes == 1);
  CHECK(r.workers_unrecorded == 0);
  const auto* decode = find(r, "decode");
  REQUIRE(decode != nullptr);
  CHECK(decode->count == 5);
  CHECK(decode->min_ns >= 150e3);  // the worker's own clock: 200 us sleeps
  REQUIRE(decode->workers.size() == 1);
  CHECK(decode->workers[0].pid == pid);
  CHECK(decode->workers[0].count == 5);
  CHECK_FALSE(decode->workers[0].alive);
  CHECK(decode->workers[0].label == "pid " + std::to_string(pid));
  CHECK(decode->workers[0].median_ns >= 150e3);
  // A name both measured: merged (the parent's 2 and the worker's 1), the worker's part listed.
  const auto* step = find(r, "step");
  REQUIRE(step != nullptr);
  CHECK(step->count == 3);
  REQUIRE(step->workers.size() == 1);
  CHECK(step->workers[0].count == 1);
  const std::string text = r.to_text();
  CHECK_MESSAGE(text.find("decode \xc2\xb7 1 worker") != std::string::npos, text);
  CHECK_MESSAGE(text.find("worker processes: 1 measured") != std::string::npos, text);
  const std::string json = r.to_json();
  CHECK(json.find("\"workers\": [{\"pid\": " + std::to_string(pid)) != std::string::npos);
  CHECK(json.find("\"worker_processes\": 1") != std::string::npos);
}

TEST_CASE("a live worker is read in place: its figures grow while it runs") {
  Fresh fresh;
  Pipe ready, go;
  const pid_t pid = fork_child([&] {
    measure("decode", 3);
    ready.send();
    if (!go.wait()) return 3;
    measure("decode", 2);
    return 0;
  });
  REQUIRE(ready.wait());
  {
    const laptime::Results r = Stopwatch::instance().results();
    const auto* decode = find(r, "decode");
    REQUIRE(decode != nullptr);
    CHECK(decode->count == 3);
    REQUIRE(decode->workers.size() == 1);
    CHECK(decode->workers[0].alive);
  }
  go.send();
  REQUIRE(wait_exit(pid) == 0);
  const laptime::Results r = Stopwatch::instance().results();
  REQUIRE(find(r, "decode") != nullptr);
  CHECK(find(r, "decode")->count == 5);
}

TEST_CASE("a killed worker keeps what it completed; its running interval is not counted") {
  Fresh fresh;
  Pipe ready;
  const pid_t pid = fork_child([&] {
    measure("decode", 4);
    Stopwatch::instance().start_meas("decode");  // killed inside it
    ready.send();
    for (;;) ::pause();
    return 0;
  });
  REQUIRE(ready.wait());
  ::kill(pid, SIGKILL);
  CHECK(wait_exit(pid) == 128 + SIGKILL);
  const laptime::Results r = Stopwatch::instance().results();
  const auto* decode = find(r, "decode");
  REQUIRE(decode != nullptr);
  CHECK(decode->count == 4);
  REQUIRE(decode->workers.size() == 1);
  CHECK_FALSE(decode->workers[0].alive);
}

TEST_CASE("a worker's warm-up follows the parent's iterations, not its own") {
  Fresh fresh(/*warmup=*/2);
  Pipe measured, warm;
  const pid_t pid = fork_child([&] {
    measure("decode", 3);  // the parent is in warm-up: not counted
    measured.send();
    if (!warm.wait()) return 3;
    measure("decode", 2);  // the parent has finished its warm-up: counted
    return 0;
  });
  REQUIRE(measured.wait());
  Stopwatch::instance().finish_iter();
  Stopwatch::instance().finish_iter();
  warm.send();
  REQUIRE(wait_exit(pid) == 0);
  const laptime::Results r = Stopwatch::instance().results();
  const auto* decode = find(r, "decode");
  REQUIRE(decode != nullptr);
  CHECK(decode->count == 2);
}

TEST_CASE("the parent's reset() drops its workers' figures, live and finished") {
  Fresh fresh;
  Pipe ready, go;
  const pid_t done = fork_child([] {
    measure("decode", 3);
    return 0;
  });
  REQUIRE(wait_exit(done) == 0);
  const pid_t live = fork_child([&] {
    measure("augment", 2);
    ready.send();
    if (!go.wait()) return 3;
    measure("augment", 1);
    return 0;
  });
  REQUIRE(ready.wait());
  REQUIRE(find(Stopwatch::instance().results(), "decode") != nullptr);
  Stopwatch::instance().reset();
  {
    const laptime::Results r = Stopwatch::instance().results();
    CHECK(find(r, "decode") == nullptr);
    CHECK(find(r, "augment") == nullptr);
  }
  go.send();
  REQUIRE(wait_exit(live) == 0);
  const laptime::Results r = Stopwatch::instance().results();
  REQUIRE(find(r, "augment") != nullptr);
  CHECK(find(r, "augment")->count == 1);  // only what it measured after the reset
}

TEST_CASE("a worker's threads and its own children are counted: per worker process") {
  Fresh fresh;
  const pid_t pid = fork_child([] {
    std::thread t([] { measure("decode", 3); });
    measure("decode", 2);
    t.join();
    std::fflush(stdout);
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      Stopwatch::instance().set_worker_label("grandchild");
      measure("decode", 4);
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(grandchild, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 4;
  });
  REQUIRE(wait_exit(pid) == 0);
  const laptime::Results r = Stopwatch::instance().results();
  const auto* decode = find(r, "decode");
  REQUIRE(decode != nullptr);
  CHECK(decode->count == 9);
  REQUIRE(decode->workers.size() == 2);
  CHECK(r.worker_processes == 2);
  std::uint64_t child = 0, grand = 0;
  for (const auto& w : decode->workers) {
    if (w.pid == pid) child = w.count;
    if (w.label == "grandchild") grand = w.count;
  }
  CHECK(child == 5);
  CHECK(grand == 4);
}

TEST_CASE("workers forked one after another reuse the regions: hundreds, none lost") {
  Fresh fresh;
  constexpr int kWorkers = 150;  // more than the 64 regions: ended workers' regions are reused
  for (int i = 0; i < kWorkers; ++i) {
    const pid_t pid = fork_child([] {
      measure("decode", 1, 10);
      return 0;
    });
    REQUIRE(wait_exit(pid) == 0);
    Stopwatch::instance().finish_iter();  // the parent folds ended workers when regions run short
  }
  const laptime::Results r = Stopwatch::instance().results();
  CHECK(r.workers_unrecorded == 0);
  CHECK(r.worker_processes == kWorkers);
  const auto* decode = find(r, "decode");
  REQUIRE(decode != nullptr);
  CHECK(decode->count == kWorkers);
}

TEST_CASE("a program started with exec by the parent (spawn, forkserver) attaches itself") {
  Fresh fresh;
  reliability::TempDir dir;
  const auto run = reliability::run_self({"--worker", "measure"}, {}, dir);
  REQUIRE_MESSAGE(run.ok(), run.describe());
  const laptime::Results r = Stopwatch::instance().results();
  const auto* m = find(r, "spawned decode");
  REQUIRE(m != nullptr);
  CHECK(m->count == 3);
  REQUIRE(m->workers.size() == 1);
  CHECK(m->workers[0].label == "spawned");
  // It never enabled the Stopwatch: it measures for the parent and reports nothing itself.
  CHECK(run.out.find("laptime stopwatch") == std::string::npos);
}

TEST_CASE("a started program that enables the Stopwatch itself is a program of its own") {
  Fresh fresh;
  reliability::TempDir dir;
  const auto run = reliability::run_self({"--worker", "own-enable"}, {}, dir);
  REQUIRE_MESSAGE(run.ok(), run.describe());
  CHECK(find(Stopwatch::instance().results(), "own program") == nullptr);
  CHECK(Stopwatch::instance().results().worker_processes == 0);
}

TEST_CASE("LAPTIME_WORKERS=0: workers keep their own copy, as before") {
  reliability::TempDir dir;
  const auto run =
      reliability::run_self({"--worker", "off-scenario"}, {{"LAPTIME_WORKERS", "0"}}, dir);
  CHECK_MESSAGE(run.ok(), run.describe());
}

namespace {

// Helpers run as separate programs (this binary again, through exec).
int worker_main(std::string_view mode) {
  Stopwatch& sw = Stopwatch::instance();
  if (mode == "measure") {
    if (!sw.is_worker()) return 10;
    sw.set_worker_label("spawned");
    measure("spawned decode", 3);
    return 0;
  }
  if (mode == "own-enable") {
    sw.enable(0, std::nullopt, false);
    if (sw.is_worker()) return 11;
    measure("own program", 2);
    const auto r = sw.results();
    return find(r, "own program") != nullptr && find(r, "own program")->count == 2 ? 0 : 12;
  }
  if (mode == "off-scenario") {
    sw.enable(0, std::nullopt, false);
    const pid_t pid = ::fork();
    if (pid == 0) {
      measure("decode", 2);
      ::_exit(sw.is_worker() ? 13 : 0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 14;
    const auto r = sw.results();
    sw.disable();
    return find(r, "decode") == nullptr && r.worker_processes == 0 ? 0 : 15;
  }
  return 2;
}

}  // namespace
#endif  // LAPTIME_ENABLED

int main(int argc, char** argv) {
#if LAPTIME_ENABLED
  if (argc >= 3 && std::string_view(argv[1]) == "--worker") return worker_main(argv[2]);
#endif
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
