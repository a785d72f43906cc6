// laptime internals: the out-of-line half of the NVTX counters' API — what counters.hpp declares
// (LAPTIME_IMPL), over the counters' state and sampler (nvtx_counters.hpp).
#pragma once

#include <cmath>
#include <mutex>
#include <string>

#include "laptime/config.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/detail/resources_sampler.hpp"
#include "laptime/impl/nvtx_counters.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

#if LAPTIME_ENABLED

LAPTIME_IMPL void nvtx_counters_enable(double sample_hz) {
  if (!(sample_hz >= 0 && sample_hz <= 1000)) {  // NaN too
    usage_error("enable_nvtx_counters(" + std::to_string(sample_hz) + ")",
                "the sample rate must be between 0 (no background samples) and 1000 per second; "
                "nothing changed");
    return;
  }
  if (nvtx_counter_calls() == nullptr) {
    warn_once("nvtx-counters-unavailable",
              "enable_nvtx_counters(): laptime was compiled without NVTX's counters extension "
              "(nvtx3/nvToolsExtCounters.h); no counter will reach a profiler");
  }
  nvtx_counters_join_fork_plan();
  NvtxCountersState& c = nvtx_counters_state();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.by_name.load(std::memory_order_relaxed) == nullptr) {
    c.by_name.store(new std::atomic<const NvtxCounterSet*>[LAPTIME_MAX_NAMES](),
                    std::memory_order_release);
  }
  c.cpus.store(resources::online_cpus(), std::memory_order_relaxed);
  const bool tool = nvtx_counters_domain(c) != nullptr;
  // A rate below one a day samples once a day: 1e9 / rate would not fit a period in ns.
  constexpr std::int64_t kMaxPeriodNs = 86400 * std::int64_t{1000000000};
  const double period_f = sample_hz > 0 ? 1e9 / sample_hz : 0;
  const std::int64_t period = period_f >= static_cast<double>(kMaxPeriodNs)
                                  ? kMaxPeriodNs
                                  : static_cast<std::int64_t>(std::llround(period_f));
  if (tool && period > 0 && c.sampler_set == nullptr) {
    c.sampler_set = nvtx_counters_register(c, "");
  }
  c.period_ns.store(tool && period > 0 && c.sampler_set->any ? period : 0,
                    std::memory_order_release);
  c.requested.store(true, std::memory_order_release);
  c.on.store(tool, std::memory_order_release);
  if (c.period_ns.load(std::memory_order_relaxed) > 0) nvtx_counters_start_sampler(c);
}

LAPTIME_IMPL void nvtx_counters_disable() {
  nvtx_counters_join_fork_plan();
  NvtxCountersState& c = nvtx_counters_state();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.period_ns.store(0, std::memory_order_release);
  c.on.store(false, std::memory_order_release);
  c.requested.store(false, std::memory_order_release);
}

LAPTIME_IMPL bool nvtx_counters_enabled() {
  return nvtx_counters_state().requested.load(std::memory_order_acquire);
}

#endif  // LAPTIME_ENABLED

}  // namespace detail
LAPTIME_END_NAMESPACE
