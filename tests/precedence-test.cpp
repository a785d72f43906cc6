// Who wins when the user's environment and the code's calls disagree (docs/configuration.md,
// "Precedence"): a variable the user set, then the code's calls, then built-in defaults, in either
// order of calls, for the Stopwatch and the NVTX wrapper.
#include <sstream>

#include "laptime/impl/nvtx_state.hpp"       // the wrapper's settings, read back
#include "laptime/impl/stopwatch_state.hpp"  // what the environment set, read back
#include "laptime/laptime.hpp"
#include "test_support.hpp"

using laptime_test::env;

TEST_CASE("a variable the user set overrides the code, in either order of calls" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  auto& sw = laptime::Stopwatch::instance();
  laptime::set_error_policy(laptime::ErrorPolicy::Throw);
  const auto user_env =
      laptime::settings_from_env(env({{"LAPTIME_PROFILE", "evaluation"}, {"LAPTIME_WARMUP", "3"}}));
  SUBCASE("configure_from_env, then the code's enable") {
    laptime::detail::testing_reset_stopwatch();
    laptime::apply_settings(user_env, 0);
    CHECK_NOTHROW(sw.enable(50, 100, false));
  }
  SUBCASE("the code's enable, then configure_from_env") {
    laptime::detail::testing_reset_stopwatch();
    sw.enable(50, 100, false);
    laptime::apply_settings(user_env, 0);
    CHECK_NOTHROW(sw.enable(50, 100, false));  // the code may say it again
  }
  CHECK(sw.is_enabled());
  const auto r = sw.results();
  CHECK(r.num_warmup_iters == 3);                                       // the user's LAPTIME_WARMUP
  CHECK(laptime::detail::stopwatch_state().print_every.load() == 100);  // the code's
  // The code still may not contradict itself.
  CHECK_THROWS_AS(sw.enable(51, 100, false), laptime::UsageError);
  laptime::detail::testing_reset_stopwatch();
#endif
}

#if LAPTIME_ENABLED
namespace {
// The wrapper's settings in force: its flags, and its domain.
std::uint32_t nvtx_flags() {
  return laptime::detail::nvtx_state().state.load() & laptime::detail::NvtxState::kFlagMask;
}
bool nvtx_tracks() {
  return (nvtx_flags() & laptime::detail::NvtxState::kTrack) != 0;
}
}  // namespace
#endif

TEST_CASE("the NVTX variables override the code's enable, in either order of calls" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  auto& nvtx = laptime::NVTXRangeWrapper::instance();
  laptime::set_error_policy(laptime::ErrorPolicy::Throw);
  laptime::NVTXOptions code_domain;
  code_domain.domain = "code";
  SUBCASE("LAPTIME_PROFILE=profiling, then the code's enable with order tracking") {
    laptime::detail::nvtx_reset_for_testing();
    laptime::apply_settings(laptime::settings_from_env(env({{"LAPTIME_PROFILE", "profiling"}})), 0);
    CHECK(nvtx.is_enabled());
    CHECK_NOTHROW(nvtx.enable(false, false, true));  // the documented set-up order
    CHECK(nvtx_tracks());                            // the code's: the profile sets none
    CHECK_NOTHROW(nvtx.enable(false, false, true));  // the code may say it again
    CHECK_THROWS_AS(nvtx.enable(false, false, false), laptime::UsageError);  // not contradict it
  }
  SUBCASE("LAPTIME_NVTX and LAPTIME_NVTX_DOMAIN, then the code's enable") {
    laptime::detail::nvtx_reset_for_testing();
    laptime::apply_settings(
        laptime::settings_from_env(env({{"LAPTIME_NVTX", "1"}, {"LAPTIME_NVTX_DOMAIN", "user"}})),
        0);
    CHECK_NOTHROW(nvtx.enable(false, false, true, code_domain));
    CHECK(nvtx_tracks());
    CHECK(laptime::detail::nvtx_state().options_domain == "user");  // the user's
  }
  SUBCASE("the code's enable, then LAPTIME_NVTX_CHECK_ORDER=0") {
    laptime::detail::nvtx_reset_for_testing();
    nvtx.enable(false, false, true, code_domain);
    laptime::apply_settings(laptime::settings_from_env(env({{"LAPTIME_NVTX_CHECK_ORDER", "0"}})),
                            0);
    CHECK(nvtx.is_enabled());
    CHECK_FALSE(nvtx_tracks());                                     // the user's
    CHECK(laptime::detail::nvtx_state().options_domain == "code");  // the code's
    CHECK_NOTHROW(nvtx.enable(false, false, true, code_domain));    // the code says it again
    CHECK_FALSE(nvtx_tracks());
  }
  for (const char* off : {"LAPTIME_NVTX=0", "LAPTIME_PROFILE=training"}) {
    CAPTURE(off);
    laptime::detail::nvtx_reset_for_testing();
    const std::string var(off);
    const auto eq = var.find('=');
    laptime::apply_settings(
        laptime::settings_from_env(env({{var.substr(0, eq), var.substr(eq + 1)}})), 0);
    CHECK_NOTHROW(nvtx.enable(false, false, true));
    CHECK_FALSE(nvtx.is_enabled());  // the user's "off" keeps the wrapper off
  }
  laptime::detail::nvtx_reset_for_testing();
#endif
}

