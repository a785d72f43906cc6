// The processes of workers-test's cases: a one-byte pipe between two of them, a forked child
// and its exit status.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "test_support.hpp"

namespace workers_test {

/// A one-byte signal between the two processes.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { REQUIRE(::pipe(fd) == 0); }
  ~Pipe() {
    ::close(fd[0]);
    ::close(fd[1]);
  }
  void send() const {
    const char c = 1;
    (void)!::write(fd[1], &c, 1);
  }
  bool wait() const {
    char c = 0;
    return ::read(fd[0], &c, 1) == 1;
  }
};

/// Forks a child that runs `body` and exits with its result (0: ok).
template <class F>
pid_t fork_child(F&& body) {
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  REQUIRE(pid > 0);
  return pid;
}

inline int wait_exit(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace workers_test
