// Configuration from the environment (docs/configuration.md): the seed's four run types and one
// variable per setting, with malformed values ignored and reported. (That the page's table of
// variables is the code's is checked in guarantees-test, with the other tables of docs/.)
#include <unistd.h>

#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "laptime/detail/env_vars.hpp"       // the table of variables
#include "laptime/impl/stopwatch_state.hpp"  // what the environment set, read back
#include "laptime/laptime.hpp"
#include "test_support.hpp"

using laptime_test::env;

// Compiled out (LAPTIME_DISABLE) nothing reads the environment: settings_from_env returns the
// defaults and configure_from_env does nothing, with nothing to link (the case right below); the
// parsing is tested in the normal build.
TEST_CASE("compiled out, the environment is not read and nothing is applied") {
#if !LAPTIME_ENABLED
  const auto s = laptime::settings_from_env(env({{"LAPTIME_PROFILE", "evaluation"}}));
  CHECK_FALSE(s.stopwatch);
  CHECK(s.warnings.empty());
  laptime::apply_settings(s, 0);
  CHECK_FALSE(laptime::configure_from_env().stopwatch);
  CHECK_FALSE(laptime::Stopwatch::instance().is_enabled());
#endif
}

namespace {
const char* evaluation_env(const char* name) {
  return std::string(name) == "LAPTIME_PROFILE" ? "evaluation" : nullptr;
}
}  // namespace

TEST_CASE("settings_from_env takes a plain function, or its pointer, as a function object" *
          LAPTIME_NEEDS_ENABLED) {
  CHECK(laptime::settings_from_env(evaluation_env).stopwatch);
  CHECK(laptime::settings_from_env(&evaluation_env).stopwatch);
  CHECK(laptime::settings_from_env([](const char* n) { return evaluation_env(n); }).stopwatch);
}