TEST_CASE("the code's settings beat built-in defaults; LAPTIME_PROFILE=training wins over enable" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  auto& sw = laptime::Stopwatch::instance();
  laptime::set_error_policy(laptime::ErrorPolicy::Throw);
  laptime::detail::testing_reset_stopwatch();
  laptime::apply_settings(laptime::settings_from_env(env({{"LAPTIME_PROFILE", "evaluation"}})), 0);
  CHECK(sw.results().num_warmup_iters == 10);  // the built-in default
  CHECK_NOTHROW(sw.enable(50, std::nullopt, false));
  CHECK(sw.results().num_warmup_iters == 50);  // the code's

  laptime::detail::testing_reset_stopwatch();
  laptime::apply_settings(laptime::settings_from_env(env({{"LAPTIME_PROFILE", "training"}})), 0);
  sw.enable(0, 1, false);  // "training: everything off" is the user's choice
  CHECK_FALSE(sw.is_enabled());

  laptime::detail::testing_reset_stopwatch();
  sw.enable(0, 1, false);
  laptime::apply_settings(laptime::settings_from_env(env({{"LAPTIME_STOPWATCH", "0"}})), 0);
  CHECK_FALSE(sw.is_enabled());
  laptime::detail::testing_reset_stopwatch();
#endif
}

TEST_CASE(
    "configure_from_env, then the code's enable on any rank: LAPTIME_TRACK_CPU and "
    "LAPTIME_PRINT_RANK0_ONLY apply, though the environment did not enable the Stopwatch" *
    LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  auto& sw = laptime::Stopwatch::instance();
  laptime::set_error_policy(laptime::ErrorPolicy::Throw);
  for (const int rank : {0, 1}) {
    CAPTURE(rank);
    laptime::detail::testing_reset_stopwatch();
    laptime::apply_settings(laptime::settings_from_env(env({{"LAPTIME_TRACK_CPU", "loader"}})),
                            rank);
    CHECK_FALSE(sw.is_enabled());  // the environment did not ask for it
    sw.enable(0, std::nullopt, false);
    sw.start_meas("loader");
    sw.end_meas("loader");
    sw.start_meas("step");
    sw.end_meas("step");
    const laptime::Results r = sw.results();
    for (const auto& m : r.measurements) {
      CAPTURE(m.name);
      CHECK(m.resources.has_value() == (m.name == "loader"));
    }
    // The variable's default (1): the reports stay on rank 0.
    CHECK(laptime::detail::stopwatch_state().print_rank0_only.load());
  }
  // The code's call beats that default, in either order; the user's variable beats the code.
  const auto rank0_only = [] { return laptime::detail::stopwatch_state().print_rank0_only.load(); };
  laptime::detail::testing_reset_stopwatch();
  sw.set_print_rank0_only(false);
  laptime::apply_settings(laptime::settings_from_env(env({})), 1);
  CHECK_FALSE(rank0_only());
  laptime::detail::testing_reset_stopwatch();
  laptime::apply_settings(laptime::settings_from_env(env({})), 1);
  sw.set_print_rank0_only(false);
  CHECK_FALSE(rank0_only());
  laptime::detail::testing_reset_stopwatch();
  laptime::apply_settings(laptime::settings_from_env(env({{"LAPTIME_PRINT_RANK0_ONLY", "1"}})), 1);
  sw.set_print_rank0_only(false);
  CHECK(rank0_only());
  laptime::detail::testing_reset_stopwatch();
#endif
}

TEST_CASE("set_max_names never goes below the names already known, and 0 is a usage error" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  laptime::detail::testing_reset_stopwatch();
  auto& sw = laptime::Stopwatch::instance();
  laptime::set_error_policy(laptime::ErrorPolicy::Throw);
  sw.enable(0, std::nullopt, false);
  for (const char* name : {"known 1", "known 2", "known 3"}) {
    sw.start_meas(name);
    sw.end_meas(name);
  }
  const std::size_t known = laptime::detail::stopwatch_state().name_count.load();
  REQUIRE(known >= 3);
  // Names are interned for good: a lower limit would count them past it and still measure them.
  CHECK(sw.set_max_names(1) == known);
  std::string refused;
  try {
    sw.start_meas("one name too many");
  } catch (const laptime::UsageError& e) {
    refused = e.what();
  }
  CHECK(refused.find("more than " + std::to_string(known) + " distinct") != std::string::npos);
  CHECK_THROWS_AS((void)sw.set_max_names(0), laptime::UsageError);
  CHECK(sw.set_max_names(known + 1) == known + 1);
  (void)sw.set_max_names(LAPTIME_MAX_NAMES);
  laptime::detail::testing_reset_stopwatch();
#endif
}

TEST_CASE(
    "before the first enable() print_eval_times prints nothing; compiled out, set_max_names "
    "returns n clamped to LAPTIME_MAX_NAMES, the limit it would set") {
  auto& sw = laptime::Stopwatch::instance();
#if LAPTIME_ENABLED
  laptime::detail::testing_reset_stopwatch();
#endif
  std::ostringstream out;
  sw.print_eval_times(out);
  CHECK(out.str().empty());
#if !LAPTIME_ENABLED
  CHECK(sw.set_max_names(7) == 7);
  CHECK(sw.set_max_names(std::size_t{LAPTIME_MAX_NAMES} + 1000) == std::size_t{LAPTIME_MAX_NAMES});
#endif
}
