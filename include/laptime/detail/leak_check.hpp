// laptime internals: memory forgotten on purpose. A forked child drops the parent's state without
// freeing it (another thread of the parent may have been changing it at the fork), and marks it
// here for AddressSanitizer's leak check, which would otherwise fail every forked worker of a
// user's ASan build at its exit (workers-test, run under ASan by the test command).
#pragma once

#include "laptime/config.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// `p` (a heap block or nullptr) is never freed and must not be reported as a leak; what it
/// points to stays reachable through it.
inline void forgotten_on_purpose(const void* p) noexcept {
#if defined(__SANITIZE_ADDRESS__)
  if (p != nullptr) __lsan_ignore_object(p);
#else
  (void)p;
#endif
}

}  // namespace detail
LAPTIME_END_NAMESPACE
