// ddp_launch: starts one process per GPU the way torchrun does, for examples/ddp_train (or any
// program that reads torchrun's variables).
//
//   ddp_launch [--nproc N] [--out DIR] [--] PROGRAM [ARGS...]
//
// Each child gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (one host: rank = local rank) and
// DDP_NCCL_ID_FILE, a path in a fresh private folder through which rank 0 hands the NCCL unique id
// to the others (it writes the file atomically; they wait for it). With --out DIR, each rank's
// laptime results go to DIR/rank{rank}.json (LAPTIME_OUTPUT, unless already set), ready for
// `laptime merge DIR/rank*.json`.
//
// Exit status: 0 when every rank exits 0; 77 when every rank exits 0 or 77 and one did 77 (the
// "skipped" status of ctest and of the examples, e.g. no GPU); otherwise the status of the first
// rank that failed (128 + signal for a signal), after the others are sent SIGTERM so that a rank
// blocked in a collective does not hang the job. SIGINT and SIGTERM are passed on to the ranks.
//
// Plain C++17 and POSIX: builds and runs without CUDA (tests/ddp-launch-test.sh checks it).
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::vector<pid_t> g_children;  // written before the handlers are installed, read by them

extern "C" void forward_signal(int sig) {
  for (pid_t pid : g_children) {
    if (pid > 0) ::kill(pid, sig);
  }
}

int usage() {
  std::fprintf(stderr, "usage: ddp_launch [--nproc N] [--out DIR] [--] PROGRAM [ARGS...]\n");
  return 2;
}

int status_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

struct Options {
  int nproc = 1;
  std::string out;
  char** program = nullptr;
};

// Reads the command line into `o`; returns 0, or the exit status of a usage error.
int parse_args(int argc, char** argv, Options& o) {
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nproc" && i + 1 < argc) {
      char* end = nullptr;
      const long n = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || n < 1 || n > 1024) {
        std::fprintf(stderr, "ddp_launch: --nproc needs a number from 1 to 1024\n");
        return 2;
      }
      o.nproc = static_cast<int>(n);
    } else if (a == "--out" && i + 1 < argc) {
      o.out = argv[++i];
    } else if (a == "--") {
      ++i;
      break;
    } else if (!a.empty() && a[0] == '-') {
      return usage();
    } else {
      break;
    }
  }
  if (i >= argc) return usage();
  o.program = argv + i;
  return 0;
}

// In a forked child: the torchrun-style environment of `rank`, then the program.
[[noreturn]] void exec_rank(const Options& o, int rank, const std::string& id_file) {
  const std::string r = std::to_string(rank), n = std::to_string(o.nproc);
  ::setenv("RANK", r.c_str(), 1);
  ::setenv("LOCAL_RANK", r.c_str(), 1);
  ::setenv("WORLD_SIZE", n.c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", n.c_str(), 1);
  ::setenv("DDP_NCCL_ID_FILE", id_file.c_str(), 1);
  if (!o.out.empty()) ::setenv("LAPTIME_OUTPUT", (o.out + "/rank{rank}.json").c_str(), 0);
  ::execvp(o.program[0], o.program);
  std::fprintf(stderr, "ddp_launch: %s: %s\n", o.program[0], std::strerror(errno));
  ::_exit(127);
}

// Forks every rank; returns false (after ending those started) when a fork fails.
bool start_ranks(const Options& o, const std::string& id_file) {
  g_children.assign(static_cast<std::size_t>(o.nproc), 0);
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  // SIGINT and SIGTERM are blocked around each fork: a child that got one before its exec would
  // run this process's forwarding handler (and carry on into the program) instead of ending.
  sigset_t forwarded, previous;
  sigemptyset(&forwarded);
  sigaddset(&forwarded, SIGINT);
  sigaddset(&forwarded, SIGTERM);
  for (int rank = 0; rank < o.nproc; ++rank) {
    ::sigprocmask(SIG_BLOCK, &forwarded, &previous);
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::sigprocmask(SIG_SETMASK, &previous, nullptr);
      std::fprintf(stderr, "ddp_launch: fork: %s\n", std::strerror(errno));
      forward_signal(SIGTERM);
      return false;
    }
    if (pid == 0) {
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::sigprocmask(SIG_SETMASK, &previous, nullptr);
      exec_rank(o, rank, id_file);
    }
    g_children[static_cast<std::size_t>(rank)] = pid;
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  }
  return true;
}

// Waits for every rank: 0 when all exited 0, 77 when all exited 0 or 77 and one 77, else the
// status of the first that failed (the others are sent SIGTERM then).
int wait_ranks(int nproc) {
  int result = 0;
  bool skipped = false;
  for (int left = nproc; left > 0;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int rank = -1;
    for (std::size_t k = 0; k < g_children.size(); ++k) {
      if (g_children[k] == pid) {
        rank = static_cast<int>(k);
        g_children[k] = 0;  // no signal to a pid that may be reused
      }
    }
    if (rank < 0) continue;
    --left;
    const int code = status_code(status);
    if (code == 77) {
      skipped = true;
    } else if (code != 0) {
      std::fprintf(stderr, "ddp_launch: rank %d exited with status %d\n", rank, code);
      if (result == 0) {
        result = code;
        forward_signal(SIGTERM);  // the others may wait for this one in a collective
      }
    }
  }
  return result == 0 && skipped ? 77 : result;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int bad = parse_args(argc, argv, o); bad != 0) return bad;
  char dir_template[] = "/tmp/ddp_launch.XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (dir == nullptr) {
    std::fprintf(stderr, "ddp_launch: mkdtemp: %s\n", std::strerror(errno));
    return 1;
  }
  const std::string id_file = std::string(dir) + "/nccl_id";
  if (!o.out.empty()) {
    ::mkdir(o.out.c_str(), 0777);  // an existing folder is fine; a failure shows at the write
  }
  if (!start_ranks(o, id_file)) return 1;
  const int result = wait_ranks(o.nproc);
  ::unlink(id_file.c_str());
  ::rmdir(dir);
  return result;
}
