// laptime: NVTX ranges for Nsight Systems and Nsight Compute, with range-order checking (SPEC §2).
//
//   auto& nvtx = laptime::NVTXRangeWrapper::instance();
//   nvtx.enable(/*sync_on_push=*/false, /*sync_on_pop=*/false, /*keep_track_of_range_order=*/true);
//   nvtx.range_push("forward");
//   ...
//   nvtx.range_pop("forward");   // checked against this thread's innermost open range
//   {
//     LAPTIME_RANGE("backward");  // pushed here, popped at the end of the scope
//     ...
//   }
//
// What a profiler receives (docs/nvtx.md, proven by tests/nvtx-test.cpp with an injection library):
// every range is an nvtxDomainRangePushEx / nvtxDomainRangePop in the chosen domain (NULL, i.e.
// NVTX's global domain, by default, which is what nvtx3.hpp does too) whose message is an NVTX
// registered string: each name is registered once per process, so the hot path passes a handle.
//
// Cost (SPEC §5): not enabled, one relaxed atomic load and a branch per call, and NVTX is never
// reached; enabled, a per-thread cache lookup (no lock shared between threads, no allocation, no
// string copy once a name is known) around the NVTX call. LAPTIME_DISABLE compiles it all out.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/cuda.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/thread.hpp"
#include "laptime/detail/thread_registry.hpp"
#include "laptime/error.hpp"

// LAPTIME_HAVE_NVTX: whether the NVTX3 headers are used. Detected with __has_include (the CMake
// target puts the toolkit's include directory on the path where it finds one; a plain `nvcc`
// build has it); the caller's definition wins. Without them the wrapper still tracks and checks
// ranges but sends nothing to a profiler, and enable() warns once. Cost: none either way.
#ifndef LAPTIME_HAVE_NVTX
#if LAPTIME_ENABLED && defined(__has_include)
#if __has_include(<nvtx3/nvToolsExt.h>)
#define LAPTIME_HAVE_NVTX 1
#endif
#endif
#endif
#ifndef LAPTIME_HAVE_NVTX
#define LAPTIME_HAVE_NVTX 0
#endif

#if LAPTIME_ENABLED && LAPTIME_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

// LAPTIME_NVTX_MAX_NAMES: the most distinct range names registered with NVTX per process. Names
// beyond it still work, passed as text (an allocation per push) with a one-time warning, so that a
// program generating names ("batch 17", "batch 18", ...) cannot grow memory without bound.
// Cost: about 150 bytes per name, plus a per-thread map entry for each name the thread used.
#ifndef LAPTIME_NVTX_MAX_NAMES
#define LAPTIME_NVTX_MAX_NAMES LAPTIME_MAX_NAMES
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

class NVTXRangeWrapper;
class NVTXScopedRange;

