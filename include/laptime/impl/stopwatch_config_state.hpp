// laptime internals: the Stopwatch's settings in force and who this process is, one part of its
// process-wide state (stopwatch_parts.hpp). config_mutex is this part's lock: it guards every
// field here but the atomics. The rules that fill it are in stopwatch_config.hpp. The
// implementation part.
#pragma once

#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/detail/env.hpp"
#include "laptime/detail/report.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// The settings the user's environment gave (configure_from_env; docs/configuration.md): they
/// override the code's enable() arguments, whichever call comes first.
struct EnvOverrides {
  bool off = false;  ///< LAPTIME_PROFILE=training or LAPTIME_STOPWATCH=0: enable() does nothing
  std::optional<int> warmup;
  std::optional<std::optional<int>> print_every;
  std::optional<bool> cuda_sync;
};

struct ConfigState {
  ConfigState() : owner_pid(::getpid()), rank(detect_rank()), host(host_name()) {}

  std::mutex config_mutex;
  EnvOverrides env;
  bool code_configured = false;  // the code's own enable() arguments, before the overrides
  int code_warmup = 0;
  std::optional<int> code_print_every;
  bool code_cuda_sync = false;
  bool configured = false;  // the settings in force (cfg_*)
  int cfg_warmup = 0;
  std::optional<int> cfg_print_every;
  bool cfg_cuda_sync = false;

  // Settings the code and the environment both give: set from the environment, the code's calls
  // yield (configure()).
  bool record_from_env = false;       // LAPTIME_RECORD
  bool nvtx_ranges_from_env = false;  // LAPTIME_NVTX_RANGES
  bool progress_from_env = false;     // LAPTIME_PROGRESS
  bool data_name_from_env = false;    // LAPTIME_DATA_NAME
  bool print_rank0_from_env = false;  // LAPTIME_PRINT_RANK0_ONLY
  bool print_rank0_by_code = false;   // Stopwatch::set_print_rank0_only
  std::string data_name;              // empty: the default rule (verdict.hpp)

  pid_t owner_pid = 0;  // the process whose results the exit output writes
  RankInfo rank;
  std::string host;
  // CLOCK_REALTIME when this state was made: a LAPTIME_OUTPUT file another process wrote since is
  // not replaced (exit_output.hpp).
  std::int64_t made_realtime_ns = realtime_now_ns();

  static std::int64_t realtime_now_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  }

  /// A setting the environment may have given: `apply` runs under config_mutex unless the
  /// environment set it and this call is the code's (the user's environment wins,
  /// docs/configuration.md).
  template <class Apply>
  void configure(bool& from_env_flag, bool from_env, Apply&& apply) {
    std::lock_guard<std::mutex> lock(config_mutex);
    if (from_env_flag && !from_env) return;
    from_env_flag = from_env_flag || from_env;
    apply();
  }

  /// The settings in force come from elsewhere (a worker's, from its parent): `apply` sets them
  /// under config_mutex.
  template <class Apply>
  void configure_from_parent(Apply&& apply) {
    std::lock_guard<std::mutex> lock(config_mutex);
    configured = true;
    apply();
  }

  void set_data_name(std::string_view name, bool from_env) {
    configure(data_name_from_env, from_env, [&] { data_name = std::string(name); });
  }
  std::string chosen_data_name() {
    std::lock_guard<std::mutex> lock(config_mutex);
    return data_name;
  }

  RankInfo rank_info() {
    std::lock_guard<std::mutex> lock(config_mutex);
    return rank;
  }
  void set_rank(int new_rank, int world_size) {
    std::lock_guard<std::mutex> lock(config_mutex);
    rank.rank = new_rank;
    // set_rank refuses INT_MAX; were it to come, the world size stays INT_MAX (no overflow).
    rank.world_size = world_size > new_rank ? world_size
                      : new_rank < INT_MAX  ? new_rank + 1
                                            : INT_MAX;
    rank.source = "set_rank";
  }

  /// Tests only: back to no settings; `also` resets the other parts' settings under the same lock.
  template <class Also>
  void testing_reset_config(Also&& also) {
    std::lock_guard<std::mutex> lock(config_mutex);
    configured = false;
    code_configured = false;
    env = EnvOverrides();
    record_from_env = false;
    nvtx_ranges_from_env = false;
    progress_from_env = false;
    data_name_from_env = false;
    print_rank0_from_env = false;
    print_rank0_by_code = false;
    data_name.clear();
    also();
  }

  // Fork (StopwatchState::before_fork): held across it, released on both sides.
  void lock_config_for_fork() { config_mutex.lock(); }
  void unlock_config_after_fork() { config_mutex.unlock(); }
};

}  // namespace detail
LAPTIME_END_NAMESPACE
