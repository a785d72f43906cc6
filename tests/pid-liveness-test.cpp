// Whether a worker still runs, where /proc cannot say (detail/pid_liveness.hpp): no proc file
// system (an empty folder in its place), a parent at its descriptor limit, a /proc of another PID
// namespace. A live worker is never taken as ended: its region would be folded, its measurements
// lost, and its next end_meas would fail. Real processes, a real /proc, real descriptor limits.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "laptime/detail/pid_liveness.hpp"
#include "laptime/laptime.hpp"
#include "test_support.hpp"
#include "workers_helpers.hpp"  // find, measure
#include "workers_support.hpp"  // Pipe, fork_child, wait_exit

namespace {

using laptime::detail::Liveness;
using laptime::detail::proc_shows_our_pids;
using laptime::detail::process_liveness;

/// A folder of its own, removed at the end, open as a directory descriptor.
struct Folder {
  std::string path;
  int fd = -1;
  Folder() {
    char name[] = "/tmp/laptime-proc-XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    path = name;
    fd = ::open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(fd >= 0);
  }
  ~Folder() {
    ::unlinkat(fd, "self", 0);
    ::close(fd);
    ::rmdir(path.c_str());
  }
};

/// A child that exited and was reaped: its pid names no process (until the system reuses it).
pid_t reaped_child() {
  const pid_t pid = workers_test::fork_child([] { return 0; });
  workers_test::wait_exit(pid);
  return pid;
}

}  // namespace

TEST_CASE(
    "the real /proc: this process is alive with its start time; a zombie and a reaped child "
    "have ended") {
  CHECK(proc_shows_our_pids());
  std::uint64_t start = 0;
  CHECK(process_liveness(::getpid(), &start) == Liveness::Alive);
  CHECK(start > 0);
  const pid_t zombie = workers_test::fork_child([] { return 0; });
  for (int i = 0; i < 1000 && process_liveness(zombie, nullptr) != Liveness::Gone; ++i) {
    ::usleep(1000);  // until it has exited: a zombie until waited for
  }
  CHECK(process_liveness(zombie, nullptr) == Liveness::Gone);
  workers_test::wait_exit(zombie);
  CHECK(process_liveness(reaped_child(), nullptr) == Liveness::Gone);
  CHECK(process_liveness(0, nullptr) == Liveness::Gone);  // not "the process group"
}

TEST_CASE("no proc file system: a live process exists, a reaped one has ended") {
  Folder empty;
  CHECK_FALSE(proc_shows_our_pids(empty.fd));
  CHECK(process_liveness(::getpid(), nullptr, empty.fd) == Liveness::AliveStartUnknown);
  CHECK(process_liveness(reaped_child(), nullptr, empty.fd) == Liveness::Gone);
}

TEST_CASE("a /proc of another PID namespace is not read for our pids") {
  Folder other;  // its "self" names another number, as the outer /proc does after unshare -p
  const std::string not_us = std::to_string(::getpid() == 1 ? 2 : 1);
  REQUIRE(::symlinkat(not_us.c_str(), other.fd, "self") == 0);
  CHECK_FALSE(proc_shows_our_pids(other.fd));
  std::uint64_t start = 0;
  CHECK(process_liveness(::getpid(), &start, other.fd) == Liveness::AliveStartUnknown);
  CHECK(start == 0);
}

#if LAPTIME_ENABLED  // the implementation: the tree walk, the workers
TEST_CASE("a /proc of another PID namespace: the process tree's walk gives no figure") {
  Folder other;  // "self" names another number; our number's folder is someone else's there
  const std::string not_us = std::to_string(::getpid() == 1 ? 2 : 1);
  REQUIRE(::symlinkat(not_us.c_str(), other.fd, "self") == 0);
  const std::string mine = std::to_string(::getpid());
  REQUIRE(::mkdirat(other.fd, mine.c_str(), 0700) == 0);
  char stat[1024];
  const int self_fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  const ssize_t n = ::read(self_fd, stat, sizeof stat);
  ::close(self_fd);
  REQUIRE(n > 0);
  const int stat_fd = ::openat(other.fd, (mine + "/stat").c_str(), O_WRONLY | O_CREAT, 0600);
  REQUIRE(stat_fd >= 0);
  REQUIRE(::write(stat_fd, stat, static_cast<std::size_t>(n)) == n);
  ::close(stat_fd);
  CHECK_FALSE(laptime::resources::detail::walk_descendants(other.fd).has_value());
  ::unlinkat(other.fd, (mine + "/stat").c_str(), 0);
  ::unlinkat(other.fd, mine.c_str(), AT_REMOVEDIR);
}

TEST_CASE(
    "a parent at its descriptor limit keeps its live worker: the worker's interval ends and "
    "counts") {
  laptime::detail::testing_reset_stopwatch();
  laptime::Stopwatch& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  workers_test::Pipe started, go;
  const pid_t pid = workers_test::fork_child([&] {
    sw.start_meas("decode");
    started.send();
    if (!go.wait()) return 3;
    try {
      sw.end_meas("decode");  // fails where the parent took this worker as ended
    } catch (...) {
      return 4;
    }
    return 0;
  });
  REQUIRE(started.wait());
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit low = saved;
  low.rlim_cur = 64;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> filler;  // every descriptor taken: /proc/<pid>/stat cannot be opened
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
  sw.finish_iter();  // the parent looks for ended workers here and at results()
  (void)sw.results();
  for (const int fd : filler) ::close(fd);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved) == 0);
  go.send();
  CHECK(workers_test::wait_exit(pid) == 0);
  const laptime::Results r = sw.results();
  const auto* decode = workers_test::find(r, "decode");
  REQUIRE(decode != nullptr);
  CHECK(decode->count == 1);
  laptime::detail::testing_reset_stopwatch();
}
#endif