namespace detail {

/// Test-only: disables the wrapper and forgets its settings, registered names and thread names,
/// so that test cases (and benchmarks) are independent. Ranges still open on any thread are
/// forgotten, not popped. Threads using the wrapper meanwhile stay safe (every shared field is
/// atomic and nothing is freed): they just find it disabled, or their stack empty.
void nvtx_reset_for_testing();

#if LAPTIME_ENABLED

// The layout of NVTX's nvtxEventAttributes_t (version 3), kept here so that the process-wide tables
// have one layout in every copy of the code, also in one compiled without the NVTX headers.
struct NvtxEventAttributes {
  std::uint16_t version = 3;
  std::uint16_t size = 48;
  std::uint32_t category = 0;
  std::int32_t color_type = 0;  // NVTX_COLOR_UNKNOWN / NVTX_COLOR_ARGB
  std::uint32_t color = 0;
  std::int32_t payload_type = 0;
  std::int32_t reserved0 = 0;
  std::uint64_t payload = 0;
  std::int32_t message_type = 0;  // NVTX_MESSAGE_TYPE_ASCII / NVTX_MESSAGE_TYPE_REGISTERED
  const void* message = nullptr;
};
static_assert(sizeof(NvtxEventAttributes) == 48, "nvtxEventAttributes_t v3 is 48 bytes");

inline constexpr std::int32_t kNvtxColorArgb = 1;
inline constexpr std::int32_t kNvtxMessageAscii = 1;
inline constexpr std::int32_t kNvtxMessageRegistered = 3;

#if LAPTIME_HAVE_NVTX
static_assert(
    sizeof(nvtxEventAttributes_t) == sizeof(NvtxEventAttributes) &&
        offsetof(nvtxEventAttributes_t, colorType) == offsetof(NvtxEventAttributes, color_type) &&
        offsetof(nvtxEventAttributes_t, payload) == offsetof(NvtxEventAttributes, payload) &&
        offsetof(nvtxEventAttributes_t, messageType) ==
            offsetof(NvtxEventAttributes, message_type) &&
        offsetof(nvtxEventAttributes_t, message) == offsetof(NvtxEventAttributes, message),
    "NvtxEventAttributes must mirror nvtxEventAttributes_t");
static_assert(NVTX_COLOR_ARGB == kNvtxColorArgb && NVTX_MESSAGE_TYPE_ASCII == kNvtxMessageAscii &&
                  NVTX_MESSAGE_TYPE_REGISTERED == kNvtxMessageRegistered,
              "NVTX enum values changed");
#endif

// The only place that calls NVTX. Domain and string handles travel as void* (NVTX's handles are
// opaque pointers) so that nothing else depends on the NVTX headers being present.
namespace nvtx_api {
#if LAPTIME_HAVE_NVTX
inline const nvtxEventAttributes_t* native(const NvtxEventAttributes* a) noexcept {
  return reinterpret_cast<const nvtxEventAttributes_t*>(a);
}
inline void push(void* domain, const NvtxEventAttributes* a) noexcept {
  nvtxDomainRangePushEx(static_cast<nvtxDomainHandle_t>(domain), native(a));
}
inline void pop(void* domain) noexcept {
  nvtxDomainRangePop(static_cast<nvtxDomainHandle_t>(domain));
}
inline void mark(void* domain, const NvtxEventAttributes* a) noexcept {
  nvtxDomainMarkEx(static_cast<nvtxDomainHandle_t>(domain), native(a));
}
inline void* register_string(void* domain, const char* text) noexcept {
  return nvtxDomainRegisterStringA(static_cast<nvtxDomainHandle_t>(domain), text);
}
inline void* create_domain(const char* name) noexcept {
  return nvtxDomainCreateA(name);
}
// Loads the injection library (the profiler) now, not in the first push of the loop.
inline void initialize() noexcept {
  nvtxInitialize(nullptr);
}
inline void name_os_thread(long tid, const char* name) noexcept {
  nvtxNameOsThreadA(static_cast<std::uint32_t>(tid), name);
}
#else
inline void push(void*, const NvtxEventAttributes*) noexcept {}
inline void pop(void*) noexcept {}
inline void mark(void*, const NvtxEventAttributes*) noexcept {}
inline void* register_string(void*, const char*) noexcept {
  return nullptr;
}
inline void* create_domain(const char*) noexcept {
  return nullptr;
}
inline void initialize() noexcept {}
inline void name_os_thread(long, const char*) noexcept {}
#endif
}  // namespace nvtx_api

/// A range name known to NVTX: its text, its registered-string handle (inside `attributes`) and the
/// enable() generation it belongs to. Never freed and never modified once published.
struct NvtxName {
  std::string text;
  std::uint32_t generation = 0;
  NvtxEventAttributes attributes;
};

/// a == b, inlined for the short texts range names are: libc's memcmp is a call through the PLT,
/// which costs as much as the rest of a push. Overlapping word loads, no byte loop above 3 bytes.
LAPTIME_ALWAYS_INLINE bool nvtx_same_text(std::string_view a, std::string_view b) noexcept {
  const std::size_t n = a.size();
  if (n != b.size()) return false;
  const char* x = a.data();
  const char* y = b.data();
  if (n >= 8) {
    if (n > 64) return std::memcmp(x, y, n) == 0;
    std::uint64_t u = 0;
    std::uint64_t v = 0;
    std::uint64_t diff = 0;
    for (std::size_t i = 0; i + 8 < n; i += 8) {
      std::memcpy(&u, x + i, 8);
      std::memcpy(&v, y + i, 8);
      diff |= u ^ v;
    }
    std::memcpy(&u, x + n - 8, 8);
    std::memcpy(&v, y + n - 8, 8);
    return (diff | (u ^ v)) == 0;
  }
  if (n >= 4) {
    std::uint32_t u1 = 0, v1 = 0, u2 = 0, v2 = 0;
    std::memcpy(&u1, x, 4);
    std::memcpy(&v1, y, 4);
    std::memcpy(&u2, x + n - 4, 4);
    std::memcpy(&v2, y + n - 4, 4);
    return ((u1 ^ v1) | (u2 ^ v2)) == 0;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (x[i] != y[i]) return false;
  }
  return true;
}

inline std::uint64_t nvtx_fnv1a(std::string_view text) noexcept {
  std::uint64_t h = 1469598103934665603ULL;
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

/// Attributes of a text message (not registered) in the given colour.
inline NvtxEventAttributes nvtx_text_attributes(const char* text,
                                                const std::vector<std::uint32_t>& colors,
                                                std::string_view name) noexcept {
  NvtxEventAttributes a;
  if (!colors.empty()) {
    a.color_type = kNvtxColorArgb;
    a.color = colors[nvtx_fnv1a(name) % colors.size()];
  }
  a.message_type = kNvtxMessageAscii;
  a.message = text;
  return a;
}

/// The state of one enable(): its domain, colours and the process-wide table of registered names.
/// Replaced (never freed) by a later enable after a test reset, so stale caches stay readable.
struct NvtxSession {
  NvtxSession(std::uint32_t gen, void* dom, std::vector<std::uint32_t> palette)
      : generation(gen), domain(dom), colors(std::move(palette)) {}

  /// The registered name for `text`, registering it with NVTX the first time; nullptr when the
  /// table is full (LAPTIME_NVTX_MAX_NAMES). Takes the session lock: only for a name the calling
  /// thread has never used.
  const NvtxName* intern(std::string_view text) {
    std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = by_text.find(text); it != by_text.end()) return it->second;
    if (names.size() >= static_cast<std::size_t>(LAPTIME_NVTX_MAX_NAMES)) return nullptr;
    NvtxName& n = names.emplace_back();
    n.text.assign(text.data(), text.size());
    n.generation = generation;
    n.attributes = nvtx_text_attributes(n.text.c_str(), colors, n.text);
    // Always the handle, as nvtx3.hpp does, even a NULL one: Nsight Compute numbers its handles
    // from 0, and it matches --nvtx-include filters against a registered name by handle, so the
    // same name sent as text would not match. (Without a tool nothing reads the handle.)
    n.attributes.message_type = kNvtxMessageRegistered;
    n.attributes.message = nvtx_api::register_string(domain, n.text.c_str());
    by_text.emplace(std::string_view(n.text), &n);
    return &n;
  }

  const std::uint32_t generation;
  void* const domain;
  const std::vector<std::uint32_t> colors;
  std::mutex mutex;
  std::deque<NvtxName> names;  // a deque: elements never move
  std::unordered_map<std::string_view, const NvtxName*> by_text;
};

/// Per-OS-thread state, kept in the process-wide ThreadRegistry so that every copy of the header
/// sees the same stack and caches. Aligned to a cache line: records are heap blocks that may lie
/// side by side, and each thread writes its own on every push and pop.
struct alignas(64) NvtxThread {
  struct Slot {
    const char* data = nullptr;  // where the caller's text was; verified by content on a hit
    const NvtxName* name = nullptr;
  };
  static constexpr std::size_t kSlots = 64;

