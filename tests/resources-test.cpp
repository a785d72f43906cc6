// laptime::resources: /proc parsers against fixtures, Usage arithmetic on made-up Samples, and
// the sampler on the real /proc of this machine (busy threads, forked children, file I/O).
#include "laptime/resources.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "laptime/detail/procfs.hpp"  // the parsers, tested on fixtures in both builds
#include "test_support.hpp"

// The process-tree CPU's accuracy against the processes' own clocks: 1 %. Under a sanitizer the
// children sampler thread runs several times slower and is often late, so a boundary extrapolates
// its readings further (1.004 % was seen under TSan beside two builds): 2 % there. The normal
// build checks the 1 %.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr double kTreeAccuracy = 0.02;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
constexpr double kTreeAccuracy = 0.02;
#else
constexpr double kTreeAccuracy = 0.01;
#endif
#else
constexpr double kTreeAccuracy = 0.01;
#endif

namespace pf = laptime::detail::procfs;
namespace res = laptime::resources;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kFixtures = std::string(LAPTIME_TEST_FIXTURES) + "/proc";

std::string fixture(const std::string& name) {
  std::ifstream in(kFixtures + "/parse/" + name, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "missing fixture " << name);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Spins the calling thread for `seconds` of wall time.
void spin_for(double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  volatile std::uint64_t sink = 0;
  while (Clock::now() < until) {
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<std::uint64_t>(i);
  }
}

// A forked child that spins for `seconds` (capped, so that it never outlives a crashed test)
// and then _exits: no doctest, no atexit handlers, no stdio in the child.
pid_t fork_spinner(double seconds) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    spin_for(seconds);
    ::_exit(0);
  }
  return child;
}

void kill_and_reap(pid_t child) {
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
}

std::uint64_t ns_since(Clock::time_point start) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

// Cores used by the process tree over `body`, and the interval's wall time in seconds.
struct Cores {
  double cores = 0;
  double wall_s = 0;
};
template <class F>
Cores cores_during(F&& body) {
  const auto t0 = Clock::now();
  const res::Sample start = res::sample();
  body();
  const res::Sample end = res::sample();
  const std::uint64_t wall = ns_since(t0);
  REQUIRE(start.tree_cpu_ok);
  REQUIRE(end.tree_cpu_ok);
  res::Usage usage;
  usage.add(start, end, wall);
  REQUIRE(usage.process_cores());
  return {*usage.process_cores(), static_cast<double>(wall) * 1e-9};
}

double seconds(const timespec& ts) {
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// CPU seconds used so far by the calling thread, by a live process, by reaped children: the
// kernel's own clocks, to check the sampler against.
double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return seconds(ts);
}
double process_cpu_s(pid_t pid) {
  clockid_t clock{};
  timespec ts{};
  if (::clock_getcpuclockid(pid, &clock) != 0 || ::clock_gettime(clock, &ts) != 0) return -1;
  return seconds(ts);
}
double reaped_children_cpu_s() {
  rusage ru{};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// The sampler must agree with the workers' own CPU clocks (within tick rounding: /proc counts in
// 10 ms ticks). The "about `ideal` cores" then holds where the machine gave the workers their
// cores; on this shared 2-core machine other jobs sometimes take them, and no sampler can report
// CPU time the workers never got.
void check_cores(double measured, double by_clocks, double ideal, double tolerance) {
  INFO("sampled cores = " << measured << ", by the workers' clocks = " << by_clocks);
  CHECK(std::fabs(measured - by_clocks) <= 0.15);
  if (by_clocks >= ideal - tolerance) {
    CHECK(std::fabs(measured - ideal) <= tolerance);
  } else {
    MESSAGE("the machine was busy: the workers got "
            << by_clocks << " of " << ideal << " cores; checked against their clocks only");
  }
}

// A temporary file of `size` bytes, removed on scope exit.
struct TempFile {
  explicit TempFile(std::size_t size) {
    char name[] = "/tmp/laptime-resources-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    path = name;
    const std::string block(size, 'x');
    REQUIRE(::write(fd, block.data(), block.size()) == static_cast<ssize_t>(block.size()));
    ::close(fd);
  }
  ~TempFile() { ::unlink(path.c_str()); }
  std::string path;
};

std::size_t read_whole(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[65536];
  std::size_t total = 0;
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) total += static_cast<std::size_t>(n);
  ::close(fd);
  return total;
}

}  // namespace

// ---- parsers ------------------------------------------------------------------------------------

