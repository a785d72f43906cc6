// laptime: NVTX ranges for Nsight Systems and Nsight Compute, with range-order checking.
//
//   auto& nvtx = laptime::NVTXRangeWrapper::instance();
//   nvtx.enable(/*sync_on_push=*/false, /*sync_on_pop=*/false, /*keep_track_of_range_order=*/true);
//   nvtx.range_push("forward");
//   ...
//   nvtx.range_pop("forward");  // checked against this thread's innermost open range
//   {
//     LAPTIME_RANGE("backward");  // pushed here, popped at the end of the scope
//     ...
//   }
//
// As docs/nvtx.md says: enable(sync_on_push, sync_on_pop, keep_track_of_range_order) as the seed,
// plus an NVTX domain (default: NVTX's global domain, so existing nsys/ncu filters keep working)
// and colours. range_push(name): optional sync, then an NVTX push; repeated names use NVTX
// registered strings, so the hot path passes a handle. range_pop() / range_pop(expected): optional
// sync, then a pop; with order tracking the expected name is checked *before* anything is popped,
// and a mismatch or an empty stack is a usage error naming the expected range, the actual top, the
// thread and its stack, with nothing changed. Each OS thread has its own stack. Scoped ranges,
// marks, thread names and profiler capture are below.
//
// What a profiler receives (docs/nvtx.md, proven by tests/nvtx-test.cpp with an injection library):
// every range is an nvtxDomainRangePushEx / nvtxDomainRangePop in the chosen domain (NULL, i.e.
// NVTX's global domain, by default, which is what nvtx3.hpp does too) whose message is an NVTX
// registered string: each name is registered once per process, so the hot path passes a handle.
//
// Cost (docs/performance.md): not enabled, one relaxed atomic load and a branch per call, and NVTX
// is never reached; enabled, one call into the implementation part: a per-thread cache lookup (no
// lock shared between threads, no allocation, no string copy once a name is known) around the NVTX
// call. LAPTIME_DISABLE compiles it all out. Compiling it costs less than nvtx3.hpp
// (bench/compile/run.sh, row "NVTX wrapper alone"): this header includes only <atomic>, <string>,
// <string_view> and <vector> (not even the NVTX headers), and declares the rest, which is defined
// once per program (LAPTIME_IMPL, weak) in the implementation part: src/laptime.cpp (the CMake
// target laptime::laptime) or <laptime/laptime.hpp>. A program of several files that includes only
// this header needs one of the two, as with <laptime/stopwatch.hpp> (tests/nvtx-test.cpp is such a
// file, linked with laptime::laptime).
//
// Where things live: impl/nvtx_api.hpp (the NVTX C calls), impl/nvtx_state.hpp (the
// process-wide state, the per-thread caches and the hot path), impl/nvtx_setup.hpp (the
// out-of-line functions declared here, enable, the name tables, messages, fork).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/error_policy.hpp"  // UsageError: what a usage error throws
#if LAPTIME_ENABLED
#include <atomic>

#include "laptime/detail/nvtx_core.hpp"  // NvtxCore, the out-of-line declarations
#endif

LAPTIME_BEGIN_NAMESPACE

/// Optional settings of NVTXRangeWrapper::enable.
///
///   laptime::NVTXOptions options;
///   options.domain = "trainer";                 // default "": NVTX's global domain
///   options.colors = {0xff76b900, 0xff1f77b4};  // ARGB; a name always gets the same colour
///   laptime::NVTXRangeWrapper::instance().enable(false, false, true, options);
struct NVTXOptions {
  /// The NVTX domain of every range and mark. Empty: the global domain, which existing filters
  /// (`nsys --capture-range=nvtx -p "step@*"`, `ncu --nvtx-include "step/"`) match as they are;
  /// a named domain must be spelled out in them ("step@trainer", "trainer@step/").
  std::string domain;
  /// ARGB palette. A range's colour is picked from it by a hash of its name. Empty: no colour is
  /// sent and the tool picks one.
  std::vector<std::uint32_t> colors;

  friend bool operator==(const NVTXOptions& a, const NVTXOptions& b) {
    return a.domain == b.domain && a.colors == b.colors;
  }
  friend bool operator!=(const NVTXOptions& a, const NVTXOptions& b) { return !(a == b); }
};

