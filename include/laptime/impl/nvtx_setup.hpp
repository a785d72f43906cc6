// laptime internals: the NVTX wrapper's implementation part — the cold paths behind what nvtx.hpp
// declares (whose out-of-line definitions are in impl/nvtx.hpp): enable(), the test reset, thread
// names, the name tables, error messages and the fork plan (nvtx.hpp is the API,
// impl/nvtx_state.hpp the state and the hot path; the Stopwatch's ranges through the wrapper
// are in impl/nvtx_measured.hpp).
//
// Compiled once per program: by src/laptime.cpp (the CMake target laptime::laptime) or in each
// file that includes <laptime/laptime.hpp> (weak definitions, linked once). A file that only
// includes <laptime/nvtx.hpp> compiles none of it, which keeps its compile cost near nvtx3's
// (docs/build.md, bench/compile/run.sh row "NVTX wrapper alone").
#pragma once

#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/cuda_sync.hpp"
#include "laptime/detail/fork_plan.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/detail/thread.hpp"
#include "laptime/impl/nvtx_state.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

#if LAPTIME_ENABLED

/// Attributes of a text message (not registered) in the given colour.
template <int = 0>
NvtxEventAttributes nvtx_text_attributes(const char* text, const std::vector<std::uint32_t>& colors,
                                         std::string_view name) noexcept {
  NvtxEventAttributes a;
  if (!colors.empty()) {
    a.color_type = kNvtxColorArgb;
    a.color = colors[name_hash(name) % colors.size()];
  }
  a.message_type = kNvtxMessageAscii;
  a.message = text;
  return a;
}

/// The registered name for `text`, registering it with NVTX the first time; nullptr when the
/// table is full (LAPTIME_NVTX_MAX_NAMES). Takes the session lock: only for a name the calling
/// thread has never used.
template <int = 0>
const NvtxName* nvtx_intern(NvtxSession& session, std::string_view text) {
  std::lock_guard<std::mutex> lock(session.mutex);
  if (const NvtxName* found = session.by_text.find(text)) return found;
  if (session.names.size() >= static_cast<std::size_t>(LAPTIME_NVTX_MAX_NAMES)) return nullptr;
  session.names.reserve(session.names.size() + 1);  // what can throw, before anything changes
  auto* n = new NvtxName();
  n->text.assign(text.data(), text.size());
  n->generation = session.generation;
  n->attributes = nvtx_text_attributes(n->text.c_str(), session.colors, n->text);
  // Always the handle, as nvtx3.hpp does, even a NULL one: Nsight Compute numbers its handles
  // from 0, and it matches --nvtx-include filters against a registered name by handle, so the
  // same name sent as text would not match. (Without a tool nothing reads the handle.)
  n->attributes.message_type = kNvtxMessageRegistered;
  n->attributes.message = nvtx_api::register_string(session.domain, n->text.c_str());
  try {
    session.by_text.insert(n);
  } catch (...) {
    delete n;
    throw;
  }
  session.names.push_back(n);
  return n;
}

// ---- What NvtxOps points at (installed by nvtx_enable) ------------------------------------------

template <int = 0>
void nvtx_grow_stack(NvtxThread& t) {
  const std::size_t capacity = t.stack.capacity == 0 ? 64 : 2 * t.stack.capacity;
  auto* data = new const NvtxName*[capacity];
  if (t.stack.size != 0) std::memcpy(data, t.stack.data, t.stack.size * sizeof *data);
  delete[] t.stack.data;
  t.stack.data = data;
  t.stack.capacity = capacity;
}

/// Forgets everything of an older enable() generation.
template <int = 0>
void nvtx_refresh(NvtxThread& t, std::uint32_t gen, NvtxSession* current) {
  t.generation = gen;
  t.session = current;
  t.domain = current != nullptr ? current->domain : nullptr;
  t.cache.clear();
  t.names.clear();
  t.stack.clear();
  t.unregistered.clear();
  if (t.stack.capacity == 0) nvtx_grow_stack(t);  // no allocation per push up to 64 deep
}

