// laptime internals: who is the calling thread (for error messages and reports).
#pragma once

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// The kernel's id of the calling thread (what `top -H`, /proc and Nsight show). Not cached: a
/// forked child's thread has a new id, and this is only called off the hot path.
inline long current_tid() noexcept {
  return static_cast<long>(::syscall(SYS_gettid));
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

}  // namespace detail
LAPTIME_END_NAMESPACE
