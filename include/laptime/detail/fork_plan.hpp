// laptime internals: fork(), one pthread_atfork registration for the whole library. Every copy
// of the code joins one process-wide plan (fork_participate), so that the locks of the Stopwatch,
// the NVTX wrapper and the warning table are taken before a fork and released after it in both
// processes, in one order.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <atomic>

#include "laptime/config.hpp"
#include "laptime/detail/process_singleton.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

// ---- fork(): one pthread_atfork registration for the whole library ----------------------------
//
// fork() (a DataLoader worker) may come while another thread holds one of laptime's locks; the
// child would inherit it held by a thread that does not exist there. So every lock that a thread
// may hold for more than a few instructions is taken before fork and released after it, in both
// processes. ONE handler does it for the library, registered once per process (the first copy of
// the code registers it; every copy's objects join it through fork_participate). The lock order,
// here and nowhere else — prepare takes them from the top, parent and child release from the
// bottom; code that holds one of these locks may take only those below it:
//
//   kForkStopwatch  StopwatchState: config_mutex, names_mutex, gpu_mutex, one_time_mutex
//                   (enable() warns and reads NVTX state while holding config_mutex)
//   kForkNvtx       NVTX: the wrapper's config mutex, then each session's name-table mutex
//                   (enable() warns while holding the config mutex)
//   kForkErrors     the warning table's lock (warn_once, first_time): taken last, since every
//                   holder above may warn
//
// Thread registries and per-thread locks (a record's label, a record's mutex) are not held
// across fork: each participant re-arms them in the child, where the threads that may have held
// them do not exist.
enum ForkRank : int { kForkStopwatch = 10, kForkNvtx = 20, kForkErrors = 90 };

struct ForkPlan {
  struct Participant {
    int rank = 0;
    const void* object = nullptr;  // the state whose locks it takes
    void (*prepare)() = nullptr;
    void (*parent)() = nullptr;
    void (*child)() = nullptr;
  };
  // Four states per layout of the code (Stopwatch, NVTX, NVTX counters, warnings): room for four.
  static constexpr int kMax = 16;
  std::atomic<long> lock{0};  // held from prepare to parent/child, and to add a participant
  std::atomic<bool> registered{false};
  std::atomic<int> count{0};       // published after its entry is written
  Participant participants[kMax];  // in the order they joined; never changed once published
  int order[kMax] = {};            // by rank, computed under the lock in prepare
};

inline ForkPlan& fork_plan() {
  return process_singleton<ForkPlan>("fork");
}

inline void fork_plan_lock(ForkPlan& f) noexcept {
  long expected = 0;
  while (!f.lock.compare_exchange_weak(expected, 1, std::memory_order_acquire)) {
    expected = 0;
    ::sched_yield();
  }
}

inline void fork_prepare() noexcept {
  ForkPlan& f = fork_plan();
  fork_plan_lock(f);
  const int n = f.count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {  // ranks ascending (a handful of entries: an insertion sort)
    int at = i;
    for (; at > 0 && f.participants[f.order[at - 1]].rank > f.participants[i].rank; --at) {
      f.order[at] = f.order[at - 1];
    }
    f.order[at] = i;
  }
  for (int i = 0; i < n; ++i) f.participants[f.order[i]].prepare();
}

inline void fork_parent() noexcept {
  ForkPlan& f = fork_plan();
  for (int i = f.count.load(std::memory_order_relaxed) - 1; i >= 0; --i) {
    f.participants[f.order[i]].parent();
  }
  f.lock.store(0, std::memory_order_release);
}

inline void fork_child() noexcept {
  ForkPlan& f = fork_plan();
  for (int i = f.count.load(std::memory_order_relaxed) - 1; i >= 0; --i) {
    f.participants[f.order[i]].child();
  }
  f.lock.store(0, std::memory_order_release);
}

/// Joins the fork plan above with the handlers of `object` (a process-wide state) at `rank`, once
/// per process and object: every copy of the code that shares the state joins once, and a copy
/// that keeps a state of its own (another layout: process_singleton.hpp's warn_if_split) joins
/// for it too. An object already in the plan returns at once, without the plan's lock. Cold: call
/// where the object's locks first matter, and while holding none of laptime's locks (a fork in
/// progress holds the plan's lock until it has every participant's, and the code is pinned, which
/// takes the loader's lock). False where the plan could not be made (no memory): call again later.
LAPTIME_NOINLINE inline bool fork_participate(ForkRank rank, const void* object, void (*prepare)(),
                                              void (*parent)(), void (*child)()) noexcept {
  ForkPlan* plan = nullptr;
  try {
    plan = &fork_plan();
  } catch (...) {  // std::bad_alloc
    return false;
  }
  ForkPlan& f = *plan;
  auto present = [&f, object] {
    const int n = f.count.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
      if (f.participants[i].object == object) return true;
    }
    return false;
  };
  if (present()) return true;
  // The plan will call these handlers' code, and pthread_atfork ties the registration to the
  // object of the code that calls it: a dlclose of either must not unmap them (a dlclose'd
  // registrar takes the process's fork handling with it).
  keep_loaded(reinterpret_cast<const void*>(prepare));  // the three are one object's code
  keep_caller_loaded();
  fork_plan_lock(f);
  const int n = f.count.load(std::memory_order_relaxed);
  if (!present() && n < ForkPlan::kMax) {
    f.participants[n] = ForkPlan::Participant{rank, object, prepare, parent, child};
    f.count.store(n + 1, std::memory_order_release);
  }
  f.lock.store(0, std::memory_order_release);
  if (!f.registered.exchange(true)) ::pthread_atfork(fork_prepare, fork_parent, fork_child);
  return true;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
