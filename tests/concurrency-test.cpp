// State changes made by one thread (disable(), enable(), reset()) while other threads time
// correctly paired intervals: a correct pair never gets a usage error from them, an interval that
// spans one is dropped whichever thread made it, and real misuse still raises. docs/stopwatch.md
// ("Switching measuring on and off while other threads measure") states the rule.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "laptime/error.hpp"
#include "laptime/stopwatch.hpp"
#include "stopwatch_support.hpp"

namespace {

using laptime_test::count_of;
using laptime_test::error_of;
using laptime_test::find;
using laptime_test::Fresh;
using laptime_test::wait_for;

void enable() {
  laptime::Stopwatch::instance().enable(0, std::nullopt, false);
}

int running_of(const std::string& name) {
  const auto m = find(laptime::Stopwatch::instance().results(), name);
  return m ? m->running : 0;
}

/// A thread that measures while the test's thread changes the Stopwatch's state: `stage` steps
/// them in turn; `errors` holds the messages of the usage errors the thread saw ("" for none).
struct Worker {
  std::atomic<int> stage{0};
  std::vector<std::string> errors;
  std::thread thread;
};

}  // namespace

TEST_CASE(
    "an interval started while another thread had disabled the Stopwatch ends without error "
    "after enable(), and is not counted" *
    LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  enable();
  Worker w;
  w.thread = std::thread([&] {
    // The thread has measured before: the Stopwatch knows it.
    w.errors.push_back(error_of([&] {
      sw.start_meas("warm");
      sw.end_meas("warm");
    }));
    w.stage = 1;
    wait_for(w.stage, 2);  // disabled by the controller
    w.errors.push_back(error_of([&] { sw.start_meas("step"); }));
    w.stage = 3;
    wait_for(w.stage, 4);  // enabled again
    w.errors.push_back(error_of([&] { sw.end_meas("step"); }));
    w.errors.push_back(error_of([&] { sw.finish_iter(); }));
    // The next pair counts, as any other.
    w.errors.push_back(error_of([&] {
      sw.start_meas("step");
      sw.end_meas("step");
    }));
  });
  wait_for(w.stage, 1);
  sw.disable();
  w.stage = 2;
  wait_for(w.stage, 3);
  enable();
  w.stage = 4;
  w.thread.join();
  for (const std::string& e : w.errors) CHECK(e == "");
  CHECK(count_of("step") == 1);  // the interval of the disabled period was dropped
  CHECK(running_of("step") == 0);
}

TEST_CASE(
    "a thread whose first call comes while another thread had disabled the Stopwatch "
    "ends that interval without error after enable()" *
    LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  enable();
  sw.disable();
  Worker w;
  w.thread = std::thread([&] {
    w.errors.push_back(error_of([&] { sw.start_meas("first"); }));
    w.stage = 1;
    wait_for(w.stage, 2);
    w.errors.push_back(error_of([&] { sw.end_meas("first"); }));
  });
  wait_for(w.stage, 1);
  enable();
  w.stage = 2;
  w.thread.join();
  for (const std::string& e : w.errors) CHECK(e == "");
  CHECK(count_of("first") == 0);
}

TEST_CASE(
    "the end of an interval started while disabled takes nothing from another thread's "
    "interval of that name" *
    LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  enable();
  Worker late;   // starts while disabled
  Worker other;  // starts the same name after enable()
  late.thread = std::thread([&] {
    late.errors.push_back(error_of([&] {
      sw.start_meas("decode");
      sw.end_meas("decode");
    }));
    late.stage = 1;
    wait_for(late.stage, 2);
    late.errors.push_back(error_of([&] { sw.start_meas("decode"); }));  // disabled: nothing
    late.stage = 3;
    wait_for(late.stage, 4);
    late.errors.push_back(error_of([&] { sw.end_meas("decode"); }));  // its own: dropped
    late.stage = 5;
  });
  wait_for(late.stage, 1);
  sw.disable();
  late.stage = 2;
  wait_for(late.stage, 3);
  sw.reset();  // the one counted interval of "late" goes too
  enable();
  other.thread = std::thread([&] {
    other.errors.push_back(error_of([&] { sw.start_meas("decode"); }));
    other.stage = 1;
    wait_for(other.stage, 2);
    other.errors.push_back(error_of([&] { sw.end_meas("decode"); }));
    other.errors.push_back(error_of([&] { sw.finish_iter(); }));
  });
  wait_for(other.stage, 1);
  late.stage = 4;
  wait_for(late.stage, 5);
  other.stage = 2;
  late.thread.join();
  other.thread.join();
  for (const std::string& e : late.errors) CHECK(e == "");
  for (const std::string& e : other.errors) CHECK(e == "");
  CHECK(count_of("decode") == 1);  // the other thread's, ended by that thread
  CHECK(running_of("decode") == 0);
}