namespace detail {
/// Test-only: disables the wrapper and forgets its settings, registered names and thread names,
/// so that test cases (and benchmarks) are independent. Ranges still open on any thread are
/// forgotten, not popped. Threads using the wrapper meanwhile stay safe (every shared field is
/// atomic and nothing is freed): they just find it disabled, or their stack empty.
#if LAPTIME_ENABLED
void nvtx_reset_for_testing();  // the implementation part (impl/nvtx_setup.hpp)
#else
inline void nvtx_reset_for_testing() {}
#endif
}  // namespace detail

/// A range name fixed at compile time, resolved to its NVTX registered string once per call site
/// (like nvtx3's registered_string): pushing it costs no lookup at all. Used by LAPTIME_RANGE; use
/// it directly for hot ranges pushed and popped in different functions:
///
///   static const laptime::NVTXRangeName kStep{"train step"};
///   nvtx.range_push(kStep);
///   ...
///   nvtx.range_pop(kStep);
class NVTXRangeName {
 public:
  /// From a string literal (or __func__): constant-initialised, so a `static` one costs no guard.
  template <std::size_t Size>
  constexpr explicit NVTXRangeName(const char (&text)[Size]) noexcept
      : text_(text, literal_length(text, Size)) {}
  constexpr explicit NVTXRangeName(std::string_view text) noexcept : text_(text) {}
  NVTXRangeName(const NVTXRangeName&) = delete;
  NVTXRangeName& operator=(const NVTXRangeName&) = delete;

  /// The name as given (it must outlive this object: a string literal).
  constexpr std::string_view text() const noexcept { return text_; }

 private:
  friend class NVTXRangeWrapper;
  friend class NVTXScopedRange;
  // Up to the first NUL: an array may be a buffer longer than its text. (A loop rather than
  // char_traits::length, which GCC does not fold here, and a guard variable would follow.)
  static constexpr std::size_t literal_length(const char* text, std::size_t n) noexcept {
    std::size_t i = 0;
    while (i + 1 < n && text[i] != '\0') ++i;
    return i;
  }
  std::string_view text_;
#if LAPTIME_ENABLED
  // Shared by the threads using this call site; read-mostly, so it costs no contention.
  mutable std::atomic<const detail::NvtxName*> resolved_{nullptr};
#endif
};

/// The process-wide NVTX range wrapper (docs/nvtx.md): NVTX pushes, pops and marks with optional
/// CUDA syncs and optional checking of the range order on each thread.
///
///   auto& nvtx = laptime::NVTXRangeWrapper::instance();
///   nvtx.enable(/*sync_on_push=*/false, /*sync_on_pop=*/false,
///   /*keep_track_of_range_order=*/true); nvtx.range_push("optimizer.step");
///   ...
///   nvtx.range_pop("optimizer.step");  // UsageError if another range is innermost
class NVTXRangeWrapper {
 public:
  /// The wrapper. Stateless: its state is process-wide (detail::nvtx_core), shared by every
  /// shared object that includes laptime.
  ///
  ///   laptime::NVTXRangeWrapper& nvtx = laptime::NVTXRangeWrapper::instance();
  static NVTXRangeWrapper& instance() noexcept {
    static NVTXRangeWrapper facade;
    return facade;
  }

  NVTXRangeWrapper(const NVTXRangeWrapper&) = delete;
  NVTXRangeWrapper& operator=(const NVTXRangeWrapper&) = delete;

  /// Turns the wrapper on. `sync_on_push` / `sync_on_pop`: synchronise the calling thread's CUDA
  /// context (laptime::cuda::synchronize) right before each push / pop, so a range's length
  /// includes the GPU work queued inside it (this stalls the pipeline: a deliberate, documented
  /// choice). `keep_track_of_range_order`: keep a stack per thread and check
  /// range_pop(expected_name). A second call with the same arguments does nothing; with different
  /// ones it is a usage error. Threads named before this call are named to NVTX now.
  ///
  ///   nvtx.enable(false, false, /*keep_track_of_range_order=*/true, {"trainer", {0xff76b900}});
  ///
  void enable(bool sync_on_push, bool sync_on_pop, bool keep_track_of_range_order,
              const NVTXOptions& options = NVTXOptions()) {
#if LAPTIME_ENABLED
    detail::nvtx_enable(sync_on_push, sync_on_pop, keep_track_of_range_order, options.domain,
                        options.colors);
#else
    (void)sync_on_push, (void)sync_on_pop, (void)keep_track_of_range_order, (void)options;
#endif
  }