/// This thread's table by content, then the process-wide table under its lock.
template <int = 0>
const NvtxName* nvtx_find_slow(NvtxThread& t, std::string_view text) {
  const NvtxName* n = t.names.find(text);
  if (n == nullptr) {
    if (t.session == nullptr) return nullptr;  // only if a test reset races with this push
    n = nvtx_intern(*t.session, text);
    if (n == nullptr) return nullptr;
    t.names.insert(n);
  }
  t.cache.insert(text, n->text.data(), n);
  return n;
}

template <int = 0>
void nvtx_push_unregistered(NvtxThread& t, std::string_view text, bool track) {
  if (track) {
    // Both grow before NVTX sees the push, so that an allocation failure leaves all unchanged.
    if (t.stack.size == t.stack.capacity) nvtx_grow_stack(t);
    t.unregistered.emplace_back(text);
    t.stack.data[t.stack.size++] = nullptr;
  }
  warn_once("nvtx-max-names", "range_push(" + detail::quoted(text) +
                                  "): more than LAPTIME_NVTX_MAX_NAMES (" +
                                  std::to_string(LAPTIME_NVTX_MAX_NAMES) +
                                  ") distinct range names; further names are sent as text, "
                                  "which costs an allocation per push");
  const std::string copy(text);
  // Not a function-local static: a fork() while another thread initialised one would leave the
  // child waiting for it forever. An empty vector allocates nothing.
  const std::vector<std::uint32_t> no_colors;
  const NvtxEventAttributes a = nvtx_text_attributes(
      copy.c_str(), t.session != nullptr ? t.session->colors : no_colors, text);
  nvtx_api::push(t.domain, &a);
}

/// "'step' > 'fwd' > 'bwd'", outermost first.
template <int = 0>
std::string nvtx_describe_stack(const NvtxThread& t) {
  if (t.stack.empty()) return "(none)";
  std::string out;
  std::size_t next_unregistered = 0;
  for (const NvtxName* n : t.stack) {
    if (!out.empty()) out += " > ";
    out += detail::quoted(n != nullptr ? std::string_view(n->text)
                                       : std::string_view(t.unregistered[next_unregistered++]));
  }
  return out;
}

template <int = 0>
void nvtx_pop_error_message(const NvtxThread& t, std::string_view expected, int how) {
  std::string call;
  if (how == kPopPlain) {
    call = "range_pop()";
  } else if (how == kPopChecked) {
    call = "range_pop(" + detail::quoted(expected) + ")";
  } else if (how == kPopMeasured) {
    call = "end_meas(" + detail::quoted(expected) + ") (Stopwatch NVTX ranges)";
  } else {
    call = "NVTXScopedRange(" + detail::quoted(expected) + ") at the end of its scope";
  }
  std::string what;
  if (t.stack.empty()) {
    what = how != kPopPlain ? "expected to close range " + detail::quoted(expected) +
                                  ", but this thread has no open range"
                            : std::string(
                                  "no open range on this thread to pop (a pop without "
                                  "its push)");
  } else {
    what = "expected to close range " + detail::quoted(expected) +
           ", but the innermost open range is " + detail::quoted(t.top_text());
  }
  what += "; nothing was popped. Open ranges on this thread";
  {
    std::lock_guard<std::mutex> lock(t.label_mutex);
    if (!t.label.empty()) what += " (NVTX name " + detail::quoted(t.label) + ")";
  }
  what += ", outermost first: " + nvtx_describe_stack(t);
  usage_error(call, what);
}

template <int = 0>
void nvtx_pop_error(const NvtxThread& t, std::string_view expected, int how) {
  if (how != kPopScoped) return nvtx_pop_error_message(t, expected, how);
  // A destructor must not throw (it may run during unwinding): report and leave state unchanged.
  try {
    nvtx_pop_error_message(t, expected, how);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s (reported, not thrown: it was found in a destructor)\n", e.what());
  }
}

