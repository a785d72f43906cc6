// The query API of tests/nvtx_recorder (the NVTX injection library the NVTX tests run under),
// opened by its path: the same path NVTX loads when main() sets NVTX_INJECTION64_PATH to it, so the
// same instance, whose log is what a profiler would have received.
#pragma once

#include <dlfcn.h>

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
