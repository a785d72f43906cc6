// CPU and I/O on the Nsight timeline (laptime/counters.hpp), proven against what a profiler
// receives: the program runs under tests/nvtx_recorder, which attaches to NVTX's counters
// extension as Nsight Systems does (InitializeInjectionNvtxExtension) and logs every counter
// registration and sample. The cases assert the counters' names, units and limits, and that the
// values of constructed intervals are right: a busy loop, a sleep, a written and fsynced file.
#include <dirent.h>
#include <fcntl.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "laptime/counters.hpp"
#include "laptime/impl/nvtx_counters.hpp"  // the publishing step, for a fixture of samples
#include "laptime/nvtx.hpp"                // LAPTIME_HAVE_NVTX
#include "laptime/resources.hpp"
#include "laptime/results.hpp"
#include "laptime/stopwatch.hpp"

#include "nvtx_recorder_api.hpp"
#include "stopwatch_support.hpp"
#include "test_support.hpp"

namespace {

// Cases that read the recorder: skipped in the LAPTIME_DISABLE build and where the NVTX headers
// with the counters extension (hence the recorder's counters) are missing.
#if LAPTIME_ENABLED && LAPTIME_HAVE_NVTX && defined(LAPTIME_NVTX_RECORDER_PATH) && \
    __has_include(<nvtx3/nvToolsExtCounters.h>)
#define NEEDS_RECORDER doctest::skip(false)
#else
#define NEEDS_RECORDER doctest::skip(true)
#endif

/// Every logged event, without its " tid=..." suffix.
std::vector<std::string> events() {
  std::vector<std::string> out;
  for (std::string line : recorder_events()) {
    const std::size_t tid = line.rfind(" tid=");
    if (tid != std::string::npos) line.resize(tid);
    out.push_back(std::move(line));
  }
  return out;
}

/// The lines that start with `prefix`.
std::vector<std::string> starting_with(const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& e : events()) {
    if (e.compare(0, prefix.size(), prefix) == 0) out.push_back(e);
  }
  return out;
}

/// What counter `name` (in laptime's domain) received: each sample's value, NaN for "no value".
std::vector<double> samples_of(const std::string& name) {
  std::vector<double> out;
  const std::string with_value = "counter laptime \"" + name + "\" ";
  const std::string without = "counter-novalue laptime \"" + name + "\" ";
  for (const std::string& e : events()) {
    if (e.compare(0, with_value.size(), with_value) == 0) {
      out.push_back(std::strtod(e.c_str() + with_value.size(), nullptr));
    } else if (e.compare(0, without.size(), without) == 0) {
      out.push_back(std::nan(""));
    }
  }
  return out;
}

std::int64_t cpu_clock_ns(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void spin_for(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  volatile std::uint64_t sink = 0;
  while (std::chrono::steady_clock::now() < until) sink = sink + 1;
}

/// Threads of this process named `name` (/proc/self/task/*/comm).
int threads_named(const std::string& name) {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string line;
      if (std::getline(comm, line) && line == name) ++n;
    }
    ::closedir(d);
  }
  return n;
}

/// The program run again with `mode` as its argument (with no NVTX tool unless `tool`): its exit
/// status.
int run_self(const char* mode, bool tool) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!tool) ::unsetenv("NVTX_INJECTION64_PATH");
    ::execl("/proc/self/exe", "counters-test", mode, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Counters off and the Stopwatch fresh, before and after a case.
struct CountersOff {
  CountersOff() { laptime::disable_nvtx_counters(); }
  ~CountersOff() { laptime::disable_nvtx_counters(); }
};

laptime::Stopwatch& tracking(const std::vector<std::string>& names) {
  laptime::Stopwatch& sw = laptime::Stopwatch::instance();
  for (const std::string& n : names) sw.track_cpu_usage(n);
  sw.enable(0, std::nullopt, false);
  return sw;
}

}  // namespace

