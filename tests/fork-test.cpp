// fork() safety: PyTorch's DataLoader forks its worker processes after the Stopwatch is enabled,
// possibly while another thread is inside laptime holding one of its locks. A forked child must
// not deadlock, may keep measuring on its own copy, and must not print or write the parent's
// results when it exits; the parent's results stay intact (docs/reliability.md).
//
// The scenario runs in a fresh process (this binary re-executed with "--helper fork-scenario"),
// because LAPTIME_OUTPUT and LAPTIME_PRINT_AT_EXIT are read at the first enable() and the
// at-exit output is part of what is checked.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "laptime/impl/stopwatch_state.hpp"  // the state's locks and thread records
#include "laptime/laptime.hpp"
#include "reliability_support.hpp"
#include "test_support.hpp"

namespace {

constexpr int kChildren = 100;
// ThreadSanitizer cannot follow a thread started in a child forked while other threads were
// alive: the child's new thread may get the id of one of the parent's, which it still counts as
// running ("dup thread with used id"). Such children measure on their one thread under TSan.
constexpr bool kThreadsInChildren = !RELIABILITY_TSAN;
// The sanitizer runtimes (GCC 12's libasan and libtsan) do not hold their own allocator's locks
// across fork: a child forked while another thread is inside malloc can hang in the runtime
// itself, whatever laptime does. Under a sanitizer the hammering thread therefore pauses, outside
// laptime, at each fork; the plain build forks at any moment, and the lock-held test below holds
// laptime's locks at the fork in every build.
constexpr bool kParkHammerAtFork = RELIABILITY_SANITIZER;

// In a forked child, the other threads of the parent are gone but their stacks are still
// mapped, and LeakSanitizer no longer knows them as roots: objects they pointed to would be
// reported as leaks at the child's exit. The parent's own exit is still checked.
std::atomic<bool> g_in_forked_child{false};

#if LAPTIME_ENABLED

[[noreturn]] void child_fail(const char* what) {
  std::fprintf(stderr, "fork-test child %d: %s\n", static_cast<int>(::getpid()), what);
  std::fflush(stderr);
  ::_exit(3);
}

void sink(const char*, std::size_t, void* user) {
  static_cast<std::atomic<long>*>(user)->fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t count_of_name(const laptime::Results& r, std::string_view name) {
  for (const auto& m : r.measurements) {
    if (m.name == name) return m.count;
  }
  return ~std::uint64_t{0};
}

// What a forked DataLoader worker does: keeps measuring on its copy (new names, a new thread, a
// tracked name, NVTX ranges, a one-time measurement, a usage error), reports, and exits through
// exit(), so that atexit handlers run.
[[noreturn]] void child_body(int index) {
  g_in_forked_child = true;
  ::alarm(30);  // a deadlock ends the child with SIGALRM, which the parent reports
  auto& sw = laptime::Stopwatch::instance();
  auto& nvtx = laptime::NVTXRangeWrapper::instance();
  // Each of these takes a lock that the hammering thread may have held at the fork.
  nvtx.enable(false, false, true);
  sw.enable(0, 50, false);
  sw.track_cpu_usage("sampled");
  laptime::detail::warn_once("fork-test", "");  // the parent warned already: nothing printed

  sw.start_meas("child outer");
  const auto in_thread = [&] {
    sw.start_meas("child thread");
    nvtx.range_push("child thread range");
    nvtx.range_pop("child thread range");
    sw.end_meas("child thread");
  };
  if (kThreadsInChildren) {
    std::thread(in_thread).join();
  } else {
    in_thread();
  }
  const std::string range = "child range " + std::to_string(index);
  for (int i = 0; i < 5; ++i) {
    sw.start_meas("child work");
    nvtx.range_push(range);
    nvtx.range_pop(range);
    sw.end_meas("child work");
  }
  sw.start_meas("sampled");  // tracked: samples /proc of the child's own process tree
  sw.end_meas("sampled");
  sw.end_meas("child outer");
  sw.start_one_time_measurement("child once");
  sw.end_one_time_measurement("child once");
  try {
    nvtx.range_pop("never pushed");
    child_fail("range_pop with an empty stack did not raise");
  } catch (const laptime::UsageError&) {
  }
  try {
    sw.end_meas("never started");
    child_fail("end_meas of a name never started did not raise");
  } catch (const laptime::UsageError&) {
  }
  sw.finish_iter();

  const laptime::Results r = sw.results();
  if (count_of_name(r, "child work") != 5) child_fail("'child work' count is not 5");
  if (count_of_name(r, "child outer") != 1) child_fail("'child outer' count is not 1");
  if (count_of_name(r, "child thread") != 1) child_fail("'child thread' count is not 1");
  if (r.pid != ::getpid()) child_fail("results carry another pid");
  std::string error;
  const auto json = reliability::parse_json(sw.to_json(), &error);
  if (!json) child_fail(("to_json is not valid JSON: " + error).c_str());
  const reliability::Json* work = reliability::find_measurement(*json, "child work");
  if (work == nullptr || work->get("count")->number != 5) child_fail("JSON count of 'child work'");
  std::exit(0);
}

// The hammering thread: every kind of call, including those that take laptime's locks (new
// names, tracked names, one-time measurements, reports, periodic printing, threads that come
// and go, NVTX names beyond the registered table, which warn under the error-state lock).
struct Hammer {
  std::atomic<bool> stop{false};
  std::atomic<bool> park{false}, parked{false};
  long intervals = 0, iters = 0, one_time = 0;

  void run() {
    auto& sw = laptime::Stopwatch::instance();
    auto& nvtx = laptime::NVTXRangeWrapper::instance();
    nvtx.name_current_thread("hammer");
    for (long i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      if (kParkHammerAtFork && park.load()) {
        parked = true;
        while (park.load()) std::this_thread::yield();
        parked = false;
      }
      nvtx.enable(false, false, true);
      sw.track_cpu_usage("sampled");
      nvtx.range_push("hammer range");
      const std::string name = "hammer name " + std::to_string(i % 6000);
      nvtx.range_push(name);
      sw.start_meas("hammer");
      sw.end_meas("hammer");
      ++intervals;
      nvtx.range_pop(name);
      nvtx.range_pop("hammer range");
      if (i % 8 == 0) {
        sw.start_meas("sampled");
        sw.end_meas("sampled");
        sw.finish_iter();
        ++iters;
      }
      if (i % 16 == 0 && one_time < 2000) {
        const std::string once = "hammer once " + std::to_string(one_time++);
        sw.start_one_time_measurement(once);
        sw.end_one_time_measurement(once);
      }
      if (i % 32 == 0) (void)sw.results();
      if (i % 256 == 0) (void)sw.to_json();
      if (i % 64 == 0) {
        std::thread([&] {
          sw.start_meas("short thread");
          nvtx.range_push("short thread range");
          nvtx.range_pop("short thread range");
          sw.end_meas("short thread");
        }).join();
      }
    }
  }
};

// After the children: no child wrote the parent's LAPTIME_OUTPUT, and the parent's results hold
// its own measurements and nothing of its children's. Returns the number of failures.
int check_parent_after_children(const Hammer& hammer) {
  int failures = 0;
  const char* output = std::getenv("LAPTIME_OUTPUT");
  if (output != nullptr && reliability::file_exists(output)) {
    std::printf("fork-scenario: a child wrote the parent's LAPTIME_OUTPUT\n");
    ++failures;
  }
  const laptime::Results r = laptime::Stopwatch::instance().results();
  auto expect = [&](std::string_view name, std::uint64_t want) {
    const std::uint64_t got = count_of_name(r, name);
    if (got != want) {
      std::printf("fork-scenario: parent's count of '%.*s' is %llu, want %llu\n",
                  static_cast<int>(name.size()), name.data(), static_cast<unsigned long long>(got),
                  static_cast<unsigned long long>(want));
      ++failures;
    }
  };
  expect("parent main", kChildren);
  expect("hammer", static_cast<std::uint64_t>(hammer.intervals));
  if (count_of_name(r, "child work") != ~std::uint64_t{0}) {
    std::printf("fork-scenario: a child's measurement shows in the parent\n");
    ++failures;
  }
  if (r.iterations_finished != hammer.iters ||
      r.one_time.size() != static_cast<std::size_t>(hammer.one_time)) {
    std::printf("fork-scenario: parent's iterations or one-time measurements changed\n");
    ++failures;
  }
  return failures;
}

// The parent of the scenario. LAPTIME_OUTPUT and LAPTIME_PRINT_AT_EXIT are set by the test.
int fork_scenario() {
  auto& sw = laptime::Stopwatch::instance();
  auto& nvtx = laptime::NVTXRangeWrapper::instance();
  std::atomic<long> printed{0};
  sw.set_print_function(&sink, &printed);
  sw.enable(0, 50, false);
  nvtx.enable(false, false, true);
  sw.track_cpu_usage("sampled");
  laptime::detail::warn_once("fork-test", "fork-test: the one warning of this test (expected)");

  Hammer hammer;
  std::thread hammer_thread([&] { hammer.run(); });
  std::uint32_t lcg = 12345;
  int failures = 0;
  double slowest = 0;
  for (int k = 0; k < kChildren; ++k) {
    sw.start_meas("parent main");
    sw.end_meas("parent main");
    lcg = lcg * 1664525u + 1013904223u;
    std::this_thread::sleep_for(std::chrono::microseconds(200 + (lcg >> 22)));  // 0.2-1.2 ms
    std::fflush(stdout);
    std::fflush(stderr);
    if (kParkHammerAtFork) {
      hammer.park = true;
      while (!hammer.parked.load()) std::this_thread::yield();
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) child_body(k);
    hammer.park = false;
    const reliability::RunResult r = reliability::wait_for_child(pid, 60);
    slowest = std::max(slowest, r.seconds);
    if (!r.ok()) {
      std::printf("fork-scenario: child %d failed: %s\n", k, r.describe().c_str());
      ++failures;
    }
  }
  hammer.stop = true;
  hammer_thread.join();

  failures += check_parent_after_children(hammer);
  std::printf("fork-scenario: %d children, %d failed, slowest %.3f s; hammer %ld intervals\n",
              kChildren, failures, slowest, hammer.intervals);
  sw.set_print_function(nullptr, nullptr);  // the at-exit report goes to stdout
  return failures == 0 ? 0 : 1;
}

#endif  // LAPTIME_ENABLED

}  // namespace

// Only children forked by this binary turn leak checking off (see g_in_forked_child).
extern "C" int __lsan_is_turned_off() {
  return g_in_forked_child.load() ? 1 : 0;
}

// ThreadSanitizer: children of a multi-threaded parent may start threads (die_after_fork=0). At
// exit TSan sleeps a second (atexit_sleep_ms) when it believes other threads are alive, which in
// a child it does for every thread of the parent: 100 children would take 100 s. This test is
// about fork, not exit (exit-test is).
extern "C" const char* __tsan_default_options() {
  return "die_after_fork=0:atexit_sleep_ms=0";
}

TEST_CASE(
    "children forked while another thread hammers laptime exit cleanly and leave the "
    "parent's results alone" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::TempDir dir;
  const std::string output = dir.file("parent-results.json");
  const auto r = reliability::run_self({"--helper", "fork-scenario"},
                                       {{"LAPTIME_OUTPUT", output},
                                        {"LAPTIME_PRINT_AT_EXIT", "1"},
                                        {"LAPTIME_ON_ERROR", ""},
                                        {"LAPTIME_PROFILE", ""}},
                                       dir, 240);
  std::string scenario_lines;  // what the scenario said about itself (not the long report)
  for (std::size_t b = 0; b < r.out.size();) {
    std::size_t e = r.out.find('\n', b);
    if (e == std::string::npos) e = r.out.size();
    if (r.out.compare(b, 14, "fork-scenario:") == 0) scenario_lines += r.out.substr(b, e - b + 1);
    b = e + 1;
  }
  INFO("scenario: " << scenario_lines);
  REQUIRE_MESSAGE(r.ok(), r.describe());
  CHECK(r.out.find("fork-scenario: 100 children, 0 failed") != std::string::npos);
  // The report printed at exit is the parent's, once: no child printed one.
  CHECK(reliability::count_of(r.out, "laptime stopwatch: ") == 1);
  std::string error;
  const auto json = reliability::parse_json(reliability::read_file(output), &error);
  REQUIRE_MESSAGE(json != nullptr, "LAPTIME_OUTPUT is not valid JSON: " << error);
  const reliability::Json* main = reliability::find_measurement(*json, "parent main");
  REQUIRE(main != nullptr);
  CHECK(main->get("count")->number == 100);
  CHECK(reliability::find_measurement(*json, "child work") == nullptr);
  CHECK(r.out.find(" pid " + std::to_string(static_cast<long>(json->get("pid")->number))) !=
        std::string::npos);
}

#if LAPTIME_ENABLED
namespace {

// Runs `hold` on another thread; it takes a lock of laptime's and calls wait(), which returns
// once the child forked meanwhile has finished, or after 200 ms: laptime may also make fork()
// wait until such a lock is free (pthread_atfork), which is as good. The child must finish
// within the timeout (a deadlock on the inherited lock would not).
using Hold = std::function<void(const std::function<void()>& wait)>;
void fork_while_held(const char* what, const Hold& hold, const std::function<void()>& child) {
  std::atomic<int> phase{0};  // 1: held, 2: release
  std::thread holder([&] {
    hold([&] {
      phase = 1;
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      while (phase.load() != 2 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    });
  });
  while (phase.load() != 1) std::this_thread::sleep_for(std::chrono::microseconds(100));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    g_in_forked_child = true;
    ::alarm(30);
    try {
      child();
    } catch (...) {
      ::_exit(4);
    }
    ::_exit(0);
  }
  const reliability::RunResult r = reliability::wait_for_child(pid, 20);
  phase = 2;
  holder.join();
  INFO("lock held at fork: " << std::string(what));
  CHECK_MESSAGE(r.ok(), r.describe());
}

template <class Mutex>
Hold holding(Mutex& m) {
  return [&m](const std::function<void()>& wait) {
    m.lock();
    wait();
    m.unlock();
  };
}

}  // namespace

TEST_CASE("a child forked while another thread holds one of laptime's locks does not hang" *
          LAPTIME_NEEDS_ENABLED) {
  laptime::detail::testing_reset_stopwatch();
  auto& s = laptime::detail::stopwatch_state();
  auto& sw = laptime::Stopwatch::instance();
  std::atomic<long> printed{0};
  sw.set_print_function(&sink, &printed);
  sw.enable(0, 1, false);
  sw.track_cpu_usage("tracked");

  fork_while_held("config_mutex", holding(s.config_mutex), [&] { sw.enable(0, 1, false); });
  fork_while_held("names_mutex", holding(s.names_mutex), [&] {
    sw.track_cpu_usage("new tracked name");
    sw.start_meas("new name");
    sw.end_meas("new name");
  });
  fork_while_held("one_time_mutex", holding(s.one_time_mutex), [&] {
    sw.start_one_time_measurement("child once");
    sw.end_one_time_measurement("child once");
  });
  fork_while_held("gpu_mutex", holding(s.gpu_mutex), [&] { (void)sw.results(); });
  // print_every_n_iters is 1: finish_iter prints, under the report lock.
  fork_while_held("report_mutex", holding(s.report_mutex), [&] { sw.finish_iter(); });
  fork_while_held(
      "error_state warned_mutex", holding(laptime::detail::error_state().warned_mutex), [&] {
        laptime::detail::warn_once("fork-test-child", "fork-test: a warning from a forked child");
      });
  // The thread registry's lock, held inside for_each (as a report does); the child starts a
  // thread (which attaches to the registry) and reports.
  fork_while_held(
      "thread registry",
      [&](const std::function<void()>& wait) {
        bool first = true;
        s.threads.for_each([&](laptime::detail::ThreadRecord&, long, bool) {
          if (first) wait();
          first = false;
        });
      },
      [&] {
        if (kThreadsInChildren) {
          bool ok = false;
          std::thread([&] {
            sw.start_meas("child thread");
            sw.end_meas("child thread");
            ok = true;
          }).join();
          if (!ok) ::_exit(5);
        }
        (void)sw.results();
      });
  // A thread's own record lock (guards its resource slots, read by reports).
  fork_while_held(
      "a thread record's mutex",
      [&](const std::function<void()>& wait) {
        sw.start_meas("tracked");  // gives this thread's record a resource slot
        sw.end_meas("tracked");
        std::mutex& m = s.threads.local().mutex;
        m.lock();
        wait();
        m.unlock();
      },
      [&] { (void)sw.results(); });

  sw.set_print_function(nullptr, nullptr);
  laptime::detail::testing_reset_stopwatch();
}

// Under TSan this case cannot run: the earlier cases' track_cpu_usage leaves the children sampler
// thread (resources) alive in this process, and a child that starts threads after the fork is
// what TSan cannot follow (see kThreadsInChildren above); the normal and ASan builds run it.
TEST_CASE("in a forked child, new threads never take over the record of the forking thread" *
          doctest::skip(!LAPTIME_ENABLED || RELIABILITY_TSAN)) {
  laptime::detail::testing_reset_stopwatch();
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("parent");  // this thread has a record
  sw.end_meas("parent");
  int records = 0;
  laptime::detail::stopwatch_state().threads.for_each(
      [&](laptime::detail::ThreadRecord&, long, bool) { ++records; });
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    g_in_forked_child = true;
    ::alarm(30);
    try {
      sw.start_meas("outer");  // running on the forking thread while new threads come
      // More threads alive at once than there are records: every record of a thread that does
      // not exist in the child gets reused, and new ones are made; the forking thread's must not
      // be taken.
      const int n = records + 2;
      std::atomic<int> started{0};
      std::vector<std::thread> threads;
      for (int i = 0; i < n; ++i) {
        threads.emplace_back([&] {
          sw.start_meas("inner");
          ++started;
          while (started.load() < n) std::this_thread::sleep_for(std::chrono::microseconds(100));
          sw.end_meas("inner");
        });
      }
      for (auto& t : threads) t.join();
      sw.end_meas("outer");  // a UsageError if a new thread adopted this thread's record
      const laptime::Results r = sw.results();
      ::_exit(count_of_name(r, "outer") == 1 && count_of_name(r, "inner") == std::uint64_t(n) ? 0
                                                                                              : 6);
    } catch (const laptime::UsageError& e) {
      std::fprintf(stderr, "%s\n", e.what());
      ::_exit(7);
    }
  }
  const reliability::RunResult r = reliability::wait_for_child(pid, 20);
  CHECK_MESSAGE(r.ok(), r.describe());
  laptime::detail::testing_reset_stopwatch();
}
#endif  // LAPTIME_ENABLED

int main(int argc, char** argv) {
  if (argc >= 3 && std::string_view(argv[1]) == "--helper") {
#if LAPTIME_ENABLED
    if (std::string_view(argv[2]) == "fork-scenario") return fork_scenario();
#endif
    std::fprintf(stderr, "fork-test: unknown helper %s\n", argv[2]);
    return 2;
  }
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
