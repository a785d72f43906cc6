// NVTXRangeWrapper, proven against what a profiler receives: the wrapper runs under
// tests/nvtx_recorder (an NVTX injection library, the mechanism Nsight uses), and each case asserts
// the exact sequence of NVTX events the recorder saw on each thread. This file: enabling, names and
// their registration, domains, colours, marks, thread names, syncs, and the quiet path without a
// profiler; nvtx-order-test.cpp: the order of pushes and pops, scopes, and the Stopwatch on the
// timeline.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

// Only the light headers: the implementation part (and its name table, LAPTIME_NVTX_MAX_NAMES
// names) comes from the library this test links (laptime::laptime), as in a program of several
// files.
#include "laptime/cuda.hpp"  // set_sync_function: nvtx.hpp no longer includes cuda.hpp
#include "laptime/nvtx.hpp"
#include "laptime/results.hpp"
#include "laptime/settings.hpp"
#include "laptime/stopwatch.hpp"
#if LAPTIME_ENABLED
#include "laptime/impl/nvtx_state.hpp"  // the no-tool case reads the session's name table
#endif

#if LAPTIME_HAVE_NVTX
#include <nvtx3/nvtx3.hpp>
#endif

#include "nvtx_support.hpp"

using namespace nvtx_test;

// First in the file, so that in a full run NVTX has not been initialised yet and the case can
// also show that NVTX is never even loaded.
TEST_CASE(
    "before enable, and always in a LAPTIME_DISABLE build, every call is accepted and no "
    "profiler receives anything") {
  const Fresh fresh;
  const long attached_before = recorder_stat("attached");
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  CHECK(&nvtx == &NVTXRangeWrapper::instance());

  const auto exercise = [&nvtx] {
    static const laptime::NVTXRangeName kName{"handle"};
    nvtx.range_push("a");
    nvtx.range_push(kName);
    nvtx.range_pop("not what was pushed");  // not checked: nothing is tracked when not enabled
    nvtx.range_pop(kName);
    nvtx.range_pop();
    nvtx.range_pop();  // more pops than pushes
    nvtx.mark("iteration 1");
    {
      LAPTIME_RANGE("macro");
      LAPTIME_RANGE("nested");
      laptime::NVTXScopedRange scoped{std::string("dynamic ") + "name"};
      instrumented_function();
    }
    CHECK_FALSE(nvtx.profiler_start());
    CHECK_FALSE(nvtx.profiler_stop());
  };
  exercise();
  CHECK_FALSE(nvtx.is_enabled());
#if !LAPTIME_ENABLED
  // Compiled out: enable() keeps the API but turns nothing on.
  nvtx.enable(true, true, true, laptime::NVTXOptions{"domain", {0xff00ff00}});
  CHECK_FALSE(nvtx.is_enabled());
  exercise();
  nvtx.name_current_thread("main");
#endif
  CHECK(all_events().empty());
  CHECK(recorder_stat("attached") == attached_before);
}

TEST_CASE(
    "enable registers each name once and every push and pop reaches the profiler in NVTX's "
    "global domain" *
    NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, false);
  CHECK(nvtx.is_enabled());
  CHECK(recorder_stat("attached") >= 1);  // enable() initialised NVTX, which loaded the recorder
  clear_events();

  nvtx.range_push("step");
  for (int i = 0; i < 3; ++i) {
    nvtx.range_push("forward");
    nvtx.range_pop();
  }
  nvtx.range_pop("step");
  CHECK_EVENTS(my_events(), {"register global step", "push global step", "register global forward",
                             "push global forward", "pop global", "push global forward",
                             "pop global", "push global forward", "pop global", "pop global"});
  // The hot path passes registered handles, never text.
  CHECK(recorder_stat("registered") == 4);
  CHECK(recorder_stat("ascii") == 0);
  CHECK(recorder_stat("unknown") == 0);
}

TEST_CASE(
    "a name whose registered handle is NULL, as Nsight Compute's first one is, is still "
    "pushed by its handle" *
    NEEDS_RECORDER) {
  const Fresh fresh;  // drops every handle registered so far
  recorder_api()->restart_string_handles();
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  clear_events();
  nvtx.range_push("first name");
  nvtx.range_pop("first name");
  CHECK_EVENTS(my_events(), {"register global first name", "push global first name", "pop global"});
  // Sent as text instead, ncu's --nvtx-include "first name/" would not match it.
  CHECK(recorder_stat("registered") == 1);
  CHECK(recorder_stat("ascii") == 0);
}

