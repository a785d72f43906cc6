// The state of tests/nvtx_recorder, shared by its two files: nvtx_recorder.cpp (NVTX's CORE and
// CORE2 callbacks, the injection entry point, the query API for the tests) and
// nvtx_recorder_counters.cpp (NVTX's counters extension). Every event becomes one line of the log.
#pragma once

#define NVTX_NO_IMPL  // a tool needs NVTX's types, not its implementation
#include <nvtx3/nvToolsExt.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#define NVTX_RECORDER_EXPORT extern "C" __attribute__((visibility("default")))

namespace nvtx_recorder {

struct Recorder {
  std::mutex mutex;
  std::vector<std::string> events;
  std::unordered_map<const void*, std::string> domains;  // handle -> name
  std::unordered_map<const void*, std::string> strings;  // registered string handle -> text
  // Registered-string handles count from 0, as Nsight Compute's do: a NULL handle is a valid one.
  std::uintptr_t next_string_handle = 0;
  std::uintptr_t next_domain_handle = 0x1000;  // never NULL: a NULL domain is the global domain
  std::uint64_t next_range_id = 1;
  long attached = 0;
  long counters_attached = 0;
  std::unordered_map<std::uint64_t, std::string> counters;  // counter id -> name
  std::uint64_t next_counter_id = 0;
  long initialize_calls = 0;
  long registered_messages = 0;
  long ascii_messages = 0;
  long unknown_handles = 0;
};

inline Recorder& recorder() {
  static Recorder* r = new Recorder();  // never destroyed: NVTX calls may come during exit
  return *r;
}

inline long tid() {
  return static_cast<long>(::syscall(SYS_gettid));
}

// Callers hold the recorder mutex.
inline std::string domain_text(Recorder& r, nvtxDomainHandle_t domain) {
  if (domain == nullptr) return "global";
  const auto it = r.domains.find(domain);
  return it != r.domains.end() ? it->second : std::string("<unknown-domain>");
}

inline void log_locked(Recorder& r, std::string line) {
  line += " tid=" + std::to_string(tid());
  r.events.push_back(std::move(line));
}

inline void log(const std::string& line) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  log_locked(r, line);
}

}  // namespace nvtx_recorder