  /// Whether enable() was called.
  ///
  ///   if (nvtx.is_enabled()) nvtx.profiler_start();
  bool is_enabled() const noexcept {
#if LAPTIME_ENABLED
    return detail::nvtx_enabled();
#else
    return false;
#endif
  }

  /// Opens a range on the calling thread (after a sync if sync_on_push). The text is registered
  /// with NVTX the first time it is seen and passed as a handle afterwards.
  ///
  ///   nvtx.range_push("data loading");
  void range_push(std::string_view name) {
#if LAPTIME_ENABLED
    if (LAPTIME_LIKELY(!detail::nvtx_busy())) return;
    detail::nvtx_push_text(name);
#else
    (void)name;
#endif
  }
  /// Same, for a name fixed at compile time (no lookup at all).
  void range_push(const NVTXRangeName& name) {
#if LAPTIME_ENABLED
    if (LAPTIME_LIKELY(!detail::nvtx_busy())) return;
    (void)detail::nvtx_push(name.text_, &name.resolved_, nullptr);
#else
    (void)name;
#endif
  }

  /// Closes the calling thread's innermost range (after a sync if sync_on_pop). With order tracking
  /// on, popping with no open range on this thread is a usage error; nothing is popped then.
  ///
  ///   nvtx.range_pop();
  void range_pop() {
#if LAPTIME_ENABLED
    if (LAPTIME_LIKELY(!detail::nvtx_busy())) return;
    detail::nvtx_pop(std::string_view(), nullptr, false);
#endif
  }
  /// Same, and with order tracking on, checks *before* popping that the innermost open range is
  /// `expected_name`; if not (or if none is open), it is a usage error naming both, the thread and
  /// its open ranges, and nothing is popped. With tracking off the name is not looked at.
  ///
  ///   nvtx.range_pop("data loading");
  void range_pop(std::string_view expected_name) {
#if LAPTIME_ENABLED
    if (LAPTIME_LIKELY(!detail::nvtx_busy())) return;
    detail::nvtx_pop(expected_name, nullptr, true);
#else
    (void)expected_name;
#endif
  }
  /// Same, for a name fixed at compile time.
  void range_pop(const NVTXRangeName& expected_name) {
#if LAPTIME_ENABLED
    if (LAPTIME_LIKELY(!detail::nvtx_busy())) return;
    detail::nvtx_pop(expected_name.text_, &expected_name.resolved_, true);
#else
    (void)expected_name;
#endif
  }

  /// An instantaneous NVTX marker with this text, in the wrapper's domain. The Stopwatch marks the
  /// end of each iteration with it.
  ///
  ///   nvtx.mark("checkpoint saved");
  void mark(std::string_view message) {
#if LAPTIME_ENABLED
    if (LAPTIME_LIKELY(!is_enabled())) return;
    detail::nvtx_mark(message);
#else
    (void)message;
#endif
  }

  /// Names the calling OS thread for the profiler (nvtxNameOsThreadA with the kernel's thread id),
  /// so a data-loader worker shows by name in Nsight Systems. Before enable() the name is only
  /// remembered (NVTX is not reached) and sent by enable().
  ///
  ///   std::thread([] { laptime::NVTXRangeWrapper::instance().name_current_thread("loader-0"); });
  void name_current_thread(std::string_view name) {
#if LAPTIME_ENABLED
    detail::nvtx_name_current_thread(name);
#else
    (void)name;
#endif
  }