TEST_CASE("a name's bytes decide its range, not the buffer it is passed in" * NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  clear_events();
  // One buffer, changing text: a cache keyed by address alone would push "layer 0" three times.
  char buffer[] = "layer 0";
  for (char c = '0'; c < '3'; ++c) {
    buffer[6] = c;
    nvtx.range_push(std::string_view(buffer, 7));
    nvtx.range_pop(std::string_view(buffer, 7));
  }
  CHECK_EVENTS(my_events(), {"register global layer 0", "push global layer 0", "pop global",
                             "register global layer 1", "push global layer 1", "pop global",
                             "register global layer 2", "push global layer 2", "pop global"});
}

TEST_CASE("a compile-time name handle is registered once and stays valid across re-enables" *
          NEEDS_RECORDER) {
  const Fresh fresh;
  static const laptime::NVTXRangeName kStep{"train step"};
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  clear_events();
  for (int i = 0; i < 3; ++i) {
    nvtx.range_push(kStep);
    nvtx.range_pop(kStep);
  }
  nvtx.range_push("train step");  // the same name by text finds the same registration
  nvtx.range_pop(kStep);
  CHECK_EVENTS(my_events(), {"register global train step", "push global train step", "pop global",
                             "push global train step", "pop global", "push global train step",
                             "pop global", "push global train step", "pop global"});

  // A new enable (after a test reset) has a new domain: the handle must re-resolve there.
  laptime::detail::nvtx_reset_for_testing();
  laptime::NVTXOptions options;
  options.domain = "laptime-test-handles";
  nvtx.enable(false, false, true, options);
  clear_events();
  nvtx.range_push(kStep);
  nvtx.range_pop(kStep);
  CHECK_EVENTS(my_events(), {"register laptime-test-handles train step",
                             "push laptime-test-handles train step", "pop laptime-test-handles"});
}

TEST_CASE(
    "a second enable with the same arguments is a no-op, with different ones a usage error "
    "that keeps the first settings" *
    NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  nvtx.enable(false, false, true);
  CHECK(nvtx.is_enabled());

  const std::string message = usage_error_of([&] { nvtx.enable(true, false, true); });
  CHECK(message.find("laptime: NVTXRangeWrapper.enable(true, false, true, ...): ") == 0);
  CHECK(message.find("already enabled with sync_on_push=false") != std::string::npos);
  CHECK(message.find("called again with sync_on_push=true") != std::string::npos);
  laptime::NVTXOptions other_domain;
  other_domain.domain = "elsewhere";
  CHECK(usage_error_of([&] { nvtx.enable(false, false, true, other_domain); }) !=
        "(no UsageError)");
  laptime::NVTXOptions coloured;
  coloured.colors = {0xff112233};
  CHECK(usage_error_of([&] { nvtx.enable(false, false, true, coloured); }) != "(no UsageError)");

  // Still the first settings: order tracking on, global domain, no colour.
  clear_events();
  nvtx.range_push("kept");
  CHECK(usage_error_of([&] { nvtx.range_pop("other"); }) != "(no UsageError)");
  nvtx.range_pop("kept");
  CHECK_EVENTS(my_events(), {"register global kept", "push global kept", "pop global"});
}

// The case below runs twice: under the recorder (the whole file's setting), then in a copy of
// this program started with LAPTIME_TEST_NO_NVTX_TOOL=1, where main() leaves NVTX without a tool.
constexpr const char* kNoToolCase =
    "with no profiler attached pushes and pops send nothing but order tracking and syncs still "
    "work";