  void adopt(long new_tid) noexcept {
    tid = new_tid;
    generation = 0;  // no enable() has generation 0: the first use refreshes
    session = nullptr;
    domain = nullptr;
    stack.clear();
    unregistered.clear();
    label.clear();  // no lock: the record has no live owner, and readers hold the registry lock
  }

  static std::size_t slot_of(const char* data, std::size_t size) noexcept {
    const auto key =
        reinterpret_cast<std::uintptr_t>(data) ^ (static_cast<std::uintptr_t>(size) << 48);
    return static_cast<std::size_t>((static_cast<std::uint64_t>(key) * 0x9E3779B97F4A7C15ULL) >>
                                    58);
  }

  /// Hot path: the name cached for this text pointer, if its bytes still match.
  LAPTIME_ALWAYS_INLINE const NvtxName* find_cached(std::string_view text) const noexcept {
    const Slot& s = slots[slot_of(text.data(), text.size())];
    if (LAPTIME_LIKELY(s.data == text.data() && s.name != nullptr &&
                       nvtx_same_text(s.name->text, text))) {
      return s.name;
    }
    return nullptr;
  }

  /// Slow path: this thread's map by content, then the process-wide table under its lock.
  LAPTIME_NOINLINE const NvtxName* find_slow(std::string_view text) {
    const NvtxName* n = nullptr;
    if (const auto it = names.find(text); it != names.end()) {
      n = it->second;
    } else {
      if (session == nullptr) return nullptr;  // only if a test reset races with this push
      n = session->intern(text);
      if (n == nullptr) return nullptr;
      names.emplace(std::string_view(n->text), n);
    }
    slots[slot_of(text.data(), text.size())] = Slot{text.data(), n};
    return n;
  }

  /// Forgets everything of an older enable() generation.
  LAPTIME_NOINLINE void refresh(std::uint32_t gen, NvtxSession* current) {
    generation = gen;
    session = current;
    domain = current != nullptr ? current->domain : nullptr;
    for (Slot& s : slots) s = Slot{};
    names.clear();
    stack.clear();
    unregistered.clear();
    stack.reserve(64);  // no allocation per push up to this depth
  }

  /// "'step' > 'fwd' > 'bwd'", outermost first.
  std::string describe_stack() const {
    if (stack.empty()) return "(none)";
    std::string out;
    std::size_t next_unregistered = 0;
    for (const NvtxName* n : stack) {
      if (!out.empty()) out += " > ";
      out += detail::quoted(n != nullptr ? std::string_view(n->text)
                                         : std::string_view(unregistered[next_unregistered++]));
    }
    return out;
  }

  std::string_view top_text() const {
    return stack.back() != nullptr ? std::string_view(stack.back()->text)
                                   : std::string_view(unregistered.back());
  }

  long tid = 0;
  std::uint32_t generation = 0;
  NvtxSession* session = nullptr;
  void* domain = nullptr;
  Slot slots[kSlots];
  std::unordered_map<std::string_view, const NvtxName*> names;
  // Open ranges, outermost first (order tracking only). nullptr: a name beyond the table, whose
  // text is the matching element of `unregistered`.
  std::vector<const NvtxName*> stack;
  std::vector<std::string> unregistered;
  mutable std::mutex label_mutex;  // name_current_thread (owner) against enable's replay
  std::string label;
};

#endif  // LAPTIME_ENABLED

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
  template <std::size_t N>
  constexpr explicit NVTXRangeName(const char (&text)[N]) noexcept
      : text_(text, literal_length(text, N)) {}
  constexpr explicit NVTXRangeName(std::string_view text) noexcept : text_(text) {}
  NVTXRangeName(const NVTXRangeName&) = delete;
  NVTXRangeName& operator=(const NVTXRangeName&) = delete;

  /// The name as given (it must outlive this object: a string literal).
  constexpr std::string_view text() const noexcept { return text_; }