  /// cuProfilerStart / cuProfilerStop (laptime::cuda), for `nsys --capture-range=cudaProfilerApi`.
  /// Does nothing and returns false when the wrapper is not enabled or CUDA is unavailable.
  ///
  ///   nvtx.profiler_start();  train();  nvtx.profiler_stop();
  bool profiler_start() noexcept {
#if LAPTIME_ENABLED
    return is_enabled() && detail::nvtx_profiler_call(true);
#else
    return false;
#endif
  }
  bool profiler_stop() noexcept {
#if LAPTIME_ENABLED
    return is_enabled() && detail::nvtx_profiler_call(false);
#else
    return false;
#endif
  }

 private:
  constexpr NVTXRangeWrapper() noexcept = default;
};

/// An NVTX range for the lifetime of a scope (RAII). Not copyable, not movable, not on the heap:
/// it always closes the range it opened, on the thread that opened it. With order tracking on, a
/// range left open inside the scope is reported at its end as a usage error (printed, never thrown
/// from the destructor; the abort policy still aborts) and nothing is popped.
///
///   {
///     laptime::NVTXScopedRange range{"layer " + std::to_string(i)};  // the text is copied once
///     run_layer(i);
///   }
class NVTXScopedRange {
 public:
  explicit NVTXScopedRange(std::string_view name) {
#if LAPTIME_ENABLED
    if (LAPTIME_LIKELY(!detail::nvtx_busy())) return;
    state_ = detail::nvtx_push(name, nullptr, &pushed_);
#else
    (void)name;
#endif
  }
  explicit NVTXScopedRange(const NVTXRangeName& name) {
#if LAPTIME_ENABLED
    if (LAPTIME_LIKELY(!detail::nvtx_busy())) return;
    state_ = detail::nvtx_push(name.text_, &name.resolved_, &pushed_);
#else
    (void)name;
#endif
  }
  ~NVTXScopedRange() {
#if LAPTIME_ENABLED
    if (state_ != 0) detail::nvtx_pop_scoped(state_, pushed_);
#endif
  }

  NVTXScopedRange(const NVTXScopedRange&) = delete;
  NVTXScopedRange& operator=(const NVTXScopedRange&) = delete;
  NVTXScopedRange(NVTXScopedRange&&) = delete;
  NVTXScopedRange& operator=(NVTXScopedRange&&) = delete;
  static void* operator new(std::size_t) = delete;
  static void* operator new[](std::size_t) = delete;
  static void operator delete(void*) = delete;
  static void operator delete[](void*) = delete;

 private:
#if LAPTIME_ENABLED
  std::uint32_t state_ = 0;  // the wrapper's state at the push; 0: nothing was pushed
  detail::NvtxPushed pushed_;
#endif
};

LAPTIME_END_NAMESPACE

/// LAPTIME_RANGE("name"): an NVTX range from here to the end of the enclosing scope. The name must
/// be a string literal; it is resolved to its registered string once per call site.
///
///   void train_step() {
///     LAPTIME_RANGE("train step");
///     ...
///   }
///
/// LAPTIME_FUNC_RANGE(): the same, named after the enclosing function (__func__).
#if LAPTIME_ENABLED
// Each use declares variables of its own (__COUNTER__, taken once per use), so that two on one
// line, or in one expansion of a user's macro, do not collide.
#define LAPTIME_RANGE(name) LAPTIME_RANGE_NUMBERED("" name "", __COUNTER__)
#define LAPTIME_FUNC_RANGE() LAPTIME_RANGE_NUMBERED(__func__, __COUNTER__)
#define LAPTIME_RANGE_NUMBERED(text, n)                                              \
  static const ::laptime::NVTXRangeName LAPTIME_CONCAT(laptime_nvtx_name_, n){text}; \
  const ::laptime::NVTXScopedRange LAPTIME_CONCAT(laptime_nvtx_range_, n) {          \
    LAPTIME_CONCAT(laptime_nvtx_name_, n)                                            \
  }
#else
// One __COUNTER__ value each, as compiled in (LAPTIME_MEAS in stopwatch.hpp says why); a
// declaration, as compiled in, so that it stands wherever that one does.
#define LAPTIME_RANGE(name) static_assert(__COUNTER__ >= 0, "LAPTIME_RANGE compiled out")
#define LAPTIME_FUNC_RANGE() static_assert(__COUNTER__ >= 0, "LAPTIME_FUNC_RANGE compiled out")
#endif