template <int = 0>
void nvtx_sync() {
  (void)cuda_synchronize();
}

template <int = 0>
inline constexpr NvtxOps kNvtxOps = {nvtx_refresh,           nvtx_find_slow, nvtx_grow_stack,
                                     nvtx_push_unregistered, nvtx_pop_error, nvtx_sync};

// ---- fork ---------------------------------------------------------------------------------------

// fork() (a DataLoader worker) may come while another thread is inside enable() or registers a new
// name: those locks are held across fork (kForkNvtx in the library's one fork plan, see
// detail/process_singleton.hpp), so that the child gets them free and the name tables whole. The
// thread registry and the threads' labels are re-armed in the child.
template <int = 0>
void nvtx_before_fork() noexcept {
  NvtxState& w = nvtx_state();
  w.config_mutex.lock();
  for (NvtxSession* s = w.sessions; s != nullptr; s = s->next) s->mutex.lock();
}

template <int = 0>
void nvtx_after_fork_in_parent() noexcept {
  NvtxState& w = nvtx_state();
  for (NvtxSession* s = w.sessions; s != nullptr; s = s->next) s->mutex.unlock();
  w.config_mutex.unlock();
}

template <int = 0>
void nvtx_after_fork_in_child() noexcept {
  NvtxState& w = nvtx_state();
  for (NvtxSession* s = w.sessions; s != nullptr; s = s->next) s->mutex.unlock();
  w.config_mutex.unlock();
  w.threads.after_fork_in_child(current_tid());
  w.threads.for_each([](NvtxThread& t, long, bool) { new (&t.label_mutex) std::mutex(); });
}

/// Joins the fork plan: from the first call that takes one of the wrapper's locks.
template <int = 0>
void nvtx_join_fork_plan() noexcept {
  // The warning table first: enable() warns while holding the config mutex, and the table's first
  // use joins the plan too, which must not happen with one of the plan's locks held.
  (void)error_state();
  fork_participate(kForkNvtx, &nvtx_state(), nvtx_before_fork, nvtx_after_fork_in_parent,
                   nvtx_after_fork_in_child);
}

// ---- enable, reset, names, marks ----------------------------------------------------------------

template <int = 0>
std::string nvtx_describe(std::uint32_t flags, const std::string& domain,
                          const std::vector<std::uint32_t>& colors) {
  std::string out = "sync_on_push=";
  out += (flags & NvtxState::kSyncPush) != 0 ? "true" : "false";
  out += ", sync_on_pop=";
  out += (flags & NvtxState::kSyncPop) != 0 ? "true" : "false";
  out += ", keep_track_of_range_order=";
  out += (flags & NvtxState::kTrack) != 0 ? "true" : "false";
  out += ", domain=";
  out += domain.empty() ? std::string("(global)") : detail::quoted(domain);
  out += ", colors=" + std::to_string(colors.size());
  return out;
}

template <int = 0>
void* nvtx_find_or_create_domain(NvtxState& w, const std::string& name) {
  if (name.empty()) {
    nvtx_api::initialize();
    return nullptr;  // NVTX's global domain
  }
  // A domain lives as long as the process: recreating it at each (test) enable would only make the
  // tool see duplicates.
  for (std::size_t i = 0; i < w.domain_names.size(); ++i) {
    if (w.domain_names[i] == name) return w.domain_handles[i];
  }
  void* domain = nvtx_api::create_domain(name.c_str());
  w.domain_names.push_back(name);
  w.domain_handles.push_back(domain);
  return domain;
}

