// nvtx_recorder: a minimal NVTX injection library, the mechanism Nsight Systems and Nsight Compute
// use to receive NVTX events. NVTX loads it when NVTX_INJECTION64_PATH names it and calls its
// InitializeInjectionNvtx2, through which it fills NVTX's callback slots (CORE: the C API without a
// domain; CORE2: the nvtxDomain* API, which nvtx3.hpp and laptime use with a NULL domain for the
// global domain). Every event is logged as one line of text, so that tests can assert exactly what
// a profiler receives:
//
//   push <domain> <text>[ color=0xAARRGGBB] tid=<kernel tid>
//   pop <domain> tid=...              mark <domain> <text>[ color=...] tid=...
//   start <domain> <text> tid=...     end <domain> tid=...
//   register <domain> <text> tid=...  domain-create <name> tid=...   domain-destroy <name> tid=...
//   name-thread <thread id> <name> tid=...   name-category <domain> <id> <name> tid=...
//   note <text> tid=...               (written by the test itself, see nvtx_recorder_note)
//
// and, from NVTX's counters extension (InitializeInjectionNvtxExtension, module
// NVTX_EXT_COUNTERS_MODULEID), what Nsight Systems draws as counter rows:
//
//   counter-register <domain> "<name>" unit=<unit> schema=<id> flags=0x<hex>[ limits=<min>..<max>]
//       scope=<id> tid=...
//   counter <domain> "<name>" <value> tid=...          (nvtxCounterSampleFloat64 / Int64)
//   counter-novalue <domain> "<name>" reason=<n> tid=...
//   counter-bytes <domain> "<name>" size=<n> tid=...   counter-batch <domain> "<name>" size=<n> ...
//
// <domain> is "global" for NVTX's global domain (the CORE slots, or a NULL domain handle) and the
// domain's name otherwise; registered strings are resolved to their text. The query API at the end
// is extern "C" for the test to find with dlopen/dlsym. The counters extension is in
// nvtx_recorder_counters.cpp, the state both share in recorder_state.hpp.
#include "recorder_state.hpp"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

using nvtx_recorder::domain_text;
using nvtx_recorder::log;
using nvtx_recorder::log_locked;
using nvtx_recorder::Recorder;
using nvtx_recorder::recorder;

namespace {

thread_local int t_depth = 0;  // NVTX returns nesting levels from push/pop

std::string narrow(const wchar_t* w) {
  std::string out;
  for (; w != nullptr && *w != 0; ++w) out += (*w >= 0 && *w < 0x80) ? static_cast<char>(*w) : '?';
  return out;
}

std::string message_text(Recorder& r, const nvtxEventAttributes_t* a) {
  if (a == nullptr) return "<null-attributes>";
  std::string text;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      ++r.ascii_messages;
      text = a->message.ascii != nullptr ? a->message.ascii : "<null>";
      break;
    case NVTX_MESSAGE_TYPE_UNICODE:
      ++r.ascii_messages;
      text = narrow(a->message.unicode);
      break;
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      ++r.registered_messages;
      const auto it = r.strings.find(a->message.registered);
      if (it != r.strings.end()) {
        text = it->second;
      } else {
        ++r.unknown_handles;
        text = "<unknown-handle>";
      }
      break;
    }
    default:
      text = "<no-message>";
  }
  if (a->colorType == NVTX_COLOR_ARGB) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " color=0x%08" PRIx32, a->color);
    text += buf;
  }
  if (a->payloadType == NVTX_PAYLOAD_TYPE_DOUBLE) {
    char buf[48];
    std::snprintf(buf, sizeof buf, " value=%.6g", a->payload.dValue);
    text += buf;
  }
  return text;
}

// ---- CORE: the C API without a domain (always the global domain) ----

void NVTX_API MarkEx(const nvtxEventAttributes_t* a) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(r, "mark global " + message_text(r, a));
}
void NVTX_API MarkA(const char* message) {
  log(std::string("mark global ") + message);
}
void NVTX_API MarkW(const wchar_t* message) {
  log("mark global " + narrow(message));
}

nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* a) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(r, "start global " + message_text(r, a));
  return r.next_range_id++;
}
nvtxRangeId_t NVTX_API RangeStartA(const char* message) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(r, std::string("start global ") + message);
  return r.next_range_id++;
}
void NVTX_API RangeEnd(nvtxRangeId_t) {
  log("end global");
}

int NVTX_API RangePushEx(const nvtxEventAttributes_t* a) {
  {
    Recorder& r = recorder();
    std::lock_guard<std::mutex> lock(r.mutex);
    log_locked(r, "push global " + message_text(r, a));
  }
  return t_depth++;
}
int NVTX_API RangePushA(const char* message) {
  log(std::string("push global ") + message);
  return t_depth++;
}
int NVTX_API RangePushW(const wchar_t* message) {
  log("push global " + narrow(message));
  return t_depth++;
}
int NVTX_API RangePop() {
  log("pop global");
  return t_depth > 0 ? --t_depth : -1;
}

void NVTX_API NameCategoryA(uint32_t category, const char* name) {
  log("name-category global " + std::to_string(category) + " " + name);
}
void NVTX_API NameOsThreadA(uint32_t thread_id, const char* name) {
  log("name-thread " + std::to_string(thread_id) + " " + name);
}
void NVTX_API NameOsThreadW(uint32_t thread_id, const wchar_t* name) {
  log("name-thread " + std::to_string(thread_id) + " " + narrow(name));
}

// ---- CORE2: the nvtxDomain* API (a NULL domain is the global domain) ----

void NVTX_API DomainMarkEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(r, "mark " + domain_text(r, domain) + " " + message_text(r, a));
}
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t domain,
                                          const nvtxEventAttributes_t* a) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(r, "start " + domain_text(r, domain) + " " + message_text(r, a));
  return r.next_range_id++;
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t domain, nvtxRangeId_t) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(r, "end " + domain_text(r, domain));
}
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  {
    Recorder& r = recorder();
    std::lock_guard<std::mutex> lock(r.mutex);
    log_locked(r, "push " + domain_text(r, domain) + " " + message_text(r, a));
  }
  return t_depth++;
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t domain) {
  {
    Recorder& r = recorder();
    std::lock_guard<std::mutex> lock(r.mutex);
    log_locked(r, "pop " + domain_text(r, domain));
  }
  return t_depth > 0 ? --t_depth : -1;
}
void NVTX_API DomainNameCategoryA(nvtxDomainHandle_t domain, uint32_t category, const char* name) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(
      r, "name-category " + domain_text(r, domain) + " " + std::to_string(category) + " " + name);
}
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t domain, const char* text) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto* handle = reinterpret_cast<nvtxStringHandle_t>(r.next_string_handle++);
  r.strings[handle] = text;
  log_locked(r, "register " + domain_text(r, domain) + " " + text);
  return handle;
}
nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t domain, const wchar_t* text) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto* handle = reinterpret_cast<nvtxStringHandle_t>(r.next_string_handle++);
  r.strings[handle] = narrow(text);
  log_locked(r, "register " + domain_text(r, domain) + " " + narrow(text));
  return handle;
}
nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto* handle = reinterpret_cast<nvtxDomainHandle_t>(r.next_domain_handle++);
  r.domains.emplace(handle, name);
  log_locked(r, std::string("domain-create ") + name);
  return handle;
}
nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* name) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto* handle = reinterpret_cast<nvtxDomainHandle_t>(r.next_domain_handle++);
  r.domains.emplace(handle, narrow(name));
  log_locked(r, "domain-create " + narrow(name));
  return handle;
}
void NVTX_API DomainDestroy(nvtxDomainHandle_t domain) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(r, "domain-destroy " + domain_text(r, domain));
}
void NVTX_API Initialize(const void*) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  ++r.initialize_calls;  // counted, not logged: it carries no event a user would see
}

template <class F>
bool fill(NvtxFunctionTable table, unsigned int size, unsigned int id, F* fn) {
  if (id >= size || table[id] == nullptr) return false;
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  return true;
}

}  // namespace

