// NVTXRangeWrapper, proven against what a profiler receives: the wrapper runs under
// tests/nvtx_recorder (an NVTX injection library, the mechanism Nsight uses), and each case asserts
// the exact sequence of NVTX events the recorder saw on each thread.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <stdexcept>
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

#include "nvtx_recorder_api.hpp"
#include "test_support.hpp"

namespace {

using laptime::NVTXRangeWrapper;

bool have_recorder() {
  return recorder_api() != nullptr;
}

// Behavioural cases that read the recorder: skipped in the LAPTIME_DISABLE build and where the
// NVTX headers (hence the recorder) are missing.
#if LAPTIME_ENABLED && LAPTIME_HAVE_NVTX && defined(LAPTIME_NVTX_RECORDER_PATH)
#define NEEDS_RECORDER doctest::skip(false)
#else
#define NEEDS_RECORDER doctest::skip(true)
#endif

std::vector<std::string> all_events() {
  std::vector<std::string> out;
  if (!have_recorder()) return out;
  const std::string text = recorder_api()->events();
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

/// The events the thread `tid` made, without their " tid=..." suffix.
std::vector<std::string> events_of(long tid) {
  const std::string suffix = " tid=" + std::to_string(tid);
  std::vector<std::string> out;
  for (const std::string& e : all_events()) {
    if (e.size() >= suffix.size() &&
        e.compare(e.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(e.substr(0, e.size() - suffix.size()));
    }
  }
  return out;
}

std::vector<std::string> my_events() {
  return events_of(laptime::detail::current_tid());
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

/// Compares as text, so that a failure prints both sequences readably.
#define CHECK_EVENTS(actual, ...) \
  CHECK(joined(actual) == joined(std::vector<std::string> __VA_ARGS__))

long recorder_stat(const char* key) {
  if (!have_recorder()) return 0;
  const std::string s = recorder_api()->stats();
  const std::string k = std::string(key) + "=";
  const std::size_t at = s.find(k);
  return at == std::string::npos ? -1 : std::atol(s.c_str() + at + k.size());
}

void clear_events() {
  if (have_recorder()) recorder_api()->clear();
}

/// A fresh, disabled wrapper and an empty log; the error policy back to Throw afterwards.
struct Fresh {
  Fresh() {
    laptime::detail::nvtx_reset_for_testing();
    laptime::set_error_policy(laptime::ErrorPolicy::Throw);
    clear_events();
  }
  ~Fresh() {
    laptime::set_error_policy(laptime::ErrorPolicy::Throw);
    laptime::detail::nvtx_reset_for_testing();
  }
};

std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const laptime::UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

/// With order tracking on: a pop that skips the innermost range and a pop with none open are
/// usage errors, and the right pops go through.
void check_order_errors(NVTXRangeWrapper& nvtx) {
  nvtx.range_push("outer");
  nvtx.range_push("inner");
  CHECK(usage_error_of([&] { nvtx.range_pop("outer"); }).find("'outer' > 'inner'") !=
        std::string::npos);
  CHECK_NOTHROW(nvtx.range_pop("inner"));
  CHECK_NOTHROW(nvtx.range_pop("outer"));
  CHECK(usage_error_of([&] { nvtx.range_pop(); }) != "(no UsageError)");
}

void instrumented_function() {
  LAPTIME_FUNC_RANGE();
}

}  // namespace

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

TEST_CASE(
    "with order tracking, popping the wrong name is a usage error that names the expected "
    "range, the innermost one, the thread and its stack, and pops nothing" *
    NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  nvtx.name_current_thread("trainer");
  nvtx.range_push("step");
  nvtx.range_push("forward");
  nvtx.range_push("attention");
  clear_events();

  const std::string message = usage_error_of([&] { nvtx.range_pop("forward"); });
  CHECK(message.find("laptime: range_pop('forward'): ") == 0);
  CHECK(message.find("expected to close range 'forward'") != std::string::npos);
  CHECK(message.find("innermost open range is 'attention'") != std::string::npos);
  CHECK(message.find("'step' > 'forward' > 'attention'") != std::string::npos);
  CHECK(message.find("nothing was popped") != std::string::npos);
  CHECK(message.find("NVTX name 'trainer'") != std::string::npos);
  CHECK(message.find("thread " + std::to_string(laptime::detail::current_tid())) !=
        std::string::npos);
  CHECK(all_events().empty());  // no pop reached NVTX

  // The stack is unchanged: the right pops still work, in order.
  nvtx.range_pop("attention");
  nvtx.range_pop("forward");
  nvtx.range_pop("step");
  CHECK_EVENTS(my_events(), {"pop global", "pop global", "pop global"});
}

TEST_CASE("with order tracking, popping with no open range is a usage error and pops nothing" *
          NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  clear_events();
  const std::string named = usage_error_of([&] { nvtx.range_pop("step"); });
  CHECK(named.find("expected to close range 'step', but this thread has no open range") !=
        std::string::npos);
  CHECK(named.find("outermost first: (none)") != std::string::npos);
  const std::string unnamed = usage_error_of([&] { nvtx.range_pop(); });
  CHECK(unnamed.find("no open range on this thread to pop") != std::string::npos);
  CHECK(all_events().empty());
}

TEST_CASE("the order check works the same without a profiler or without the NVTX headers" *
          LAPTIME_NEEDS_ENABLED) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  check_order_errors(nvtx);
}

// The case below runs twice: under the recorder (the whole file's setting), then in a copy of
// this program started with LAPTIME_TEST_NO_NVTX_TOOL=1, where main() leaves NVTX without a tool.
constexpr const char* kNoToolCase =
    "with no profiler attached pushes and pops send nothing but order tracking and syncs still "
    "work";

TEST_CASE(kNoToolCase* LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  using laptime::detail::NvtxCore;
  const auto no_tool = [] {
    return (laptime::detail::nvtx_core().state.load() & NvtxCore::kNoTool) != 0;
  };
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  if (std::getenv("LAPTIME_TEST_NO_NVTX_TOOL") == nullptr) {
    // With a tool: the wrapper says so, and a push and a pop reach it.
    if (have_recorder() && LAPTIME_HAVE_NVTX) {
      const Fresh fresh;
      nvtx.enable(false, false, false);
      CHECK_FALSE(no_tool());
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
    return;
  }
  // With no tool nothing reaches a profiler either way; what shows the quiet path is taken is that
  // the out-of-line half never ran: it registers each name it pushes in the enable's session.
  const auto registered = [] {
    laptime::detail::NvtxSession* session = laptime::detail::nvtx_state().session.load();
    const std::lock_guard<std::mutex> lock(session->mutex);
    return session->names.size();
  };
  const Fresh fresh;
  // Untracked: nothing to do, as with NVTX itself; an unbalanced pop is passed on (to nobody).
  nvtx.enable(false, false, false);
  CHECK(no_tool());
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
  CHECK(no_tool());
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
#endif
}

TEST_CASE(
    "under the Warn policy a wrong pop is reported, leaves the stack unchanged and the "
    "wrapper keeps working" *
    NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  nvtx.range_push("outer");
  nvtx.range_push("inner");
  laptime::set_error_policy(laptime::ErrorPolicy::Warn);
  clear_events();
  nvtx.range_pop("outer");  // prints a warning, returns
  nvtx.range_pop("inner");
  nvtx.range_pop("outer");
  nvtx.range_pop();  // nothing open: warned, nothing popped
  CHECK_EVENTS(my_events(), {"pop global", "pop global"});
}

TEST_CASE(
    "with order tracking off the expected name is ignored and every pop reaches the "
    "profiler" *
    NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, false);
  clear_events();
  nvtx.range_push("a");
  nvtx.range_pop("b");
  nvtx.range_pop("c");  // unbalanced: passed on as it is, as NVTX itself would
  CHECK_EVENTS(my_events(), {"register global a", "push global a", "pop global", "pop global"});
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

TEST_CASE("ranges nest correctly on several threads at once, each with its own stack" *
          NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  clear_events();
  constexpr int kThreads = 4;
  constexpr int kIterations = 200;
  std::vector<long> tids(kThreads);
  std::vector<std::string> failures(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      tids[k] = laptime::detail::current_tid();
      const std::string outer = "worker " + std::to_string(k);
      ++ready;
      while (ready.load() < kThreads) {
      }
      try {
        for (int i = 0; i < kIterations; ++i) {
          nvtx.range_push(outer);
          nvtx.range_push("shared inner");
          nvtx.range_pop("shared inner");
          nvtx.range_pop(outer);
        }
      } catch (const std::exception& e) {
        failures[k] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int registrations = 0;
  for (const std::string& e : all_events()) registrations += e.rfind("register ", 0) == 0 ? 1 : 0;
  CHECK(registrations == kThreads + 1);  // each name once per process, whoever saw it first
  for (int k = 0; k < kThreads; ++k) {
    CHECK(failures[k].empty());
    std::vector<std::string> expected;
    for (int i = 0; i < kIterations; ++i) {
      expected.insert(expected.end(), {"push global worker " + std::to_string(k),
                                       "push global shared inner", "pop global", "pop global"});
    }
    std::vector<std::string> actual;
    for (const std::string& e : events_of(tids[k])) {
      if (e.rfind("register ", 0) != 0) actual.push_back(e);
    }
    CHECK(joined(actual) == joined(expected));
  }
  CHECK(recorder_stat("unknown") == 0);
}

TEST_CASE("RAII ranges and the macros pop what they pushed, also when an exception unwinds" *
          NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  clear_events();
  {
    LAPTIME_RANGE("block");
    instrumented_function();
    // A temporary name: the scope keeps the registered copy, not the caller's buffer.
    const laptime::NVTXScopedRange scoped{std::string("dynamic ") + std::to_string(42)};
  }
  CHECK_THROWS_AS(
      [] {
        LAPTIME_RANGE("throwing");
        throw std::runtime_error("unwind");
      }(),
      std::runtime_error);
  CHECK_EVENTS(my_events(),
               {"register global block", "push global block",
                "register global instrumented_function", "push global instrumented_function",
                "pop global", "register global dynamic 42", "push global dynamic 42", "pop global",
                "pop global", "register global throwing", "push global throwing", "pop global"});
}

TEST_CASE("a scope that leaves an inner range open reports it at its end and pops nothing" *
          NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  clear_events();
  {
    LAPTIME_RANGE("scope");
    nvtx.range_push("left open");
  }  // reported on stderr (a destructor does not throw); neither range popped
  CHECK_EVENTS(my_events(), {"register global scope", "push global scope",
                             "register global left open", "push global left open"});
  clear_events();
  nvtx.range_pop("left open");
  nvtx.range_pop("scope");
  CHECK_EVENTS(my_events(), {"pop global", "pop global"});
}

TEST_CASE("a scope opened before enable pops nothing at its end" * NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  {
    const laptime::NVTXScopedRange before{"before enable"};
    nvtx.enable(false, false, true);
    clear_events();
  }
  CHECK(all_events().empty());
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

TEST_CASE("the Stopwatch's finish_iter marks each iteration while the wrapper is enabled" *
          NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const Fresh fresh;
  laptime::detail::testing_reset_stopwatch();
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  sw.finish_iter();  // wrapper not enabled yet: no mark
  CHECK(my_events().empty());
  NVTXRangeWrapper::instance().enable(false, false, false);
  clear_events();
  sw.finish_iter();
  sw.finish_iter();
  CHECK_EVENTS(my_events(), {"mark global iteration 2", "mark global iteration 3"});
  laptime::detail::testing_reset_stopwatch();
#endif
}

// ---- Stopwatch intervals as NVTX ranges (Stopwatch::set_nvtx_ranges, docs/nvtx.md) -------------

#if LAPTIME_ENABLED
namespace {
/// A fresh wrapper and Stopwatch (measuring from the first iteration); both reset afterwards.
struct FreshUnified : Fresh {
  FreshUnified() { laptime::detail::testing_reset_stopwatch(); }
  ~FreshUnified() { laptime::detail::testing_reset_stopwatch(); }
};

std::int64_t count_of(const std::string& name) {
  for (const auto& m : laptime::Stopwatch::instance().results().measurements) {
    if (m.name == name) return m.count;
  }
  return -1;
}
}  // namespace
#endif

TEST_CASE(
    "with NVTX ranges on, every Stopwatch interval is an NVTX range of the same registered name, "
    "nested on the measuring thread, and shares the wrapper's handle" *
    NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, false);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  clear_events();
  for (int i = 0; i < 2; ++i) {  // the warm-up iteration is on the timeline too
    sw.start_meas("step");
    sw.start_meas("forward");
    sw.end_meas("forward");
    nvtx.range_push("step");  // by hand: the same registered string, not registered again
    nvtx.range_pop();
    sw.end_meas("step");
    sw.finish_iter();
  }
  CHECK_EVENTS(my_events(),
               {"register global step", "push global step", "register global forward",
                "push global forward", "pop global", "push global step", "pop global", "pop global",
                "mark global iteration 1", "push global step", "push global forward", "pop global",
                "push global step", "pop global", "pop global", "mark global iteration 2"});
  CHECK(recorder_stat("registered") == 6);
  CHECK(recorder_stat("ascii") == 2);  // the two marks
  CHECK(count_of("step") == 1);        // the Stopwatch itself is unchanged
#endif
}

TEST_CASE(
    "with NVTX ranges off (the default), or before the Stopwatch is enabled, it emits nothing" *
    NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  NVTXRangeWrapper::instance().enable(false, false, true);
  auto& sw = laptime::Stopwatch::instance();
  sw.set_nvtx_ranges(true);
  clear_events();
  sw.start_meas("before enable");
  sw.end_meas("before enable");
  CHECK(my_events().empty());
  sw.set_nvtx_ranges(false);
  sw.enable(0, std::nullopt, false);
  sw.start_meas("off");
  sw.end_meas("off");
  sw.set_nvtx_ranges(true);
  sw.set_nvtx_ranges(false);  // on and off again: back to nothing
  sw.start_meas("off");
  sw.end_meas("off");
  CHECK(my_events().empty());
  CHECK(count_of("off") == 2);
#endif
}

TEST_CASE(
    "with NVTX ranges on and the NVTX wrapper not enabled nothing is sent; ranges start once it "
    "is" *
    NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  clear_events();
  sw.start_meas("early");
  sw.end_meas("early");
  CHECK(my_events().empty());
  NVTXRangeWrapper::instance().enable(false, false, false);
  clear_events();
  sw.start_meas("early");
  sw.end_meas("early");
  CHECK_EVENTS(my_events(), {"register global early", "push global early", "pop global"});
  CHECK(count_of("early") == 2);
#endif
}

TEST_CASE(
    "an interval ended on another thread: the name uses start/end ranges from then on, and the "
    "first one's push is popped by its own thread at its next start of the name" *
    NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  NVTXRangeWrapper::instance().enable(false, false, false);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  clear_events();
  long ender_tid = 0;
  const auto end_elsewhere = [&] {
    std::thread([&] {
      ender_tid = laptime::detail::current_tid();
      laptime::Stopwatch::instance().end_meas("batch");
    }).join();
  };
  sw.start_meas("batch");
  end_elsewhere();  // the first: pushed here, cannot be popped there
  CHECK(events_of(ender_tid).empty());
  CHECK_EVENTS(my_events(), {"register global batch", "push global batch"});
  clear_events();
  sw.start_meas("batch");  // pops the owed push, then a start/end range
  end_elsewhere();
  CHECK_EVENTS(my_events(), {"pop global", "start global batch"});
  CHECK_EVENTS(events_of(ender_tid), {"end global"});
  clear_events();
  sw.start_meas("batch");  // ended on its own thread: still a start/end range
  sw.end_meas("batch");
  CHECK_EVENTS(my_events(), {"start global batch", "end global"});
  CHECK(count_of("batch") == 3);
#endif
}

TEST_CASE(
    "with order tracking, Stopwatch ranges are on the wrapper's stack: range_pop sees them, and "
    "an end_meas whose range is not the innermost is a usage error after the interval counted" *
    NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  clear_events();
  nvtx.range_push("outer");
  sw.start_meas("fwd");
  CHECK(usage_error_of([&] { nvtx.range_pop("outer"); }).find("innermost open range is 'fwd'") !=
        std::string::npos);
  sw.end_meas("fwd");
  nvtx.range_pop("outer");
  CHECK_EVENTS(my_events(), {"register global outer", "push global outer", "register global fwd",
                             "push global fwd", "pop global", "pop global"});
  clear_events();
  sw.start_meas("bwd");
  nvtx.range_push("inner");
  const std::string message = usage_error_of([&] { sw.end_meas("bwd"); });
  CHECK(message.find("end_meas('bwd')") != std::string::npos);
  CHECK(message.find("innermost open range is 'inner'") != std::string::npos);
  CHECK(message.find("'bwd' > 'inner'") != std::string::npos);
  CHECK(count_of("bwd") == 1);  // the measurement itself ended
  nvtx.range_pop("inner");
  nvtx.range_pop("bwd");  // nothing was popped: the range is still open, as after range_pop
  CHECK_EVENTS(my_events(), {"register global bwd", "push global bwd", "register global inner",
                             "push global inner", "pop global", "pop global"});
  // Without tracking nothing is checked: the pop closes the innermost range, as range_pop() does.
#endif
}

TEST_CASE("an interval dropped by reset() closes its NVTX range when its end_meas comes" *
          NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  NVTXRangeWrapper::instance().enable(false, false, true);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  clear_events();
  sw.start_meas("dropped");
  sw.reset();
  sw.end_meas("dropped");  // silently dropped (docs/stopwatch.md), its range closed
  CHECK_EVENTS(my_events(), {"register global dropped", "push global dropped", "pop global"});
  CHECK(count_of("dropped") == -1);
#endif
}

TEST_CASE(
    "LAPTIME_NVTX_RANGES and the profiling profile turn the ranges on, and win over the code's "
    "set_nvtx_ranges" *
    NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  using Env = std::vector<std::pair<std::string, std::string>>;
  const auto parse = [](const Env& env) {
    return laptime::settings_from_env([&](const char* name) -> const char* {
      for (const auto& [k, v] : env) {
        if (k == name) return v.c_str();
      }
      return nullptr;
    });
  };
  CHECK_FALSE(parse({}).nvtx_ranges);
  CHECK_FALSE(parse({}).from_env.nvtx_ranges);
  CHECK(parse({{"LAPTIME_NVTX_RANGES", "1"}}).nvtx_ranges);
  CHECK(parse({{"LAPTIME_PROFILE", "profiling"}}).nvtx_ranges);
  CHECK(parse({{"LAPTIME_PROFILE", "profiling"}}).from_env.nvtx_ranges);
  CHECK_FALSE(parse({{"LAPTIME_PROFILE", "debugging"}}).nvtx_ranges);
  CHECK_FALSE(parse({{"LAPTIME_PROFILE", "evaluation"}}).from_env.nvtx_ranges);
  CHECK_FALSE(parse({{"LAPTIME_PROFILE", "profiling"}, {"LAPTIME_NVTX_RANGES", "0"}}).nvtx_ranges);
  const laptime::Settings bad = parse({{"LAPTIME_NVTX_RANGES", "maybe"}});
  CHECK_FALSE(bad.nvtx_ranges);
  CHECK_FALSE(bad.from_env.nvtx_ranges);
  REQUIRE(bad.warnings.size() == 1);
  CHECK(bad.warnings[0].find("LAPTIME_NVTX_RANGES") != std::string::npos);

  SUBCASE("the profiling profile: Stopwatch, wrapper and ranges from one variable") {
    const FreshUnified fresh;
    laptime::apply_settings(parse({{"LAPTIME_PROFILE", "profiling"}, {"LAPTIME_WARMUP", "0"}}), 0);
    auto& sw = laptime::Stopwatch::instance();
    sw.set_nvtx_ranges(false);  // the environment's choice wins (docs/configuration.md)
    clear_events();
    sw.start_meas("profiled");
    sw.end_meas("profiled");
    CHECK_EVENTS(my_events(), {"register global profiled", "push global profiled", "pop global"});
  }
  SUBCASE("LAPTIME_NVTX_RANGES=0 wins over the code's set_nvtx_ranges(true)") {
    const FreshUnified fresh;
    laptime::apply_settings(parse({{"LAPTIME_NVTX_RANGES", "0"}, {"LAPTIME_NVTX", "1"}}), 0);
    auto& sw = laptime::Stopwatch::instance();
    sw.enable(0, std::nullopt, false);
    sw.set_nvtx_ranges(true);
    clear_events();
    sw.start_meas("quiet");
    sw.end_meas("quiet");
    CHECK(my_events().empty());
  }
#endif
}

int main(int argc, char** argv) {
#ifdef LAPTIME_NVTX_RECORDER_PATH
  // NVTX reads this at its first call, which comes later: every case runs under the recorder
  // (but in the copy that the no-tool case starts).
  if (std::getenv("LAPTIME_TEST_NO_NVTX_TOOL") == nullptr) {
    ::setenv("NVTX_INJECTION64_PATH", LAPTIME_NVTX_RECORDER_PATH, 1);
  }
#endif
  doctest::Context context(argc, argv);
  return context.run();
}
