// laptime internals: the NVTX wrapper's state and its hot path (nvtx.hpp is the API), part of the
// implementation part (included by impl/nvtx_setup.hpp).
//
// One NvtxState per process (process_singleton), shared by every copy of the header. The hot
// path below is what the out-of-line push and pop (impl/nvtx_setup.hpp, LAPTIME_IMPL) compile
// to: a relaxed load of `state`, a per-thread cache lookup and the NVTX call. Everything rarer (a
// name this thread has not used yet, an error message, a CUDA sync) is reached through `ops`, a
// table of function pointers that enable() installs. A thread's first use through this copy of
// the code is not among them: it must fill this copy's own per-thread cache
// (detail/thread_registry.hpp), and the table holds the functions of the copy that enabled.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/names.hpp"
#include "laptime/detail/nvtx_core.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/thread_registry.hpp"
#include "laptime/impl/nvtx_api.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

#if LAPTIME_ENABLED

/// A range name known to NVTX: its text, its registered-string handle (inside `attributes`) and the
/// enable() generation it belongs to. Never freed and never modified once published.
struct NvtxName {
  std::string text;
  std::uint32_t generation = 0;
  NvtxEventAttributes attributes;
};

/// Names by text (detail/names.hpp's TextTable: the text's hash beside each entry). Used under the
/// session lock (the process-wide table) or by its one thread (a thread's table). Cold: only a
/// name that a thread meets for the first time reaches it.
struct NvtxNameTable {
  TextTable<const NvtxName*> by_text;

  const NvtxName* find(std::string_view text) const noexcept {
    const NvtxName* const* n = by_text.find(text);
    return n != nullptr ? *n : nullptr;
  }

  /// Adds `n` (whose text is not in the table). May throw std::bad_alloc; the table is unchanged.
  void insert(const NvtxName* n) { by_text.insert(n->text, n); }

  void clear() noexcept { by_text.clear(); }
};

/// The state of one enable(): its domain, colours and the process-wide table of registered names.
/// Replaced (never freed) by a later enable after a test reset, so stale caches stay readable.
struct NvtxSession {
  NvtxSession(std::uint32_t gen, void* dom, std::vector<std::uint32_t> palette, NvtxSession* older)
      : generation(gen), domain(dom), colors(std::move(palette)), next(older) {}

  const std::uint32_t generation;
  void* const domain;
  const std::vector<std::uint32_t> colors;
  NvtxSession* const next;  // the sessions of earlier enables (kept for stale readers)
  std::mutex mutex;         // the name table
  std::vector<NvtxName*> names;
  NvtxNameTable by_text;
};

/// A thread's open ranges, outermost first: a vector whose hot path has no growth code of its own
/// (NvtxOps::grow_stack makes room), so that a push compiles to a compare and a store.
struct NvtxStack {
  const NvtxName** data = nullptr;
  std::size_t size = 0;
  std::size_t capacity = 0;

  bool empty() const noexcept { return size == 0; }
  const NvtxName* back() const noexcept { return data[size - 1]; }
  void pop_back() noexcept { --size; }
  void clear() noexcept { size = 0; }
  const NvtxName* const* begin() const noexcept { return data; }
  const NvtxName* const* end() const noexcept { return data + size; }
};

/// Per-OS-thread state, kept in the process-wide ThreadRegistry so that every copy of the header
/// sees the same stack and caches. Aligned to a cache line: records are heap blocks that may lie
/// side by side, and each thread writes its own on every push and pop.
struct alignas(64) NvtxThread {
  void adopt(long new_tid) noexcept {
    tid = new_tid;
    generation = 0;  // no enable() has generation 0: the first use refreshes
    session = nullptr;
    domain = nullptr;
    stack.clear();
    unregistered.clear();
    label.clear();  // no lock: the record has no live owner, and readers hold the registry lock
  }
  static constexpr bool reusable() noexcept { return true; }

  /// Hot path: the name cached for this text pointer, if its bytes still match.
  LAPTIME_ALWAYS_INLINE const NvtxName* find_cached(std::string_view text) const noexcept {
    const auto* e = cache.find(text);
    return LAPTIME_LIKELY(e != nullptr) ? e->value : nullptr;
  }

  std::string_view top_text() const {
    return stack.back() != nullptr ? std::string_view(stack.back()->text)
                                   : std::string_view(unregistered.back());
  }

  long tid = 0;
  std::uint32_t generation = 0;
  NvtxSession* session = nullptr;
  void* domain = nullptr;
  NameCache<const NvtxName*> cache;  // by the caller's pointer (detail/names.hpp)
  NvtxNameTable names;               // this thread's names by content (behind the slots)
  // Open ranges, outermost first (order tracking only). nullptr: a name beyond the table, whose
  // text is the matching element of `unregistered`.
  NvtxStack stack;
  std::vector<std::string> unregistered;
  mutable std::mutex label_mutex;  // name_current_thread (owner) against enable's replay
  std::string label;
};

struct NvtxState;

