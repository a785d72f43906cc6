// laptime internals: NVTX's counters extension (nvtx3/nvToolsExtCounters.h, NVTX 3.2; the CUDA 13
// toolkit has it), the only place that calls it (impl/nvtx_counters.hpp publishes through it).
//
// As with NVTX's core calls (NvtxCalls, impl/nvtx_api.hpp), a file compiled with the extension's
// header defines a table of the calls (weak: one copy kept), and a copy of laptime's code compiled
// without it calls through that table where the program has one, so that files which disagree on
// the headers all reach the profiler (docs/build.md; ctest consumer-mixed-nvtx-headers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "laptime/config.hpp"
#include "laptime/impl/nvtx_api.hpp"

// LAPTIME_HAVE_NVTX_COUNTERS: whether NVTX's counters extension header is there (NVTX 3.2 and
// later). Where no file of the program has it, enable_nvtx_counters() warns once and publishes
// nothing. Cost: none.
#ifndef LAPTIME_HAVE_NVTX_COUNTERS
#if LAPTIME_ENABLED && LAPTIME_HAVE_NVTX && defined(__has_include)
#if __has_include(<nvtx3/nvToolsExtCounters.h>)
#define LAPTIME_HAVE_NVTX_COUNTERS 1
#endif
#endif
#endif
#ifndef LAPTIME_HAVE_NVTX_COUNTERS
#define LAPTIME_HAVE_NVTX_COUNTERS 0
#endif

#if LAPTIME_HAVE_NVTX_COUNTERS
// NVTX's extension headers define static inline functions that laptime does not call. nvcc's host
// pass hands them to the host compiler as part of the main file, where clang (nvcc -ccbin
// clang++) warns about each unused one (-Wunused-function): -Werror builds must not fail on it.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wunused-function"
#endif
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>
#if defined(__clang__)
#pragma clang diagnostic pop
#endif
#endif

LAPTIME_BEGIN_NAMESPACE
namespace detail {

#if LAPTIME_ENABLED

/// The extension's calls laptime makes.
struct NvtxCounterCalls {
  /// Registers one double counter; 0 where no tool gave it an id.
  std::uint64_t (*register_double)(void* domain, const char* name, const char* unit,
                                   const char* description, bool percent) noexcept;
  /// One sample of counter `id`, or, where the tool gave none (id 0) and `mark`, a mark named
  /// `mark_name` whose double payload is the value. `value` nullptr: /proc could not give it.
  void (*sample)(void* domain, std::uint64_t id, bool mark, void* mark_name,
                 const double* value) noexcept;
};
// Defined below where this file sees the extension's header; null where no file of the program
// (or shared object) was compiled with it.
__attribute__((weak)) extern const NvtxCounterCalls nvtx_native_counter_calls;

#if LAPTIME_HAVE_NVTX_COUNTERS
namespace nvtx_native {
inline std::uint64_t register_double(void* domain, const char* name, const char* unit,
                                     const char* description, bool percent) noexcept {
  nvtxSemanticsCounter_t sem{};
  sem.header.structSize = sizeof sem;
  sem.header.semanticId = NVTX_SEMANTIC_ID_COUNTERS_V1;
  sem.header.version = NVTX_COUNTER_SEMANTIC_VERSION;
  sem.header.next = nullptr;
  sem.flags = NVTX_COUNTER_FLAG_VALUETYPE_ABSOLUTE | NVTX_COUNTER_FLAG_INTERPOLATION_SINCE_LAST;
  sem.unit = unit;
  sem.unitScaleNumerator = 1;
  sem.unitScaleDenominator = 1;
  sem.limitType = NVTX_COUNTER_LIMIT_UNDEFINED;
  if (percent) {
    sem.flags |= NVTX_COUNTER_FLAG_LIMITS;
    sem.limitType = NVTX_COUNTER_LIMIT_F64;
    sem.min.f64 = 0.0;
    sem.max.f64 = 100.0;
  }
  nvtxCounterAttr_t attr{};
  attr.structSize = sizeof attr;
  attr.schemaId = NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE;
  attr.name = name;
  attr.description = description;
  attr.scopeId = NVTX_SCOPE_NONE;
  attr.semantics = &sem.header;
  attr.counterId = NVTX_COUNTER_ID_NONE;  // the tool numbers them
  return nvtxCounterRegister(static_cast<nvtxDomainHandle_t>(domain), &attr);
}

inline void sample(void* domain, std::uint64_t id, bool mark, void* mark_name,
                   const double* value) noexcept {
  const auto d = static_cast<nvtxDomainHandle_t>(domain);
  if (id != 0) {
    if (value != nullptr) {
      nvtxCounterSampleFloat64(d, id, *value);
    } else {
      nvtxCounterSampleNoValue(d, id, NVTX_COUNTER_SAMPLE_UNAVAILABLE);
    }
  } else if (mark && value != nullptr) {
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = static_cast<nvtxStringHandle_t>(mark_name);
    a.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
    a.payload.dValue = *value;
    nvtxDomainMarkEx(d, &a);
  }
}
}  // namespace nvtx_native

__attribute__((weak)) extern const NvtxCounterCalls nvtx_native_counter_calls = {
    &nvtx_native::register_double, &nvtx_native::sample};
#endif

/// The extension's calls; nullptr where the program has no file compiled with its header.
inline const NvtxCounterCalls* nvtx_counter_calls() noexcept {
  return &nvtx_native_counter_calls;
}

/// Registers one double counter named `name` with `unit`; 0 where no tool gave it an id.
inline std::uint64_t nvtx_counter_register(void* domain, const std::string& name, const char* unit,
                                           const char* description, bool percent) noexcept {
  const NvtxCounterCalls* calls = nvtx_counter_calls();
  return calls != nullptr ? calls->register_double(domain, name.c_str(), unit, description, percent)
                          : 0;
}

/// A tool that takes no counters (Nsight Systems 2025.3.1 records none: docs/resources.md) still
/// gets the figures: the counter's name registered as a string, for marks carrying the values.
inline void* nvtx_counter_mark_name(void* domain, const std::string& name) noexcept {
  return nvtx_counter_calls() != nullptr ? nvtx_api::register_string(domain, name.c_str())
                                         : nullptr;
}

/// One sample: to the counter `id`, or, where the tool gave no counter, as a mark named after it
/// whose double payload is the value (a figure /proc could not give is then left out).
inline void nvtx_counter_sample(void* domain, std::uint64_t id, bool mark, void* mark_name,
                                std::optional<double> v) noexcept {
  const NvtxCounterCalls* calls = nvtx_counter_calls();
  if (calls != nullptr) calls->sample(domain, id, mark, mark_name, v ? &*v : nullptr);
}

#endif  // LAPTIME_ENABLED

}  // namespace detail
LAPTIME_END_NAMESPACE
