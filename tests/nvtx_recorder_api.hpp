// The query API of tests/nvtx_recorder (the NVTX injection library the NVTX tests run under),
// opened by its path: the same path NVTX loads when main() sets NVTX_INJECTION64_PATH to it, so the
// same instance, whose log is what a profiler would have received. Below it, the log read as
// lines and the recorder's counts, shared by the tests that run under it.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

struct RecorderApi {
  const char* (*events)() = nullptr;  // the log, one event per line, each ending " tid=N"
  void (*clear)() = nullptr;
  const char* (*stats)() = nullptr;     // "key=value" counts (registrations, ...)
  void (*note)(const char*) = nullptr;  // a "note TEXT" line in the log
  void (*restart_string_handles)() = nullptr;
};

/// The recorder's API, or nullptr where it was not built (no NVTX headers) or does not load.
inline const RecorderApi* recorder_api() {
#ifdef LAPTIME_NVTX_RECORDER_PATH
  static const RecorderApi* api = []() -> const RecorderApi* {
    void* lib = ::dlopen(LAPTIME_NVTX_RECORDER_PATH, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return nullptr;
    static RecorderApi a;
    a.events = reinterpret_cast<const char* (*)()>(::dlsym(lib, "nvtx_recorder_events"));
    a.clear = reinterpret_cast<void (*)()>(::dlsym(lib, "nvtx_recorder_clear"));
    a.stats = reinterpret_cast<const char* (*)()>(::dlsym(lib, "nvtx_recorder_stats"));
    a.note = reinterpret_cast<void (*)(const char*)>(::dlsym(lib, "nvtx_recorder_note"));
    a.restart_string_handles =
        reinterpret_cast<void (*)()>(::dlsym(lib, "nvtx_recorder_restart_string_handles"));
    if (!a.events || !a.clear || !a.stats || !a.note || !a.restart_string_handles) return nullptr;
    return &a;
  }();
  return api;
#else
  return nullptr;
#endif
}

/// The recorder's log since its last clear, one event a line, each ending " tid=N"; empty where
/// the recorder is missing.
inline std::vector<std::string> recorder_events() {
  std::vector<std::string> out;
  if (recorder_api() == nullptr) return out;
  const std::string text = recorder_api()->events();
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

/// Empties the recorder's log and its event counts.
inline void recorder_clear() {
  if (recorder_api() != nullptr) recorder_api()->clear();
}

/// The recorder's count `key` (attached, registered, ascii, unknown...): 0 where the recorder is
/// missing, -1 where it has no such count.
inline long recorder_stat(const char* key) {
  if (recorder_api() == nullptr) return 0;
  const std::string s = recorder_api()->stats();
  const std::string k = std::string(key) + "=";
  const std::size_t at = s.find(k);
  return at == std::string::npos ? -1 : std::atol(s.c_str() + at + k.size());
}
