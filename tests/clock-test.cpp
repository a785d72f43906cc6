// The Stopwatch's clock (detail/clock.hpp): the cycle counter where it is invariant, steady_clock
// otherwise; accurate against steady_clock, monotonic across cores and fork, overridable.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "laptime/impl/clock.hpp"
#include "laptime/stopwatch.hpp"
#include "stopwatch_support.hpp"

namespace lt = laptime::detail;

namespace {

std::string read_text(const char* path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

// Restores the calling thread's CPU affinity when it goes out of scope.
struct AffinityGuard {
  cpu_set_t saved;
  AffinityGuard() {
    CPU_ZERO(&saved);
    ::sched_getaffinity(0, sizeof saved, &saved);
  }
  ~AffinityGuard() { ::sched_setaffinity(0, sizeof saved, &saved); }
  AffinityGuard(const AffinityGuard&) = delete;
  AffinityGuard& operator=(const AffinityGuard&) = delete;
};

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set);
}

// The counter is expected here unless the environment chose otherwise.
bool expect_counter() {
  if (std::getenv("LAPTIME_CLOCK") != nullptr) return false;
#if defined(__x86_64__)
  return lt::has_invariant_tsc(read_text("/proc/cpuinfo"));
#elif defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

const std::string kFlagsBoth =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu tsc rdtscp lm constant_tsc "
    "rep_good nopl nonstop_tsc cpuid\nbogomips\t: 5192.28\n\nprocessor\t: 1\n";

}  // namespace

TEST_CASE("the cycle counter is chosen only with an invariant TSC; LAPTIME_CLOCK overrides") {
  SUBCASE("both flags: the counter") {
    const auto c = lt::choose_clock(kFlagsBoth, std::nullopt, false, true);
    CHECK(c.counter);
    CHECK(c.warning.empty());
  }
  SUBCASE("flags absent (a fixture of a machine without them): steady_clock, and why") {
    const std::string text = read_text(LAPTIME_TEST_FIXTURES "/cpuinfo-no-invariant-tsc.txt");
    REQUIRE(text.find("flags") != std::string::npos);
    CHECK_FALSE(lt::has_invariant_tsc(text));
    const auto c = lt::choose_clock(text, std::nullopt, false, true);
    CHECK_FALSE(c.counter);
    CHECK(c.reason == "no invariant TSC");
    CHECK(lt::describe_clock({false, 0.0, c.reason}) == "clock: steady (no invariant TSC)");
  }
  SUBCASE("one flag, a flag's prefix or a flag of a later line is not enough") {
    CHECK_FALSE(lt::has_invariant_tsc("flags\t\t: fpu constant_tsc tsc\n"));
    CHECK_FALSE(lt::has_invariant_tsc("flags\t\t: constant_tsc nonstop_tsc_s3\n"));
    CHECK_FALSE(lt::has_invariant_tsc("flags\t\t: constant_tsc\nbugs\t\t: nonstop_tsc\n"));
    CHECK(lt::has_invariant_tsc("flags\t\t: constant_tsc nonstop_tsc\n"));
    CHECK_FALSE(lt::has_invariant_tsc(""));
  }
  SUBCASE("LAPTIME_CLOCK=steady wins over the flags, =tsc over their absence") {
    const auto s = lt::choose_clock(kFlagsBoth, std::string_view("steady"), false, true);
    CHECK_FALSE(s.counter);
    CHECK(s.reason == "LAPTIME_CLOCK=steady");
    const auto t = lt::choose_clock("flags\t: fpu\n", std::string_view("tsc"), false, true);
    CHECK(t.counter);
    CHECK(t.reason == "LAPTIME_CLOCK=tsc, without invariant TSC");
  }
  SUBCASE("a malformed LAPTIME_CLOCK is warned about and ignored") {
    const auto c = lt::choose_clock(kFlagsBoth, std::string_view("rdtsc"), false, true);
    CHECK(c.counter);
    CHECK(c.warning.find("LAPTIME_CLOCK='rdtsc'") != std::string::npos);
  }
  SUBCASE("AArch64's counter needs no flag; no counter at all means steady_clock") {
    CHECK(lt::choose_clock("", std::nullopt, true, true).counter);
    CHECK_FALSE(lt::choose_clock(kFlagsBoth, std::string_view("tsc"), false, false).counter);
  }
  SUBCASE("the report line names the counter and its rate") {
    CHECK(lt::describe_clock({true, 2.45e9, ""}).rfind("clock: ", 0) == 0);
    CHECK(lt::describe_clock({true, 2.45e9, ""}).find(" 2.45 GHz") != std::string::npos);
  }
}

