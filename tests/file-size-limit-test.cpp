// The file size limit batch systems set (`ulimit -f`, RLIMIT_FSIZE; Slurm passes the submitting
// shell's on): a write past it raises SIGXFSZ, which ends the process. laptime checks its own
// writes against it first: the workers' region is not made (one warning, the program measures
// on), and results larger than the limit fail with EFBIG, leaving no temporary file. Real
// processes under a real limit, with SIGXFSZ at its default action.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>

#include "laptime/laptime.hpp"
#include "test_support.hpp"
#include "workers_support.hpp"  // fork_child, wait_exit

#if LAPTIME_ENABLED
namespace {

/// Files in `folder` (its own, so nothing else writes there).
int files_in(const std::string& folder) {
  int n = 0;
  if (DIR* d = ::opendir(folder.c_str())) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.' || e->d_name[1] > '.';
    ::closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE(
    "under ulimit -f: enable() and measuring go on, results too large fail with EFBIG and "
    "leave no file") {
  char folder[] = "/tmp/laptime-fsize-XXXXXX";
  REQUIRE(::mkdtemp(folder) != nullptr);
  const pid_t pid = workers_test::fork_child([&] {
    ::signal(SIGXFSZ, SIG_DFL);  // the default: the process ends (Python ignores it)
    const rlimit limit{512, 512};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 10;
    laptime::detail::testing_reset_stopwatch();
    laptime::Stopwatch& sw = laptime::Stopwatch::instance();
    const workers_test::Pipe warnings;
    if (::dup2(warnings.fd[1], 2) != 2) return 15;
    ::fcntl(warnings.fd[0], F_SETFL, O_NONBLOCK);  // no warning: the read fails, never waits
    sw.enable(0, std::nullopt, false);             // the workers' region is larger than 512 bytes
    char said[512] = {};
    if (::read(warnings.fd[0], said, sizeof said - 1) <= 0 ||
        std::strstr(said, "workers: cannot make the region") == nullptr ||
        std::strstr(said, "ulimit -f") == nullptr) {
      return 16;  // the warning that says why workers are not in the report
    }
    for (int i = 0; i < 3; ++i) {
      sw.start_meas("step");
      sw.end_meas("step");
      sw.finish_iter();
    }
    if (sw.results().iterations_measured != 3) return 11;
    try {
      sw.write_json(std::string(folder) + "/results.json");  // a few KB
      return 12;
    } catch (const std::system_error& e) {
      if (e.code().value() != EFBIG) return 13;
    }
    return files_in(folder) == 0 ? 0 : 14;
  });
  CHECK(workers_test::wait_exit(pid) == 0);  // 128 + SIGXFSZ where a write went past the limit
  CHECK(files_in(folder) == 0);
  ::rmdir(folder);
}
#endif