/// Enables the wrapper with these settings, or moves an enabled one to them (a new session: the
/// threads refresh at their next push). Under config_mutex.
template <int = 0>
void nvtx_apply(NvtxState& w, std::uint32_t flags, const std::string& domain_name,
                const std::vector<std::uint32_t>& colors) {
  const bool sync_on_push = (flags & NvtxState::kSyncPush) != 0;
  const bool sync_on_pop = (flags & NvtxState::kSyncPop) != 0;
  // With syncs on, load the CUDA driver now (milliseconds), not inside the first range.
  if (sync_on_push || sync_on_pop) (void)cuda_driver();
  if (!nvtx_api::available()) {
    warn_once("nvtx-unavailable",
              "NVTXRangeWrapper.enable(): laptime was compiled without the NVTX headers "
              "(nvtx3/nvToolsExt.h); ranges are checked but no profiler will see them");
  }
  void* domain = nvtx_find_or_create_domain(w, domain_name);  // NVTX initialised from here on
  const std::uint32_t no_tool = nvtx_api::push_pop_reach_no_tool() ? NvtxState::kNoTool : 0u;
  w.generation = (w.generation + 1) & (~0u >> NvtxState::kGenerationShift);
  if (w.generation == 0) w.generation = 1;
  auto* session = new NvtxSession(w.generation, domain, colors, w.sessions);
  w.sessions = session;
  w.session.store(session, std::memory_order_relaxed);
  w.domain.store(domain, std::memory_order_relaxed);
  w.ops.store(&kNvtxOps<>, std::memory_order_relaxed);
  w.options_domain = domain_name;
  w.options_colors = colors;
  // Threads named before enable() get their names now (nvtxNameOsThreadA takes any thread's id).
  w.threads.for_each([](NvtxThread& t, long tid, bool alive) {
    if (!alive) return;
    std::lock_guard<std::mutex> label_lock(t.label_mutex);
    if (!t.label.empty()) nvtx_api::name_os_thread(tid, t.label.c_str());
  });
  // Release: a thread that sees the new state also sees the session, the domain and the ops.
  w.state.store(flags | no_tool | (w.generation << NvtxState::kGenerationShift),
                std::memory_order_release);
}

/// The state flags of settings asked for, the user's variables over them where set.
inline std::uint32_t nvtx_flags(const NvtxEnvOverrides& env, bool sync_on_push, bool sync_on_pop,
                                bool track) {
  return NvtxState::kEnabled |
         (env.sync_on_push.value_or(sync_on_push) ? NvtxState::kSyncPush : 0u) |
         (env.sync_on_pop.value_or(sync_on_pop) ? NvtxState::kSyncPop : 0u) |
         (env.track.value_or(track) ? NvtxState::kTrack : 0u);
}

/// NVTXRangeWrapper::enable. What the user's environment set (configure_from_env, before or
/// after) wins over the arguments (docs/configuration.md, "Precedence"): LAPTIME_NVTX=0 keeps the
/// wrapper off; an enable by configure_from_env alone takes the code's settings where the user set
/// none. Two enables of the code that disagree are a usage error.
template <int = 0>
void nvtx_enable(NvtxState& w, bool sync_on_push, bool sync_on_pop, bool track,
                 const std::string& domain_name, const std::vector<std::uint32_t>& colors) {
  nvtx_join_fork_plan();
  std::unique_lock<std::mutex> lock(w.config_mutex);
  const NvtxEnvOverrides& env = w.env;
  if (env.off) return;
  const std::string& domain = env.domain ? *env.domain : domain_name;
  const std::uint32_t flags = nvtx_flags(env, sync_on_push, sync_on_pop, track);
  const std::uint32_t current = w.state.load(std::memory_order_relaxed);
  const bool code_before = w.code_enabled;
  w.code_enabled = true;
  const bool enabled = (current & NvtxState::kEnabled) != 0;
  if (enabled && (current & NvtxState::kFlagMask) == flags && w.options_domain == domain &&
      w.options_colors == colors) {
    return;
  }
  if (enabled && code_before) {
    std::string what = "already enabled with " +
                       nvtx_describe(current, w.options_domain, w.options_colors) +
                       "; called again with " + nvtx_describe(flags, domain, colors) +
                       " (the first settings stay)";
    lock.unlock();
    usage_error(std::string("NVTXRangeWrapper.enable(") + (sync_on_push ? "true" : "false") + ", " +
                    (sync_on_pop ? "true" : "false") + ", " + (track ? "true" : "false") + ", ...)",
                what);
    return;
  }
  nvtx_apply(w, flags, domain,
             colors);  // the first enable, or the code's over configure_from_env's
}