#if LAPTIME_ENABLED
namespace {

bool nvtx_has_no_tool() {
  using laptime::detail::NvtxCore;
  return (laptime::detail::nvtx_core().state.load() & NvtxCore::kNoTool) != 0;
}

// With a tool: the wrapper says so, and a push and a pop reach it; then the case again, in a copy
// of this program without a tool.
void check_with_tool_then_without() {
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  if (have_recorder() && LAPTIME_HAVE_NVTX) {
    const Fresh fresh;
    nvtx.enable(false, false, false);
    CHECK_FALSE(nvtx_has_no_tool());
    clear_events();
    nvtx.range_push("seen");
    nvtx.range_pop();
    CHECK_EVENTS(my_events(), {"register global seen", "push global seen", "pop global"});
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("LAPTIME_TEST_NO_NVTX_TOOL", "1", 1);  // main() then leaves NVTX without a tool
    ::unsetenv("NVTX_INJECTION64_PATH");
    const std::string filter = std::string("--test-case=") + kNoToolCase;
    ::execl("/proc/self/exe", "nvtx-test", filter.c_str(), "--no-intro", "--no-version",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = -1;
  REQUIRE(pid > 0);
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // its own failures are printed above
}

// With no tool nothing reaches a profiler either way; what shows the quiet path is taken is that
// the out-of-line half never ran: it registers each name it pushes in the enable's session.
void check_without_tool() {
  const auto registered = [] {
    laptime::detail::NvtxSession* session = laptime::detail::nvtx_state().session.load();
    const std::lock_guard<std::mutex> lock(session->mutex);
    return session->names.size();
  };
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  const Fresh fresh;
  // Untracked: nothing to do, as with NVTX itself; an unbalanced pop is passed on (to nobody).
  nvtx.enable(false, false, false);
  CHECK(nvtx_has_no_tool());
  nvtx.range_push("a");
  nvtx.range_pop("b");
  nvtx.range_pop();
  { LAPTIME_RANGE("scoped"); }
  // Stopwatch intervals as ranges: measured as always, none left open.
  laptime::Stopwatch& sw = laptime::Stopwatch::instance();
  sw.reset();
  sw.enable(0, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  for (int i = 0; i < 3; ++i) {
    sw.start_meas("quiet interval");
    sw.end_meas("quiet interval");
    sw.finish_iter();
  }
  int count = -1;
  for (const auto& m : sw.results().measurements) {
    if (m.name == "quiet interval") count = static_cast<int>(m.count);
  }
  CHECK(count == 3);
  sw.set_nvtx_ranges(false);
  sw.reset();
  CHECK(registered() == 0);  // neither the pushes, the scope nor the intervals went out of line

  // Order tracking: still checked, with the same errors.
  laptime::detail::nvtx_reset_for_testing();
  nvtx.enable(false, false, true);
  CHECK(nvtx_has_no_tool());
  check_order_errors(nvtx);

  // Syncs: still made, before the (silent) push and pop.
  laptime::detail::nvtx_reset_for_testing();
  static std::atomic<int> syncs{0};
  laptime::cuda::set_sync_function([](void*) { ++syncs; }, nullptr);
  nvtx.enable(true, true, false);
  nvtx.range_push("synced");
  nvtx.range_pop();
  CHECK(syncs.load() == 2);
  CHECK(registered() == 1);  // a synced push is not quiet: it took the whole path
  laptime::cuda::set_sync_function(nullptr, nullptr);
}

}  // namespace
#endif

TEST_CASE(kNoToolCase* LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  if (std::getenv("LAPTIME_TEST_NO_NVTX_TOOL") == nullptr) {
    check_with_tool_then_without();
  } else {
    check_without_tool();
  }
#endif
}

TEST_CASE(
    "the C API, nvtx3.hpp and the wrapper land in one global domain as one nested sequence "
    "(CORE and CORE2 callbacks alike)" *
    NEEDS_RECORDER) {
#if LAPTIME_HAVE_NVTX
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  clear_events();
  nvtxRangePushA("c api");  // CORE slot RangePushA
  {
    nvtx3::scoped_range cpp{"nvtx3 scoped"};  // CORE2 DomainRangePushEx with a NULL domain
    static const nvtx3::registered_string registered{"nvtx3 registered"};
    nvtx3::scoped_range cpp_registered{registered};
    nvtx.range_push("laptime");
    nvtxMarkA("c mark");  // CORE MarkA
    nvtx3::mark("nvtx3 mark");
    nvtx.mark("laptime mark");
    nvtx.range_pop("laptime");
  }
  nvtxRangePop();  // CORE RangePop
  CHECK_EVENTS(my_events(),
               {"push global c api", "push global nvtx3 scoped", "register global nvtx3 registered",
                "push global nvtx3 registered", "register global laptime", "push global laptime",
                "mark global c mark", "mark global nvtx3 mark", "mark global laptime mark",
                "pop global", "pop global", "pop global", "pop global"});
#endif
}

TEST_CASE("a named domain carries every range, mark and registered string" * NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  laptime::NVTXOptions options;
  options.domain = "laptime-test-domain";
  nvtx.enable(false, false, true, options);
  nvtx.range_push("step");
  nvtx.mark("iteration 1");
  nvtx.range_pop("step");
  CHECK_EVENTS(my_events(), {"domain-create laptime-test-domain",
                             "register laptime-test-domain step", "push laptime-test-domain step",
                             "mark laptime-test-domain iteration 1", "pop laptime-test-domain"});
}

TEST_CASE("colours come from the palette and stay the same for a name" * NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  laptime::NVTXOptions options;
  options.colors = {0xff000001, 0xff000002, 0xff000003};
  nvtx.enable(false, false, false, options);
  clear_events();
  const std::vector<std::string> names{"load", "forward", "backward", "optimizer"};
  for (int round = 0; round < 2; ++round) {
    for (const std::string& n : names) {
      nvtx.range_push(n);
      nvtx.range_pop();
    }
  }
  std::vector<std::string> pushes;
  for (const std::string& e : my_events()) {
    if (e.rfind("push ", 0) == 0) pushes.push_back(e);
  }
  REQUIRE(pushes.size() == 8);
  for (std::size_t i = 0; i < 4; ++i) {
    INFO(pushes[i]);
    CHECK(pushes[i] == pushes[i + 4]);
    const bool from_palette = pushes[i].find(" color=0xff000001") != std::string::npos ||
                              pushes[i].find(" color=0xff000002") != std::string::npos ||
                              pushes[i].find(" color=0xff000003") != std::string::npos;
    CHECK(from_palette);
  }
}

TEST_CASE("marks carry their text, however long" * NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, false);
  clear_events();
  const std::string long_text(1000, 'x');
  nvtx.mark("iteration 7");
  nvtx.mark(long_text);
  nvtx.mark("");
  CHECK_EVENTS(my_events(),
               {"mark global iteration 7", "mark global " + long_text, "mark global "});
  CHECK(recorder_stat("registered") == 0);  // changing texts must not fill the name table
}

TEST_CASE("threads show by their kernel tid and name, also when named before enable" *
          NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  std::mutex m;
  std::condition_variable cv;
  int stage = 0;
  std::atomic<long> early_tid{0};
  std::atomic<long> late_tid{0};
  std::thread early([&] {
    early_tid = laptime::detail::current_tid();
    nvtx.name_current_thread("loader-0");  // before enable: remembered, NVTX not reached
    std::unique_lock<std::mutex> lock(m);
    stage = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return stage == 2; });
  });
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return stage == 1; });
  }
  CHECK(all_events().empty());
  nvtx.enable(false, false, true);
  std::thread late([&] {
    late_tid = laptime::detail::current_tid();
    nvtx.name_current_thread("loader-1");
  });
  late.join();
  {
    std::lock_guard<std::mutex> lock(m);
    stage = 2;
  }
  cv.notify_all();
  early.join();
  // enable() named the early thread from this thread; the late one named itself.
  CHECK_EVENTS(my_events(), {"name-thread " + std::to_string(early_tid.load()) + " loader-0"});
  CHECK_EVENTS(events_of(late_tid),
               {"name-thread " + std::to_string(late_tid.load()) + " loader-1"});
}