TEST_CASE("this process uses the clock its CPU flags and environment call for") {
  lt::clock_calibrate_now();
  const lt::ClockInfo info = lt::clock_info();
  CHECK(info.counter == expect_counter());
  if (info.counter) {
    CHECK(info.hz > 1e6);  // a plausible counter rate (TSC: GHz; cntvct: tens of MHz and up)
    const std::string said = lt::clock_description();  // aarch64's counter: 25 MHz and up
    CHECK((said.find(" GHz") != std::string::npos || said.find(" MHz") != std::string::npos));
  }
  MESSAGE(lt::clock_description());
}

TEST_CASE("the report and the JSON say which clock timed them" * LAPTIME_NEEDS_ENABLED) {
  lt::clock_calibrate_now();
  laptime_test::Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("step");
  sw.end_meas("step");
  sw.finish_iter();
  const laptime::Results r = sw.results();
  const std::string expect = lt::clock_description().substr(7);  // without "clock: "
  CHECK(r.clock == expect);
  CHECK(r.to_text().find(", clock " + expect + "\n") != std::string::npos);
  CHECK(r.to_json().find("\"clock\": \"" + expect + "\"") != std::string::npos);
}

TEST_CASE("intervals from 1 ms to 1 s agree with steady_clock within 0.1 %" *
          LAPTIME_NEEDS_ENABLED) {
  lt::clock_calibrate_now();
  laptime_test::Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0);
  for (const int ms : {1, 10, 100, 1000}) {
    const std::string name = "sleep " + std::to_string(ms) + " ms";
    // The steady_clock interval around both timestamps and the one between them bracket the
    // true length; the clock under test must fall inside, widened by 0.1 %.
    const std::int64_t s0 = lt::steady_ns();
    const std::int64_t t0 = lt::now_ns();
    const std::int64_t s1 = lt::steady_ns();
    sw.start_meas(name);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    sw.end_meas(name);
    const std::int64_t s2 = lt::steady_ns();
    const std::int64_t t1 = lt::now_ns();
    const std::int64_t s3 = lt::steady_ns();
    const double outer = static_cast<double>(s3 - s0), inner = static_cast<double>(s2 - s1);
    const double d = static_cast<double>(t1 - t0);
    CHECK(d >= inner * 0.999);
    CHECK(d <= outer * 1.001);
    const auto m = laptime_test::find(sw.results(), name);
    REQUIRE(m != nullptr);
    CHECK(m->total_ns >= ms * 1e6 * 0.999);  // sleep_for sleeps at least that long
    CHECK(m->total_ns <= outer * 1.001);
  }
  // A run of more than a second has not drifted: the drift check keeps the counter.
  CHECK(lt::clock_info().counter == expect_counter());
}