 private:
  friend class NVTXRangeWrapper;
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

/// The process-wide NVTX range wrapper (SPEC §2): NVTX pushes, pops and marks with optional CUDA
/// syncs and optional checking of the range order on each thread.
///
///   auto& nvtx = laptime::NVTXRangeWrapper::instance();
///   nvtx.enable(/*sync_on_push=*/false, /*sync_on_pop=*/false,
///   /*keep_track_of_range_order=*/true); nvtx.range_push("optimizer.step");
///   ...
///   nvtx.range_pop("optimizer.step");  // UsageError if another range is innermost
class NVTXRangeWrapper {
 public:
  /// The one wrapper of this process, shared by every shared object that includes laptime.
  ///
  ///   laptime::NVTXRangeWrapper& nvtx = laptime::NVTXRangeWrapper::instance();
  static NVTXRangeWrapper& instance();

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
  void enable(bool sync_on_push, bool sync_on_pop, bool keep_track_of_range_order,
              const NVTXOptions& options = NVTXOptions());

  /// Whether enable() was called.
  ///
  ///   if (nvtx.is_enabled()) nvtx.profiler_start();
  bool is_enabled() const noexcept;

  /// Opens a range on the calling thread (after a sync if sync_on_push). The text is registered
  /// with NVTX the first time it is seen and passed as a handle afterwards.
  ///
  ///   nvtx.range_push("data loading");
  void range_push(std::string_view name);
  /// Same, for a name fixed at compile time (no lookup at all).
  void range_push(const NVTXRangeName& name);

  /// Closes the calling thread's innermost range (after a sync if sync_on_pop). With order tracking
  /// on, popping with no open range on this thread is a usage error; nothing is popped then.
  ///
  ///   nvtx.range_pop();
  void range_pop();
  /// Same, and with order tracking on, checks *before* popping that the innermost open range is
  /// `expected_name`; if not (or if none is open), it is a usage error naming both, the thread and
  /// its open ranges, and nothing is popped. With tracking off the name is not looked at.
  ///
  ///   nvtx.range_pop("data loading");
  void range_pop(std::string_view expected_name);
  /// Same, for a name fixed at compile time.
  void range_pop(const NVTXRangeName& expected_name);

  /// An instantaneous NVTX marker with this text, in the wrapper's domain. The Stopwatch marks the
  /// end of each iteration with it.
  ///
  ///   nvtx.mark("checkpoint saved");
  void mark(std::string_view message);

  /// Names the calling OS thread for the profiler (nvtxNameOsThreadA with the kernel's thread id),
  /// so a data-loader worker shows by name in Nsight Systems. Before enable() the name is only
  /// remembered (NVTX is not reached) and sent by enable().
  ///
  ///   std::thread([] { laptime::NVTXRangeWrapper::instance().name_current_thread("loader-0"); });
  void name_current_thread(std::string_view name);

  /// cuProfilerStart / cuProfilerStop (laptime::cuda), for `nsys --capture-range=cudaProfilerApi`.
  /// Does nothing and returns false when the wrapper is not enabled or CUDA is unavailable.
  ///
  ///   nvtx.profiler_start();  train();  nvtx.profiler_stop();
  bool profiler_start() noexcept;
  bool profiler_stop() noexcept;

 private:
  NVTXRangeWrapper() = default;
  friend class NVTXScopedRange;
  friend void detail::nvtx_reset_for_testing();

#if LAPTIME_ENABLED
  // This copy of the code's pointer to the process-wide wrapper, set at its first use. Constant-
  // initialised (no guard variable), so instance() inlines to one load and a branch, where
  // process_singleton's guarded static is an out-of-line call on every push and pop.
  static std::atomic<NVTXRangeWrapper*>& found() noexcept {
    static std::atomic<NVTXRangeWrapper*> w{nullptr};
    return w;
  }
  static NVTXRangeWrapper& find_instance();
  template <class T>
  friend struct detail::SingletonHolder;

  static constexpr std::uint32_t kEnabled = 1;
  static constexpr std::uint32_t kSyncPush = 2;
  static constexpr std::uint32_t kSyncPop = 4;
  static constexpr std::uint32_t kTrack = 8;
  static constexpr std::uint32_t kFlagMask = 15;
  static constexpr int kGenerationShift = 4;

  std::uint32_t state() const noexcept {
    return state_.load(std::memory_order_relaxed);
  }
  std::uint32_t push_enabled(std::string_view text, const NVTXRangeName* handle,
                             const detail::NvtxName** pushed);
  void pop_enabled(std::string_view expected, const NVTXRangeName* handle, bool check);
  void pop_scoped(std::uint32_t pushed_state, const detail::NvtxName* pushed) noexcept;
  void mark_enabled(std::string_view message);
  detail::NvtxThread& thread_for(std::uint32_t s);
  [[gnu::cold]] void pop_error(const char* call, const detail::NvtxThread& t,
                               std::string_view expected, bool check);
  [[gnu::cold]] static void push_unregistered(void* domain, std::string_view text,
                                              const detail::NvtxSession* session);
  void* find_or_create_domain(const std::string& name);
  static std::string describe(std::uint32_t flags, const NVTXOptions& options);
  void reset_for_testing();
  void before_fork() noexcept;
  void after_fork_in_parent() noexcept;
  void after_fork_in_child() noexcept;