TEST_CASE("a tracked name gets four counters, registered once, with their units and limits" *
          NEEDS_RECORDER) {
  laptime_test::Fresh fresh;
  CountersOff off;
  laptime::enable_nvtx_counters();
  CHECK(laptime::nvtx_counters_enabled());
  laptime::Stopwatch& sw = tracking({"units"});
  recorder_clear();
  for (int i = 0; i < 3; ++i) {
    sw.start_meas("units");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    sw.end_meas("units");
    sw.finish_iter();
  }
  const auto registered = starting_with("counter-register");
  REQUIRE(registered.size() == 4);
  // Doubles (NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE = 20), absolute values that hold since the previous
  // sample (0x10 | 0x200), percentages limited to 0..100 (0xc).
  CHECK(registered[0] ==
        "counter-register laptime \"units: process tree CPU\" unit=% schema=20 "
        "flags=0x21c limits=0..100 scope=0");
  CHECK(registered[1] ==
        "counter-register laptime \"units: system CPU\" unit=% schema=20 "
        "flags=0x21c limits=0..100 scope=0");
  CHECK(registered[2] ==
        "counter-register laptime \"units: read\" unit=MB/s schema=20 flags=0x210 scope=0");
  CHECK(registered[3] ==
        "counter-register laptime \"units: write\" unit=MB/s schema=20 flags=0x210 scope=0");
  // One sample of each per interval, each interval's four together at its end.
  for (const char* figure : {"process tree CPU", "system CPU", "read", "write"}) {
    CHECK(samples_of(std::string("units: ") + figure).size() == 3);
  }
  // A name untracked publishes nothing.
  recorder_clear();
  sw.start_meas("untracked");
  sw.end_meas("untracked");
  CHECK(starting_with("counter").empty());
}

TEST_CASE("the counters carry the interval's own figures: a busy loop high, a sleep near 0" *
          NEEDS_RECORDER) {
  laptime_test::Fresh fresh;
  CountersOff off;
  laptime::enable_nvtx_counters();
  laptime::Stopwatch& sw = tracking({"spin", "nap"});
  recorder_clear();
  const std::int64_t cpu_before = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
  const std::int64_t wall_before = now_ns();
  sw.start_meas("spin");
  spin_for(std::chrono::milliseconds(300));
  sw.end_meas("spin");
  const double by_clock = static_cast<double>(cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_before) /
                          static_cast<double>(now_ns() - wall_before);
  sw.start_meas("nap");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  sw.end_meas("nap");

  const int cpus = laptime::resources::online_cpus();
  REQUIRE(cpus > 0);
  const auto spin = samples_of("spin: process tree CPU");
  const auto nap = samples_of("nap: process tree CPU");
  REQUIRE(spin.size() == 1);
  REQUIRE(nap.size() == 1);
  const double spin_cores = spin[0] * cpus / 100.0;
  const double nap_cores = nap[0] * cpus / 100.0;
  INFO("spin: " << spin_cores << " cores (its thread's clock: " << by_clock
                << "), nap: " << nap_cores << " cores");
  // The spinning thread's own clock bounds what the tree used in the window from below; the
  // library's sampler threads add a little on top.
  CHECK(spin_cores >= by_clock - 0.05);
  CHECK(spin_cores <= by_clock + 0.2);
  CHECK(nap_cores < 0.1);
  CHECK(spin_cores > 3 * nap_cores);

  // The same Usage arithmetic as the report's figures of these single intervals.
  const laptime::Results r = sw.results();
  const auto spin_result = laptime_test::find(r, "spin");
  REQUIRE(spin_result);
  REQUIRE(spin_result->resources);
  REQUIRE(spin_result->resources->process_percent);
  CHECK(spin[0] == doctest::Approx(*spin_result->resources->process_percent).epsilon(1e-6));
  const auto system = samples_of("spin: system CPU");
  REQUIRE(system.size() == 1);
  REQUIRE(spin_result->resources->system_percent);  // 300 ms: many clock ticks
  CHECK(system[0] == doctest::Approx(*spin_result->resources->system_percent).epsilon(1e-6));
  CHECK(system[0] >= 0);
  CHECK(system[0] <= 100);
}

