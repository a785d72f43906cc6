// Worker processes in the parent's report (docs/workers.md): what a
// child measures — forked, forked from a child, or a program started with exec (as spawn and
// forkserver start Python's workers) — is merged into the report of the process that enabled the
// Stopwatch, per name and per worker; a worker that dies keeps what it completed; warm-up and
// reset() follow the parent. Real processes, real shared memory.
#include <fcntl.h>
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

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif
#include "laptime/impl/stopwatch_state.hpp"  // the share's header and the state, read back
#include "laptime/impl/worker_share.hpp"
#include "laptime/laptime.hpp"
#include "reliability_support.hpp"
#include "test_support.hpp"
#include "workers_helpers.hpp"  // find, measure, and the programs the cases start
#include "workers_support.hpp"  // Pipe, fork_child, wait_exit

#if LAPTIME_ENABLED
namespace {

using laptime::Stopwatch;
using workers_test::find;
using workers_test::fork_child;
using workers_test::kManyPairs;
using workers_test::kPairsAtLeast;
using workers_test::measure;
using workers_test::Pipe;
using workers_test::wait_exit;

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
    measure("zeta", 1);  // names only the worker measured come in its first-seen order
    measure("alpha", 1);
    return 0;
  });
  REQUIRE(wait_exit(pid) == 0);
  const laptime::Results r = Stopwatch::instance().results();
  std::string order;
  for (const auto& m : r.measurements) order += m.name + " ";
  CHECK(order == "step decode zeta alpha ");
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

