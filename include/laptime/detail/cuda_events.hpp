// laptime internals: GPU event timing's machinery, the pool of CUDA event pairs behind
// laptime::cuda::GpuEventTimer (cuda.hpp is the API and says what it promises).
//
// Events come from a pool per CUDA context, are created ahead or in batches, are recycled once
// resolved and never destroyed per interval: an event-timed interval's hot path (start/stop) is a
// free-list pop under the pool's mutex and one cuEventRecord each, with no allocation
// (docs/performance.md, the GPU goals; the free lists reserve their capacity when a pool is made or
// grown).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/cuda_driver.hpp"
#include "laptime/detail/cuda_event_stats.hpp"
#include "laptime/detail/cuda_sync.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// The event pool and its bookkeeping; GpuEventTimer forwards to it.
class GpuEventPool {
 public:
  static constexpr std::uint32_t kInvalid = 0xffffffffu;

  using Stats = GpuEventStats;

  /// A timer on the given driver table (nullptr: unavailable). Use instance(); this is for tests
  /// and for drivers loaded some other way.
  explicit GpuEventPool(const CudaDriverApi* api) noexcept : api_(api) {}
  /// On the process's driver (unavailable where it is).
  GpuEventPool() noexcept;
  GpuEventPool(const GpuEventPool&) = delete;
  GpuEventPool& operator=(const GpuEventPool&) = delete;

  /// Whether start() can succeed at all (a driver and a device).
  bool available() const noexcept { return api_ != nullptr; }

  /// Records a start event on `stream` (nullptr: the legacy default stream of the current
  /// context; otherwise a CUstream / cudaStream_t / PyTorch stream handle). Returns a token for
  /// stop(), or kInvalid if unavailable, if no context is current, or if `stream` is capturing a
  /// CUDA graph (timing events would become graph nodes). Costs one cuEventRecord; no sync.
  std::uint32_t start(void* stream) noexcept;

  /// Records the end event of `token`'s pair on `stream`; `tag` is the caller's, handed back to
  /// on_done when the pair is resolved. kInvalid is ignored.
  void stop(std::uint32_t token, void* stream, std::uint64_t tag) noexcept;

  /// Returns `token`'s pair to the pool without timing it (an interval abandoned after start()).
  void cancel(std::uint32_t token) noexcept;

  // the thread's buffer is freed at its exit: wanted
  LAPTIME_CLANG_ALLOW("-Wexit-time-destructors")
  /// Non-blocking: calls on_done(tag, gpu_ns) for each stopped pair whose events completed, in
  /// no particular order, outside the timer's lock. Returns how many stopped pairs still pend.
  template <class Fn>
  std::size_t poll(Fn&& on_done) {
    thread_local std::vector<Done> ready;  // keeps its capacity: no allocation per iteration
    ready.clear();
    const std::size_t left = collect(ready, /*top_up=*/true);
    for (const Done& d : ready) on_done(d.tag, d.gpu_ns);
    return left;
  }
  LAPTIME_CLANG_ALLOW_END

  /// Blocking: waits for every stopped pair (cuEventSynchronize), then reports them like poll().
  /// For report time, never inside the loop. Pairs started but not stopped are left alone.
  template <class Fn>
  void drain(Fn&& on_done) {
    wait_pending();
    std::vector<Done> ready;
    (void)collect(ready, /*top_up=*/false);
    for (const Done& d : ready) on_done(d.tag, d.gpu_ns);
  }