/// configure_from_env's NVTX variables: kept for the code's enable() calls to come, and applied
/// now over the settings in force (the code's, or the defaults) where they turn the wrapper on or
/// it is on already.
template <int = 0>
void nvtx_configure_from_env(NvtxState& w, const NvtxEnvOverrides& o, bool on) {
  nvtx_join_fork_plan();
  std::unique_lock<std::mutex> lock(w.config_mutex);
  w.env = o;
  const std::uint32_t current = w.state.load(std::memory_order_relaxed);
  const bool enabled = (current & NvtxState::kEnabled) != 0;
  if (o.off) {
    if (enabled) {
      lock.unlock();
      warn_once("nvtx-env-off-late",
                "LAPTIME_NVTX=0 (or LAPTIME_PROFILE=training or evaluation, the profiles "
                "without NVTX) came after the code's NVTXRangeWrapper.enable(): the wrapper "
                "stays on (call configure_from_env first)");
    }
    return;
  }
  if (!enabled && !on) return;
  // Over the settings in force: the code's where it enabled, else the defaults (all off).
  const std::uint32_t flags =
      nvtx_flags(o, (current & NvtxState::kSyncPush) != 0, (current & NvtxState::kSyncPop) != 0,
                 (current & NvtxState::kTrack) != 0);
  const std::string& domain = o.domain ? *o.domain : w.options_domain;
  if (enabled && (current & NvtxState::kFlagMask) == flags && w.options_domain == domain) return;
  nvtx_apply(w, flags, domain, w.options_colors);
}

/// NVTXRangeWrapper::name_current_thread.
template <int = 0>
void nvtx_name_current_thread(NvtxState& w, std::string_view name) {
  nvtx_join_fork_plan();
  NvtxThread& t = w.threads.local();
  std::string copy(name);
  {
    std::lock_guard<std::mutex> lock(t.label_mutex);
    t.label = copy;
  }
  // Acquire: pairs with enable()'s release store, after which NVTX is initialised. A thread naming
  // itself while another enables may be named twice; that is harmless.
  if ((w.state.load(std::memory_order_acquire) & NvtxState::kEnabled) != 0) {
    nvtx_api::name_os_thread(t.tid, copy.c_str());
  }
}

/// NVTXRangeWrapper::mark.
template <int = 0>
void nvtx_mark(NvtxState& w, std::string_view message) {
  const std::uint32_t s = w.state.load(std::memory_order_acquire);
  if ((s & NvtxState::kEnabled) == 0) return;
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
  NvtxEventAttributes a;
  a.message_type = kNvtxMessageAscii;
  a.message = text;
  nvtx_api::mark(w.domain.load(std::memory_order_relaxed), &a);
}

/// The test reset (nvtx_reset_for_testing).
template <int = 0>
void nvtx_reset(NvtxState& w) {
  nvtx_join_fork_plan();
  std::lock_guard<std::mutex> lock(w.config_mutex);
  w.generation = (w.generation + 1) & (~0u >> NvtxState::kGenerationShift);
  if (w.generation == 0) w.generation = 1;
  w.options_domain.clear();
  w.options_colors.clear();
  w.env = NvtxEnvOverrides();
  w.code_enabled = false;
  w.session.store(nullptr, std::memory_order_relaxed);
  w.domain.store(nullptr, std::memory_order_relaxed);
  w.state.store(w.generation << NvtxState::kGenerationShift, std::memory_order_release);
  w.threads.for_each([](NvtxThread& t, long, bool) {
    std::lock_guard<std::mutex> label_lock(t.label_mutex);
    t.label.clear();
  });
}

#endif  // LAPTIME_ENABLED

}  // namespace detail
LAPTIME_END_NAMESPACE
