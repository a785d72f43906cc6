// laptime internals: the CPU and I/O of tracked names as NVTX counters (counters.hpp is the API).
//
// NVTX's counters extension (nvtx3/nvToolsExtCounters.h, NVTX 3.2; the CUDA 13 toolkit has it):
// nvtxCounterRegister once per counter, cold, under this state's lock; then one
// nvtxCounterSampleFloat64 per figure (nvtxCounterSampleNoValue where /proc could not give it),
// whose timestamp the tool takes. Each counter is a double with counter semantics: its unit ("%"
// or "MB/s"), an absolute value that holds since the previous sample (the figure describes the
// window that ends at the sample), and for percentages the limits 0..100.
//
// Without a tool attached NVTX gives laptime's domain a NULL handle (and a registration id 0): the
// counters stay off, a tracked interval's end pays one relaxed load as when they are off, and the
// background thread is not started. (A name whose counters got no id publishes nothing either.)
//
// The extension's calls are in impl/nvtx_counters_api.hpp (impl/nvtx_api.hpp holds the core API);
// this file is part of the implementation part (stopwatch_state.hpp includes it).
#pragma once

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "laptime/config.hpp"
#include "laptime/counters.hpp"
#include "laptime/detail/fork_plan.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/detail/thread.hpp"
#include "laptime/impl/nvtx_counters_api.hpp"
#include "laptime/impl/nvtx_setup.hpp"
#include "laptime/resources.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

#if LAPTIME_ENABLED

/// The figures each set of counters publishes, in this order.
enum NvtxCounterFigure : int { kCounterProcessCpu, kCounterSystemCpu, kCounterRead, kCounterWrite };
inline constexpr int kCounterFigures = 4;

/// One set of counters (a tracked name's, or the background sampler's). Never destroyed.
struct NvtxCounterSet {
  std::uint64_t id[kCounterFigures] = {};  // 0: NVTX gave none (no tool, or no counters module)
  // Where the tool took no counter (id 0) but registers strings: the counter's name, for a mark
  // that carries each sample's value (nvtx_counter_sample).
  void* mark_name[kCounterFigures] = {};  // the tool's handle (opaque: it may be 0)
  bool mark[kCounterFigures] = {};        // publish as marks: the tool gave no counter id
  bool any = false;                       // some id is not 0, or some figure goes as marks
};

/// The process-wide state (one per process, process_singleton "nvtx_counters").
struct NvtxCountersState {
  // Read at every tracked interval end: apart from what only configuration writes. `on`: enabled
  // and a tool attached (NVTX gave laptime's domain a handle; without a tool it gives NULL).
  alignas(64) std::atomic<bool> on{false};
  std::atomic<bool> requested{false};  // enable_nvtx_counters() in effect
  std::atomic<void*> domain{nullptr};
  std::atomic<int> cpus{0};
  // by_name[id]: the counters of the Stopwatch's name `id`; the table is made at the first enable.
  std::atomic<std::atomic<const NvtxCounterSet*>*> by_name{nullptr};

  // The lock of registration and configuration; held across fork (kForkNvtxCounters). While
  // holding it the code may take the NVTX wrapper's configuration lock and warn, nothing else.
  alignas(64) std::mutex mutex;
  bool domain_ready = false;
  const NvtxCounterSet* sampler_set = nullptr;

  // The background sampler: its period (0: off) and whether its thread runs in this process.
  std::atomic<std::int64_t> period_ns{0};
  std::atomic<bool> thread_running{false};
};

// Between the Stopwatch's locks (kForkStopwatch) and the NVTX wrapper's (kForkNvtx): registration
// takes the wrapper's configuration lock while it holds this state's lock.
inline constexpr ForkRank kForkNvtxCounters = static_cast<ForkRank>(15);

LAPTIME_ALWAYS_INLINE NvtxCountersState& nvtx_counters_state() {
  return process_singleton<NvtxCountersState>("nvtx_counters");
}

/// Joins the fork plan: by enable and disable, before they take the lock (registration takes it
/// only after an enable). The warning table and the wrapper's locks join first: both are taken
/// under this state's lock.
inline void nvtx_counters_join_fork_plan() {
  nvtx_join_fork_plan();
  fork_participate(
      kForkNvtxCounters, &nvtx_counters_state(), [] { nvtx_counters_state().mutex.lock(); },
      [] { nvtx_counters_state().mutex.unlock(); },
      [] {
        NvtxCountersState& c = nvtx_counters_state();
        c.mutex.unlock();
        // The sampler thread is not copied into the child; the parent's tree includes the child.
        c.thread_running.store(false, std::memory_order_relaxed);
        c.period_ns.store(0, std::memory_order_relaxed);
      });
}

