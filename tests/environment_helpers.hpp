// The side of environment-test that runs in a fresh process: one program per bad environment
// (started as "--helper MODE"), each measuring and printing what the test checks, and
// run_helper(), which starts one and checks that it kept measuring. What laptime reads at first
// use needs a fresh process, so each case runs this binary again.
#pragma once

#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "laptime/laptime.hpp"
#include "reliability_support.hpp"
#include "test_support.hpp"

namespace environment_test {

inline constexpr int kIters = 12;

#if LAPTIME_ENABLED

// Measures "step" (and the tracked "tracked") kIters iterations, then prints what the test
// checks: a summary line, the report and the JSON between markers.
inline int measure_and_report() {
  auto& sw = laptime::Stopwatch::instance();
  for (int i = 0; i < kIters; ++i) {
    sw.start_meas("step");
    sw.start_meas("tracked");
    sw.end_meas("tracked");
    sw.end_meas("step");
    sw.finish_iter();
  }
  bool thrown = false;
  try {
    sw.end_meas("never started");
  } catch (const laptime::UsageError&) {
    thrown = true;
  }
  std::printf("helper: enabled=%d measured=%lld usage_error_thrown=%d\n", sw.is_enabled() ? 1 : 0,
              static_cast<long long>(sw.get_num_nonwarmup_iters_measured()), thrown ? 1 : 0);
  std::printf("--- report\n%s--- json\n%s\n--- end\n", sw.report().c_str(), sw.to_json().c_str());
  return 0;
}

// /proc replaced by an empty directory (an empty tmpfs mounted over it in a private mount
// namespace): what a locked-down container or a missing mount looks like. 77: not possible here.
inline int helper_no_proc() {
  if (!reliability::enter_private_mount_namespace()) return 77;
  if (::mount("none", "/proc", "tmpfs", 0, "size=16k,mode=0555") != 0) {
    std::perror("mount tmpfs over /proc");
    return 77;
  }
  auto& sw = laptime::Stopwatch::instance();
  sw.track_cpu_usage("tracked");
  sw.enable(0, std::nullopt, false);
  const int rc = measure_and_report();
  // Sanitizer runtimes read /proc at exit (LeakSanitizer lists threads there): give it back.
  ::umount2("/proc", MNT_DETACH);
  return rc;
}

// LAPTIME_CUDA_DRIVER points at nothing: CUDA syncs (and GPU timing) are unavailable; host
// timing goes on.
inline int helper_no_cuda(bool gpu_timing) {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, /*do_cuda_sync=*/true);
  if (gpu_timing) sw.enable_gpu_timing();
  laptime::NVTXRangeWrapper::instance().enable(/*sync_on_push=*/true, false, true);
  laptime::NVTXRangeWrapper::instance().range_push("range");
  laptime::NVTXRangeWrapper::instance().range_pop("range");
  return measure_and_report();
}

// configure_from_env() with whatever the test put in the environment.
inline int helper_configure() {
  laptime::configure_from_env();
  auto& sw = laptime::Stopwatch::instance();
  if (!sw.is_enabled()) sw.enable(0, std::nullopt, false);
  return measure_and_report();
}

// Enables from the code and says what the variables read at the first enable chose: whether a
// shared file for worker processes was made (it is published in LAPTIME_WORKER_SHARE) and
// whether SIGTERM got laptime's handler (LAPTIME_SIGNAL_HANDLERS, with LAPTIME_OUTPUT set).
inline int helper_first_enable_flags() {
  laptime::Stopwatch::instance().enable(0, std::nullopt, false);
  struct sigaction sa {};
  ::sigaction(SIGTERM, nullptr, &sa);
  std::printf("flags: workers=%d signal_handlers=%d\n",
              std::getenv("LAPTIME_WORKER_SHARE") != nullptr ? 1 : 0,
              sa.sa_handler != SIG_DFL ? 1 : 0);
  return measure_and_report();
}

// configure_from_env(), then the code turns on everything that echoes a variable's value: CUDA
// syncs and GPU timing (the driver's path), the at-exit file (its path).
inline int helper_configure_everything() {
  laptime::configure_from_env();
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, /*do_cuda_sync=*/true);
  sw.enable_gpu_timing();
  return measure_and_report();
}

// The code asks for more intervals per thread than the bound.
inline int helper_record_from_code() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable_recording(2000000000);
  sw.enable(0, std::nullopt, false);
  return measure_and_report();
}