TEST_CASE("the write counter shows a written and fsynced file's bytes over the interval" *
          NEEDS_RECORDER) {
  laptime_test::Fresh fresh;
  CountersOff off;
  laptime::enable_nvtx_counters();
  laptime::Stopwatch& sw = tracking({"save"});
  // In the working directory (the build tree, on a disk): /tmp may be a tmpfs, which writes no
  // storage bytes.
  struct statfs fs {};
  if (::statfs(".", &fs) == 0 && fs.f_type == 0x01021994) {  // TMPFS_MAGIC
    MESSAGE("the working directory is a tmpfs, which writes no storage bytes: not checked");
    return;
  }
  char name[] = "laptime-counters-XXXXXX";
  const int fd = ::mkstemp(name);
  REQUIRE(fd >= 0);
  constexpr std::size_t kBytes = 8 << 20;
  const std::string block(kBytes, 'z');
  recorder_clear();
  sw.start_meas("save");
  const bool written = ::write(fd, block.data(), block.size()) == static_cast<ssize_t>(kBytes);
  const bool synced = ::fsync(fd) == 0;
  sw.end_meas("save");
  ::close(fd);
  ::unlink(name);
  REQUIRE(written);
  REQUIRE(synced);
  const auto write = samples_of("save: write");
  REQUIRE(write.size() == 1);
  const auto m = laptime_test::find(sw.results(), "save");
  REQUIRE(m);
  REQUIRE(m->count == 1);
  // MB/s times the interval: the bytes that reached storage, the file's and a little of the
  // file system's metadata (journal, inode): seen 8 KiB on ext4.
  const double bytes = write[0] * 1e6 * m->total_ns * 1e-9;
  INFO("write counter " << write[0] << " MB/s over " << m->total_ns * 1e-6 << " ms");
  CHECK(bytes >= static_cast<double>(kBytes) * 0.999);
  CHECK(bytes <= static_cast<double>(kBytes) + (1 << 20));
  const auto read = samples_of("save: read");
  REQUIRE(read.size() == 1);
  CHECK(read[0] >= 0);
}

TEST_CASE("a figure /proc cannot give is a sample without a value" * NEEDS_RECORDER) {
#if LAPTIME_ENABLED && LAPTIME_HAVE_NVTX_COUNTERS
  namespace d = laptime::detail;
  laptime_test::Fresh fresh;
  CountersOff off;
  laptime::enable_nvtx_counters();
  d::NvtxCountersState& c = d::nvtx_counters_state();
  const d::NvtxCounterSet* set = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    set = d::nvtx_counters_register(c, "fixture: ");
  }
  REQUIRE(set->any);
  // The process tree used 0.5 s of CPU in 1 s; /proc/stat and /proc/self/io were unreadable at
  // one end (as in a container with hidepid, or the machine's CPU in less than a clock tick).
  laptime::resources::Sample a, b;
  a.tree_cpu_ok = b.tree_cpu_ok = true;
  a.tree_cpu_s = 2.0;
  b.tree_cpu_s = 2.5;
  a.taken_ns = 1'000'000'000;
  b.taken_ns = 2'000'000'000;
  a.system_ok = true;
  b.io_ok = true;
  recorder_clear();
  d::nvtx_counters_publish(c, *set, a, b, 1'000'000'000);
  const auto cpu = samples_of("fixture: process tree CPU");
  REQUIRE(cpu.size() == 1);
  CHECK(cpu[0] == doctest::Approx(50.0 / laptime::resources::online_cpus()));
  for (const char* figure : {"system CPU", "read", "write"}) {
    CHECK(starting_with(std::string("counter-novalue laptime \"fixture: ") + figure + "\" reason=2")
              .size() == 1);
  }
  delete set;  // the library keeps its sets for the process; this one is the test's
#endif
}

