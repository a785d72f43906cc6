// laptime internals: per-thread records that every copy of the header agrees on.
//
// A plain `thread_local` is per copy of the code: a measurement started through one shared object
// (a Python extension) and ended through another (a C++ extension) would see two different slots.
// So the per-thread state lives in the process-wide object, one Record per OS thread, and each
// copy keeps only a thread_local *pointer* to it, found once per thread under the registry lock.
//
// Records are never freed (a report may read them at any time). When a thread exits, its record
// is retired, and a later thread may adopt it: memory stays bounded by the largest number of
// threads alive at once, not by how many were ever created (loaders that respawn workers).
//
// A thread's exit runs its thread_local destructors one after another, and laptime's own (which
// marks the record) may run before a user's that still measures. So the record is only marked
// "exiting" there and stays the thread's; it is handed to another thread once the kernel says the
// exiting thread is gone (tgkill(pid, tid, 0) fails with ESRCH). A measurement made from any
// thread_local destructor is counted like any other.
#pragma once

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <mutex>
#include <new>

#include "laptime/config.hpp"
#include "laptime/detail/thread.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// Record must be default-constructible and provide `void adopt(long tid) noexcept`, called under
/// the registry lock when a thread takes the record (fresh or retired): it clears what belonged to
/// the previous thread (running measurements, range stacks) and keeps what is accumulated; and
/// `bool reusable() const noexcept`, whether a retired record may be taken at all (a Stopwatch
/// record is not while an interval its thread started may still be ended by another thread).
template <class Record>
class ThreadRegistry {
 public:
  ThreadRegistry() = default;
  ThreadRegistry(const ThreadRegistry&) = delete;
  ThreadRegistry& operator=(const ThreadRegistry&) = delete;

  /// The calling thread's record. Fast path: two thread_local loads and a compare, no guard.
  LAPTIME_ALWAYS_INLINE Record& local() {
    return local([this]() -> Record& { return attach(); });
  }

  /// local(), with the first call of a thread going to `attach_elsewhere()` (a function of the
  /// implementation part that calls local()), so that a hot path does not compile attach().
  template <class Attach>
  LAPTIME_ALWAYS_INLINE Record& local(Attach&& attach_elsewhere) {
    const Fast& f = fast();
    if (LAPTIME_LIKELY(f.owner == this)) return f.node->record;
    return attach_elsewhere();
  }

  /// The calling thread's record if it has attached through this copy of the code, else nullptr:
  /// the fast path of local() alone, for hot paths that keep attach() out of line elsewhere.
  LAPTIME_ALWAYS_INLINE Record* find_local() noexcept {
    const Fast& f = fast();
    return LAPTIME_LIKELY(f.owner == this) ? &f.node->record : nullptr;
  }