// ---- Registration (cold, under the state's lock) -----------------------------------------------

/// laptime's NVTX domain: the wrapper's named domain if it was enabled with one, else "laptime".
template <int = 0>
void* nvtx_counters_domain(NvtxCountersState& c) {
  if (!c.domain_ready) {
    NvtxState& w = nvtx_state();
    std::lock_guard<std::mutex> lock(w.config_mutex);
    const bool named = (w.state.load(std::memory_order_relaxed) & NvtxState::kEnabled) != 0 &&
                       !w.options_domain.empty();
    c.domain.store(nvtx_find_or_create_domain(w, named ? w.options_domain : std::string("laptime")),
                   std::memory_order_release);
    c.domain_ready = true;
  }
  return c.domain.load(std::memory_order_relaxed);
}

/// Registers the four counters "<prefix>process tree CPU", ... (prefix "" or "<name>: ").
template <int = 0>
const NvtxCounterSet* nvtx_counters_register(NvtxCountersState& c, const std::string& prefix) {
  void* domain = nvtx_counters_domain(c);
  auto* set = new NvtxCounterSet();
  set->id[kCounterProcessCpu] = nvtx_counter_register(
      domain, prefix + "process tree CPU", "%",
      "CPU time of this process and its descendants over the window, % of all CPUs", true);
  set->id[kCounterSystemCpu] = nvtx_counter_register(
      domain, prefix + "system CPU", "%", "busy share of the machine's CPUs over the window", true);
  set->id[kCounterRead] = nvtx_counter_register(domain, prefix + "read", "MB/s",
                                                "bytes the process tree read from storage", false);
  set->id[kCounterWrite] =
      nvtx_counter_register(domain, prefix + "write", "MB/s",
                            "bytes the process tree caused to be written to storage", false);
  static constexpr const char* kSuffix[kCounterFigures] = {"process tree CPU", "system CPU", "read",
                                                           "write"};
  for (int k = 0; k < kCounterFigures; ++k) {
    // Counters are registered only with a tool attached (the domain has a handle): where it gave
    // no counter id, it takes marks.
    if (set->id[k] == 0 && domain != nullptr && nvtx_counter_calls() != nullptr) {
      set->mark[k] = true;
      set->mark_name[k] = nvtx_counter_mark_name(domain, prefix + kSuffix[k]);
    }
    set->any = set->any || set->id[k] != 0 || set->mark[k];
  }
  return set;
}