TEST_CASE("the /proc/stat parser counts every field once and treats idle+iowait as idle") {
  SUBCASE("a real file, with guest time inside user and nice") {
    const auto t = pf::parse_system_cpu(fixture("proc-stat"));
    REQUIRE(t);
    const std::uint64_t total = 10132153 + 290696 + 3084719 + 46828483 + 16683 + 0 + 25195 + 7;
    CHECK(t->total == total);
    CHECK(t->busy == total - 46828483 - 16683);
    CHECK(pf::count_cpu_lines(fixture("proc-stat")) == 2);
  }
  SUBCASE("an old kernel's four fields") {
    const auto t = pf::parse_system_cpu(fixture("proc-stat-four-fields"));
    REQUIRE(t);
    CHECK(t->total == 950);
    CHECK(t->busy == 150);
  }
  SUBCASE("malformed files give nullopt") {
    CHECK_FALSE(pf::parse_system_cpu(fixture("empty")));
    CHECK_FALSE(pf::parse_system_cpu(fixture("proc-stat-truncated")));
    CHECK_FALSE(pf::parse_system_cpu(fixture("proc-stat-short")));
    CHECK_FALSE(pf::parse_system_cpu(fixture("proc-stat-garbage")));
    CHECK_FALSE(pf::parse_system_cpu(fixture("proc-stat-no-aggregate")));
    CHECK(pf::count_cpu_lines(fixture("empty")) == 0);
  }
}

TEST_CASE("the /proc/<pid>/stat parser finds comm by the last parenthesis") {
  SUBCASE("a plain line") {
    const std::string st_text = fixture("stat-plain");  // comm points into it
    const auto st = pf::parse_process_stat(st_text);
    REQUIRE(st);
    CHECK(st->pid == 4242);
    CHECK(st->comm == "python3");
    CHECK(st->state == 'S');
    CHECK(st->ppid == 1);
    CHECK(st->utime == 250);
    CHECK(st->stime == 40);
    CHECK(st->cutime == 30);
    CHECK(st->cstime == 5);
    CHECK(st->cpu_ticks() == 325);
    CHECK(st->cminflt == 27);
    CHECK(st->cmajflt == 3);
    CHECK(st->num_threads == 4);
    CHECK(st->start_time == 14940);
  }
  SUBCASE("comm with spaces and parentheses") {
    const std::string parens_text = fixture("stat-comm-parens");  // comm points into it
    const auto parens = pf::parse_process_stat(parens_text);
    REQUIRE(parens);
    CHECK(parens->comm == "(a) (b)");
    CHECK(parens->state == 'R');
    CHECK(parens->ppid == 4242);
    CHECK(parens->cpu_ticks() == 7 + 3 + 2 + 1);

    const std::string fake_text = fixture("stat-comm-fake-fields");  // comm points into it
    const auto fake = pf::parse_process_stat(fake_text);
    REQUIRE(fake);
    CHECK(fake->comm == "x) R 9 9");
    CHECK(fake->state == 'S');
    CHECK(fake->ppid == 4242);

    const std::string spaces_text = fixture("stat-comm-spaces");  // comm points into it
    const auto spaces = pf::parse_process_stat(spaces_text);
    REQUIRE(spaces);
    CHECK(spaces->comm == "a b");
    CHECK(spaces->num_threads == 1);
  }
  SUBCASE("malformed lines give nullopt") {
    CHECK_FALSE(pf::parse_process_stat(fixture("empty")));
    CHECK_FALSE(pf::parse_process_stat(fixture("stat-truncated")));
    CHECK_FALSE(pf::parse_process_stat(fixture("stat-missing-fields")));
    CHECK_FALSE(pf::parse_process_stat(fixture("stat-negative-time")));
    CHECK_FALSE(pf::parse_process_stat(fixture("stat-no-parens")));
    CHECK_FALSE(pf::parse_process_stat("x (a) S 1 "));
  }
}

TEST_CASE("the /proc/<pid>/io parser needs all four byte counters, complete") {
  const auto io = pf::parse_io(fixture("io"));
  REQUIRE(io);
  CHECK(io->rchar == 323934931);
  CHECK(io->wchar == 323929600);
  CHECK(io->read_bytes == 4096);
  CHECK(io->write_bytes == 323932160);
  CHECK_FALSE(pf::parse_io(fixture("empty")));
  CHECK_FALSE(pf::parse_io(fixture("io-truncated")));
  CHECK_FALSE(pf::parse_io(fixture("io-missing-field")));
  CHECK_FALSE(pf::parse_io(fixture("io-garbage")));
}