NVTX_RECORDER_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;

  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0) return 0;
  bool ok = fill(core, core_size, NVTX_CBID_CORE_MarkEx, &MarkEx);
  ok &= fill(core, core_size, NVTX_CBID_CORE_MarkA, &MarkA);
  ok &= fill(core, core_size, NVTX_CBID_CORE_MarkW, &MarkW);
  ok &= fill(core, core_size, NVTX_CBID_CORE_RangeStartEx, &RangeStartEx);
  ok &= fill(core, core_size, NVTX_CBID_CORE_RangeStartA, &RangeStartA);
  ok &= fill(core, core_size, NVTX_CBID_CORE_RangeEnd, &RangeEnd);
  ok &= fill(core, core_size, NVTX_CBID_CORE_RangePushEx, &RangePushEx);
  ok &= fill(core, core_size, NVTX_CBID_CORE_RangePushA, &RangePushA);
  ok &= fill(core, core_size, NVTX_CBID_CORE_RangePushW, &RangePushW);
  ok &= fill(core, core_size, NVTX_CBID_CORE_RangePop, &RangePop);
  ok &= fill(core, core_size, NVTX_CBID_CORE_NameCategoryA, &NameCategoryA);
  ok &= fill(core, core_size, NVTX_CBID_CORE_NameOsThreadA, &NameOsThreadA);
  ok &= fill(core, core_size, NVTX_CBID_CORE_NameOsThreadW, &NameOsThreadW);

  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) == 0) return 0;
  ok &= fill(core2, core2_size, NVTX_CBID_CORE2_DomainMarkEx, &DomainMarkEx);
  ok &= fill(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, &DomainRangeStartEx);
  ok &= fill(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, &DomainRangeEnd);
  ok &= fill(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &DomainRangePushEx);
  ok &= fill(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &DomainRangePop);
  ok &= fill(core2, core2_size, NVTX_CBID_CORE2_DomainNameCategoryA, &DomainNameCategoryA);
  ok &= fill(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &DomainRegisterStringA);
  ok &= fill(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringW, &DomainRegisterStringW);
  ok &= fill(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &DomainCreateA);
  ok &= fill(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, &DomainCreateW);
  ok &= fill(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, &DomainDestroy);
  ok &= fill(core2, core2_size, NVTX_CBID_CORE2_Initialize, &Initialize);
  if (!ok) {
    std::fprintf(stderr, "nvtx_recorder: this NVTX has fewer callback slots than expected\n");
    return 0;
  }
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  ++r.attached;  // once per copy of NVTX in the process (each shared object has its own)
  return 1;
}

// ---- Query API for the tests ----

/// Every event since the last clear, one per line. The pointer stays valid until the calling
/// thread's next call.
NVTX_RECORDER_EXPORT const char* nvtx_recorder_events(void) {
  thread_local std::string snapshot;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  snapshot.clear();
  for (const std::string& e : r.events) {
    snapshot += e;
    snapshot += '\n';
  }
  return snapshot.c_str();
}

/// Forgets the events and counters (not the domains and registered strings: their handles stay
/// valid, as in a real tool).
NVTX_RECORDER_EXPORT void nvtx_recorder_clear(void) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.events.clear();
  r.initialize_calls = 0;
  r.registered_messages = 0;
  r.ascii_messages = 0;
  r.unknown_handles = 0;
}

/// "attached=1 initialize=1 registered=4 ascii=1 unknown=0 counters=1": how many copies of NVTX
/// attached, how many nvtxInitialize calls, how many event messages were registered handles or
/// text, and how many copies of NVTX's counters extension attached.
NVTX_RECORDER_EXPORT const char* nvtx_recorder_stats(void) {
  thread_local char buf[192];
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::snprintf(buf, sizeof buf,
                "attached=%ld initialize=%ld registered=%ld ascii=%ld unknown=%ld counters=%ld",
                r.attached, r.initialize_calls, r.registered_messages, r.ascii_messages,
                r.unknown_handles, r.counters_attached);
  return buf;
}

/// Numbers registered strings from 0 again, so that the next one gets the NULL handle (as the first
/// one of a process does in Nsight Compute). Only for tests that have dropped every older handle.
NVTX_RECORDER_EXPORT void nvtx_recorder_restart_string_handles(void) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.next_string_handle = 0;
}

/// Adds "note <text> tid=..." to the log: lets a test place its own events in the sequence.
NVTX_RECORDER_EXPORT void nvtx_recorder_note(const char* text) {
  log(std::string("note ") + text);
}
