// laptime internals: who is the calling thread (for error messages and reports).
#pragma once

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// The kernel's id of the calling thread (what `top -H`, /proc and Nsight show). Not cached: a
/// forked child's thread has a new id, and this is only called off the hot path.
inline long current_tid() noexcept {
  return ::syscall(SYS_gettid);
}

/// "thread 1234 'loader-0'" (the name only where the thread has one).
inline std::string thread_label() {
  std::string label = "thread " + std::to_string(current_tid());
  char name[32] = {};
  if (::pthread_getname_np(::pthread_self(), name, sizeof name) == 0 && name[0] != '\0') {
    label += " '";
    label += name;
    label += "'";
  }
  return label;
}

/// Starts laptime's background thread `fn(arg)`: detached, named `name` (15 characters at most),
/// with every signal blocked (it takes none meant for the program's threads). false when it
/// could not be started.
inline bool start_background_thread(void* (*fn)(void*), void* arg, const char* name) noexcept {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_t tid{};
  bool ok = pthread_attr_init(&attr) == 0;
  ok = ok && pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0;
  ok = ok && pthread_create(&tid, &attr, fn, arg) == 0;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (ok) pthread_setname_np(tid, name);
  return ok;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