TEST_CASE("the four run types of the seed switch the tools as its config file did" *
          LAPTIME_NEEDS_ENABLED) {
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

TEST_CASE("each setting has its own variable, applied on top of the profile" *
          LAPTIME_NEEDS_ENABLED) {
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

TEST_CASE("a malformed variable is ignored with one clear message" * LAPTIME_NEEDS_ENABLED) {
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

namespace {
// Values a shell, a launcher or an attacker may leave in a variable.
const std::vector<std::string> kHostile = {" ",
                                           "-1",
                                           "+3",
                                           "0x10",
                                           "1e3",
                                           "3.0",
                                           "1 2",
                                           "99999999999",
                                           "2147483648",
                                           "-2147483649",
                                           "nan",
                                           "\xff\xfe",
                                           "yes please",
                                           "\x1b[2J",
                                           "1\n",
                                           std::string(100000, '7'),
                                           "\xef\xbc\x93",  // fullwidth 3
                                           "on\x1b]0;t\x07"};

bool has_control(const std::string& text) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}
}  // namespace

TEST_CASE("hostile values in every LAPTIME_* variable keep the default, with one escaped warning" *
          LAPTIME_NEEDS_ENABLED) {
  const laptime::Settings defaults = laptime::settings_from_env(env({}));
  for (const char* name :
       {"LAPTIME_PROFILE", "LAPTIME_STOPWATCH", "LAPTIME_WARMUP", "LAPTIME_PRINT_EVERY",
        "LAPTIME_CUDA_SYNC", "LAPTIME_PRINT_RANK0_ONLY", "LAPTIME_RANKS", "LAPTIME_NVTX",
        "LAPTIME_NVTX_SYNC_PUSH", "LAPTIME_NVTX_SYNC_POP", "LAPTIME_NVTX_CHECK_ORDER"}) {
    for (const std::string& value : kHostile) {
      CAPTURE(name);
      CAPTURE(value.substr(0, 20));
      laptime::Settings s;
      CHECK_NOTHROW(s = laptime::settings_from_env(env({{name, value}})));
      REQUIRE(s.warnings.size() == 1);
      CHECK(s.warnings[0].rfind(name, 0) == 0);
      CHECK_FALSE(has_control(s.warnings[0]));
      CHECK(s.warnings[0].size() < 300);  // a 100 kB value is cut, not repeated
      CHECK(s.stopwatch == defaults.stopwatch);
      CHECK(s.nvtx == defaults.nvtx);
      CHECK(s.num_warmup_iters == defaults.num_warmup_iters);
      CHECK(s.print_every_n_iters == defaults.print_every_n_iters);
      CHECK(s.do_cuda_sync == defaults.do_cuda_sync);
      CHECK(s.gpu_timing == defaults.gpu_timing);
      CHECK(s.print_rank0_only == defaults.print_rank0_only);
      CHECK(s.stopwatch_all_ranks == defaults.stopwatch_all_ranks);
      CHECK(s.nvtx_sync_on_push == defaults.nvtx_sync_on_push);
      CHECK(s.nvtx_sync_on_pop == defaults.nvtx_sync_on_pop);
      CHECK(s.nvtx_check_order == defaults.nvtx_check_order);
    }
  }
  // Free text: any value is a domain name or a list of names; none of them is a warning.
  for (const std::string& value : kHostile) {
    auto s = laptime::settings_from_env(
        env({{"LAPTIME_NVTX_DOMAIN", value}, {"LAPTIME_TRACK_CPU", value}}));
    CHECK(s.warnings.empty());
  }
  // Numbers at the edges of their range.
  CHECK(laptime::settings_from_env(env({{"LAPTIME_WARMUP", "2147483647"}})).num_warmup_iters ==
        2147483647);
  CHECK(laptime::settings_from_env(env({{"LAPTIME_WARMUP", " 7 "}})).num_warmup_iters == 7);
}

TEST_CASE(
    "LAPTIME_TRACK_CPU keeps at most 256 distinct names, well below the name table, with one "
    "warning naming the bound" *
    LAPTIME_NEEDS_ENABLED) {
  std::string list = "a,,a,b,";
  for (int i = 0; i < LAPTIME_MAX_NAMES + 100; ++i) list += "n" + std::to_string(i) + ",";
  const auto s = laptime::settings_from_env(env({{"LAPTIME_TRACK_CPU", list}}));
  CHECK(s.track_cpu.size() == 256);
  CHECK(s.track_cpu[0] == "a");
  CHECK(s.track_cpu[1] == "b");
  REQUIRE(s.warnings.size() == 1);
  CHECK(s.warnings[0].rfind("LAPTIME_TRACK_CPU", 0) == 0);
  CHECK(s.warnings[0].find("256") != std::string::npos);
  // At the bound: no warning.
  list.clear();
  for (int i = 0; i < 256; ++i) list += "n" + std::to_string(i) + ",";
  CHECK(laptime::settings_from_env(env({{"LAPTIME_TRACK_CPU", list}})).warnings.empty());
}

TEST_CASE("LAPTIME_RECORD above 1000000 intervals per thread is clamped to it with one warning" *
          LAPTIME_NEEDS_ENABLED) {
  for (const char* huge :
       {"1000001", "2000000000", "2147483647", "3000000000", " 99999999999999999999999 "}) {
    CAPTURE(huge);
    const auto s = laptime::settings_from_env(env({{"LAPTIME_RECORD", huge}}));
    CHECK(s.record_intervals == std::optional<std::size_t>(1000000));
    REQUIRE(s.warnings.size() == 1);
    const std::string digits = std::string(huge).substr(huge[0] == ' ' ? 1 : 0, 20);
    CHECK(s.warnings[0].rfind("LAPTIME_RECORD=" + digits, 0) == 0);
    CHECK(s.warnings[0].find("1000000") != std::string::npos);
  }
  const auto s = laptime::settings_from_env(env({{"LAPTIME_RECORD", "1000000"}}));
  CHECK(s.record_intervals == std::optional<std::size_t>(1000000));
  CHECK(s.warnings.empty());
}

TEST_CASE(
    "every boolean variable takes 1/0, true/false, on/off, yes/no in any case, through one "
    "parser" *
    LAPTIME_NEEDS_ENABLED) {
  const std::pair<const char*, bool laptime::Settings::*> booleans[] = {
      {"LAPTIME_STOPWATCH", &laptime::Settings::stopwatch},
      {"LAPTIME_CUDA_SYNC", &laptime::Settings::do_cuda_sync},
      {"LAPTIME_GPU_TIMING", &laptime::Settings::gpu_timing},
      {"LAPTIME_PRINT_RANK0_ONLY", &laptime::Settings::print_rank0_only},
      {"LAPTIME_NVTX", &laptime::Settings::nvtx},
      {"LAPTIME_NVTX_SYNC_PUSH", &laptime::Settings::nvtx_sync_on_push},
      {"LAPTIME_NVTX_SYNC_POP", &laptime::Settings::nvtx_sync_on_pop},
      {"LAPTIME_NVTX_CHECK_ORDER", &laptime::Settings::nvtx_check_order},
      {"LAPTIME_NVTX_COUNTERS", &laptime::Settings::nvtx_counters},
      {"LAPTIME_NVTX_RANGES", &laptime::Settings::nvtx_ranges}};
  const std::pair<const char*, bool> spellings[] = {
      {"1", true},      {"TRUE", true}, {"True", true}, {"tRUE", true}, {"ON", true},
      {"oN", true},     {"YES", true},  {"yEs", true},  {"0", false},   {"FALSE", false},
      {"fAlSe", false}, {"OFF", false}, {"Off", false}, {"NO", false},  {"nO", false}};
  for (const auto& boolean : booleans) {
    for (const auto& spelling : spellings) {
      const char* name = boolean.first;
      const char* text = spelling.first;
      const bool on = spelling.second;
      CAPTURE(name);
      CAPTURE(text);
      // The opposite first (a profile that turns everything on, or off), so that the value
      // must come from the variable.
      const auto s = laptime::settings_from_env(
          env({{"LAPTIME_PROFILE", on ? "training" : "profiling"}, {name, text}}));
      CHECK(s.warnings.empty());
      CHECK(s.*boolean.second == on);
    }
  }
#if LAPTIME_ENABLED
  // What each spelling means, for the variables read elsewhere (environment-test runs them).
  for (const auto& spelling : spellings) {
    CAPTURE(spelling.first);
    CHECK(laptime::detail::parse_bool(spelling.first) == std::optional<bool>(spelling.second));
  }
#endif
}

namespace lt = laptime::detail;

TEST_CASE("each type of variable has one warning per kind of bad value, the table's" *
          LAPTIME_NEEDS_ENABLED) {
  // Every variable configure_from_env reads, set to a value no type takes, is warned about in
  // its type's words; the text-like types take it.
  std::size_t checked = 0;
  for (const lt::EnvVar& v : lt::kEnvVars) {
    if (std::string(v.read_at) != "configure_from_env()") continue;
    CAPTURE(v.name);
    const auto s = laptime::settings_from_env(env({{v.name, "maybe,"}}));
    const bool free_text = v.type == lt::EnvType::Text || v.type == lt::EnvType::Names;
    if (free_text) {
      CHECK(s.warnings.empty());
      continue;
    }
    REQUIRE(s.warnings.size() == 1);
    CHECK(s.warnings[0] == std::string(v.name) + "='maybe,' " + lt::env_why(v) + "; ignored");
    ++checked;
  }
  CHECK(checked >= 15);
  // A number above an int's highest is clamped, with the bound's one text.
  const auto s = laptime::settings_from_env(env({{"LAPTIME_RECORD", "1000001"}}));
  REQUIRE(s.warnings.size() == 1);
  CHECK(s.warnings[0] == std::string("LAPTIME_RECORD=1000001 is above 1000000, ") +
                             lt::env_var(lt::Env::record).bound_is + "; 1000000 is used");
}

TEST_CASE("LAPTIME_NVTX_COUNTERS and LAPTIME_NVTX_COUNTERS_HZ, and the profiling profile" *
          LAPTIME_NEEDS_ENABLED) {
  auto settings = [](std::map<std::string, std::string> env) {
    return laptime::settings_from_env([env](const char* name) -> const char* {
      const auto it = env.find(name);
      return it != env.end() ? it->second.c_str() : nullptr;
    });
  };
  const laptime::Settings none = settings({});
  CHECK_FALSE(none.nvtx_counters);
  CHECK(none.nvtx_counters_hz == 0);
  const laptime::Settings on = settings({{"LAPTIME_NVTX_COUNTERS", "1"}});
  CHECK(on.nvtx_counters);
  CHECK(on.nvtx_counters_hz == 0);
  const laptime::Settings rate = settings({{"LAPTIME_NVTX_COUNTERS_HZ", "20"}});
  CHECK(rate.nvtx_counters);  // a rate turns them on
  CHECK(rate.nvtx_counters_hz == 20);
  const laptime::Settings profiling = settings({{"LAPTIME_PROFILE", "profiling"}});
  CHECK(profiling.nvtx_counters);
  CHECK(profiling.nvtx_counters_hz == 10);
  const laptime::Settings debugging = settings({{"LAPTIME_PROFILE", "debugging"}});
  CHECK_FALSE(debugging.nvtx_counters);
  const laptime::Settings vetoed =
      settings({{"LAPTIME_PROFILE", "profiling"}, {"LAPTIME_NVTX_COUNTERS", "0"}});
  CHECK_FALSE(vetoed.nvtx_counters);
  const laptime::Settings slow =
      settings({{"LAPTIME_PROFILE", "profiling"}, {"LAPTIME_NVTX_COUNTERS_HZ", "0"}});
  CHECK(slow.nvtx_counters);
  CHECK(slow.nvtx_counters_hz == 0);
  // A decimal number, spaces around it allowed as for an int; no base prefix, exponent or sign.
  for (const char* good : {"2.5", " 5", "5 ", ".5", "7."}) {
    const laptime::Settings s = settings({{"LAPTIME_NVTX_COUNTERS_HZ", good}});
    CHECK_MESSAGE(s.nvtx_counters, good);
    CHECK(s.warnings.empty());
  }
  for (const char* bad : {"fast", "-1", "1001", "nan", "10x", "0x10", "0X1p3", "1e1", "+5", "."}) {
    const laptime::Settings s = settings({{"LAPTIME_NVTX_COUNTERS_HZ", bad}});
    CHECK_FALSE(s.nvtx_counters);
    REQUIRE(s.warnings.size() == 1);
    CHECK(s.warnings[0].find("LAPTIME_NVTX_COUNTERS_HZ=") == 0);
  }
}

TEST_CASE(
    "error-policy names have one parser, shared by LAPTIME_ON_ERROR and the Python extension: "
    "exact lower-case names only, and each policy's name reads back as itself") {
  using laptime::ErrorPolicy;
  CHECK(laptime::parse_error_policy("throw") == ErrorPolicy::Throw);
  CHECK(laptime::parse_error_policy("warn") == ErrorPolicy::Warn);
  CHECK(laptime::parse_error_policy("abort") == ErrorPolicy::Abort);
  for (const char* bad : {"", "Warn", "WARN", " warn", "warn ", "warning", "ignore", "thro"}) {
    CAPTURE(bad);
    CHECK_FALSE(laptime::parse_error_policy(bad).has_value());
  }
  for (const ErrorPolicy p : {ErrorPolicy::Throw, ErrorPolicy::Warn, ErrorPolicy::Abort}) {
    CHECK(laptime::parse_error_policy(laptime::error_policy_name(p)) == p);
  }
}

namespace {
// Everything written to stderr while `fn` runs.
template <class Fn>
[[maybe_unused]] std::string capture_stderr(Fn&& fn) {
  std::fflush(stderr);
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  const int saved = ::dup(2);
  ::dup2(::fileno(file), 2);
  fn();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string out;
  std::rewind(file);
  for (int c; (c = std::fgetc(file)) != EOF;) out += static_cast<char>(c);
  std::fclose(file);
  return out;
}
}  // namespace

TEST_CASE("Settings::track_cpu made in code gets LAPTIME_TRACK_CPU's bound: distinct names, 256" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  const auto tracked_names = [] {
    const laptime::detail::StopwatchState& st = laptime::detail::stopwatch_state();
    int n = 0;
    for (std::uint32_t id = 0; id < st.name_count.load(); ++id) {
      n += (st.name_flags[id].load() & laptime::detail::kNameTracked) != 0;
    }
    return n;
  };
  laptime::detail::testing_reset_stopwatch();
  laptime::Settings s;
  for (int i = 0; i < 3000; ++i) s.track_cpu.push_back("repeated-" + std::to_string(i % 10));
  s.track_cpu.emplace_back();  // an empty item: dropped
  // Before "applying settings never throws…", whose list is past the bound too: the warning is
  // told once per process.
  std::string err = capture_stderr([&] { laptime::apply_settings(s, 0); });
  CHECK(err.empty());  // 10 distinct names: within the bound
  CHECK(tracked_names() == 10);
  s.track_cpu.clear();
  for (int i = 0; i < 300; ++i) s.track_cpu.push_back("distinct-" + std::to_string(i));
  err = capture_stderr([&] { laptime::apply_settings(s, 0); });
  CHECK(err.rfind("laptime: warning: apply_settings: LAPTIME_TRACK_CPU (track_cpu)", 0) == 0);
  CHECK(err.find("only the first 256") != std::string::npos);
  CHECK(tracked_names() == 10 + 256);
  laptime::detail::testing_reset_stopwatch();
#endif
}

// Last in this file: it fills the process's name table.
TEST_CASE(
    "applying settings never throws, whatever the error policy, also with more names to "
    "track than the table holds" *
    LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  laptime::detail::testing_reset_stopwatch();
  laptime::Settings s = laptime::settings_from_env(env({{"LAPTIME_PROFILE", "evaluation"}}));
  for (int i = 0; i < LAPTIME_MAX_NAMES + 10; ++i) s.track_cpu.push_back("t" + std::to_string(i));
  REQUIRE(laptime::error_policy() == laptime::ErrorPolicy::Throw);
  CHECK_NOTHROW(laptime::apply_settings(s, /*rank=*/0));
  CHECK(laptime::Stopwatch::instance().is_enabled());  // the rest was still applied
  // enable() again with other arguments: a usage error from code, a warning from settings.
  s.num_warmup_iters = 3;
  CHECK_NOTHROW(laptime::apply_settings(s, /*rank=*/0));
  laptime::detail::testing_reset_stopwatch();
#endif
}

TEST_CASE("LAPTIME_GPU_TIMING takes a boolean, or the names to time on the GPU" *
          LAPTIME_NEEDS_ENABLED) {
  laptime::Settings s = laptime::settings_from_env(env({{"LAPTIME_GPU_TIMING", "1"}}));
  CHECK(s.gpu_timing);
  CHECK(s.gpu_timing_names.empty());
  s = laptime::settings_from_env(env({{"LAPTIME_GPU_TIMING", "forward,backward,forward"}}));
  CHECK_FALSE(s.gpu_timing);
  CHECK(s.gpu_timing_names == std::vector<std::string>{"forward", "backward"});
  s = laptime::settings_from_env(env({{"LAPTIME_GPU_TIMING", "optimizer step"}}));
  CHECK(s.gpu_timing_names == std::vector<std::string>{"optimizer step"});
  // Spaces around an item are not part of the name, in either kind of list.
  s = laptime::settings_from_env(env({{"LAPTIME_GPU_TIMING", " forward, backward "},
                                      {"LAPTIME_TRACK_CPU", "data fetch, training loop , ,"}}));
  CHECK(s.gpu_timing_names == std::vector<std::string>{"forward", "backward"});
  CHECK(s.track_cpu == std::vector<std::string>{"data fetch", "training loop"});
  CHECK(s.warnings.empty());
  s = laptime::settings_from_env(env({{"LAPTIME_TRACK_CPU", ",,, ,"}}));
  CHECK(s.track_cpu.empty());
  for (const std::string& bad :
       {std::string("a,,b"), std::string("\x1b[2J"), std::string(" ,"), std::string(300, 'x')}) {
    CAPTURE(bad);
    s = laptime::settings_from_env(env({{"LAPTIME_GPU_TIMING", bad}}));
    CHECK_FALSE(s.gpu_timing);
    CHECK(s.gpu_timing_names.empty());
    REQUIRE(s.warnings.size() == 1);
    CHECK_FALSE(has_control(s.warnings[0]));
  }
}

TEST_CASE(
    "Settings made in code get the environment's bounds: LAPTIME_RECORD's and "
    "LAPTIME_GPU_TIMING's, each with one warning, and start_meas goes on" *
    LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  auto& sw = laptime::Stopwatch::instance();
  laptime::set_error_policy(laptime::ErrorPolicy::Throw);
  laptime::detail::testing_reset_stopwatch();
  laptime::Settings s;
  s.stopwatch = true;
  s.num_warmup_iters = 0;
  s.record_intervals = std::numeric_limits<std::size_t>::max();  // a -1 from a config file
  for (int i = 0; i < 5000; ++i) s.gpu_timing_names.push_back("code-gpu-" + std::to_string(i));
  const std::string err = capture_stderr([&] { laptime::apply_settings(s, 0); });
  CHECK(err.find("configure_from_env") == std::string::npos);  // the code applied them
  CHECK(err.find("record_intervals") != std::string::npos);
  CHECK(err.find("1000000 is used") != std::string::npos);
  CHECK(err.find("gpu_timing_names") != std::string::npos);
  CHECK(err.find("only the first 64") != std::string::npos);
  CHECK_NOTHROW(sw.start_meas("code-data"));  // its name still finds room in the table
  sw.end_meas("code-data");
  sw.finish_iter();
  const auto r = sw.results();
  REQUIRE(r.samples.has_value());
  CHECK(r.samples->capacity == 1000000);
  const laptime::detail::StopwatchState& st = laptime::detail::stopwatch_state();
  int gpu_names = 0;
  for (std::uint32_t id = 0; id < st.name_count.load(); ++id) {
    gpu_names += (st.name_flags[id].load() & laptime::detail::kNameGpu) != 0;
  }
  CHECK(gpu_names == 64);
  laptime::detail::testing_reset_stopwatch();
#endif
}
