// Helpers for the reliability tests (fork-test, exit-test, environment-test) and the API fuzzer
// (fuzz/api_fuzzer.cpp): running this very test binary again as a fresh process (variables
// laptime reads at first use need one) with a timeout, files and signals, and (from
// json_support.hpp) a strict JSON parser and a UTF-8 check.
// Plain C++ and POSIX, no doctest: the fuzzer includes it too.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "json_support.hpp"

extern char** environ;

namespace reliability {

// ---------------------------------------------------------------------------------------------
// Files and processes

/// The whole file, or "" if it cannot be read.
inline std::string read_file(const std::string& path) {
  std::string out;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  char buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

/// The names in `dir` that contain `part` (a temporary file left next to an output, say).
inline std::vector<std::string> files_containing(const std::string& dir, std::string_view part) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (std::string_view(e->d_name).find(part) != std::string_view::npos) {
        out.emplace_back(e->d_name);
      }
    }
    ::closedir(d);
  }
  return out;
}

#if defined(__SANITIZE_THREAD__)
#define RELIABILITY_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RELIABILITY_TSAN 1
#endif
#endif
#ifndef RELIABILITY_TSAN
#define RELIABILITY_TSAN 0
#endif
// Any sanitizer runtime (AddressSanitizer or ThreadSanitizer) is linked in.
#if defined(__SANITIZE_ADDRESS__) || RELIABILITY_TSAN
#define RELIABILITY_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RELIABILITY_SANITIZER 1
#endif
#endif
#ifndef RELIABILITY_SANITIZER
#define RELIABILITY_SANITIZER 0
#endif

/// Sends `sig` to the child `pid`. ThreadSanitizer runs a program's handlers itself, deferred to
/// a point it deems safe, and now and then loses an asynchronous signal: in about 1 of 150 runs
/// of output-test's write-json loop under TSan, a SIGTERM ended nothing and laptime's handler
/// was never entered (checked with a write(2) at its first line), while every thread kept making
/// system calls. Under TSan only, the signal is sent again each 5 s until the child has ended (at
/// most 4 times); elsewhere one kill, as a user's would be.
inline void send_signal(pid_t pid, int sig) {
  ::kill(pid, sig);
  if (!RELIABILITY_TSAN) return;
  for (int resend = 0; resend < 4; ++resend) {
    for (int i = 0; i < 500; ++i) {
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
          info.si_pid == pid) {
        return;  // ended (or not ours to wait for)
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid, sig);
  }
}

inline bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