/// What the hot path calls on its rare branches, installed by enable() (impl/nvtx_setup.hpp).
struct NvtxOps {
  void (*refresh)(NvtxThread& t, std::uint32_t generation, NvtxSession* session);
  const NvtxName* (*find_slow)(NvtxThread& t, std::string_view text);
  /// Makes room for one more range on t.stack. May throw std::bad_alloc (nothing changed then).
  void (*grow_stack)(NvtxThread& t);
  /// Pushes a name beyond LAPTIME_NVTX_MAX_NAMES as text (and onto the stack when tracking).
  void (*push_unregistered)(NvtxThread& t, std::string_view text, bool track);
  /// A pop that does not match: by the error policy. `how`: kPopPlain, kPopChecked, kPopScoped,
  /// kPopMeasured.
  void (*pop_error)(const NvtxThread& t, std::string_view expected, int how);
  void (*sync)();
};
inline constexpr int kPopPlain = 0;     // range_pop()
inline constexpr int kPopChecked = 1;   // range_pop(expected)
inline constexpr int kPopScoped = 2;    // the end of an NVTXScopedRange's scope
inline constexpr int kPopMeasured = 3;  // end_meas of a Stopwatch NVTX range (set_nvtx_ranges)

/// What the user's environment set for the wrapper (configure_from_env; docs/configuration.md):
/// it overrides the code's enable() arguments, whichever call comes first. `off`: LAPTIME_NVTX=0
/// or LAPTIME_PROFILE=training or evaluation, the code's enable() does nothing.
struct NvtxEnvOverrides {
  bool off = false;
  std::optional<bool> sync_on_push, sync_on_pop, track;
  std::optional<std::string> domain;
};

/// The process-wide wrapper state: NvtxCore (nvtx.hpp: the flags the inline API reads) and the
/// rest.
struct NvtxState : NvtxCore {
  alignas(64) std::mutex config_mutex;  // enable() and the test reset
  std::string options_domain;           // enable()'s NVTXOptions
  std::vector<std::uint32_t> options_colors;
  NvtxEnvOverrides env;       // under config_mutex
  bool code_enabled = false;  // under config_mutex: the code's own enable() has run
  std::uint32_t generation = 0;
  std::vector<std::string> domain_names;  // NVTX domains by name: created once per process
  std::vector<void*> domain_handles;
  NvtxSession* sessions = nullptr;  // newest first, never freed (see NvtxSession)
  ThreadRegistry<NvtxThread> threads;
};

/// The process's NvtxState: after the first call from this copy of the code, one load.
LAPTIME_ALWAYS_INLINE NvtxState& nvtx_state() {
  return static_cast<NvtxState&>(nvtx_core());
}

// ---- The hot path -----------------------------------------------------------------------------

/// The ops table: read only on the rare branches (set before the first kEnabled, never cleared).
LAPTIME_ALWAYS_INLINE const NvtxOps& nvtx_ops(NvtxState& w) noexcept {
  return *w.ops.load(std::memory_order_relaxed);
}

/// The calling thread's record, found through this copy's own per-thread cache (a miss attaches
/// out of line, through this copy's code, so that the next call hits).
LAPTIME_ALWAYS_INLINE NvtxThread& nvtx_thread(NvtxState& w, std::uint32_t s) {
  NvtxThread& t = w.threads.local();
  const std::uint32_t gen = s >> NvtxState::kGenerationShift;
  if (LAPTIME_UNLIKELY(t.generation != gen)) {
    nvtx_ops(w).refresh(t, gen, w.session.load(std::memory_order_relaxed));
  }
  return t;
}

/// Pushes `name` (nullptr: a name beyond the table, sent as `text`) on thread `t` under state `s`.
LAPTIME_ALWAYS_INLINE void nvtx_push_name(NvtxState& w, NvtxThread& t, std::uint32_t s,
                                          std::string_view text, const NvtxName* name) {
  if (LAPTIME_UNLIKELY(name == nullptr)) {
    nvtx_ops(w).push_unregistered(t, text, (s & NvtxState::kTrack) != 0);
    return;
  }
  if ((s & NvtxState::kTrack) != 0) {
    // Grow the stack before NVTX sees the push, so that an allocation failure leaves both
    // unchanged.
    if (LAPTIME_UNLIKELY(t.stack.size == t.stack.capacity)) nvtx_ops(w).grow_stack(t);
    t.stack.data[t.stack.size++] = name;
  }
  nvtx_api::push(t.domain, &name->attributes);
}

/// range_push(text), inlined where it is called: the thread's cache by the text's pointer.
LAPTIME_ALWAYS_INLINE void nvtx_push_text(NvtxState& w, std::string_view text) {
  // Acquire (a plain load on x86) only on the enabled path: pairs with enable()'s release store.
  const std::uint32_t s = w.state.load(std::memory_order_acquire);
  if ((s & NvtxState::kEnabled) == 0) return;
  if ((s & NvtxState::kSyncPush) != 0) nvtx_ops(w).sync();
  NvtxThread& t = nvtx_thread(w, s);
  const NvtxName* name = t.find_cached(text);
  if (LAPTIME_UNLIKELY(name == nullptr)) name = nvtx_ops(w).find_slow(t, text);
  nvtx_push_name(w, t, s, text, name);
}

