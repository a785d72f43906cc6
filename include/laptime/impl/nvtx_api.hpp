// laptime internals: the NVTX C API, the only place that calls it (docs/nvtx.md).
//
// Only the C header nvtx3/nvToolsExt.h is used (nvtx3.hpp costs several times more to compile),
// and only where it is found. Domain and string handles travel as void* (NVTX's handles are opaque
// pointers) so that nothing else depends on the NVTX headers being present.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "laptime/config.hpp"
#include "laptime/detail/nvtx_core.hpp"  // LAPTIME_HAVE_NVTX

#if LAPTIME_ENABLED && LAPTIME_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

LAPTIME_BEGIN_NAMESPACE
namespace detail {

#if LAPTIME_ENABLED

// The layout of NVTX's nvtxEventAttributes_t (version 3), kept here so that the process-wide tables
// have one layout in every copy of the code, also in one compiled without the NVTX headers.
struct NvtxEventAttributes {
  std::uint16_t version = 3;
  std::uint16_t size = 48;
  std::uint32_t category = 0;
  std::int32_t color_type = 0;  // NVTX_COLOR_UNKNOWN / NVTX_COLOR_ARGB
  std::uint32_t color = 0;
  std::int32_t payload_type = 0;
  std::int32_t reserved0 = 0;
  std::uint64_t payload = 0;
  std::int32_t message_type = 0;  // NVTX_MESSAGE_TYPE_ASCII / NVTX_MESSAGE_TYPE_REGISTERED
  const void* message = nullptr;
};
static_assert(sizeof(NvtxEventAttributes) == 48, "nvtxEventAttributes_t v3 is 48 bytes");

inline constexpr std::int32_t kNvtxColorArgb = 1;
inline constexpr std::int32_t kNvtxMessageAscii = 1;
inline constexpr std::int32_t kNvtxMessageRegistered = 3;

#if LAPTIME_HAVE_NVTX
static_assert(
    sizeof(nvtxEventAttributes_t) == sizeof(NvtxEventAttributes) &&
        offsetof(nvtxEventAttributes_t, colorType) == offsetof(NvtxEventAttributes, color_type) &&
        offsetof(nvtxEventAttributes_t, payload) == offsetof(NvtxEventAttributes, payload) &&
        offsetof(nvtxEventAttributes_t, messageType) ==
            offsetof(NvtxEventAttributes, message_type) &&
        offsetof(nvtxEventAttributes_t, message) == offsetof(NvtxEventAttributes, message),
    "NvtxEventAttributes must mirror nvtxEventAttributes_t");
static_assert(NVTX_COLOR_ARGB == kNvtxColorArgb && NVTX_MESSAGE_TYPE_ASCII == kNvtxMessageAscii &&
                  NVTX_MESSAGE_TYPE_REGISTERED == kNvtxMessageRegistered,
              "NVTX enum values changed");
#endif

// The NVTX calls laptime makes. Files that disagree on nvtx3/ (a .cu file under nvcc beside a .cpp
// file under g++) share one copy of laptime's code, the one the link order keeps: its functions
// are weak or inline. So a file compiled with the headers also defines this table of the calls
// (weak: one copy kept), and a copy of the code compiled without them calls through it where the
// program has it: either copy then reaches the profiler (docs/build.md; ctest
// consumer-mixed-nvtx-headers). A copy compiled with the headers calls NVTX directly.
struct NvtxCalls {
  // Push and pop are not noexcept (NVTX's C calls throw nothing), so that a caller's last call to
  // them can be a tail call: a noexcept function around another call keeps a frame for
  // std::terminate.
  void (*push)(void* domain, const NvtxEventAttributes* a);
  void (*pop)(void* domain);
  std::uint64_t (*range_start)(void* domain, const NvtxEventAttributes* a) noexcept;
  void (*range_end)(void* domain, std::uint64_t id) noexcept;
  void (*mark)(void* domain, const NvtxEventAttributes* a) noexcept;
  void* (*register_string)(void* domain, const char* text) noexcept;
  void* (*create_domain)(const char* name) noexcept;
  void (*initialize)() noexcept;
  void (*name_os_thread)(long tid, const char* name) noexcept;
  bool (*push_pop_reach_no_tool)() noexcept;
};
// Defined below where this file sees the NVTX headers; null where no file of the program (or
// shared object) was compiled with them.
__attribute__((weak)) extern const NvtxCalls nvtx_native_calls;

#if LAPTIME_HAVE_NVTX
namespace nvtx_native {
inline const nvtxEventAttributes_t* native(const NvtxEventAttributes* a) noexcept {
  return reinterpret_cast<const nvtxEventAttributes_t*>(a);
}
inline void push(void* domain, const NvtxEventAttributes* a) {
  nvtxDomainRangePushEx(static_cast<nvtxDomainHandle_t>(domain), native(a));
}
inline void pop(void* domain) {
  nvtxDomainRangePop(static_cast<nvtxDomainHandle_t>(domain));
}
// Start/end ranges: not bound to a thread's stack (Stopwatch intervals that end on another thread).
inline std::uint64_t range_start(void* domain, const NvtxEventAttributes* a) noexcept {
  return nvtxDomainRangeStartEx(static_cast<nvtxDomainHandle_t>(domain), native(a));
}
inline void range_end(void* domain, std::uint64_t id) noexcept {
  nvtxDomainRangeEnd(static_cast<nvtxDomainHandle_t>(domain), id);
}
inline void mark(void* domain, const NvtxEventAttributes* a) noexcept {
  nvtxDomainMarkEx(static_cast<nvtxDomainHandle_t>(domain), native(a));
}
inline void* register_string(void* domain, const char* text) noexcept {
  return nvtxDomainRegisterStringA(static_cast<nvtxDomainHandle_t>(domain), text);
}
inline void* create_domain(const char* name) noexcept {
  return nvtxDomainCreateA(name);
}
// Loads the injection library (the profiler) now, not in the first push of the loop.
inline void initialize() noexcept {
  nvtxInitialize(nullptr);
}
inline void name_os_thread(long tid, const char* name) noexcept {
  nvtxNameOsThreadA(static_cast<std::uint32_t>(tid), name);
}
// Whether pushes and pops reach no tool. After initialize(), nvtxDomainRangePushEx and
// nvtxDomainRangePop (inline functions of the NVTX header) test these two pointers of NVTX's
// function table and return at once where they are null: no injection library was named, or it
// failed to load or declined. Initialisation happens once per process, so the answer holds for
// good. The test is NVTX's own, read once here rather than at every push.
inline bool push_pop_reach_no_tool() noexcept {
  return NVTX_VERSIONED_IDENTIFIER(nvtxGlobals).nvtxDomainRangePushEx_impl_fnptr == nullptr &&
         NVTX_VERSIONED_IDENTIFIER(nvtxGlobals).nvtxDomainRangePop_impl_fnptr == nullptr;
}
}  // namespace nvtx_native

__attribute__((weak)) extern const NvtxCalls nvtx_native_calls = {
    &nvtx_native::push,           &nvtx_native::pop,
    &nvtx_native::range_start,    &nvtx_native::range_end,
    &nvtx_native::mark,           &nvtx_native::register_string,
    &nvtx_native::create_domain,  &nvtx_native::initialize,
    &nvtx_native::name_os_thread, &nvtx_native::push_pop_reach_no_tool};

namespace nvtx_api {
using namespace nvtx_native;
/// Whether ranges can reach a profiler: NVTX is there.
inline bool available() noexcept {
  return true;
}
}  // namespace nvtx_api
#else
namespace nvtx_api {
/// The calls of a copy compiled with the headers: this program's or shared object's (the weak
/// table), else the one a copy of another shared object published in the process-wide state.
inline const NvtxCalls* native() noexcept {
  if (&nvtx_native_calls != nullptr) return &nvtx_native_calls;
  NvtxCore* core = nvtx_core_pointer().load(std::memory_order_acquire);
  return core != nullptr ? core->calls.load(std::memory_order_acquire) : nullptr;
}
inline bool available() noexcept {
  return native() != nullptr;
}
inline void push(void* domain, const NvtxEventAttributes* a) {
  if (available()) native()->push(domain, a);
}
inline void pop(void* domain) {
  if (available()) native()->pop(domain);
}
inline std::uint64_t range_start(void* domain, const NvtxEventAttributes* a) noexcept {
  return available() ? native()->range_start(domain, a) : 0;
}
inline void range_end(void* domain, std::uint64_t id) noexcept {
  if (available()) native()->range_end(domain, id);
}
inline void mark(void* domain, const NvtxEventAttributes* a) noexcept {
  if (available()) native()->mark(domain, a);
}
inline void* register_string(void* domain, const char* text) noexcept {
  return available() ? native()->register_string(domain, text) : nullptr;
}
inline void* create_domain(const char* name) noexcept {
  return available() ? native()->create_domain(name) : nullptr;
}
inline void initialize() noexcept {
  if (available()) native()->initialize();
}
inline void name_os_thread(long tid, const char* name) noexcept {
  if (available()) native()->name_os_thread(tid, name);
}
inline bool push_pop_reach_no_tool() noexcept {
  return !available() || native()->push_pop_reach_no_tool();
}
}  // namespace nvtx_api
#endif

#endif  // LAPTIME_ENABLED

}  // namespace detail
LAPTIME_END_NAMESPACE
