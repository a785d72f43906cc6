// laptime::resources' plain code, tested without the machine's figures: the /proc parsers against
// fixture files, Usage arithmetic on made-up Samples, and sample_at walking fixture directories
// (tests/fixtures/proc) or the entry of a process that is gone. The sampler on this machine's
// /proc is resources-test's.
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "laptime/detail/procfs.hpp"  // the parsers, tested on fixtures in both builds
#include "laptime/resources.hpp"
#include "test_support.hpp"

namespace pf = laptime::detail::procfs;
namespace res = laptime::resources;

namespace {

const std::string kFixtures = std::string(LAPTIME_TEST_FIXTURES) + "/proc";

std::string fixture(const std::string& name) {
  std::ifstream in(kFixtures + "/parse/" + name, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "missing fixture " << name);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
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
  SUBCASE("the live descendants: the mean of both ends, weighted like the CPU") {
    CHECK_FALSE(u.child_processes());  // Samples that did not count them
    res::Usage w;
    res::Sample a = made_up(0, 0, 0, 0), b = made_up(1, 0, 0, 0), c = made_up(2, 0, 0, 0);
    a.processes = 9;  // the process and 8 workers
    b.processes = 9;
    c.processes = 7;  // two workers ended in the second interval
    w.add(a, b, 1'000'000'000);
    w.add(b, c, 3'000'000'000);
    CHECK(*w.child_processes() == doctest::Approx((8.0 * 1 + 7.0 * 3) / 4));
    w.merge(u);  // intervals without a count leave the mean alone
    CHECK(*w.child_processes() == doctest::Approx((8.0 * 1 + 7.0 * 3) / 4));
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

TEST_CASE("Usage::main_cores is the process's own part of the tree's CPU, weighted like it" *
          LAPTIME_NEEDS_ENABLED) {
  res::Sample a;
  res::Sample b;
  a.tree_cpu_ok = b.tree_cpu_ok = true;
  a.tree_cpu_s = 1.0;
  b.tree_cpu_s = 4.0;  // 3 s of CPU in 2 s: 1.5 cores
  a.self_cpu_s = 0.5;
  b.self_cpu_s = 1.5;  // 1 s of it the process's own: 0.5 cores
  res::Usage u;
  CHECK_FALSE(u.main_cores());
  u.add(a, b, 2'000'000'000);
  CHECK(*u.process_cores() == doctest::Approx(1.5));
  CHECK(*u.main_cores() == doctest::Approx(0.5));
  res::Usage other;
  b.self_cpu_s = 0.5;  // an interval whose CPU was all the child processes'
  other.add(a, b, 2'000'000'000);
  u.merge(other);
  CHECK(*u.process_cores() == doctest::Approx(1.5));
  CHECK(*u.main_cores() == doctest::Approx(0.25));
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

TEST_CASE("sample_at walks each process once where a listing names it twice or an ancestor" *
          LAPTIME_NEEDS_ENABLED) {
  // The tree above, its children files corrupt: 100 lists itself and 101 twice, 101 lists 100,
  // 103 lists 101. Once each, as in the tree; before, the walk branched at every level (a hang).
  const res::Sample s = res::sample_at(kFixtures + "/cycle", 100);
  REQUIRE(s.tree_cpu_ok);
  CHECK(s.processes == 4);
  CHECK(s.tree_cpu_s ==
        doctest::Approx((130 + 60 + 10 + 4) / static_cast<double>(res::clock_ticks())));
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