TEST_CASE("misuse still raises after another thread switched the Stopwatch off and on" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  enable();
  Worker w;
  w.thread = std::thread([&] {
    sw.start_meas("a");
    sw.end_meas("a");
    w.stage = 1;
    wait_for(w.stage, 2);  // disabled, then enabled again, by the controller
    // A name never started in this period, nor while disabled.
    w.errors.push_back(error_of([&] { sw.end_meas("never"); }));
    w.errors.push_back(error_of([&] { sw.end_meas("a"); }));
    // A name started twice on this thread within one period.
    sw.start_meas("twice");
    w.errors.push_back(error_of([&] { sw.start_meas("twice"); }));
    w.errors.push_back(error_of([&] { sw.finish_iter(); }));
    sw.end_meas("twice");
    // Started and ended while disabled, then ended again after enable(): ended twice.
    w.stage = 3;
    wait_for(w.stage, 4);
    sw.start_meas("off");
    sw.end_meas("off");
    w.stage = 5;
    wait_for(w.stage, 6);
    w.errors.push_back(error_of([&] { sw.end_meas("off"); }));
  });
  wait_for(w.stage, 1);
  sw.disable();
  enable();
  w.stage = 2;
  wait_for(w.stage, 3);
  sw.disable();
  w.stage = 4;
  wait_for(w.stage, 5);
  enable();
  w.stage = 6;
  w.thread.join();
  REQUIRE(w.errors.size() == 5);
  CHECK(w.errors[0].find("end_meas('never')") != std::string::npos);
  CHECK(w.errors[0].find("is not running") != std::string::npos);
  CHECK(w.errors[1].find("is not running") != std::string::npos);
  CHECK(w.errors[2].find("already running on this thread") != std::string::npos);
  CHECK(w.errors[3].find("still running on this thread") != std::string::npos);
  CHECK(w.errors[4].find("is not running") != std::string::npos);
}

TEST_CASE(
    "threads timing correct pairs for a second while another thread toggles disable(), "
    "enable() and reset() hundreds of times get no usage error" *
    LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  enable();
  constexpr int kWorkers = 4;
  std::atomic<bool> stop{false};
  std::atomic<int> disables{0};  // counted after each disable() or reset() returns
  std::atomic<int> errors{0};
  std::atomic<int> exited{0};
  std::atomic<std::int64_t> pairs{0};
  std::vector<std::string> first_error(kWorkers);
  std::vector<std::thread> workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.emplace_back([&, i] {
      auto note = [&](const char* what) {
        errors.fetch_add(1);
        if (first_error[static_cast<std::size_t>(i)].empty()) {
          first_error[static_cast<std::size_t>(i)] = what;
        }
      };
      for (std::int64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
        try {
          sw.start_meas("outer");
          sw.start_meas("inner");  // the same names on every thread
          sw.end_meas("inner");
          if (n % 64 == 0) {
            // Spans at least one disable() or reset() of the controller: never counted.
            sw.start_meas("across");
            const int seen = disables.load();
            while (disables.load() == seen) std::this_thread::yield();
            sw.end_meas("across");
          }
          sw.end_meas("outer");
          if (n % 8 == 0) sw.finish_iter();
          pairs.fetch_add(1, std::memory_order_relaxed);
        } catch (const laptime::UsageError& e) {
          note(e.what());
        }
      }
      ++exited;
    });
  }
  int toggles = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < until) {
    sw.disable();
    ++disables;
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    enable();
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    if (++toggles % 10 == 0) {
      sw.reset();
      ++disables;
    }
  }
  // Toggling goes on until every worker left its loop: one inside "across" waits for a disable().
  stop = true;
  while (exited.load() < kWorkers) {
    sw.disable();
    ++disables;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    enable();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (auto& t : workers) t.join();
  std::string first;
  for (const std::string& e : first_error) {
    if (first.empty()) first = e;
  }
  INFO("first error: " << first);
  CHECK(errors.load() == 0);
  CHECK(toggles >= 200);
  CHECK(pairs.load() > 0);
  CHECK(count_of("across") == 0);   // every one spanned a disable() or reset()
  CHECK(running_of("outer") == 0);  // nothing left running
  CHECK(running_of("inner") == 0);
  CHECK(running_of("across") == 0);
}

TEST_CASE("several threads may time the same name at once; all intervals feed its statistics" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  constexpr int kThreads = 4, kEach = 2000;
  std::atomic<int> inside{0}, max_inside{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        sw.start_meas("load batch");
        const int now = inside.fetch_add(1) + 1;
        int seen = max_inside.load();
        while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
        }
        if (i % 100 == 0) std::this_thread::yield();
        inside.fetch_sub(1);
        sw.end_meas("load batch");
      }
    });
  }
  for (auto& w : workers) w.join();
  sw.finish_iter();
  const auto m = find(sw.results(), "load batch");
  REQUIRE(m != nullptr);
  CHECK(m->count == kThreads * kEach);  // threads that exited still count
  CHECK(m->running == 0);
  CHECK(max_inside.load() >= 1);
}