// The seed's way: the code's enable() alone (no configure_from_env), then its own recording.
inline int helper_enable_only() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.enable_recording(8);
  return measure_and_report();
}

// Recording whose ring cannot be allocated: the address space is limited to what the process
// uses now plus 16 MB, half a ring of 1000000 intervals. 77: not possible here.
inline int helper_record_no_memory() {
  // Sanitizer runtimes reserve terabytes of address space: a limit on it is not possible there.
  if (RELIABILITY_SANITIZER) return 77;
  const std::string status = reliability::read_file("/proc/self/status");
  const auto at = status.find("VmSize:");
  if (at == std::string::npos) return 77;
  const rlim_t limit = (std::strtoull(status.c_str() + at + 7, nullptr, 10) + 16 * 1024) * 1024;
  const struct rlimit rl = {limit, limit};
  if (::setrlimit(RLIMIT_AS, &rl) != 0) return 77;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable_recording(1000000);
  sw.enable(0, std::nullopt, false);
  return measure_and_report();
}

// configure_from_env() with more names to track than asked for, then names not in the list are
// measured: "step" and "tracked" must still be measurable.
inline int helper_configure_untracked() {
  const laptime::Settings applied = laptime::configure_from_env();
  std::printf("helper: track_cpu applied=%zu\n", applied.track_cpu.size());
  std::printf("helper: gpu_timing_names applied=%zu\n", applied.gpu_timing_names.size());
  return measure_and_report();
}

#endif  // LAPTIME_ENABLED

inline std::string between(const std::string& text, const std::string& begin,
                           const std::string& end) {
  const auto b = text.find(begin);
  if (b == std::string::npos) return "";
  const auto e = text.find(end, b + begin.size());
  return text.substr(b + begin.size(),
                     e == std::string::npos ? std::string::npos : e - b - begin.size());
}

// The environment of a case: the test's own LAPTIME_* settings removed, `vars` added.
inline std::map<std::string, std::string> env_with(std::map<std::string, std::string> vars) {
  for (const char* name :
       {"LAPTIME_PROFILE", "LAPTIME_ON_ERROR", "LAPTIME_OUTPUT", "LAPTIME_PRINT_AT_EXIT",
        "LAPTIME_WARMUP", "LAPTIME_CUDA_DRIVER", "LAPTIME_STOPWATCH", "LAPTIME_PRINT_EVERY"}) {
    vars.emplace(name, "");
  }
  return vars;
}

// Runs a helper; checks it exited 0, kept measuring and wrote valid JSON. Returns the JSON.
inline std::unique_ptr<reliability::Json> run_helper(const char* mode,
                                                     const std::map<std::string, std::string>& vars,
                                                     reliability::RunResult& r,
                                                     int expect_measured) {
  reliability::TempDir dir;
  r = reliability::run_self({"--helper", mode}, env_with(vars), dir);
  if (r.exit_code == 77) return nullptr;
  CHECK_MESSAGE(r.ok(), r.describe());
  CHECK(r.out.find("helper: enabled=1 measured=" + std::to_string(expect_measured) +
                   " usage_error_thrown=1") != std::string::npos);
  std::string error;
  auto json = reliability::parse_json(between(r.out, "--- json\n", "\n--- end"), &error);
  CHECK_MESSAGE(json != nullptr, "to_json: " << error);
  if (json != nullptr) {
    const reliability::Json* step = reliability::find_measurement(*json, "step");
    REQUIRE(step != nullptr);
    CHECK(step->get("count")->number == expect_measured);
    CHECK(step->get("total_s")->number > 0);
  }
  return json;
}

/// The helper program `mode` names, run in this process; 2 where none does.
inline int run_helper_program(std::string_view mode) {
#if LAPTIME_ENABLED
  if (mode == "no-proc") return helper_no_proc();
  if (mode == "no-cuda-sync") return helper_no_cuda(false);
  if (mode == "no-cuda-sync-timing") return helper_no_cuda(true);
  if (mode == "configure") return helper_configure();
  if (mode == "first-enable-flags") return helper_first_enable_flags();
  if (mode == "configure-everything") return helper_configure_everything();
  if (mode == "configure-untracked") return helper_configure_untracked();
  if (mode == "record-from-code") return helper_record_from_code();
  if (mode == "record-no-memory") return helper_record_no_memory();
  if (mode == "enable-only") return helper_enable_only();
#endif
  std::fprintf(stderr, "environment-test: unknown helper %.*s\n", static_cast<int>(mode.size()),
               mode.data());
  return 2;
}

}  // namespace environment_test