TEST_CASE("the background sampler publishes the process tree at its rate, and stops" *
          NEEDS_RECORDER) {
  laptime_test::Fresh fresh;
  CountersOff off;
  recorder_clear();
  laptime::enable_nvtx_counters(50);
  CHECK(threads_named("laptime-counter") == 1);
  const std::int64_t cpu_before = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
  const std::int64_t wall_before = now_ns();
  spin_for(std::chrono::milliseconds(500));
  const double by_clock = static_cast<double>(cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_before) /
                          static_cast<double>(now_ns() - wall_before);
  laptime::disable_nvtx_counters();
  // The first enable with a rate registers the four unprefixed counters (once per process).
  const auto registered = starting_with("counter-register laptime \"process tree CPU\"");
  REQUIRE(registered.size() == 1);
  const auto cpu = samples_of("process tree CPU");
  INFO(cpu.size() << " samples in 500 ms at 50 Hz");
  CHECK(cpu.size() >= 12);  // 25 expected; the sampler thread may be starved on a loaded machine
  CHECK(cpu.size() <= 27);
  CHECK(samples_of("system CPU").size() == cpu.size());
  CHECK(samples_of("read").size() == cpu.size());
  CHECK(samples_of("write").size() == cpu.size());
  const int cpus = laptime::resources::online_cpus();
  double mean = 0;
  for (const double v : cpu) mean += v / static_cast<double>(cpu.size());
  INFO("mean " << mean * cpus / 100 << " cores; the spinning thread's clock " << by_clock);
  CHECK(mean * cpus / 100 >= 0.8 * by_clock - 0.05);

  // Off: the thread ends within a period and publishes nothing more.
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  recorder_clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(samples_of("process tree CPU").empty());
  CHECK(threads_named("laptime-counter") == 0);

  // On again (a thread that was about to end keeps running instead): samples come back.
  laptime::enable_nvtx_counters(50);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  laptime::disable_nvtx_counters();
  CHECK(samples_of("process tree CPU").size() >= 3);
  CHECK(starting_with("counter-register").empty());  // registered once per process
}

TEST_CASE("a rate below one a day samples once a day; a new rate takes effect at once" *
          NEEDS_RECORDER) {
  laptime_test::Fresh fresh;
  CountersOff off;
  // A rate whose period does not fit in ns (1e9 / rate): no overflow (UBSan), no busy thread.
  recorder_clear();
  laptime::enable_nvtx_counters(1.0842021724855045e-10);
  const std::int64_t cpu_before = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::int64_t cpu_used = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu_before;
  CHECK(samples_of("process tree CPU").empty());
  CHECK(cpu_used < 100'000'000);  // a sampler spinning through /proc takes most of a core
  // To 50 a second: before, the thread slept out the old period (a day here) first.
  recorder_clear();
  laptime::enable_nvtx_counters(50);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  laptime::disable_nvtx_counters();
  CHECK(samples_of("process tree CPU").size() >= 10);  // 25 expected, less on a loaded machine
}

TEST_CASE("with the counters off, tracked intervals publish nothing" * NEEDS_RECORDER) {
  laptime_test::Fresh fresh;
  CountersOff off;
  CHECK_FALSE(laptime::nvtx_counters_enabled());
  laptime::Stopwatch& sw = tracking({"quiet"});
  recorder_clear();
  for (int i = 0; i < 5; ++i) {
    sw.start_meas("quiet");
    sw.end_meas("quiet");
  }
  CHECK(starting_with("counter").empty());
}

TEST_CASE("without a profiler attached, the counters start no thread and publish nothing" *
          NEEDS_RECORDER) {
  // In a process of its own: NVTX looks for its tool once, at its first call.
  CHECK(run_self("--no-tool-child", false) == 0);
}

TEST_CASE("a tool without the counters extension gets each figure as a mark carrying its value" *
          NEEDS_RECORDER) {
  // In a process of its own, under the recorder told to take no counters (as Nsight Systems
  // 2025.3.1 does: its reports hold no counter): the samples come as marks with a double payload.
  ::setenv("NVTX_RECORDER_NO_COUNTERS", "1", 1);
  const int rc = run_self("--marks-child", true);
  ::unsetenv("NVTX_RECORDER_NO_COUNTERS");
  CHECK(rc == 0);
}

TEST_CASE("the counters go to the NVTX wrapper's named domain where it has one" * NEEDS_RECORDER) {
  // In a process of its own: the domain is chosen once per process, at the first enable.
  CHECK(run_self("--domain-child", true) == 0);
}