TEST_CASE("children lists parse whole ids only, and the ppid fallback finds direct children") {
  std::vector<pid_t> pids{7};
  CHECK(pf::parse_pid_list(fixture("children"), pids));
  CHECK(pids == std::vector<pid_t>{7, 101, 102});
  CHECK(pf::parse_pid_list(fixture("empty"), pids));
  CHECK_FALSE(pf::parse_pid_list(fixture("children-truncated"), pids));
  CHECK_FALSE(pf::parse_pid_list(fixture("children-garbage"), pids));
  CHECK(pids == std::vector<pid_t>{7, 101, 102});  // failures leave the list as it was

  CHECK(pf::parse_pid("123") == 123);
  CHECK_FALSE(pf::parse_pid("self"));
  CHECK_FALSE(pf::parse_pid("0"));
  CHECK_FALSE(pf::parse_pid("99999999999"));

  const std::vector<std::pair<pid_t, pid_t>> table{{1, 0}, {10, 1}, {11, 10}, {12, 10}, {13, 1}};
  std::vector<pid_t> kids;
  pf::children_from_ppids(10, table, kids);
  CHECK(kids == std::vector<pid_t>{11, 12});
}

// ---- Usage arithmetic ---------------------------------------------------------------------------

namespace {
res::Sample made_up(double cpu_s, std::uint64_t busy, std::uint64_t total, std::uint64_t bytes) {
  res::Sample s;
  s.tree_cpu_ok = s.system_ok = s.io_ok = true;
  s.tree_cpu_s = cpu_s;
  s.system_busy_ticks = busy;
  s.system_total_ticks = total;
  s.read_bytes = bytes;
  s.write_bytes = 2 * bytes;
  s.rchar = 3 * bytes;
  s.wchar = 4 * bytes;
  return s;
}
}  // namespace