/// How often `needle` occurs in `hay` (non-overlapping).
inline int count_of(std::string_view hay, std::string_view needle) {
  int n = 0;
  for (auto pos = hay.find(needle); pos != std::string_view::npos;
       pos = hay.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

/// A fresh directory under $TMPDIR (or /tmp), removed with its files when this goes away.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/laptime-test-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) != nullptr) path_ = buf.data();
  }
  ~TempDir() {
    if (path_.empty()) return;
    // Flat: the tests put only files here.
    const std::string cmd = "rm -rf '" + path_ + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// What a process did.
struct RunResult {
  bool started = false;
  bool timed_out = false;
  int exit_code = -1;  ///< -1 unless it exited normally
  int signal = 0;      ///< the signal that ended it, if any
  double seconds = 0;
  std::string out, err;

  bool ok() const { return started && !timed_out && exit_code == 0; }
  std::string describe() const {
    std::string d = !started      ? "did not start"
                    : timed_out   ? "timed out (killed)"
                    : signal != 0 ? "killed by signal " + std::to_string(signal)
                                  : "exit code " + std::to_string(exit_code);
    return d + "; stderr: " + err.substr(0, 2000);
  }
};

/// Waits for `pid` at most `timeout_s` seconds; kills it (SIGKILL) after that. Fills the exit
/// fields of `r`.
inline void wait_with_timeout(pid_t pid, double timeout_s, RunResult& r) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return;
    if (std::chrono::steady_clock::now() > deadline) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
}

/// The result of the child `pid` that this process forked, waited for as wait_with_timeout does;
/// a failed fork (`pid` < 0) reads as a child that never started.
inline RunResult wait_for_child(pid_t pid, double timeout_s) {
  RunResult r;
  r.started = pid > 0;
  if (pid > 0) wait_with_timeout(pid, timeout_s, r);
  return r;
}

/// A process started by spawn_self: where its stdout and stderr go.
struct Spawned {
  pid_t pid = -1;
  std::string out_path, err_path;
};

/// Starts this test binary again (/proc/self/exe) with `args`, its environment changed by `env`
/// (name -> value; an empty value unsets the variable), stdout and stderr captured through files
/// in `dir`. With `stdout_to_closed_pipe`, stdout is instead a pipe that nobody reads (its read
/// end is closed before the process starts, as after `| head -1` has exited), with SIGPIPE at its
/// default action.
inline Spawned spawn_self(const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& env, const TempDir& dir,
                          bool stdout_to_closed_pipe = false) {
  static int counter = 0;
  const std::string tag = std::to_string(++counter);
  Spawned sp;
  sp.out_path = dir.file("stdout-" + tag);
  sp.err_path = dir.file("stderr-" + tag);

  // Everything the child needs is built before fork: between fork and exec only
  // async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string name(entry.substr(0, entry.find('=')));
    if (env.count(name) == 0) env_strings.emplace_back(entry);
  }
  for (const auto& [name, value] : env) {
    if (!value.empty()) env_strings.push_back(name + "=" + value);
  }
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings{"laptime-test-helper"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  int out_fd = ::open(sp.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int err_fd = ::open(sp.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (stdout_to_closed_pipe && out_fd >= 0) {
    int p[2];
    ::close(out_fd);
    out_fd = -1;
    if (::pipe2(p, O_CLOEXEC) == 0) {
      ::close(p[0]);  // no reader, from the start
      out_fd = p[1];
    }
  }
  if (out_fd < 0 || err_fd < 0) return sp;
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    if (stdout_to_closed_pipe) ::signal(SIGPIPE, SIG_DFL);
    ::execve("/proc/self/exe", argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out_fd);
  ::close(err_fd);
  sp.pid = pid;
  return sp;
}

/// Waits for a process from spawn_self (killing it after `timeout_s` seconds) and collects it.
inline RunResult finish(const Spawned& sp, double timeout_s = 60) {
  RunResult r;
  if (sp.pid < 0) return r;
  r.started = true;
  wait_with_timeout(sp.pid, timeout_s, r);
  r.out = read_file(sp.out_path);
  r.err = read_file(sp.err_path);
  return r;
}

/// spawn_self, then finish.
inline RunResult run_self(const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& env, const TempDir& dir,
                          double timeout_s = 60, bool stdout_to_closed_pipe = false) {
  return finish(spawn_self(args, env, dir, stdout_to_closed_pipe), timeout_s);
}

/// Writes `text` to an existing file (a /proc control file); false on failure.
inline bool write_text(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

/// Moves this process (single-threaded: unshare requires it) into a private mount namespace, as
/// root directly, otherwise inside a new user namespace where it is root. Mounts made then are
/// seen by this process only. False where neither is allowed (a locked-down container).
inline bool enter_private_mount_namespace() {
  if (::unshare(CLONE_NEWNS) != 0) {
    const uid_t uid = ::geteuid();
    const gid_t gid = ::getegid();
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
    write_text("/proc/self/setgroups", "deny");
    if (!write_text("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
        !write_text("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1")) {
      return false;
    }
  }
  return ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
}

/// Lines of `text` that contain `needle`.
inline int lines_with(std::string_view text, std::string_view needle) {
  int n = 0;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    if (text.substr(begin, end - begin).find(needle) != std::string_view::npos) ++n;
    begin = end + 1;
  }
  return n;
}

}  // namespace reliability