  /// Visits every record (threads alive or exited) under the registry lock: f(Record&, long tid,
  /// bool alive). Records keep their accumulated data after their thread exits.
  template <class Fn>
  void for_each(Fn&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Node* n = head_.load(std::memory_order_relaxed); n != nullptr; n = n->next) {
      // An exiting thread (its thread_local destructors run, or it is gone) counts as not alive.
      // Its open intervals still count as running in reports (another thread may end them:
      // docs/stopwatch.md), until its record is taken over.
      f(n->record, n->tid, n->alive && !n->exiting);
    }
  }

  /// Visits every record without the registry lock, for a hot path that reads only a record's
  /// atomics (another thread's end_meas): f(Record&). Records are never freed, and one is linked
  /// in whole (its `next` set before it is published), so the walk is safe while threads attach
  /// and never waits behind a report; it misses a record published after it began.
  template <class Fn>
  void for_each_record(Fn&& f) {
    for (Node* n = head_.load(std::memory_order_acquire); n != nullptr; n = n->next) f(n->record);
  }

  /// Runs f() under the registry lock: for state that Record::adopt writes.
  template <class Fn>
  void under_lock(Fn&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    f();
  }

  /// Call in a forked child (pthread_atfork), on the forking thread, with its new tid: the lock
  /// may have been held by a thread that does not exist in the child. Only the forking thread is
  /// alive there; it keeps its record (found through this copy's cache), under its new tid, so
  /// that a thread started in the child never adopts it while it is in use.
  void after_fork_in_child(long surviving_tid) noexcept {
    new (&mutex_) std::mutex();
    const Fast& f = fast();
    Node* const mine = f.owner == this ? f.node : nullptr;
    for (Node* n = head_.load(std::memory_order_relaxed); n != nullptr; n = n->next) {
      n->alive = (n == mine);
      n->exiting = false;
    }
    if (mine != nullptr) {
      mine->tid = surviving_tid;
      cache().tid = surviving_tid;
    }
  }

  /// Retires the calling thread's record now (also done automatically at thread exit).
  void retire_current() noexcept {
    Cache& c = cache();
    if (c.owner != this) return;
    retire(c.node, c.tid);
    c.owner = nullptr;
    c.node = nullptr;
    fast() = Fast{};
  }

 private:
  struct Node {
    Record record;
    long tid = 0;
    pthread_t self{};  // tells this thread from a later one that got the same tid
    bool alive = false;
    bool exiting = false;  // its thread runs its thread_local destructors (see the top)
    Node* next = nullptr;
  };

  // One per thread and per copy of the code; its destructor runs at thread exit and marks the
  // record exiting. The hot path's Fast copy stays valid: destructors that run after this one
  // keep measuring on the same record.
  struct Cache {
    ThreadRegistry* owner = nullptr;
    Node* node = nullptr;
    long tid = 0;
    ~Cache() {
      if (owner != nullptr) owner->mark_exiting(node, tid);
    }
  };

  // The hot path's copy of Cache::owner and Cache::node. Trivially destructible and constant-
  // initialised, so reading it needs no guard variable (a thread_local with a destructor is
  // checked for first use on every access); Cache is touched only in attach().
  struct Fast {
    ThreadRegistry* owner = nullptr;
    Node* node = nullptr;
  };

  // the destructor hands the record back at thread exit
  LAPTIME_CLANG_ALLOW("-Wexit-time-destructors")
  static Cache& cache() {
    thread_local Cache c;
    return c;
  }
  LAPTIME_CLANG_ALLOW_END

  static Fast& fast() noexcept {
    thread_local Fast f;
    return f;
  }

  LAPTIME_NOINLINE Record& attach() {
    Cache& c = cache();
    if (c.owner != nullptr) c.owner->retire(c.node, c.tid);  // cached for another registry (tests)
    const long tid = current_tid();
    const pthread_t me = ::pthread_self();
    std::lock_guard<std::mutex> lock(mutex_);
    Node* found = nullptr;
    Node* spare = nullptr;
    Node* held = nullptr;  // the oldest record of an exited thread that is not reusable
    int held_count = 0;
    for (Node* n = head_.load(std::memory_order_relaxed); n != nullptr; n = n->next) {
      if (n->alive && n->tid == tid && (!n->exiting || ::pthread_equal(n->self, me))) {
        found = n;  // this thread already attached through another copy of the code
        break;
      }
      if (spare == nullptr &&
          (!n->alive || (n->exiting && (n->tid == tid || thread_gone(n->tid))))) {
        if (n->record.reusable()) {
          spare = n;
        } else {
          held = n;  // the list is newest first
          ++held_count;
        }
      }
    }
    if (found == nullptr) {
      // At most kMaxHeld records wait for another thread to end what their thread left running:
      // beyond that the oldest is taken (what ran there is dropped), so that memory and this
      // search stay bounded when threads exit with intervals nobody ends.
      found = spare != nullptr ? spare : held_count >= kMaxHeld ? held : nullptr;
      if (found == nullptr) {
        found = new Node();
        found->next = head_.load(std::memory_order_relaxed);
        head_.store(found, std::memory_order_release);  // for_each_record's walk
      }
      found->tid = tid;
      found->self = me;
      found->alive = true;
      found->exiting = false;
      found->record.adopt(tid);
    }
    c.owner = this;
    c.node = found;
    c.tid = tid;
    fast() = Fast{this, found};
    return found->record;
  }

  // Another copy of the code may have retired the node already, and a new thread adopted it:
  // only the thread that owns it may retire it.
  void retire(Node* node, long tid) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (node->tid == tid) {
      node->alive = false;
      node->exiting = false;
    }
  }

  void mark_exiting(Node* node, long tid) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (node->tid == tid && node->alive) node->exiting = true;
  }

  // Whether thread `tid` of this process has finished exiting (its id may since be reused).
  static bool thread_gone(long tid) noexcept {
    const int saved = errno;
    const bool gone =
        ::syscall(SYS_tgkill, static_cast<long>(::getpid()), tid, 0) != 0 && errno == ESRCH;
    errno = saved;
    return gone;
  }

  static constexpr int kMaxHeld = 16;
  std::mutex mutex_;
  std::atomic<Node*> head_{nullptr};  // newest first; a node's `next` never changes
};

}  // namespace detail
LAPTIME_END_NAMESPACE
