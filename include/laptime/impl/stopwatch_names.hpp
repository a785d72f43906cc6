// laptime internals: the Stopwatch's name table, one part of its process-wide state
// (stopwatch_parts.hpp). Every measurement name is interned once (id = first-seen order) under the
// table's lock; its text is published to lock-free readers (the rare branches of the hot path,
// reports) through `names`. The implementation part.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/env_vars.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/detail/stopwatch_hot.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// The name limit LAPTIME_MAX_NAMES asks for (nullopt: unset), clamped to the capacity; a
/// malformed value is warned about once and ignored, one above the capacity is clamped.
inline std::optional<std::uint32_t> env_max_names() {
  const std::optional<int> n = env_checked(env_int<Env::max_names>());
  if (!n) return std::nullopt;
  return static_cast<std::uint32_t>(*n);
}

/// What a report says of the calls refused at the name limit after the first (warn_once's note).
inline constexpr std::string_view kMaxNamesRepeats =
    "calls with names past LAPTIME_MAX_NAMES were not measured";

/// The process-wide name table. names_mutex guards `ids`, `texts` and the growth of the table; it
/// is taken by intern() only (and held across fork, so that a child gets the table whole).
struct NameTable {
  NameTable() {
    if (const auto n = env_max_names()) {
      max_names.store(*n, std::memory_order_relaxed);
      max_names_from_env = true;
    }
  }

  // Read by the rare branches of the hot path and by reports: the interned text of each id.
  std::array<std::atomic<const std::string*>, LAPTIME_MAX_NAMES> names{};
  std::mutex names_mutex;
  // Ids by text, looked up without a copy of the text (a name refused at the limit is looked up
  // on every call); the keys are the texts `texts` owns, which never move.
  TextTable<std::uint32_t> ids;
  std::vector<std::unique_ptr<const std::string>> texts;
  std::atomic<std::uint32_t> name_count{0};
  // The run-time limit on distinct names, <= LAPTIME_MAX_NAMES (the storage capacity): from
  // LAPTIME_MAX_NAMES in the environment at first use, else Stopwatch::set_max_names.
  std::atomic<std::uint32_t> max_names{LAPTIME_MAX_NAMES};
  bool max_names_from_env = false;

  /// The id of `name` (whose text_hash is `hash`), interned now if new; kNoName when the table is
  /// at its limit.
  std::uint32_t intern(std::string_view name, std::uint64_t hash) {
    std::lock_guard<std::mutex> lock(names_mutex);
    if (const std::uint32_t* known = ids.find(name, hash)) return *known;
    const std::uint32_t id = name_count.load(std::memory_order_relaxed);
    if (id >= max_names.load(std::memory_order_relaxed)) return kNoName;
    texts.push_back(std::make_unique<const std::string>(name));
    try {
      ids.insert(*texts.back(), hash, id);
    } catch (...) {
      texts.pop_back();
      throw;
    }
    names[id].store(texts.back().get(), std::memory_order_release);
    name_count.store(id + 1, std::memory_order_release);
    return id;
  }
  std::uint32_t intern(std::string_view name) { return intern(name, text_hash(name)); }

  /// Stopwatch::set_max_names' limit `n`, never below the names already known (interned for
  /// good: they would be past it and still measured); under names_mutex, so that none is interned
  /// meanwhile. LAPTIME_MAX_NAMES in the environment wins. Returns the names known.
  std::uint32_t set_limit(std::uint32_t n) {
    std::lock_guard<std::mutex> lock(names_mutex);
    const std::uint32_t known = name_count.load(std::memory_order_relaxed);
    if (!max_names_from_env) max_names.store(n < known ? known : n, std::memory_order_relaxed);
    return known;
  }

  /// The interned text of a known id.
  const std::string& name_text(std::uint32_t id) const {
    return *names[id].load(std::memory_order_acquire);
  }

  // Fork (StopwatchState::before_fork): held across it, released on both sides.
  void lock_names_for_fork() { names_mutex.lock(); }
  void unlock_names_after_fork() { names_mutex.unlock(); }
};

}  // namespace detail
LAPTIME_END_NAMESPACE