// Under AddressSanitizer (the test command's asan tree): a forked worker's leak check finds none
// of the parent's slots, which the worker forgets (a user's ASan build checks each worker at its
// exit). Elsewhere the worker only measures.
TEST_CASE("a forked worker's leak check finds nothing laptime forgot of the parent's") {
  Fresh fresh;
  measure("step", 2);
  const pid_t pid = fork_child([] {
    measure("decode", 1);
#if defined(__SANITIZE_ADDRESS__)
    return __lsan_do_recoverable_leak_check() == 0 ? 0 : 1;
#else
    return 0;
#endif
  });
  CHECK(wait_exit(pid) == 0);
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

TEST_CASE("a worker's label: at most 47 bytes, cut at a UTF-8 boundary; a NUL byte kept") {
  Fresh fresh;
  const std::string a45(45, 'a');
  struct Case {
    std::string label, shown;
  };
  const Case cases[] = {
      {a45 + "\xf0\x9f\x98\x80tail", a45},                // a 4-byte character over byte 47
      {a45 + "b\xc3\xa9" + "cd", a45 + "b"},              // a 2-byte one over byte 47
      {a45 + "\xc3\xa9" + "cd", a45 + "\xc3\xa9"},        // one that ends at byte 47: kept
      {std::string(60, 'z'), std::string(47, 'z')},       // plain ASCII: 47 bytes
      {std::string("a\0b", 3), std::string("a\0b", 3)}};  // a NUL byte is a byte like any other
  std::vector<pid_t> pids;
  for (const Case& c : cases) {
    pids.push_back(fork_child([&c] {
      Stopwatch::instance().set_worker_label(c.label);
      measure("labelled", 1);
      return 0;
    }));
    REQUIRE(wait_exit(pids.back()) == 0);
  }
  const laptime::Results r = Stopwatch::instance().results();
  const auto* labelled = find(r, "labelled");
  REQUIRE(labelled != nullptr);
  REQUIRE(labelled->workers.size() == pids.size());
  for (std::size_t i = 0; i < pids.size(); ++i) {
    CAPTURE(i);
    for (const auto& w : labelled->workers) {
      if (w.pid == pids[i]) CHECK(w.label == cases[i].shown);
    }
  }
  CHECK(r.to_json().find("\\ufffd") == std::string::npos);
  CHECK(r.to_json().find("\xef\xbf\xbd") == std::string::npos);
}

TEST_CASE("workers forked one after another reuse the regions: hundreds, none lost") {
  Fresh fresh;
  constexpr int kWorkers = 150;  // more than the 64 regions: ended workers' regions are reused
  // The parent folds ended workers when regions run short: at finish_iter, and at the next fork.
  bool finish_iters = false;
  SUBCASE("a finish_iter after each") {
    finish_iters = true;
  }
  SUBCASE("nothing between them (an evaluation loop's loaders)") {
    finish_iters = false;
  }
  for (int i = 0; i < kWorkers; ++i) {
    const pid_t pid = fork_child([] {
      measure("decode", 1, 10);
      return 0;
    });
    REQUIRE(wait_exit(pid) == 0);
    if (finish_iters) Stopwatch::instance().finish_iter();
  }
  const laptime::Results r = Stopwatch::instance().results();
  CHECK(r.workers_unrecorded == 0);
  CHECK(r.worker_processes == kWorkers);
  const auto* decode = find(r, "decode");
  REQUIRE(decode != nullptr);
  CHECK(decode->count == kWorkers);
}

TEST_CASE("loader workers that end with each epoch count once: the most that measured at a time") {
  Fresh fresh;
  constexpr int kEpochs = 3, kPerEpoch = 2;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    Pipe measured, go;
    std::vector<pid_t> pids;
    for (int w = 0; w < kPerEpoch; ++w) {
      pids.push_back(fork_child([&] {
        measure("decode", 1, 10);
        measured.send();
        return go.wait() ? 0 : 1;  // alive until every worker of the epoch has measured
      }));
    }
    for (int w = 0; w < kPerEpoch; ++w) REQUIRE(measured.wait());
    for (int w = 0; w < kPerEpoch; ++w) go.send();
    for (const pid_t pid : pids) REQUIRE(wait_exit(pid) == 0);
    Stopwatch::instance().finish_iter();
  }
  const laptime::Results r = Stopwatch::instance().results();
  CHECK(r.worker_processes == kEpochs * kPerEpoch);
  CHECK(r.workers_alive == 0);
  CHECK(r.workers_peak == kPerEpoch);
  CHECK(r.to_json().find("\"workers_peak\": 2") != std::string::npos);
  Stopwatch::instance().reset();
  CHECK(Stopwatch::instance().results().workers_peak == 0);
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

TEST_CASE("a worker with more (thread, name) pairs than its region holds: none silent") {
  // Every pair up to the region's limit reaches the parent's report whole (percentiles too);
  // those beyond it are counted in the text and the JSON, with one warning.
  reliability::TempDir dir;
  const auto run = reliability::run_self({"--worker", "many-pairs"}, {}, dir);
  REQUIRE_MESSAGE(run.ok(), run.describe());
  int present = -1, whole = -1;
  REQUIRE(std::sscanf(run.out.c_str(), "present %d whole %d", &present, &whole) == 2);
  const std::string key = "\"workers_pairs_dropped\": ";
  const std::size_t at = run.out.find(key);
  REQUIRE_MESSAGE(at != std::string::npos, run.out.substr(0, 600));
  const int dropped = std::atoi(run.out.c_str() + at + key.size());
  MESSAGE("pairs of one worker thread in the parent's report: " << present << ", dropped "
                                                                << dropped);
  CHECK(whole == present);
  CHECK(present >= kPairsAtLeast);
  CHECK(present + dropped == kManyPairs);
  CHECK(dropped > 0);
  CHECK_MESSAGE(run.out.find(std::to_string(dropped) + " (thread, name) pairs did not fit") !=
                    std::string::npos,
                run.out.substr(0, 600));
  CHECK_MESSAGE(reliability::count_of(run.err, "laptime: warning:") == 1, run.err);
}

TEST_CASE("a (thread, name) pair costs a worker's region at most 2 KiB, measured") {
  // What the region's allocator hands out for pairs whose intervals fall in one power of two
  // (the common case): the histogram, its one block, the name's text and the pair's share of its
  // thread's slot chunk. docs/workers.md quotes the figure this prints.
  Fresh fresh;
  constexpr int kPairs = 256;
  Pipe answer;
  const pid_t pid = fork_child([&] {
    measure("first", 1, 1);  // claims the region
    const std::uint64_t before = laptime::detail::stopwatch_state().share.region_bytes_used();
    for (int i = 0; i < kPairs; ++i) measure("cost " + std::to_string(i), 1, 1);
    const std::uint64_t bytes =
        laptime::detail::stopwatch_state().share.region_bytes_used() - before;
    return ::write(answer.fd[1], &bytes, sizeof bytes) == sizeof bytes ? 0 : 3;
  });
  REQUIRE(wait_exit(pid) == 0);
  std::uint64_t bytes = 0;
  REQUIRE(::read(answer.fd[0], &bytes, sizeof bytes) == sizeof bytes);
  const double per_pair = static_cast<double>(bytes) / kPairs;
  MESSAGE("bytes of a worker's region per (thread, name) pair: " << per_pair);
  CHECK(per_pair > 0);
  CHECK(per_pair <= 2048);
  CHECK(Stopwatch::instance().results().workers_pairs_dropped == 0);
}

TEST_CASE("a worker that truncates the shared region: the parent goes on measuring and reports") {
  // A bug in user code: ftruncate on the descriptor a forked worker inherits (named in
  // LAPTIME_WORKER_SHARE). The parent reads its iteration gate from that file on every
  // start_meas; run as a program of its own, so that a crash is a failed check, not a dead suite.
  reliability::TempDir dir;
  const auto run = reliability::run_self({"--worker", "truncate"}, {}, dir);
  REQUIRE_MESSAGE(run.ok(), run.describe());
}

TEST_CASE("a stale LAPTIME_WORKER_SHARE is ignored with one warning, never a crash") {
  // Another process's file, named by a variable left in the environment: the program started
  // with it runs as a program of its own.
  reliability::TempDir dir;
  const std::string empty = dir.file("empty"), short_file = dir.file("short");
  std::FILE* f = std::fopen(empty.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fclose(f);
  {
    // A region's first page, whole and valid (magic, layout, owner, nonce), but nothing after it.
    laptime::detail::ShareHeader header;
    header.magic.store(laptime::detail::kShareMagic);
    header.layout = laptime::detail::share_layout();
    header.owner_pid = ::getpid();
    header.nonce = 42;
    f = std::fopen(short_file.c_str(), "w");
    REQUIRE(f != nullptr);
    REQUIRE(std::fwrite(&header, sizeof header, 1, f) == 1);
    std::fclose(f);
  }
  std::string path;
  SUBCASE("an empty file") {
    path = empty;
  }
  SUBCASE("a short file with a valid header") {
    path = short_file;
  }
  SUBCASE("/dev/zero") {
    path = "/dev/zero";
  }
  int fd = -1;
  Pipe pipe;
  SUBCASE("a pipe") {
    fd = pipe.fd[0];
  }
  if (fd < 0) fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  const std::string value = std::to_string(::getpid()) + ":" + std::to_string(fd) + ":42";
  const auto run =
      reliability::run_self({"--worker", "stale"}, {{"LAPTIME_WORKER_SHARE", value}}, dir);
  if (fd != pipe.fd[0]) ::close(fd);
  REQUIRE_MESSAGE(run.ok(), run.describe());
  CHECK_MESSAGE(reliability::count_of(run.err, "laptime: warning:") == 1, run.err);
  CHECK_MESSAGE(run.err.find("LAPTIME_WORKER_SHARE") != std::string::npos, run.err);
}

TEST_CASE("LAPTIME_WORKERS=0: workers keep their own copy, as before") {
  reliability::TempDir dir;
  const auto run =
      reliability::run_self({"--worker", "off-scenario"}, {{"LAPTIME_WORKERS", "0"}}, dir);
  CHECK_MESSAGE(run.ok(), run.describe());
}

#endif  // LAPTIME_ENABLED

int main(int argc, char** argv) {
#if LAPTIME_ENABLED
  if (argc >= 3 && std::string_view(argv[1]) == "--worker")
    return workers_test::worker_main(argv[2]);
#endif
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
