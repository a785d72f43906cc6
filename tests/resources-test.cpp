// laptime::resources: the sampler on the real /proc of this machine (busy threads, forked
// children, file I/O), its thread, its kept descriptors, a forked child's own tree, and what a
// sample costs. The parsers and the arithmetic on fixtures: procfs-test; the tree CPU's accuracy
// against every process's own clock: tracking-test.
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

#include "sampler_support.hpp"
#include "test_support.hpp"

namespace res = laptime::resources;
using Clock = std::chrono::steady_clock;
using sampler_test::fork_busy;
using sampler_test::fork_spinner;
using sampler_test::kill_and_reap;
using sampler_test::process_cpu_s;
using sampler_test::reaped_children_cpu_s;
using sampler_test::seconds;
using sampler_test::spin_for;

namespace {

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

// CPU seconds used so far by the calling thread: the kernel's own clock, to check the sampler
// against.
double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return seconds(ts);
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

// In a child of its own: sets SIGCHLD to `ignore` when asked, then samples its tree with one
// sleeping grandchild. Returns what it wrote to stderr.
std::string warnings_of_tree_sample(bool ignore_sigchld) {
  int out[2];
  REQUIRE(::pipe(out) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(60);
    if (::dup2(out[1], 2) != 2) ::_exit(1);
    if (ignore_sigchld) ::signal(SIGCHLD, SIG_IGN);
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::alarm(60);
      for (;;) ::pause();
    }
    const res::Sample s = res::sample();
    ::kill(grandchild, SIGKILL);
    ::_exit(s.tree_cpu_ok && s.processes == 2 ? 0 : 2);
  }
  ::close(out[1]);
  std::string said;
  char buf[512];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;)
    said.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  return said;
}

TEST_CASE("a process that ignores SIGCHLD is told its children's CPU is lost when they end" *
          LAPTIME_NEEDS_ENABLED) {
#if defined(__SANITIZE_THREAD__)
  MESSAGE("skipped under ThreadSanitizer");  // it ends a child that starts a thread after fork
  return;
#endif
  // The kernel reaps such children itself and adds them to no one's cutime (docs/resources.md).
  const std::string ignored = warnings_of_tree_sample(true);
  CHECK(ignored.find("ignores SIGCHLD") != std::string::npos);
  CHECK(ignored.find("is lost when it ends") != std::string::npos);
  CHECK(warnings_of_tree_sample(false).find("SIGCHLD") == std::string::npos);
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