  /// Calls f(tag) for every stopped pair not resolved yet, under the timer's lock (f must not
  /// call the timer). Lets a report say which names still wait for the GPU.
  template <class Fn>
  void for_each_pending(Fn&& f) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::uint32_t token : pending_) f(pairs_[token].tag);
  }

  /// Creates events ahead of time so that at least `pairs` pairs are free in the context current
  /// on the calling thread (call at setup, e.g. after enabling GPU timing). Returns the free count.
  std::size_t reserve(std::size_t pairs) noexcept;

  /// Forgets stopped pairs that were not resolved yet (their results are dropped) and returns
  /// them to the pool. Pairs in flight stay valid.
  void reset() noexcept;

  Stats stats() const;

 private:
  struct Done {
    std::uint64_t tag;
    std::uint64_t gpu_ns;
  };
  enum class State : std::uint8_t { Free, Started, Stopping, Stopped, Dead };
  struct Pair {
    cu::Event start = nullptr;
    cu::Event end = nullptr;
    cu::Stream stream = nullptr;  // where the end event was recorded
    std::uint64_t tag = 0;
    std::uint32_t pool = 0;
    State state = State::Free;
  };
  struct Pool {
    cu::Context ctx = nullptr;
    std::vector<std::uint32_t> free;  // indices into pairs_
  };

  // Pairs are created in batches: one cuEventCreate costs about a microsecond, so a batch keeps
  // the pool's growth off most starts; kSpare free pairs are kept by poll() (off the interval).
  static constexpr std::size_t kBatch = 32;
  static constexpr std::size_t kSpare = 16;

  std::uint32_t pool_for(cu::Context ctx);
  std::size_t grow(std::uint32_t pool, std::size_t pairs) noexcept;
  bool with_context(cu::Context ctx, bool& pushed) noexcept;
  void release_context(bool pushed) noexcept;
  std::size_t collect(std::vector<Done>& ready, bool top_up);
  void wait_pending();
  void warn(const char* key, const std::string& what) const noexcept;

  const CudaDriverApi* api_ = nullptr;
  mutable std::mutex mutex_;
  std::vector<Pair> pairs_;
  std::vector<Pool> pools_;
  std::vector<std::uint32_t> pending_;
  Stats stats_;
};

inline GpuEventPool::GpuEventPool() noexcept {
  const CudaDriver& d = cuda_driver();
  api_ = d.available ? &d.api : nullptr;
}

inline void GpuEventPool::warn(const char* key, const std::string& what) const noexcept {
  cuda_warn_once(key, what);
}

inline std::uint32_t GpuEventPool::pool_for(cu::Context ctx) {
  for (std::uint32_t i = 0; i < pools_.size(); ++i) {
    if (pools_[i].ctx == ctx) return i;
  }
  pools_.push_back(Pool{ctx, {}});
  pools_.back().free.reserve(kBatch * 4);
  stats_.contexts = pools_.size();
  return static_cast<std::uint32_t>(pools_.size() - 1);
}

// Caller holds mutex_ and has made the pool's context current.
inline std::size_t GpuEventPool::grow(std::uint32_t pool, std::size_t pairs) noexcept {
  std::size_t made = 0;
  try {
    for (; made < pairs; ++made) {
      Pair p;
      p.pool = pool;
      // CU_EVENT_DEFAULT: the events must time (never CU_EVENT_DISABLE_TIMING), and a blocking
      // sync flag would only matter to drain().
      if (api_->event_create(&p.start, cu::kEventDefault) != cu::kSuccess) break;
      if (api_->event_create(&p.end, cu::kEventDefault) != cu::kSuccess) {
        (void)api_->event_destroy(p.start);
        ++stats_.events_created;
        break;
      }
      stats_.events_created += 2;
      pairs_.push_back(p);
      pools_[pool].free.push_back(static_cast<std::uint32_t>(pairs_.size() - 1));
    }
    // Every pair can be pending once at most: with this, stop() never allocates.
    pending_.reserve(pairs_.size());
  } catch (...) {  // out of host memory: keep what was made
  }
  return made;
}

// Makes `ctx` current on this thread if it is not (pushed = true then); false if that failed.
inline bool GpuEventPool::with_context(cu::Context ctx, bool& pushed) noexcept {
  pushed = false;
  cu::Context cur = nullptr;
  if (api_->ctx_get_current(&cur) == cu::kSuccess && cur == ctx) return true;
  if (api_->ctx_push_current(ctx) != cu::kSuccess) return false;
  pushed = true;
  return true;
}

inline void GpuEventPool::release_context(bool pushed) noexcept {
  if (pushed) {
    cu::Context popped = nullptr;
    (void)api_->ctx_pop_current(&popped);
  }
}