TEST_CASE("a sample rate outside 0..1000 per second is a usage error" * LAPTIME_NEEDS_ENABLED) {
  laptime_test::Fresh fresh;
  CountersOff off;
  CHECK(laptime_test::error_of([] {
          laptime::enable_nvtx_counters(-1);
        }).find("enable_nvtx_counters(-1.000000): the sample rate must be between 0") !=
        std::string::npos);
  CHECK(laptime_test::error_of([] { laptime::enable_nvtx_counters(5000); }) != "");
  CHECK_FALSE(laptime::nvtx_counters_enabled());
}

// The child of "without a profiler attached": counters asked for at 50 Hz, a tracked interval,
// and then no sampler thread (exit 0), or one (exit 1).
int no_tool_child() {
  laptime::Stopwatch& sw = tracking({"alone"});
  laptime::enable_nvtx_counters(50);
  if (!laptime::nvtx_counters_enabled()) return 2;
  sw.start_meas("alone");
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  sw.end_meas("alone");
  return threads_named("laptime-counter") == 0 ? 0 : 1;
}

// The child of "a tool without the counters extension": a busy and an idle tracked interval;
// exit 0 if no counter was registered and each figure came as a mark with its value, the busy
// one's process tree CPU above 3x the idle one's.
int marks_child() {
  laptime::Stopwatch& sw = tracking({"busy", "idle"});
  laptime::enable_nvtx_counters();
  if (!laptime::nvtx_counters_enabled()) return 2;
  // Twice: a first interval may lack a figure (the machine's CPU needs a clock tick), which is
  // then left out, never a made-up 0.
  for (int i = 0; i < 2; ++i) {
    sw.start_meas("busy");
    spin_for(std::chrono::milliseconds(60));
    sw.end_meas("busy");
    sw.start_meas("idle");
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    sw.end_meas("idle");
  }
  if (!starting_with("counter-register").empty()) return 3;
  auto value_of = [](const std::string& mark) -> double {  // the last interval's
    const auto lines = starting_with("mark laptime " + mark + " value=");
    if (lines.empty()) return -1;
    return std::strtod(lines.back().c_str() + lines.back().find("value=") + 6, nullptr);
  };
  const auto dump = [] {
    for (const std::string& e : events()) std::fprintf(stderr, "marks-child: %s\n", e.c_str());
  };
  const double busy = value_of("busy: process tree CPU");
  const double idle = value_of("idle: process tree CPU");
  const double write = value_of("busy: write");
  int rc = busy > 3 * idle ? 0 : 6;
  if (value_of("busy: system CPU") < 0 || value_of("idle: read") < 0) rc = 5;
  if (busy < 0 || idle < 0 || write < 0) rc = 4;
  if (rc != 0) dump();
  return rc;
}

// The child of "the NVTX wrapper's named domain": the wrapper enabled with the domain "trainer",
// then the counters; exit 0 if a tracked interval's counters were registered and sampled there.
int domain_child() {
  laptime::NVTXOptions options;
  options.domain = "trainer";
  laptime::NVTXRangeWrapper::instance().enable(false, false, false, options);
  laptime::Stopwatch& sw = tracking({"step"});
  laptime::enable_nvtx_counters();
  sw.start_meas("step");
  sw.end_meas("step");
  const auto registered = starting_with("counter-register trainer \"step: ");
  const auto sampled = starting_with("counter trainer \"step: process tree CPU\" ");
  const bool elsewhere = !starting_with("counter-register laptime").empty();
  return registered.size() == 4 && sampled.size() == 1 && !elsewhere ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--no-tool-child") return no_tool_child();
#ifdef LAPTIME_NVTX_RECORDER_PATH
  // NVTX reads this at its first call, which comes later: every case runs under the recorder.
  ::setenv("NVTX_INJECTION64_PATH", LAPTIME_NVTX_RECORDER_PATH, 1);
#endif
  if (argc == 2 && std::string(argv[1]) == "--domain-child") return domain_child();
  if (argc == 2 && std::string(argv[1]) == "--marks-child") return marks_child();
  doctest::Context context(argc, argv);
  return context.run();
}