  // Read on every call: on their own cache line, written only by enable() and the test reset.
  // state_: kEnabled | kSync* | kTrack | generation << kGenerationShift. A new generation starts at
  // each enable() after a reset, so per-thread caches and scoped ranges notice they are stale.
  alignas(64) std::atomic<std::uint32_t> state_{0};
  std::atomic<void*> domain_{nullptr};
  std::atomic<detail::NvtxSession*> session_{nullptr};

  alignas(64) std::mutex config_mutex_;  // enable() and the test reset
  NVTXOptions options_;
  std::uint32_t generation_ = 0;
  std::unordered_map<std::string, void*> domains_;  // NVTX domains by name: created once
  std::vector<std::unique_ptr<detail::NvtxSession>> sessions_;  // never freed (see NvtxSession)
  detail::ThreadRegistry<detail::NvtxThread> threads_;
  std::atomic<bool> fork_handlers_{false};  // installed once per process
#endif
};

/// An NVTX range for the lifetime of a scope (RAII). Not copyable, not movable, not on the heap:
/// it always closes the range it opened, on the thread that opened it. With order tracking on, a
/// range left open inside the scope is reported at its end as a usage error (printed, never thrown
/// from the destructor) and nothing is popped.
///
///   {
///     laptime::NVTXScopedRange range{"layer " + std::to_string(i)};  // the text is copied once
///     run_layer(i);
///   }
class NVTXScopedRange {
 public:
  explicit NVTXScopedRange(std::string_view name);
  explicit NVTXScopedRange(const NVTXRangeName& name);
  ~NVTXScopedRange();

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
  const detail::NvtxName* name_ = nullptr;
#endif
};

// ---------------------------------------------------------------------------------------------
// Implementation

inline NVTXRangeWrapper& NVTXRangeWrapper::instance() {
#if LAPTIME_ENABLED
  NVTXRangeWrapper* w = found().load(std::memory_order_acquire);
  if (LAPTIME_LIKELY(w != nullptr)) return *w;
  return find_instance();
#else
  static NVTXRangeWrapper wrapper;  // stateless
  return wrapper;
#endif
}

#if LAPTIME_ENABLED
LAPTIME_NOINLINE inline NVTXRangeWrapper& NVTXRangeWrapper::find_instance() {
  NVTXRangeWrapper& w = detail::process_singleton<NVTXRangeWrapper>("nvtx");
  if (!w.fork_handlers_.exchange(true)) {
    // Registered after error_state()'s, so that its prepare handler runs before that one (reverse
    // order): enable() may warn while it holds config_mutex_.
    (void)detail::error_state();
    ::pthread_atfork([] { instance().before_fork(); }, [] { instance().after_fork_in_parent(); },
                     [] { instance().after_fork_in_child(); });
  }
  found().store(&w, std::memory_order_release);
  return w;
}

// fork() (a DataLoader worker) may come while another thread is inside enable() or registers a new
// name: hold those locks across fork, so that the child gets them free and the name tables whole.
// The thread registry and the threads' labels stay consistent at any time; their locks are
// re-armed in the child, where the threads that may have held them do not exist.
inline void NVTXRangeWrapper::before_fork() noexcept {
  config_mutex_.lock();
  for (const auto& session : sessions_) session->mutex.lock();
}

inline void NVTXRangeWrapper::after_fork_in_parent() noexcept {
  for (const auto& session : sessions_) session->mutex.unlock();
  config_mutex_.unlock();
}

inline void NVTXRangeWrapper::after_fork_in_child() noexcept {
  for (const auto& session : sessions_) session->mutex.unlock();
  config_mutex_.unlock();
  threads_.after_fork_in_child(detail::current_tid());
  threads_.for_each([](detail::NvtxThread& t, long, bool) { new (&t.label_mutex) std::mutex(); });
}
#endif

inline bool NVTXRangeWrapper::is_enabled() const noexcept {
#if LAPTIME_ENABLED
  return (state() & kEnabled) != 0;
#else
  return false;
#endif
}

inline void NVTXRangeWrapper::range_push(std::string_view name) {
#if LAPTIME_ENABLED
  if (LAPTIME_LIKELY((state() & kEnabled) == 0)) return;
  push_enabled(name, nullptr, nullptr);
#else
  (void)name;
#endif
}

inline void NVTXRangeWrapper::range_push(const NVTXRangeName& name) {
#if LAPTIME_ENABLED
  if (LAPTIME_LIKELY((state() & kEnabled) == 0)) return;
  push_enabled(name.text_, &name, nullptr);
#else
  (void)name;
#endif
}

inline void NVTXRangeWrapper::range_pop() {
#if LAPTIME_ENABLED
  if (LAPTIME_LIKELY((state() & kEnabled) == 0)) return;
  pop_enabled(std::string_view(), nullptr, false);
#endif
}

inline void NVTXRangeWrapper::range_pop(std::string_view expected_name) {
#if LAPTIME_ENABLED
  if (LAPTIME_LIKELY((state() & kEnabled) == 0)) return;
  pop_enabled(expected_name, nullptr, true);
#else
  (void)expected_name;
#endif
}

inline void NVTXRangeWrapper::range_pop(const NVTXRangeName& expected_name) {
#if LAPTIME_ENABLED
  if (LAPTIME_LIKELY((state() & kEnabled) == 0)) return;
  pop_enabled(expected_name.text_, &expected_name, true);
#else
  (void)expected_name;
#endif
}

inline void NVTXRangeWrapper::mark(std::string_view message) {
#if LAPTIME_ENABLED
  if (LAPTIME_LIKELY((state() & kEnabled) == 0)) return;
  mark_enabled(message);
#else
  (void)message;
#endif
}

inline bool NVTXRangeWrapper::profiler_start() noexcept {
#if LAPTIME_ENABLED
  return is_enabled() && cuda::profiler_start();
#else
  return false;
#endif
}

inline bool NVTXRangeWrapper::profiler_stop() noexcept {
#if LAPTIME_ENABLED
  return is_enabled() && cuda::profiler_stop();
#else
  return false;
#endif
}

inline void NVTXRangeWrapper::name_current_thread(std::string_view name) {
#if LAPTIME_ENABLED
  detail::NvtxThread& t = threads_.local();
  std::string copy(name);
  {
    std::lock_guard<std::mutex> lock(t.label_mutex);
    t.label = copy;
  }
  // Acquire: pairs with enable()'s release store, after which NVTX is initialised. A thread naming
  // itself while another enables may be named twice; that is harmless.
  if ((state_.load(std::memory_order_acquire) & kEnabled) != 0) {
    detail::nvtx_api::name_os_thread(t.tid, copy.c_str());
  }
#else
  (void)name;
#endif
}

#if LAPTIME_ENABLED

inline std::string NVTXRangeWrapper::describe(std::uint32_t flags, const NVTXOptions& options) {
  std::string out = "sync_on_push=";
  out += (flags & kSyncPush) != 0 ? "true" : "false";
  out += ", sync_on_pop=";
  out += (flags & kSyncPop) != 0 ? "true" : "false";
  out += ", keep_track_of_range_order=";
  out += (flags & kTrack) != 0 ? "true" : "false";
  out += ", domain=";
  out += options.domain.empty() ? std::string("(global)") : detail::quoted(options.domain);
  out += ", colors=" + std::to_string(options.colors.size());
  return out;
}

inline void* NVTXRangeWrapper::find_or_create_domain(const std::string& name) {
  if (name.empty()) {
    detail::nvtx_api::initialize();
    return nullptr;  // NVTX's global domain
  }
  // A domain lives as long as the process: recreating it at each (test) enable would only make the
  // tool see duplicates.
  if (const auto it = domains_.find(name); it != domains_.end()) return it->second;
  void* domain = detail::nvtx_api::create_domain(name.c_str());
  domains_.emplace(name, domain);
  return domain;
}

inline void NVTXRangeWrapper::enable(bool sync_on_push, bool sync_on_pop,
                                     bool keep_track_of_range_order, const NVTXOptions& options) {
  const std::uint32_t flags = kEnabled | (sync_on_push ? kSyncPush : 0u) |
                              (sync_on_pop ? kSyncPop : 0u) |
                              (keep_track_of_range_order ? kTrack : 0u);
  std::unique_lock<std::mutex> lock(config_mutex_);
  const std::uint32_t current = state();
  if ((current & kEnabled) != 0) {
    if ((current & kFlagMask) == flags && options_ == options) return;
    std::string what = "already enabled with " + describe(current, options_) +
                       "; called again with " + describe(flags, options) +
                       " (the first settings stay)";
    lock.unlock();
    detail::usage_error("NVTXRangeWrapper::enable", what);
    return;
  }
  // With syncs on, load the CUDA driver now (milliseconds), not inside the first range.
  if (sync_on_push || sync_on_pop) (void)cuda::driver_available();
#if !LAPTIME_HAVE_NVTX
  detail::warn_once("nvtx-unavailable",
                    "NVTXRangeWrapper::enable: laptime was compiled without the NVTX headers "
                    "(nvtx3/nvToolsExt.h); ranges are checked but no profiler will see them");
#endif
  void* domain = find_or_create_domain(options.domain);
  generation_ = (generation_ + 1) & (~0u >> kGenerationShift);
  if (generation_ == 0) generation_ = 1;
  auto session = std::make_unique<detail::NvtxSession>(generation_, domain, options.colors);
  session_.store(session.get(), std::memory_order_relaxed);
  sessions_.push_back(std::move(session));
  domain_.store(domain, std::memory_order_relaxed);
  options_ = options;
  // Threads named before enable() get their names now (nvtxNameOsThreadA takes any thread's id).
  threads_.for_each([](detail::NvtxThread& t, long tid, bool alive) {
    if (!alive) return;
    std::lock_guard<std::mutex> label_lock(t.label_mutex);
    if (!t.label.empty()) detail::nvtx_api::name_os_thread(tid, t.label.c_str());
  });
  // Release: a thread that sees the new state also sees the session and the domain.
  state_.store(flags | (generation_ << kGenerationShift), std::memory_order_release);
}

inline detail::NvtxThread& NVTXRangeWrapper::thread_for(std::uint32_t s) {
  detail::NvtxThread& t = threads_.local();
  const std::uint32_t gen = s >> kGenerationShift;
  if (LAPTIME_UNLIKELY(t.generation != gen)) {
    t.refresh(gen, session_.load(std::memory_order_relaxed));
  }
  return t;
}

inline std::uint32_t NVTXRangeWrapper::push_enabled(std::string_view text,
                                                    const NVTXRangeName* handle,
                                                    const detail::NvtxName** pushed) {
  // Acquire (a plain load on x86) only on the enabled path: pairs with enable()'s release store.
  const std::uint32_t s = state_.load(std::memory_order_acquire);
  if ((s & kEnabled) == 0) return 0;
  if ((s & kSyncPush) != 0) cuda::synchronize();
  detail::NvtxThread& t = thread_for(s);
  const detail::NvtxName* name = nullptr;
  if (handle != nullptr) {
    name = handle->resolved_.load(std::memory_order_acquire);
    if (LAPTIME_UNLIKELY(name == nullptr || name->generation != t.generation)) {
      name = t.find_cached(text);
      if (name == nullptr) name = t.find_slow(text);
      if (name != nullptr) handle->resolved_.store(name, std::memory_order_release);
    }
  } else {
    name = t.find_cached(text);
    if (LAPTIME_UNLIKELY(name == nullptr)) name = t.find_slow(text);
  }
  if ((s & kTrack) != 0) {
    // Grow the stack before NVTX sees the push, so that an allocation failure leaves both
    // unchanged.
    if (LAPTIME_UNLIKELY(name == nullptr)) t.unregistered.emplace_back(text);
    t.stack.push_back(name);
  }
  if (LAPTIME_LIKELY(name != nullptr)) {
    detail::nvtx_api::push(t.domain, &name->attributes);
  } else {
    push_unregistered(t.domain, text, t.session);
  }
  if (pushed != nullptr) *pushed = name;
  return s;
}

inline void NVTXRangeWrapper::push_unregistered(void* domain, std::string_view text,
                                                const detail::NvtxSession* session) {
  detail::warn_once("nvtx-max-names",
                    "NVTXRangeWrapper: more than LAPTIME_NVTX_MAX_NAMES (" +
                        std::to_string(LAPTIME_NVTX_MAX_NAMES) +
                        ") distinct range names; further names are sent as text, which costs an "
                        "allocation per push");
  const std::string copy(text);
  // Not a function-local static: a fork() while another thread initialised one would leave the
  // child waiting for it forever. An empty vector allocates nothing.
  const std::vector<std::uint32_t> no_colors;
  const detail::NvtxEventAttributes a = detail::nvtx_text_attributes(
      copy.c_str(), session != nullptr ? session->colors : no_colors, text);
  detail::nvtx_api::push(domain, &a);
}

inline void NVTXRangeWrapper::pop_enabled(std::string_view expected, const NVTXRangeName* handle,
                                          bool check) {
  const std::uint32_t s = state_.load(std::memory_order_acquire);
  if ((s & kEnabled) == 0) return;
  if ((s & kTrack) == 0) {
    if ((s & kSyncPop) != 0) cuda::synchronize();
    detail::nvtx_api::pop(domain_.load(std::memory_order_relaxed));
    return;
  }
  detail::NvtxThread& t = thread_for(s);
  // The check comes before the sync and the pop: on a mismatch nothing at all happens.
  if (LAPTIME_UNLIKELY(t.stack.empty())) {
    pop_error("NVTXRangeWrapper::range_pop", t, expected, check);
    return;
  }
  const detail::NvtxName* top = t.stack.back();
  if (check) {
    const bool same = top != nullptr ? (handle != nullptr &&
                                        handle->resolved_.load(std::memory_order_relaxed) == top) ||
                                           detail::nvtx_same_text(top->text, expected)
                                     : std::string_view(t.unregistered.back()) == expected;
    if (LAPTIME_UNLIKELY(!same)) {
      pop_error("NVTXRangeWrapper::range_pop", t, expected, check);
      return;
    }
  }
  if ((s & kSyncPop) != 0) cuda::synchronize();
  if (LAPTIME_UNLIKELY(top == nullptr)) t.unregistered.pop_back();
  t.stack.pop_back();
  detail::nvtx_api::pop(t.domain);
}

inline void NVTXRangeWrapper::pop_scoped(std::uint32_t pushed_state,
                                         const detail::NvtxName* pushed) noexcept {
  const std::uint32_t s = state_.load(std::memory_order_acquire);
  // Disabled or re-enabled (test reset) since the push: that range is not this wrapper's anymore.
  if (s != pushed_state) return;
  if ((s & kTrack) == 0) {
    if ((s & kSyncPop) != 0) cuda::synchronize();
    detail::nvtx_api::pop(domain_.load(std::memory_order_relaxed));
    return;
  }
  detail::NvtxThread& t = threads_.local();
  const bool same =
      !t.stack.empty() && t.stack.back() == pushed && (t.generation == (s >> kGenerationShift));
  if (LAPTIME_UNLIKELY(!same)) {
    // A destructor must not throw (it may run during unwinding): report and leave state unchanged.
    try {
      pop_error("NVTXScopedRange (end of scope)", t,
                pushed != nullptr ? std::string_view(pushed->text)
                                  : std::string_view("(a range beyond LAPTIME_NVTX_MAX_NAMES)"),
                true);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s (reported, not thrown: it was found in a destructor)\n", e.what());
    }
    return;
  }
  if ((s & kSyncPop) != 0) cuda::synchronize();
  if (pushed == nullptr) t.unregistered.pop_back();
  t.stack.pop_back();
  detail::nvtx_api::pop(t.domain);
}

inline void NVTXRangeWrapper::pop_error(const char* call, const detail::NvtxThread& t,
                                        std::string_view expected, bool check) {
  std::string what;
  if (t.stack.empty()) {
    what = check ? "expected to close range " + detail::quoted(expected) +
                       ", but this thread has no open range"
                 : std::string("no open range on this thread to pop (a pop without its push)");
  } else {
    what = "expected to close range " + detail::quoted(expected) +
           ", but the innermost open range is " + detail::quoted(t.top_text());
  }
  what += "; nothing was popped. Open ranges on this thread";
  {
    std::lock_guard<std::mutex> lock(t.label_mutex);
    if (!t.label.empty()) what += " (NVTX name " + detail::quoted(t.label) + ")";
  }
  what += ", outermost first: " + t.describe_stack();
  detail::usage_error(call, what);
}

inline void NVTXRangeWrapper::mark_enabled(std::string_view message) {
  const std::uint32_t s = state_.load(std::memory_order_acquire);
  if ((s & kEnabled) == 0) return;
  // Marks carry changing text ("iteration 17"): sent as text, not registered, so the name table
  // does not grow with the run. NVTX wants it NUL-terminated.
  char small[256];
  std::string large;
  const char* text = small;
  if (message.size() < sizeof small) {
    if (!message.empty()) std::memcpy(small, message.data(), message.size());
    small[message.size()] = '\0';
  } else {
    large.assign(message.data(), message.size());
    text = large.c_str();
  }
  detail::NvtxEventAttributes a;
  a.message_type = detail::kNvtxMessageAscii;
  a.message = text;
  detail::nvtx_api::mark(domain_.load(std::memory_order_relaxed), &a);
}

inline void NVTXRangeWrapper::reset_for_testing() {
  std::lock_guard<std::mutex> lock(config_mutex_);
  generation_ = (generation_ + 1) & (~0u >> kGenerationShift);
  if (generation_ == 0) generation_ = 1;
  options_ = NVTXOptions();
  session_.store(nullptr, std::memory_order_relaxed);
  domain_.store(nullptr, std::memory_order_relaxed);
  state_.store(generation_ << kGenerationShift, std::memory_order_release);
  threads_.for_each([](detail::NvtxThread& t, long, bool) {
    std::lock_guard<std::mutex> label_lock(t.label_mutex);
    t.label.clear();
  });
}

#else  // !LAPTIME_ENABLED

inline void NVTXRangeWrapper::enable(bool sync_on_push, bool sync_on_pop,
                                     bool keep_track_of_range_order, const NVTXOptions& options) {
  (void)sync_on_push;
  (void)sync_on_pop;
  (void)keep_track_of_range_order;
  (void)options;
}

#endif  // LAPTIME_ENABLED

inline NVTXScopedRange::NVTXScopedRange(std::string_view name) {
#if LAPTIME_ENABLED
  NVTXRangeWrapper& w = NVTXRangeWrapper::instance();
  if (LAPTIME_LIKELY((w.state() & NVTXRangeWrapper::kEnabled) == 0)) return;
  state_ = w.push_enabled(name, nullptr, &name_);
#else
  (void)name;
#endif
}

inline NVTXScopedRange::NVTXScopedRange(const NVTXRangeName& name) {
#if LAPTIME_ENABLED
  NVTXRangeWrapper& w = NVTXRangeWrapper::instance();
  if (LAPTIME_LIKELY((w.state() & NVTXRangeWrapper::kEnabled) == 0)) return;
  state_ = w.push_enabled(name.text(), &name, &name_);
#else
  (void)name;
#endif
}

inline NVTXScopedRange::~NVTXScopedRange() {
#if LAPTIME_ENABLED
  if (state_ != 0) NVTXRangeWrapper::instance().pop_scoped(state_, name_);
#endif
}

namespace detail {
inline void nvtx_reset_for_testing() {
#if LAPTIME_ENABLED
  NVTXRangeWrapper::instance().reset_for_testing();
#endif
}
}  // namespace detail

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
#define LAPTIME_RANGE(name)                                                                       \
  static const ::laptime::NVTXRangeName LAPTIME_CONCAT(laptime_nvtx_name_, __LINE__){"" name ""}; \
  const ::laptime::NVTXScopedRange LAPTIME_CONCAT(laptime_nvtx_range_, __LINE__) {                \
    LAPTIME_CONCAT(laptime_nvtx_name_, __LINE__)                                                  \
  }
#define LAPTIME_FUNC_RANGE()                                                                    \
  static const ::laptime::NVTXRangeName LAPTIME_CONCAT(laptime_nvtx_name_, __LINE__){__func__}; \
  const ::laptime::NVTXScopedRange LAPTIME_CONCAT(laptime_nvtx_range_, __LINE__) {              \
    LAPTIME_CONCAT(laptime_nvtx_name_, __LINE__)                                                \
  }
#else
#define LAPTIME_RANGE(name)
#define LAPTIME_FUNC_RANGE()
#endif