TEST_CASE("names beyond the name table still reach the profiler, as text, and are tracked" *
          NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  for (int i = 0; i < LAPTIME_NVTX_MAX_NAMES; ++i) {
    nvtx.range_push("name " + std::to_string(i));
    nvtx.range_pop();
  }
  clear_events();
  nvtx.range_push("one too many");
  nvtx.range_push("name 0");
  const std::string message = usage_error_of([&] { nvtx.range_pop("one too many"); });
  CHECK(message.find("'one too many' > 'name 0'") != std::string::npos);
  nvtx.range_pop("name 0");
  CHECK(usage_error_of([&] {
          nvtx.range_pop("name 0");
        }).find("innermost open range is 'one too many'") != std::string::npos);
  nvtx.range_pop("one too many");
  CHECK_EVENTS(my_events(),
               {"push global one too many", "push global name 0", "pop global", "pop global"});
  CHECK(recorder_stat("ascii") == 1);
  CHECK(recorder_stat("registered") == 1);
}

TEST_CASE(
    "sync_on_push and sync_on_pop synchronise right before the push and the pop, and not "
    "for a pop refused by the order check" *
    NEEDS_RECORDER) {
  const Fresh fresh;
  // The CUDA layer calls an installed sync function instead of the context sync; here it writes a
  // note into the recorder's log, to show where in the sequence the sync happens.
  static std::atomic<int> syncs{0};
  laptime::cuda::set_sync_function(
      [](void*) {
        ++syncs;
        if (have_recorder()) recorder_api()->note("sync");
      },
      nullptr);
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(true, true, true);
  clear_events();
  nvtx.range_push("synced");
  CHECK(usage_error_of([&] { nvtx.range_pop("wrong"); }) != "(no UsageError)");
  nvtx.range_pop("synced");
  CHECK_EVENTS(my_events(), {"note sync", "register global synced", "push global synced",
                             "note sync", "pop global"});
  CHECK(syncs.load() == 2);
  laptime::cuda::set_sync_function(nullptr, nullptr);
}

int main(int argc, char** argv) {
  return run_under_recorder(argc, argv);
}
