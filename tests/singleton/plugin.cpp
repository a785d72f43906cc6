// A stand-in for a Python extension or a plugin: its own copy of laptime, hidden symbols, loaded
// with RTLD_LOCAL. Only these extern "C" entry points are visible.
#include <string>

#include "laptime/error.hpp"
#include "laptime/impl/stopwatch_state.hpp"  // the internals this test looks at
#include "laptime/nvtx.hpp"
#include "laptime/stopwatch.hpp"

#define PLUGIN_API extern "C" __attribute__((visibility("default")))
#define PLUGIN_FN(name) LAPTIME_CONCAT(PLUGIN_PREFIX, name)

PLUGIN_API void PLUGIN_FN(enable)(int warmup) {
  laptime::Stopwatch::instance().enable(warmup, std::nullopt, false);
}
PLUGIN_API void PLUGIN_FN(start)(const char* name) {
  laptime::Stopwatch::instance().start_meas(name);
}
PLUGIN_API void PLUGIN_FN(end)(const char* name) {
  laptime::Stopwatch::instance().end_meas(name);
}
PLUGIN_API void PLUGIN_FN(finish_iter)() {
  laptime::Stopwatch::instance().finish_iter();
}
PLUGIN_API const char* PLUGIN_FN(json)() {
  static std::string json;
  json = laptime::Stopwatch::instance().to_json();
  return json.c_str();
}
PLUGIN_API const void* PLUGIN_FN(state_address)() {
#if LAPTIME_ENABLED
  return &laptime::detail::stopwatch_state();
#else
  return nullptr;  // compiled out: there is no state
#endif
}

// The NVTX wrapper with order tracking, enabled through this copy.
PLUGIN_API void PLUGIN_FN(nvtx_enable)() {
  laptime::NVTXRangeWrapper::instance().enable(false, false, true);
}
// A scoped range of this copy around `inside` (nullptr: nothing inside).
PLUGIN_API void PLUGIN_FN(scoped_range)(void (*inside)()) {
  LAPTIME_RANGE("plugin range");
  if (inside != nullptr) inside();
}

// Only the error policy: a copy's first use of the warning table joins the fork plan (and may be
// the process's one pthread_atfork registration).
PLUGIN_API void PLUGIN_FN(warn_policy)() {
  laptime::set_error_policy(laptime::ErrorPolicy::Warn);
}
