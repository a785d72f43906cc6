// tests/nvtx_recorder's half for NVTX's counters extension (module NVTX_EXT_COUNTERS_MODULEID):
// what Nsight Systems draws as counter rows, logged as the lines nvtx_recorder.cpp's header lists
// (counter-register, counter, counter-novalue, counter-bytes, counter-batch).
#include "recorder_state.hpp"

#if __has_include(<nvtx3/nvToolsExtCounters.h>)
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>
#define NVTX_RECORDER_COUNTERS 1
#else
#define NVTX_RECORDER_COUNTERS 0
#endif

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#if NVTX_RECORDER_COUNTERS
using nvtx_recorder::domain_text;
using nvtx_recorder::log_locked;
using nvtx_recorder::Recorder;
using nvtx_recorder::recorder;

namespace {

// Callers hold the recorder mutex.
std::string counter_text(Recorder& r, nvtxDomainHandle_t domain, std::uint64_t id) {
  const auto it = r.counters.find(id);
  return domain_text(r, domain) + " \"" +
         (it != r.counters.end() ? it->second : std::string("<unknown-counter>")) + "\"";
}

std::string limit_text(std::int64_t type, nvtxCounterLimit_t v) {
  char buf[40];
  if (type == NVTX_COUNTER_LIMIT_F64) {
    std::snprintf(buf, sizeof buf, "%g", v.f64);
  } else if (type == NVTX_COUNTER_LIMIT_U64) {
    std::snprintf(buf, sizeof buf, "%" PRIu64, v.u64);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRId64, v.i64);
  }
  return buf;
}

uint64_t NVTX_API CounterRegister(nvtxDomainHandle_t domain, const nvtxCounterAttr_t* a) {
  if (a == nullptr || a->name == nullptr) return NVTX_COUNTER_ID_NONE;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  // A static id is the caller's; others are numbered as a tool does, from the dynamic range.
  const std::uint64_t id =
      a->counterId >= NVTX_COUNTER_ID_STATIC_START && a->counterId < NVTX_COUNTER_ID_DYNAMIC_START
          ? a->counterId
          : NVTX_COUNTER_ID_DYNAMIC_START + r.next_counter_id++;
  r.counters[id] = a->name;
  std::string line = "counter-register " + domain_text(r, domain) + " \"" + a->name + "\"";
  const nvtxSemanticsCounter_t* sem = nullptr;
  for (const nvtxSemanticsHeader_t* h = a->semantics; h != nullptr; h = h->next) {
    if (h->semanticId == NVTX_SEMANTIC_ID_COUNTERS_V1) {
      sem = reinterpret_cast<const nvtxSemanticsCounter_t*>(h);
    }
  }
  char buf[96];
  line += " unit=";
  line += sem != nullptr && sem->unit != nullptr ? sem->unit : "<none>";
  std::snprintf(buf, sizeof buf, " schema=%" PRIu64 " flags=0x%" PRIx64, a->schemaId,
                sem != nullptr ? sem->flags : 0);
  line += buf;
  if (sem != nullptr && (sem->flags & NVTX_COUNTER_FLAG_LIMITS) == NVTX_COUNTER_FLAG_LIMITS) {
    line += " limits=" + limit_text(sem->limitType, sem->min) + ".." +
            limit_text(sem->limitType, sem->max);
  }
  line += " scope=" + std::to_string(a->scopeId);
  log_locked(r, std::move(line));
  return id;
}

void NVTX_API CounterSampleFloat64(nvtxDomainHandle_t domain, uint64_t id, double value) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  char buf[40];
  std::snprintf(buf, sizeof buf, " %.9g", value);
  log_locked(r, "counter " + counter_text(r, domain, id) + buf);
}

void NVTX_API CounterSampleInt64(nvtxDomainHandle_t domain, uint64_t id, int64_t value) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(r, "counter " + counter_text(r, domain, id) + " " + std::to_string(value));
}

void NVTX_API CounterSample(nvtxDomainHandle_t domain, uint64_t id, const void*, size_t size) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(r, "counter-bytes " + counter_text(r, domain, id) + " size=" + std::to_string(size));
}

void NVTX_API CounterSampleNoValue(nvtxDomainHandle_t domain, uint64_t id, uint8_t reason) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(r, "counter-novalue " + counter_text(r, domain, id) +
                    " reason=" + std::to_string(static_cast<int>(reason)));
}

void NVTX_API CounterBatchSubmit(nvtxDomainHandle_t domain, const nvtxCounterBatch_t* b) {
  if (b == nullptr) return;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(r, "counter-batch " + counter_text(r, domain, b->counterId) +
                    " size=" + std::to_string(b->countersSize));
}

}  // namespace
#endif  // NVTX_RECORDER_COUNTERS

/// The entry point of NVTX's extension modules (counters, payloads, memory): called once per
/// module and copy of NVTX, at the module's first call. Only the counters module gets callbacks;
/// the others stay no-ops.
NVTX_RECORDER_EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* info) {
  if (info == nullptr) return 0;
#if NVTX_RECORDER_COUNTERS
  // NVTX_RECORDER_NO_COUNTERS=1: a tool without the counters module (as Nsight Systems 2025.3.1
  // behaves: it records no counter), whose registrations then return 0.
  const char* no_counters = std::getenv("NVTX_RECORDER_NO_COUNTERS");
  if (no_counters != nullptr && no_counters[0] == '1') return 1;
  if (info->moduleId == NVTX_EXT_COUNTERS_MODULEID &&
      info->compatId == NVTX_EXT_COUNTERS_COMPATID && info->segmentsCount >= 1 &&
      info->segments != nullptr) {
    const nvtxExtModuleSegment_t& seg = info->segments[0];
    auto put = [&seg](std::size_t cbid, auto* fn) {
      if (cbid < seg.slotCount) seg.functionSlots[cbid] = reinterpret_cast<intptr_t>(fn);
    };
    put(NVTX3EXT_CBID_nvtxCounterRegister, &CounterRegister);
    put(NVTX3EXT_CBID_nvtxCounterSampleInt64, &CounterSampleInt64);
    put(NVTX3EXT_CBID_nvtxCounterSampleFloat64, &CounterSampleFloat64);
    put(NVTX3EXT_CBID_nvtxCounterSample, &CounterSample);
    put(NVTX3EXT_CBID_nvtxCounterSampleNoValue, &CounterSampleNoValue);
    put(NVTX3EXT_CBID_nvtxCounterBatchSubmit, &CounterBatchSubmit);
    Recorder& r = recorder();
    std::lock_guard<std::mutex> lock(r.mutex);
    ++r.counters_attached;
  }
#endif
  return 1;
}