TEST_CASE("Usage weights intervals by length and counts a group only where valid at both ends" *
          LAPTIME_NEEDS_ENABLED) {
  res::Usage u;
  CHECK(u.intervals() == 0);
  CHECK_FALSE(u.process_cores());
  CHECK_FALSE(u.system_percent());
  CHECK_FALSE(u.read_mb_per_s());

  // 1 s at 2 cores and 3 s at 0 cores: 0.5 cores, not the 1.0 of an unweighted mean.
  u.add(made_up(10, 0, 0, 0), made_up(12, 50, 100, 1'000'000), 1'000'000'000);
  u.add(made_up(12, 50, 100, 1'000'000), made_up(12, 80, 400, 1'000'000), 3'000'000'000);
  CHECK(u.intervals() == 2);
  CHECK(*u.process_cores() == doctest::Approx(0.5));
  CHECK(*u.process_percent(4) == doctest::Approx(12.5));  // 0.5 of 4 cores
  CHECK(*u.process_percent(1) == doctest::Approx(50.0));
  CHECK_FALSE(u.process_percent(0));  // CPUs unknown: no figure, not a division by zero
  CHECK(u.process_percent() == u.process_percent(res::online_cpus()));
  CHECK(*u.system_percent() == doctest::Approx(80.0 / 400 * 100));
  CHECK(*u.read_mb_per_s() == doctest::Approx(0.25));
  CHECK(*u.write_mb_per_s() == doctest::Approx(0.5));
  CHECK(*u.rchar_mb_per_s() == doctest::Approx(0.75));
  CHECK(*u.wchar_mb_per_s() == doctest::Approx(1.0));

  SUBCASE("an invalid end drops that group only") {
    res::Sample no_cpu = made_up(100, 1080, 1400, 2'000'000);
    no_cpu.tree_cpu_ok = false;
    u.add(made_up(12, 80, 400, 1'000'000), no_cpu, 1'000'000'000);
    CHECK(u.intervals() == 3);
    CHECK(*u.process_cores() == doctest::Approx(0.5));  // unchanged
    CHECK(*u.system_percent() == doctest::Approx(1080.0 / 1400 * 100));
    CHECK(*u.read_mb_per_s() == doctest::Approx(2.0 / 5));
  }
  SUBCASE("counters that went backwards are no interval") {
    u.add(made_up(12, 80, 400, 5), made_up(11, 80, 400, 4), 1'000'000'000);
    CHECK(*u.process_cores() == doctest::Approx(0.5));
    CHECK(*u.read_mb_per_s() == doctest::Approx(0.25));
  }
  SUBCASE("merge adds sums, so the weighting survives") {
    res::Usage other;
    other.add(made_up(0, 0, 0, 0), made_up(4, 0, 0, 0), 1'000'000'000);  // 4 cores for 1 s
    u.merge(other);
    CHECK(u.intervals() == 3);
    CHECK(*u.process_cores() == doctest::Approx(6.0 / 5));
  }
  SUBCASE("no valid group: nullopt, not zero") {
    res::Usage none;
    none.add(res::Sample{}, made_up(1, 1, 1, 1), 1'000'000'000);
    CHECK(none.intervals() == 1);
    CHECK_FALSE(none.process_cores());
    CHECK_FALSE(none.process_percent(4));
    CHECK_FALSE(none.system_percent());
    CHECK_FALSE(none.wchar_mb_per_s());
  }
}

// ---- the sampler on fixture directories ---------------------------------------------------------

TEST_CASE("sample_at walks children files of every thread, recursively" * LAPTIME_NEEDS_ENABLED) {
  const res::Sample s = res::sample_at(kFixtures + "/tree", 100);
  const double hz = static_cast<double>(res::clock_ticks());
  REQUIRE(hz > 0);
  CHECK(s.system_ok);
  CHECK(s.system_total_ticks == 6455);
  CHECK(s.system_busy_ticks == 1355);
  // 100 (two threads) -> 101 -> 103 (comm "(a) (b)") -> 104 (listed, gone); 100's thread 105 ->
  // 102.
  REQUIRE(s.tree_cpu_ok);
  CHECK(s.processes == 4);
  CHECK(s.tree_cpu_s == doctest::Approx((130 + 60 + 10 + 4) / hz));
  REQUIRE(s.io_ok);  // 102 has no io file: left out, the rest counts
  CHECK(s.rchar == 1011);
  CHECK(s.wchar == 2022);
  CHECK(s.read_bytes == 333);
  CHECK(s.write_bytes == 444);
}

TEST_CASE("sample_at falls back to ppid fields where children files are missing" *
          LAPTIME_NEEDS_ENABLED) {
  const res::Sample s = res::sample_at(kFixtures + "/scan", 300);
  REQUIRE(s.tree_cpu_ok);
  CHECK(s.processes == 3);  // 300 -> 301 -> 302; 303 is not ours, 304 is malformed
  CHECK(s.tree_cpu_s == doctest::Approx(32.0 / static_cast<double>(res::clock_ticks())));
  REQUIRE(s.io_ok);
  CHECK(s.rchar == 111);
  CHECK(s.wchar == 222);
}

TEST_CASE("unreadable sources make their figures unavailable, never a crash" *
          LAPTIME_NEEDS_ENABLED) {
  SUBCASE("a missing proc root") {
    const res::Sample s = res::sample_at(kFixtures + "/does-not-exist", ::getpid());
    CHECK_FALSE(s.tree_cpu_ok);
    CHECK_FALSE(s.system_ok);
    CHECK_FALSE(s.io_ok);
    res::Usage u;
    u.add(s, s, 1'000'000'000);
    CHECK(u.intervals() == 1);
    CHECK_FALSE(u.process_cores());
    CHECK_FALSE(u.process_percent());
    CHECK_FALSE(u.system_percent());
    CHECK_FALSE(u.read_mb_per_s());
    CHECK_FALSE(u.write_mb_per_s());
    CHECK_FALSE(u.rchar_mb_per_s());
    CHECK_FALSE(u.wchar_mb_per_s());
  }
  SUBCASE("a broken /proc/stat and a missing io file") {
    const res::Sample s = res::sample_at(kFixtures + "/broken", 400);
    CHECK_FALSE(s.system_ok);
    CHECK_FALSE(s.io_ok);
    REQUIRE(s.tree_cpu_ok);
    CHECK(s.tree_cpu_s == doctest::Approx(7.0 / static_cast<double>(res::clock_ticks())));
  }
  SUBCASE("a process that is gone") {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) ::_exit(0);
    ::waitpid(child, nullptr, 0);
    const res::Sample s = res::sample_at("/proc", child);
    CHECK_FALSE(s.tree_cpu_ok);
    CHECK_FALSE(s.io_ok);
    CHECK(s.system_ok);
  }
}

// ---- the sampler on this machine's /proc --------------------------------------------------------

TEST_CASE("the machine: clock ticks and cpus come from the system" * LAPTIME_NEEDS_ENABLED) {
  CHECK(res::clock_ticks() == ::sysconf(_SC_CLK_TCK));
  CHECK(res::online_cpus() == ::sysconf(_SC_NPROCESSORS_ONLN));
  const res::Sample s = res::sample();
  CHECK(s.system_ok);
  CHECK(s.tree_cpu_ok);
  CHECK(s.io_ok);
  CHECK(s.processes == 1);
  CHECK(s.system_total_ticks >= s.system_busy_ticks);
}

TEST_CASE("one busy thread reads about one core" * LAPTIME_NEEDS_ENABLED) {
  double worker_s = 0;
  const Cores c = cores_during([&] {
    std::thread([&] {
      const double before = thread_cpu_s();
      spin_for(0.5);
      worker_s = thread_cpu_s() - before;
    }).join();
  });
  check_cores(c.cores, worker_s / c.wall_s, 1.0, 0.2);
}

TEST_CASE("a busy thread plus a busy child still running at the end read about two cores" *
          LAPTIME_NEEDS_ENABLED) {
  pid_t child = -1;
  double worker_s = 0;
  res::Sample in_interval;
  const Cores c = cores_during([&] {
    child = fork_spinner(5.0);  // killed below, long before that
    std::thread([&] {
      const double before = thread_cpu_s();
      spin_for(0.5);
      worker_s = thread_cpu_s() - before;
    }).join();
    in_interval = res::sample();
  });
  const double child_s = process_cpu_s(child);  // all of it inside the interval
  kill_and_reap(child);
  CHECK(in_interval.processes == 2);
  REQUIRE(child_s >= 0);
  check_cores(c.cores, (worker_s + child_s) / c.wall_s, 2.0, 0.3);
}

TEST_CASE("a sleeping interval reads about zero cores" * LAPTIME_NEEDS_ENABLED) {
  const Cores c = cores_during([] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  INFO("cores = " << c.cores);
  CHECK(c.cores < 0.1);
}

TEST_CASE("a child reaped inside the interval still counts, CPU and I/O" * LAPTIME_NEEDS_ENABLED) {
  constexpr std::size_t kBytes = 1 << 20;
  const TempFile file(kBytes);
  const double reaped_before = reaped_children_cpu_s();
  const auto t0 = Clock::now();
  const res::Sample start = res::sample();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const bool ok = read_whole(file.path) == kBytes;
    spin_for(0.5);
    ::_exit(ok ? 0 : 1);
  }
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  const res::Sample end = res::sample();
  const std::uint64_t wall = ns_since(t0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(end.processes == 1);  // the child is gone: only cutime/cstime and our io hold it now

  res::Usage u;
  u.add(start, end, wall);
  REQUIRE(u.process_cores());
  const double child_s = reaped_children_cpu_s() - reaped_before;
  check_cores(*u.process_cores(), child_s / (static_cast<double>(wall) * 1e-9), 1.0, 0.2);
  // Linux adds a reaped child's /proc/<pid>/io into its parent's (wait_task_zombie).
  REQUIRE(end.io_ok);
  CHECK(end.rchar - start.rchar >= kBytes);
}

TEST_CASE("tree CPU never goes backwards while children are reaped during samples" *
          LAPTIME_NEEDS_ENABLED) {
  // A child reaped between reading its parent and reading it would drop out of one sample
  // (its time not yet in the parent's cutime as read): the sampler re-reads and retries then.
  std::atomic<bool> stop{false};
  std::thread reaper([&stop] {  // its children hang off this thread's children file
    while (!stop.load()) {
      const pid_t child = fork_spinner(0.02);
      if (child < 0) return;
      ::waitpid(child, nullptr, 0);
    }
  });
  double previous = res::sample().tree_cpu_s;
  double worst_drop = 0;
  int samples = 0;
  const auto until = Clock::now() + std::chrono::milliseconds(600);
  while (Clock::now() < until) {
    const res::Sample s = res::sample();
    REQUIRE(s.tree_cpu_ok);
    worst_drop = std::max(worst_drop, previous - s.tree_cpu_s);
    previous = s.tree_cpu_s;
    ++samples;
  }
  stop.store(true);
  reaper.join();
  INFO(samples << " samples");
  CHECK(worst_drop <= 0.0);
}

TEST_CASE("reads and writes inside an interval show up as rchar and wchar bytes" *
          LAPTIME_NEEDS_ENABLED) {
  constexpr std::size_t kBytes = 4 << 20;
  // The sampler's own reads of /proc count in rchar too: a few kB per sample.
  constexpr std::uint64_t kSlack = 64 << 10;

  SUBCASE("reads") {
    const TempFile file(kBytes);
    const auto t0 = Clock::now();
    const res::Sample start = res::sample();
    REQUIRE(read_whole(file.path) == kBytes);
    const res::Sample end = res::sample();
    const std::uint64_t wall = ns_since(t0);
    REQUIRE(start.io_ok);
    REQUIRE(end.io_ok);
    CHECK(end.rchar - start.rchar >= kBytes);
    CHECK(end.rchar - start.rchar <= kBytes + kSlack);
    // The file was just written, so it is in the page cache: read_bytes (storage) may be 0.
    CHECK(end.read_bytes - start.read_bytes <= kBytes + kSlack);

    res::Usage u;
    u.add(start, end, wall);
    const double seconds = static_cast<double>(wall) * 1e-9;
    // Usage takes the sampler's own /proc reads out again: what is left is the file, to the
    // byte up to the size of one read() racing with the counter.
    const double bytes = *u.rchar_mb_per_s() * seconds * 1e6;
    CHECK(bytes >= static_cast<double>(kBytes) - 4096);
    CHECK(bytes <= static_cast<double>(kBytes) + 4096);
  }
  SUBCASE("writes") {
    char name[] = "/tmp/laptime-resources-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    const std::string block(kBytes, 'y');
    const res::Sample start = res::sample();
    const ssize_t written = ::write(fd, block.data(), block.size());
    const res::Sample end = res::sample();
    ::close(fd);
    ::unlink(name);
    REQUIRE(written == static_cast<ssize_t>(kBytes));
    REQUIRE(start.io_ok);
    REQUIRE(end.io_ok);
    CHECK(end.wchar - start.wchar == kBytes);  // the sampler writes nothing
  }
}

// ---- accuracy against the processes' own clocks
// ----------------------------------------------------

namespace {

// A child that spins until it is killed (an alarm ends it if the test crashes).
pid_t fork_busy() {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(60);
    volatile std::uint64_t sink = 0;
    for (;;) sink = sink + 1;
  }
  return child;
}

// The tree's CPU by the kernel's clocks: this process's threads, its reaped children, and each
// live process in `live`.
double clocks_cpu_s(const std::vector<pid_t>& live) {
  timespec own{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &own);
  double total = seconds(own) + reaped_children_cpu_s();
  for (const pid_t pid : live) {
    const double cpu = process_cpu_s(pid);
    REQUIRE(cpu >= 0);
    total += cpu;
  }
  return total;
}

// Sleeps until the tree has used `cpu_s` more CPU seconds by the clocks than `from` (at most
// 20 s): on a loaded machine the children get less than their cores, and 1 % of what they got
// must stay above the few milliseconds one boundary may be off by.
void wait_for_cpu(const std::vector<pid_t>& live, double from, double cpu_s) {
  const auto until = Clock::now() + std::chrono::seconds(20);
  while (clocks_cpu_s(live) - from < cpu_s && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

TEST_CASE("with 16 busy children the tree CPU is within 1 % of their own clocks" *
          LAPTIME_NEEDS_ENABLED) {
  std::vector<pid_t> children;
  for (int i = 0; i < 16; ++i) children.push_back(fork_busy());
  // Samples every few ms, as a training loop's tracked names do: the children sampler runs, and
  // both boundaries take the descendants from its readings.
  std::atomic<bool> stop{false};
  std::thread loop([&stop] {
    while (!stop.load()) {
      (void)res::sample();
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const res::Sample start = res::sample();
  const double clocks_start = clocks_cpu_s(children);
  wait_for_cpu(children, clocks_start, 2.0);
  const res::Sample end = res::sample();
  const double clocks_end = clocks_cpu_s(children);
  stop.store(true);
  loop.join();
  for (const pid_t child : children) kill_and_reap(child);
  REQUIRE(start.tree_cpu_ok);
  REQUIRE(end.tree_cpu_ok);
  CHECK(end.processes == 17);
  const double sampled = end.tree_cpu_s - start.tree_cpu_s;
  const double by_clocks = clocks_end - clocks_start;
  INFO("sampled " << sampled << " s, by the clocks " << by_clocks << " s");
  CHECK(by_clocks >= 2.0);
  CHECK(std::fabs(sampled - by_clocks) <= kTreeAccuracy * by_clocks);
}

TEST_CASE("a child that exits and is reaped inside the interval counts to 1 %, beside busy ones" *
          LAPTIME_NEEDS_ENABLED) {
  std::vector<pid_t> busy;
  for (int i = 0; i < 4; ++i) busy.push_back(fork_busy());
  for (int i = 0; i < 20; ++i) (void)res::sample();
  const res::Sample start = res::sample();
  const double clocks_start = clocks_cpu_s(busy);
  const pid_t leaving = fork_spinner(0.3);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const res::Sample middle = res::sample();  // the leaving child is live here
  REQUIRE(::waitpid(leaving, nullptr, 0) == leaving);
  wait_for_cpu(busy, clocks_start, 2.0);
  const res::Sample end = res::sample();
  const double clocks_end = clocks_cpu_s(busy);  // the leaving child is in RUSAGE_CHILDREN now
  for (const pid_t child : busy) kill_and_reap(child);
  CHECK(middle.processes == 6);
  CHECK(end.processes == 5);
  const double sampled = end.tree_cpu_s - start.tree_cpu_s;
  const double by_clocks = clocks_end - clocks_start;
  INFO("sampled " << sampled << " s, by the clocks " << by_clocks << " s");
  CHECK(std::fabs(sampled - by_clocks) <= kTreeAccuracy * by_clocks);
}

TEST_CASE("grandchildren count: a live one by its clock, a reaped one in its parent's ticks" *
          LAPTIME_NEEDS_ENABLED) {
  // The child forks a grandchild that stays, and one that spins, exits and is reaped by the
  // child; it sends both pids and, once it has reaped the second, its RUSAGE_CHILDREN.
  int to_parent[2];
  REQUIRE(::pipe(to_parent) == 0);
  const auto start_clocks = [] { return clocks_cpu_s({}); };
  for (int i = 0; i < 20; ++i) (void)res::sample();
  const res::Sample start = res::sample();
  const double own_start = start_clocks();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(60);
    const pid_t stays = fork_busy();
    const pid_t leaves = fork_spinner(0.3);
    ::waitpid(leaves, nullptr, 0);
    const double reaped = reaped_children_cpu_s();
    const bool ok = ::write(to_parent[1], &stays, sizeof stays) == sizeof stays &&
                    ::write(to_parent[1], &reaped, sizeof reaped) == sizeof reaped;
    if (!ok) ::_exit(1);
    ::pause();  // killed, with its grandchild, at the end
    ::_exit(0);
  }
  pid_t stays = 0;
  double reaped_by_child = 0;
  REQUIRE(::read(to_parent[0], &stays, sizeof stays) == sizeof stays);
  REQUIRE(::read(to_parent[0], &reaped_by_child, sizeof reaped_by_child) == sizeof reaped_by_child);
  wait_for_cpu({child, stays}, own_start, 1.0);
  const res::Sample end = res::sample();
  const double by_clocks = clocks_cpu_s({child, stays}) - own_start + reaped_by_child;
  ::kill(stays, SIGKILL);
  kill_and_reap(child);
  ::close(to_parent[0]);
  ::close(to_parent[1]);
  CHECK(end.processes == 3);
  const double sampled = end.tree_cpu_s - start.tree_cpu_s;
  // The reaped grandchild's CPU is in the child's cutime and cstime: whole clock ticks, each
  // truncated (one tick each at most).
  const double ticks = 2.0 / static_cast<double>(res::clock_ticks());
  INFO("sampled " << sampled << " s, by the clocks " << by_clocks << " s");
  CHECK(std::fabs(sampled - by_clocks) <= kTreeAccuracy * by_clocks + ticks);
}

// The CPU time (ns) of this process's thread named `name`, from its schedstat; -1 if none.
long long thread_cpu_ns_named(const std::string& name) {
  DIR* dir = ::opendir("/proc/self/task");
  REQUIRE(dir != nullptr);
  long long found = -1;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string task = std::string("/proc/self/task/") + entry->d_name;
    std::ifstream comm(task + "/comm");
    std::string line;
    if (!std::getline(comm, line) || line != name) continue;
    std::ifstream sched(task + "/schedstat");
    sched >> found;
  }
  ::closedir(dir);
  return found;
}

TEST_CASE("the children sampler is a thread named laptime-sampler that sleeps when samples stop" *
          LAPTIME_NEEDS_ENABLED) {
  for (int i = 0; i < 20; ++i) {
    (void)res::sample();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE(thread_cpu_ns_named("laptime-sampler") >= 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // idle after 1 s
  const long long before = thread_cpu_ns_named("laptime-sampler");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(thread_cpu_ns_named("laptime-sampler") == before);
  const res::Sample s = res::sample();  // wakes it
  CHECK(s.tree_cpu_ok);
}

TEST_CASE("sample() survives the program closing its kept descriptors and reusing their numbers" *
          LAPTIME_NEEDS_ENABLED) {
  REQUIRE(res::sample().io_ok);
  // Every descriptor above stderr is closed, as a daemonising program does, and the numbers are
  // taken again by a file of the program's own.
  const TempFile file(4096);
  for (int fd = 3; fd < 64; ++fd) ::close(fd);
  std::vector<int> reused;
  for (int i = 0; i < 8; ++i) reused.push_back(::open(file.path.c_str(), O_RDONLY | O_CLOEXEC));
  const res::Sample s = res::sample();
  // A reap makes the next sample walk the tree itself, through its kept /proc descriptor.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  const res::Sample walked = res::sample();
  for (const int fd : reused) ::close(fd);
  CHECK(s.system_ok);
  CHECK(s.io_ok);
  CHECK(s.tree_cpu_ok);
  CHECK(walked.tree_cpu_ok);
  CHECK(walked.processes == 1);
}

TEST_CASE("a forked child samples its own tree, not its parent's readings" *
          LAPTIME_NEEDS_ENABLED) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer ends a child that starts a thread after a multi-threaded fork.
  MESSAGE("skipped under ThreadSanitizer");
  return;
#endif
  std::vector<pid_t> busy;
  for (int i = 0; i < 3; ++i) busy.push_back(fork_busy());
  for (int i = 0; i < 10; ++i) {  // the parent's sampler has readings of 4 processes
    (void)res::sample();
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(60);
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::alarm(60);  // never outlives a child that failed before killing it
      for (;;) ::pause();
    }
    res::Sample s;
    for (int i = 0; i < 20; ++i) {
      s = res::sample();
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
    ::kill(grandchild, SIGKILL);
    ::waitpid(grandchild, nullptr, 0);
    ::_exit(s.tree_cpu_ok && s.processes == 2 ? 0 : 1);
  }
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  for (const pid_t pid : busy) kill_and_reap(pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(res::sample().processes == 1);
}

// Not a test: how far one boundary's tree CPU is from the clocks, with 16 busy children, for
// sample() (the children sampler's readings, extrapolated) and for sample_at (a walk of /proc at
// the boundary, children's CPU in clock ticks, as sample() did before). Run with
//   build/tests/resources-test --no-skip --test-case='*one boundary*'
TEST_CASE("how far one boundary is from the clocks, sample() against a walk" * doctest::skip()) {
  std::vector<pid_t> children;
  for (int i = 0; i < 16; ++i) children.push_back(fork_busy());
  std::vector<double> fast, walked;
  for (int i = 0; i < 320; ++i) {
    const double a = res::sample().tree_cpu_s - clocks_cpu_s(children);
    const double b = res::sample_at("/proc", ::getpid(), true).tree_cpu_s - clocks_cpu_s(children);
    if (i >= 20) fast.push_back(a), walked.push_back(b);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  for (const pid_t child : children) kill_and_reap(child);
  // The offset common to all boundaries cancels in every interval: spread around the mean.
  for (auto* errors : {&fast, &walked}) {
    double mean = 0;
    for (const double e : *errors) mean += e / static_cast<double>(errors->size());
    for (double& e : *errors) e = std::fabs(e - mean) * 1e3;
    std::sort(errors->begin(), errors->end());
    std::printf("%s: |error| median %.2f ms, p90 %.2f ms, max %.2f ms\n",
                errors == &fast ? "sample()         " : "walk (sample_at) ", (*errors)[150],
                (*errors)[270], errors->back());
  }
}

// ---- cost ---------------------------------------------------------------------------------------

// Not a test: prints what one sample() costs with 0 and with 8 idle child processes. Run with
//   build-res/tests/resources-test --no-skip --test-case='*cost*'
// (bench/ will get a Google Benchmark of the same).
TEST_CASE("sample cost with 0 and 8 child processes" * doctest::skip()) {
  for (const int children : {0, 8}) {
    std::vector<pid_t> kids;
    for (int i = 0; i < children; ++i) {
      const pid_t kid = ::fork();
      REQUIRE(kid >= 0);
      if (kid == 0) {
        ::pause();
        ::_exit(0);
      }
      kids.push_back(kid);
    }
    std::uint32_t seen = 0;
    for (int i = 0; i < 100; ++i) seen = res::sample().processes;  // warm up
    constexpr int kRounds = 2000;
    const auto t0 = Clock::now();
    for (int i = 0; i < kRounds; ++i) seen = res::sample().processes;
    const double us = static_cast<double>(ns_since(t0)) / kRounds / 1e3;
    std::printf("sample() with %d children (%u processes seen): %.1f us\n", children, seen, us);
    for (const pid_t kid : kids) kill_and_reap(kid);
  }
}
