// laptime internals: start_meas and end_meas while the Stopwatch is disabled after an enable()
// (docs/stopwatch.md, "Switching measuring off and on while other threads measure").
//
// Another thread may call disable() and enable() at any moment. A thread whose start_meas came
// while disabled and whose end_meas comes after the enable() made a correct pair; its interval
// belongs to the disabled period and is dropped. For that, the start is remembered on the calling
// thread's slot as a dropped interval (kDroppedRun): its end_meas then ends nothing, silently,
// and never ends another thread's interval of that name. An end_meas while disabled clears the
// slot, so that a second end after enable() is still the usage error it is. Before the first
// enable() nothing is remembered (calls cost next to nothing and record nothing).
//
// Implementation part (LAPTIME_IMPL): compiled once by src/laptime.cpp, or carried by
// <laptime/laptime.hpp>.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/impl/stopwatch_state.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// disable() and the environment's "off": measuring stops. Once enabled, calls made while off are
/// remembered (kDisabled); before the first enable(), they stay free (kNeverEnabled). Under
/// config_mutex.
inline void switch_off(StopwatchState& s) noexcept {
  if (s.ever_enabled()) {
    s.power.store(kDisabled, std::memory_order_release);
  }
}

LAPTIME_IMPL void StopwatchCore::start_while_disabled(std::string_view name) noexcept {
  StopwatchState& state = static_cast<StopwatchState&>(*this);
  try {
    ThreadRecord& rec = threads.local();
    const NameCacheEntry* e = rec.cache.find(name);
    // A name new to this thread: interned as start_meas would, but past the name limit it is
    // not remembered (its end after enable() raises the limit's error, as any call of it does).
    if (e == nullptr) {
      const std::uint64_t hash = text_hash(name);
      if (rec.known.find(name, hash) == nullptr && state.intern(name, hash) == kNoName) return;
    }
    if (e == nullptr) e = lookup(rec, name);
    if (e == nullptr) return;
    Slot& s = *e->value;
    const std::uint32_t r = s.run.load(std::memory_order_relaxed);
    if (r == kDroppedRun) return;
    if (r != 0) {
      drop_interval(s, kDroppedRun);  // started before the disable(): dropped, never ended
    } else {
      s.run.store(kDroppedRun, std::memory_order_relaxed);
    }
  } catch (...) {  // no memory for the thread's record or the name: the start is not remembered
  }
}

LAPTIME_IMPL void StopwatchCore::end_while_disabled(std::string_view name) noexcept {
  try {
    ThreadRecord& rec = threads.local();
    Slot* s = nullptr;
    if (const NameCacheEntry* e = rec.cache.find(name)) {
      s = e->value;
    } else if (const std::uint32_t* id = rec.known.find(name, text_hash(name))) {
      s = &rec.slot(*id);
    }
    // Whatever runs on the slot (started while disabled, or before the disable()) ends here,
    // dropped.
    if (s != nullptr && s->run.load(std::memory_order_relaxed) != 0) drop_interval(*s);
  } catch (...) {  // no memory for the thread's record: nothing of it can be running
  }
}

}  // namespace detail
LAPTIME_END_NAMESPACE
