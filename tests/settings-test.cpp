// Configuration from the environment (SPEC §8): the seed's four run types and one variable per
// setting, with malformed values ignored and reported.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <map>
#include <string>

#include "laptime/settings.hpp"
#include "test_support.hpp"

namespace {
auto env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace

TEST_CASE("the four run types of the seed switch the tools as its config file did") {
  auto s = laptime::settings_from_env(env({{"LAPTIME_PROFILE", "training"}}));
  CHECK_FALSE(s.stopwatch);
  CHECK_FALSE(s.nvtx);
  s = laptime::settings_from_env(env({{"LAPTIME_PROFILE", "evaluation"}}));
  CHECK(s.stopwatch);
  CHECK_FALSE(s.nvtx);
  s = laptime::settings_from_env(env({{"LAPTIME_PROFILE", "profiling"}}));
  CHECK(s.stopwatch);
  CHECK(s.nvtx);
  CHECK_FALSE(s.nvtx_check_order);
  s = laptime::settings_from_env(env({{"LAPTIME_PROFILE", "debugging"}}));
  CHECK(s.stopwatch);
  CHECK(s.nvtx);
  CHECK(s.nvtx_check_order);
  CHECK(s.warnings.empty());
  s = laptime::settings_from_env(env({}));
  CHECK_FALSE(s.stopwatch);
  CHECK_FALSE(s.nvtx);
}

TEST_CASE("each setting has its own variable, applied on top of the profile") {
  const auto s = laptime::settings_from_env(env({{"LAPTIME_PROFILE", "profiling"},
                                                 {"LAPTIME_NVTX_CHECK_ORDER", "1"},
                                                 {"LAPTIME_WARMUP", "50"},
                                                 {"LAPTIME_PRINT_EVERY", "100"},
                                                 {"LAPTIME_CUDA_SYNC", "true"},
                                                 {"LAPTIME_GPU_TIMING", "on"},
                                                 {"LAPTIME_RANKS", "all"},
                                                 {"LAPTIME_TRACK_CPU", "training loop,data"},
                                                 {"LAPTIME_NVTX_DOMAIN", "trainer"},
                                                 {"LAPTIME_NVTX_SYNC_POP", "yes"}}));
  CHECK(s.nvtx_check_order);
  CHECK(s.num_warmup_iters == 50);
  CHECK(s.print_every_n_iters == 100);
  CHECK(s.do_cuda_sync);
  CHECK(s.gpu_timing);
  CHECK(s.stopwatch_all_ranks);
  CHECK(s.track_cpu == std::vector<std::string>{"training loop", "data"});
  CHECK(s.nvtx_domain == "trainer");
  CHECK(s.nvtx_sync_on_pop);
  CHECK_FALSE(s.nvtx_sync_on_push);
  CHECK(s.warnings.empty());
}

TEST_CASE("a malformed variable is ignored with one clear message") {
  const auto s = laptime::settings_from_env(env({{"LAPTIME_PROFILE", "fast"},
                                                 {"LAPTIME_WARMUP", "-3"},
                                                 {"LAPTIME_PRINT_EVERY", "often"},
                                                 {"LAPTIME_NVTX", "maybe"},
                                                 {"LAPTIME_RANKS", "1"}}));
  REQUIRE(s.warnings.size() == 5);
  CHECK(s.warnings[0].find("LAPTIME_PROFILE='fast'") != std::string::npos);
  CHECK(s.warnings[1].find("LAPTIME_WARMUP='-3'") != std::string::npos);
  CHECK(s.num_warmup_iters == 10);
  CHECK_FALSE(s.print_every_n_iters.has_value());
  CHECK_FALSE(s.nvtx);
}

TEST_CASE("applying evaluation settings enables the Stopwatch on rank 0 only, as the seed did" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  laptime::detail::testing_reset_stopwatch();
  const auto s = laptime::settings_from_env(env(
      {{"LAPTIME_PROFILE", "evaluation"}, {"LAPTIME_WARMUP", "2"}, {"LAPTIME_TRACK_CPU", "x"}}));
  laptime::apply_settings(s, /*rank=*/1);
  CHECK_FALSE(laptime::Stopwatch::instance().is_enabled());
  CHECK_FALSE(laptime::NVTXRangeWrapper::instance().is_enabled());
  laptime::apply_settings(s, /*rank=*/0);
  CHECK(laptime::Stopwatch::instance().is_enabled());
  CHECK(laptime::Stopwatch::instance().results().num_warmup_iters == 2);
  CHECK_FALSE(laptime::NVTXRangeWrapper::instance().is_enabled());
  laptime::detail::testing_reset_stopwatch();
#endif
}
