// The print function (Stopwatch::set_print_function) as programs use it: one that calls laptime
// back on its own thread, and one replaced while reports print on another thread
// (docs/stopwatch.md, set_print_function).
#include <atomic>
#include <iostream>
#include <string>
#include <thread>

#include "laptime/stopwatch.hpp"
#include "stopwatch_support.hpp"

namespace {

using laptime_test::find;
using laptime_test::Fresh;

std::atomic<int> g_calls{0};
std::string g_seen;

// Forwards the report, then calls laptime back: a report (finish_iter due to print, and
// print_eval_times), and a new print function. Before, each of these waited for the lock that
// the report being printed held.
void calls_back(const char* text, std::size_t size, void*) {
  g_seen.append(text, size);
  if (++g_calls > 1) return;
  auto& sw = laptime::Stopwatch::instance();
  sw.finish_iter();  // due to print: the nested report goes to stdout, not through this again
  sw.print_eval_times(std::cout);  // to stdout: it looks at the progress line, under that lock
  sw.set_print_function(calls_back, nullptr);
}

struct Sink {
  int tag;
};
Sink g_a{1}, g_b{2};
std::atomic<long> g_mismatches{0};
void print_a(const char*, std::size_t, void* user) {
  if (static_cast<Sink*>(user)->tag != 1) ++g_mismatches;
}
void print_b(const char*, std::size_t, void* user) {
  if (static_cast<Sink*>(user)->tag != 2) ++g_mismatches;
}

}  // namespace

TEST_CASE("a print function may call laptime back on its own thread" * LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  g_calls = 0;
  g_seen.clear();
  sw.set_print_function(calls_back, nullptr);
  sw.enable(0, 1, false);  // a report every iteration
  for (int i = 0; i < 3; ++i) {
    sw.start_meas("step");
    sw.end_meas("step");
    sw.finish_iter();
  }
  sw.set_print_function(nullptr, nullptr);
  CHECK(g_calls == 3);  // the outer reports; the nested one went to stdout
  CHECK(g_seen.find("step") != std::string::npos);
  CHECK(find(sw.results(), "step")->count == 3);
}

TEST_CASE("a print function replaced while reports print never gets the other one's data" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  g_mismatches = 0;
  sw.set_print_function(print_a, &g_a);
  sw.enable(0, 1, false);
  std::atomic<bool> stop{false};
  std::thread switcher([&] {
    while (!stop) {
      sw.set_print_function(print_b, &g_b);
      sw.set_print_function(print_a, &g_a);
    }
  });
  for (int i = 0; i < 20000; ++i) sw.finish_iter();
  stop = true;
  switcher.join();
  sw.set_print_function(nullptr, nullptr);
  CHECK(g_mismatches == 0);
}