/// Pushes `text` with the call site's cached name in `resolved` (a NVTXRangeName), for the scoped
/// ranges and range_push(NVTXRangeName). Returns the state it pushed under (0: nothing pushed);
/// `pushed` gets the name (nullptr: beyond the table) and the stack's depth after the push.
LAPTIME_ALWAYS_INLINE std::uint32_t nvtx_push(NvtxState& w, std::string_view text,
                                              std::atomic<const NvtxName*>* resolved,
                                              NvtxPushed* pushed) {
  const std::uint32_t s = w.state.load(std::memory_order_acquire);
  if ((s & NvtxState::kEnabled) == 0) return 0;
  if ((s & NvtxState::kSyncPush) != 0) nvtx_ops(w).sync();
  NvtxThread& t = nvtx_thread(w, s);
  const NvtxName* name = nullptr;
  if (resolved != nullptr) {
    name = resolved->load(std::memory_order_acquire);
    if (LAPTIME_UNLIKELY(name == nullptr || name->generation != t.generation)) {
      name = t.find_cached(text);
      if (name == nullptr) name = nvtx_ops(w).find_slow(t, text);
      if (name != nullptr) resolved->store(name, std::memory_order_release);
    }
  } else {
    name = t.find_cached(text);
    if (LAPTIME_UNLIKELY(name == nullptr)) name = nvtx_ops(w).find_slow(t, text);
  }
  nvtx_push_name(w, t, s, text, name);
  if (pushed != nullptr) *pushed = {name, t.stack.size};
  return s;
}

/// Pops the innermost range; with order tracking and `check`, only if it is `expected` (or the
/// call site's name in `resolved`).
LAPTIME_ALWAYS_INLINE void nvtx_pop(NvtxState& w, std::string_view expected,
                                    const std::atomic<const NvtxName*>* resolved, bool check) {
  const std::uint32_t s = w.state.load(std::memory_order_acquire);
  if ((s & NvtxState::kEnabled) == 0) return;
  if ((s & NvtxState::kTrack) == 0) {
    if ((s & NvtxState::kSyncPop) != 0) nvtx_ops(w).sync();
    nvtx_api::pop(w.domain.load(std::memory_order_relaxed));
    return;
  }
  NvtxThread& t = nvtx_thread(w, s);
  // The check comes before the sync and the pop: on a mismatch nothing at all happens.
  if (LAPTIME_UNLIKELY(t.stack.empty())) {
    nvtx_ops(w).pop_error(t, expected, check ? kPopChecked : kPopPlain);
    return;
  }
  const NvtxName* top = t.stack.back();
  if (check) {
    const bool same = top != nullptr ? (resolved != nullptr &&
                                        resolved->load(std::memory_order_relaxed) == top) ||
                                           same_text(top->text, expected)
                                     : std::string_view(t.unregistered.back()) == expected;
    if (LAPTIME_UNLIKELY(!same)) {
      nvtx_ops(w).pop_error(t, expected, kPopChecked);
      return;
    }
  }
  if ((s & NvtxState::kSyncPop) != 0) nvtx_ops(w).sync();
  if (LAPTIME_UNLIKELY(top == nullptr)) t.unregistered.pop_back();
  t.stack.pop_back();
  nvtx_api::pop(t.domain);
}

/// The end of a scoped range pushed under `pushed_state` with `pushed`: its own range only, the
/// innermost at the depth it was pushed to. Never throws.
LAPTIME_ALWAYS_INLINE void nvtx_pop_scoped(NvtxState& w, std::uint32_t pushed_state,
                                           const NvtxPushed& pushed) noexcept {
  const std::uint32_t s = w.state.load(std::memory_order_acquire);
  // Disabled or re-enabled (test reset) since the push: that range is not this wrapper's anymore.
  if (s != pushed_state) return;
  if ((s & NvtxState::kTrack) == 0) {
    if ((s & NvtxState::kSyncPop) != 0) nvtx_ops(w).sync();
    nvtx_api::pop(w.domain.load(std::memory_order_relaxed));
    return;
  }
  // The record is the thread's, whichever copy of the code pushed: a thread that has not used
  // this copy yet attaches here (out of line), it does not count as having no open range.
  NvtxThread& t = w.threads.local();
  const bool same = t.stack.size == pushed.depth && !t.stack.empty() &&
                    t.stack.back() == pushed.name &&
                    t.generation == (s >> NvtxState::kGenerationShift);
  if (LAPTIME_UNLIKELY(!same)) {
    // pop_error reports a destructor's error without throwing (it may run during unwinding).
    nvtx_ops(w).pop_error(t,
                          pushed.name != nullptr
                              ? std::string_view(pushed.name->text)
                              : std::string_view("(a range beyond LAPTIME_NVTX_MAX_NAMES)"),
                          kPopScoped);
    return;
  }
  if ((s & NvtxState::kSyncPop) != 0) nvtx_ops(w).sync();
  if (pushed.name == nullptr) t.unregistered.pop_back();
  t.stack.pop_back();
  nvtx_api::pop(t.domain);
}

#endif  // LAPTIME_ENABLED

}  // namespace detail
LAPTIME_END_NAMESPACE