/// The counters of the Stopwatch's name `id` (text in `name`), registered at its first interval.
template <int = 0>
LAPTIME_NOINLINE const NvtxCounterSet* nvtx_counters_for(
    NvtxCountersState& c, std::uint32_t id, const std::atomic<const std::string*>& name) {
  std::atomic<const NvtxCounterSet*>* table = c.by_name.load(std::memory_order_acquire);
  if (table == nullptr || id >= static_cast<std::uint32_t>(LAPTIME_MAX_NAMES)) return nullptr;
  if (const NvtxCounterSet* s = table[id].load(std::memory_order_acquire)) return s;
  const std::string* text = name.load(std::memory_order_acquire);
  if (text == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(c.mutex);
  if (const NvtxCounterSet* s = table[id].load(std::memory_order_acquire)) return s;
  const NvtxCounterSet* s = nvtx_counters_register(c, *text + ": ");
  table[id].store(s, std::memory_order_release);
  return s;
}

// ---- Publishing
// ----------------------------------------------------------------------------------

/// Publishes the figures of the window from `start` to `end` (`wall_ns` long).
template <int = 0>
void nvtx_counters_publish(const NvtxCountersState& c, const NvtxCounterSet& set,
                           const resources::Sample& start, const resources::Sample& end,
                           std::uint64_t wall_ns) noexcept {
  resources::Usage u;
  u.add(start, end, wall_ns);
  void* domain = c.domain.load(std::memory_order_acquire);
  const std::optional<double> figures[kCounterFigures] = {
      u.process_percent(c.cpus.load(std::memory_order_relaxed)), u.system_percent(),
      u.read_mb_per_s(), u.write_mb_per_s()};
  for (int k = 0; k < kCounterFigures; ++k) {
    nvtx_counter_sample(domain, set.id[k], set.mark[k], set.mark_name[k], figures[k]);
  }
}

/// The slow half of nvtx_counters_interval_end.
template <int = 0>
LAPTIME_NOINLINE void nvtx_counters_interval(NvtxCountersState& c, std::uint32_t id,
                                             const std::atomic<const std::string*>& name,
                                             const resources::Sample& start,
                                             const resources::Sample& end, std::int64_t dt) {
  const NvtxCounterSet* set = nvtx_counters_for(c, id, name);
  if (set == nullptr || !set->any) return;
  nvtx_counters_publish(c, *set, start, end, static_cast<std::uint64_t>(dt > 0 ? dt : 0));
}

/// The Stopwatch's hook: a tracked interval of name `id` ended (StopwatchState::end_samples).
LAPTIME_ALWAYS_INLINE void nvtx_counters_interval_end(std::uint32_t id,
                                                      const std::atomic<const std::string*>& name,
                                                      const resources::Sample& start,
                                                      const resources::Sample& end,
                                                      std::int64_t dt) {
  NvtxCountersState& c = nvtx_counters_state();
  if (LAPTIME_LIKELY(!c.on.load(std::memory_order_relaxed))) return;
  nvtx_counters_interval(c, id, name, start, end, dt);
}

// ---- The background sampler --------------------------------------------------------------------

/// The sampler's longest sleep between two looks at the rate (enable_nvtx_counters may change it,
/// disable_nvtx_counters end it).
inline constexpr std::int64_t kNapNs = 100'000'000;

template <int = 0>
void nvtx_counters_sampler_run(NvtxCountersState& c) noexcept {
  const pid_t self = ::getpid();
  resources::Sample prev = resources::sample_at("/proc", self, /*precise_self=*/true);
  std::int64_t prev_ns = resources::detail::monotonic_ns();
  for (;;) {
    const std::int64_t period = c.period_ns.load(std::memory_order_acquire);
    if (period <= 0) {
      // Exit, unless an enable came between the load above and this store.
      c.thread_running.store(false, std::memory_order_seq_cst);
      if (c.period_ns.load(std::memory_order_seq_cst) <= 0) return;
      bool expected = false;
      if (!c.thread_running.compare_exchange_strong(expected, true)) return;  // a new thread runs
      prev = resources::sample_at("/proc", self, /*precise_self=*/true);      // a fresh window
      prev_ns = resources::detail::monotonic_ns();
      continue;
    }
    // Sleeps to one period after the last sample, in naps of at most kNapNs, so that a new rate
    // or a disable (the period read again after each nap) takes effect within one.
    const std::int64_t wake = prev_ns + period;
    const std::int64_t now_before = resources::detail::monotonic_ns();
    if (now_before < wake) {
      const std::int64_t until_ns = wake - now_before > kNapNs ? now_before + kNapNs : wake;
      const timespec until{until_ns / 1000000000, until_ns % 1000000000};
      ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr);
      continue;
    }
    const resources::Sample now = resources::sample_at("/proc", self, /*precise_self=*/true);
    const std::int64_t now_ns = resources::detail::monotonic_ns();
    if (c.on.load(std::memory_order_relaxed) && c.sampler_set != nullptr) {
      nvtx_counters_publish(c, *c.sampler_set, prev, now,
                            static_cast<std::uint64_t>(now_ns - prev_ns));
    }
    prev = now;
    prev_ns = now_ns;
  }
}

template <int = 0>
void* nvtx_counters_sampler_main(void*) {
  nvtx_counters_sampler_run(nvtx_counters_state());
  return nullptr;
}

/// Starts the sampler thread unless it runs. Called under the state's lock.
template <int = 0>
void nvtx_counters_start_sampler(NvtxCountersState& c) {
  bool expected = false;
  if (!c.thread_running.compare_exchange_strong(expected, true)) return;
  if (!start_background_thread(&nvtx_counters_sampler_main<>, nullptr, "laptime-counter")) {
    c.thread_running.store(false, std::memory_order_release);
    warn_once("nvtx-counters-thread",
              "enable_nvtx_counters(): cannot start the sampler thread; only tracked intervals "
              "publish counters");
  }
}

#endif  // LAPTIME_ENABLED

}  // namespace detail
LAPTIME_END_NAMESPACE