TEST_CASE("intervals that start on one core and end on the other are never negative") {
  if (usable_cpus() < 2) {
    MESSAGE("one CPU only: nothing to cross");
    return;
  }
  lt::clock_calibrate_now();
  const AffinityGuard restore;

  SUBCASE("a thread that migrates between cores mid-interval") {
    for (int i = 0; i < 2000; ++i) {
      REQUIRE(pin_to(i % 2));
      const std::int64_t t0 = lt::now_ns();
      REQUIRE(pin_to(1 - i % 2));  // the thread runs on the other core when this returns
      const std::int64_t t1 = lt::now_ns();
      REQUIRE(t1 >= t0);
    }
  }

  SUBCASE("a timestamp handed to the other core: at most a cache miss's time later") {
    // Ping-pong: each side, pinned to its core, reads the clock after seeing the other's
    // timestamp, then publishes its own. The counter is read unordered (clock.hpp says why), so
    // the receiver's read may run a little ahead of the load that sees the timestamp; what
    // this bounds is that the cores' counters agree and the scale is shared: an offset between
    // cores or two scales would show as microseconds.
    constexpr int kRounds = 2000;
    std::atomic<std::int64_t> mailbox[2] = {{-1}, {-1}};
    std::atomic<std::int64_t> worst{0};
    auto side = [&](int me) {
      pin_to(me);
      for (int i = 0; i < kRounds; ++i) {
        if (me == 1 || i > 0) {
          std::int64_t seen;
          while ((seen = mailbox[me].exchange(-1, std::memory_order_acquire)) < 0) {
          }
          const std::int64_t t = lt::now_ns();
          if (seen - t > worst.load(std::memory_order_relaxed)) worst.store(seen - t);
        }
        mailbox[1 - me].store(lt::now_ns(), std::memory_order_release);
      }
    };
    std::thread a(side, 0), b(side, 1);
    a.join();
    b.join();
    MESSAGE("largest inversion after a hand-off: " << worst.load() << " ns");
    CHECK(worst.load() < 2000);
  }

  SUBCASE("Stopwatch intervals started on one core and ended on the other") {
    if (!LAPTIME_ENABLED) return;  // compiled out: nothing is measured
    laptime_test::Fresh fresh;
    auto& sw = laptime::Stopwatch::instance();
    sw.enable(0);
    constexpr int kIntervals = 200;
    for (int i = 0; i < kIntervals; ++i) {
      REQUIRE(pin_to(i % 2));
      sw.start_meas("migrating");
      const std::int64_t t = lt::steady_ns();
      REQUIRE(pin_to(1 - i % 2));
      while (lt::steady_ns() - t < 20'000) {  // at least 20 µs inside the interval
      }
      sw.end_meas("migrating");
    }
    const auto m = laptime_test::find(sw.results(), "migrating");
    REQUIRE(m != nullptr);
    CHECK(m->count == kIntervals);
    CHECK(m->min_ns >= 20'000 * 0.99);  // 1 %: the histogram's resolution does not apply to min
    CHECK(m->total_ns >= kIntervals * 20'000.0);
  }
}

TEST_CASE("a forked child's timestamps continue the parent's") {
  lt::clock_calibrate_now();
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const std::int64_t before = lt::now_ns();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::int64_t t = lt::now_ns();
    const bool counter = lt::clock_info().counter;
    const std::int64_t msg[2] = {t, counter ? 1 : 0};
    (void)!::write(fds[1], msg, sizeof msg);
    ::_exit(0);
  }
  std::int64_t msg[2] = {0, 0};
  CHECK(::read(fds[0], msg, sizeof msg) == static_cast<ssize_t>(sizeof msg));
  const std::int64_t after = lt::now_ns();
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(fds[0]);
  ::close(fds[1]);
  CHECK(msg[0] >= before);
  CHECK(msg[0] <= after);
  CHECK((msg[1] == 1) == expect_counter());
}

// Run by the next test case in a fresh process with LAPTIME_CLOCK set: prints the report line.
TEST_CASE("child: print the clock" *
          doctest::skip(std::getenv("LAPTIME_CLOCK_TEST_CHILD") == nullptr)) {
  (void)lt::now_ns();
  std::printf("[%s]\n", lt::clock_description().c_str());
}

TEST_CASE("LAPTIME_CLOCK=steady and =tsc are honoured by a process that reads them") {
  char exe[4096] = {};
  REQUIRE(::readlink("/proc/self/exe", exe, sizeof exe - 1) > 0);
  auto child_line = [&](const char* value) {
    const std::string cmd = std::string("LAPTIME_CLOCK=") + value +
                            " LAPTIME_CLOCK_TEST_CHILD=1 '" + exe +
                            "' --test-case='child: print the clock' --no-version 2>&1";
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, p)) out += buf;
      ::pclose(p);
    }
    const std::size_t a = out.find("[clock: ");
    return a == std::string::npos ? out : out.substr(a + 1, out.find(']', a) - a - 1);
  };
  CHECK(child_line("steady") == "clock: steady (LAPTIME_CLOCK=steady)");
#if defined(__x86_64__)
  CHECK(child_line("tsc").rfind("clock: tsc", 0) == 0);
#endif
}