inline std::uint32_t GpuEventPool::start(void* stream) noexcept {
  if (LAPTIME_UNLIKELY(api_ == nullptr)) {
    warn("cuda-timing-unavailable", "GPU event timing requested but CUDA is " +
                                        cuda_driver().status + "; host timing goes on");
    return kInvalid;
  }
  cu::Context ctx = nullptr;
  if (LAPTIME_UNLIKELY(api_->ctx_get_current(&ctx) != cu::kSuccess || ctx == nullptr)) {
    warn("cuda-timing-no-context",
         "GPU event timing requested on a thread with no current CUDA context (make the device "
         "current first, e.g. cudaSetDevice / torch.cuda.set_device); those intervals get no GPU "
         "time");
    return kInvalid;
  }
  const auto cu_stream = static_cast<cu::Stream>(stream);
  cu::CaptureStatus capture = cu::kCaptureNone;
  if (LAPTIME_UNLIKELY(api_->stream_is_capturing(cu_stream, &capture) != cu::kSuccess ||
                       capture != cu::kCaptureNone)) {
    warn("cuda-timing-capture",
         "GPU event timing skipped: the stream is capturing a CUDA graph (or cannot be queried); "
         "those intervals get no GPU time");
    return kInvalid;
  }
  std::uint32_t token = kInvalid;
  cu::Event ev = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::uint32_t pool = 0;
    try {
      pool = pool_for(ctx);
    } catch (...) {
      return kInvalid;
    }
    if (LAPTIME_UNLIKELY(pools_[pool].free.empty())) {
      ++stats_.grown_in_start;
      if (grow(pool, kBatch) == 0) {
        warn("cuda-timing-create", "cuEventCreate failed; those intervals get no GPU time");
        return kInvalid;
      }
    }
    token = pools_[pool].free.back();
    pools_[pool].free.pop_back();
    pairs_[token].state = State::Started;
    ev = pairs_[token].start;
    ++stats_.in_flight;
  }
  // Outside the lock: the pair is ours until stop(), and a record costs about a microsecond.
  const cu::Result r = api_->event_record(ev, cu_stream);
  if (LAPTIME_UNLIKELY(r != cu::kSuccess)) {
    warn("cuda-timing-record", "cuEventRecord failed: " + cuda_error_text(*api_, r) +
                                   "; those intervals get no GPU time");
    cancel(token);
    return kInvalid;
  }
  return token;
}

inline void GpuEventPool::stop(std::uint32_t token, void* stream, std::uint64_t tag) noexcept {
  if (token == kInvalid || api_ == nullptr) return;
  cu::Event ev = nullptr;
  cu::Context ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (LAPTIME_UNLIKELY(token >= pairs_.size() || pairs_[token].state != State::Started)) {
      warn("cuda-timing-bad-token", "GpuEventPool::stop: the token is not a started pair");
      return;
    }
    Pair& p = pairs_[token];
    p.state = State::Stopping;
    ev = p.end;
    ctx = pools_[p.pool].ctx;
  }
  // The end event belongs to the start's context: record there even if this thread has another
  // one current (with a null stream, that context's legacy default stream).
  bool pushed = false;
  cu::Result r = cu::kErrorInvalidContext;
  if (with_context(ctx, pushed)) {
    r = api_->event_record(ev, static_cast<cu::Stream>(stream));
    release_context(pushed);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  Pair& p = pairs_[token];
  --stats_.in_flight;
  if (LAPTIME_UNLIKELY(r != cu::kSuccess)) {
    warn("cuda-timing-record", "cuEventRecord failed: " + cuda_error_text(*api_, r) +
                                   "; those intervals get no GPU time");
    p.state = State::Free;
    pools_[p.pool].free.push_back(token);  // capacity reserved at creation: no throw
    ++stats_.dropped;
    return;
  }
  p.tag = tag;
  p.stream = static_cast<cu::Stream>(stream);
  p.state = State::Stopped;
  try {
    pending_.push_back(token);
  } catch (...) {
    p.state = State::Free;
    pools_[p.pool].free.push_back(token);
    ++stats_.dropped;
  }
}

inline void GpuEventPool::cancel(std::uint32_t token) noexcept {
  if (token == kInvalid || api_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (token >= pairs_.size() || pairs_[token].state != State::Started) return;
  pairs_[token].state = State::Free;
  pools_[pairs_[token].pool].free.push_back(token);
  --stats_.in_flight;
}

inline std::size_t GpuEventPool::collect(std::vector<Done>& ready, bool top_up) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A stream completes its work in order: once an end event on a stream is not ready, the pairs
  // stopped after it on that stream are not either, so they are not queried. This keeps poll()
  // at a few driver calls per stream however far the GPU lags behind (pending_ is in stop order;
  // where two threads raced to stop on one stream, a ready pair may wait one more poll).
  struct Blocked {
    std::uint32_t pool;  // the null stream is per context, so (pool, stream) names a stream
    cu::Stream stream;
  };
  Blocked blocked[16];
  std::size_t n_blocked = 0;
  auto is_blocked = [&](const Pair& p) {
    for (std::size_t i = 0; i < n_blocked; ++i) {
      if (blocked[i].pool == p.pool && blocked[i].stream == p.stream) return true;
    }
    return false;
  };
  std::size_t kept = 0;
  for (const std::uint32_t token : pending_) {
    Pair& p = pairs_[token];
    if (is_blocked(p)) {
      pending_[kept++] = token;
      continue;
    }
    cu::Result r = api_->event_query(p.end);
    float ms = 0.0f;
    // Start and end may sit on different streams: the end completing says nothing about the
    // start, so cuEventElapsedTime's own NOT_READY is honoured too.
    if (r == cu::kSuccess) r = api_->event_elapsed_time(&ms, p.start, p.end);
    if (r == cu::kErrorNotReady) {
      pending_[kept++] = token;
      if (n_blocked < sizeof blocked / sizeof blocked[0]) blocked[n_blocked++] = {p.pool, p.stream};
      continue;
    }
    if (r == cu::kSuccess) {
      const long long ns = std::llround(static_cast<double>(ms) * 1e6);
      ready.push_back(Done{p.tag, ns > 0 ? static_cast<std::uint64_t>(ns) : 0});
      ++stats_.resolved;
      p.state = State::Free;
      pools_[p.pool].free.push_back(token);
    } else {
      ++stats_.dropped;
      warn("cuda-timing-resolve", "a GPU interval could not be resolved: " +
                                      cuda_error_text(*api_, r) + " (its result is dropped)");
      // A destroyed context takes its events with it: never hand those out again.
      const bool dead = r == cu::kErrorContextIsDestroyed || r == cu::kErrorInvalidContext ||
                        r == cu::kErrorInvalidHandle || r == cu::kErrorDeinitialized;
      p.state = dead ? State::Dead : State::Free;
      if (!dead) pools_[p.pool].free.push_back(token);
    }
  }
  pending_.resize(kept);
  if (top_up) {
    // Growing here, at the end of an iteration, keeps cuEventCreate out of the next intervals.
    for (std::uint32_t i = 0; i < pools_.size(); ++i) {
      if (pools_[i].free.size() >= kSpare) continue;
      bool pushed = false;
      if (!with_context(pools_[i].ctx, pushed)) continue;
      (void)grow(i, kBatch);
      release_context(pushed);
    }
  }
  stats_.pending = pending_.size();
  return pending_.size();
}

inline void GpuEventPool::wait_pending() {
  std::vector<cu::Event> ends;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ends.reserve(2 * pending_.size());
    for (const std::uint32_t token : pending_) {
      ends.push_back(pairs_[token].start);  // may sit on another stream than the end
      ends.push_back(pairs_[token].end);
    }
  }
  // Outside the lock so that other threads keep timing. Events are never destroyed, so waiting
  // on one that a concurrent poll() already recycled only waits for its newer record.
  for (cu::Event ev : ends) (void)api_->event_synchronize(ev);
}

inline std::size_t GpuEventPool::reserve(std::size_t pairs) noexcept {
  if (api_ == nullptr) return 0;
  cu::Context ctx = nullptr;
  if (api_->ctx_get_current(&ctx) != cu::kSuccess || ctx == nullptr) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  std::uint32_t pool = 0;
  try {
    pool = pool_for(ctx);
  } catch (...) {
    return 0;
  }
  const std::size_t have = pools_[pool].free.size();
  if (have < pairs) (void)grow(pool, pairs - have);
  return pools_[pool].free.size();
}

inline void GpuEventPool::reset() noexcept {
  if (api_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::uint32_t token : pending_) {
    pairs_[token].state = State::Free;
    pools_[pairs_[token].pool].free.push_back(token);
  }
  pending_.clear();
  stats_.pending = 0;
}

inline GpuEventStats GpuEventPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Stats s = stats_;
  s.pending = pending_.size();
  return s;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
