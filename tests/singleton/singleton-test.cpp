// One Stopwatch per process, also across shared objects loaded with RTLD_LOCAL (docs/stopwatch.md).
#include <dlfcn.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "laptime/detail/thread.hpp"
#include "laptime/impl/nvtx_state.hpp"       // the NVTX test reads the thread's range stack
#include "laptime/impl/stopwatch_state.hpp"  // the internals this test looks at
#include "laptime/nvtx.hpp"
#include "laptime/stopwatch.hpp"
#include "test_support.hpp"

namespace {
struct Plugin {
  explicit Plugin(const char* path, const std::string& prefix) {
    handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE_MESSAGE(handle != nullptr, ::dlerror());
    auto sym = [&](const char* name) {
      void* p = ::dlsym(handle, (prefix + name).c_str());
      REQUIRE_MESSAGE(p != nullptr, name);
      return p;
    };
    enable = reinterpret_cast<void (*)(int)>(sym("enable"));
    start = reinterpret_cast<void (*)(const char*)>(sym("start"));
    end = reinterpret_cast<void (*)(const char*)>(sym("end"));
    finish_iter = reinterpret_cast<void (*)()>(sym("finish_iter"));
    json = reinterpret_cast<const char* (*)()>(sym("json"));
    state_address = reinterpret_cast<const void* (*)()>(sym("state_address"));
    nvtx_enable = reinterpret_cast<void (*)()>(sym("nvtx_enable"));
    scoped_range = reinterpret_cast<void (*)(void (*)())>(sym("scoped_range"));
  }
  void* handle = nullptr;
  void (*enable)(int) = nullptr;
  void (*start)(const char*) = nullptr;
  void (*end)(const char*) = nullptr;
  void (*finish_iter)() = nullptr;
  const char* (*json)() = nullptr;
  const void* (*state_address)() = nullptr;
  void (*nvtx_enable)() = nullptr;
  void (*scoped_range)(void (*inside)()) = nullptr;
};
}  // namespace

TEST_CASE("two shared objects loaded with RTLD_LOCAL and the program share one Stopwatch" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  Plugin a(PLUGIN_A, "plugin_a_");
  Plugin b(PLUGIN_B, "plugin_b_");
  // Each copy of the code has its own statics, yet they find the same state.
  CHECK(a.state_address() == b.state_address());
  CHECK(a.state_address() == &laptime::detail::stopwatch_state());

  a.enable(1);
  CHECK(laptime::Stopwatch::instance().is_enabled());
  b.enable(1);  // same arguments: a no-op, not an error, because it is the same Stopwatch

  for (int i = 0; i < 3; ++i) {
    a.start("step");
    b.start("inner");
    laptime::Stopwatch::instance().end_meas("inner");  // ended through a third copy
    b.end("step");  // started in a, ended in b: the running slot is shared per thread
    b.finish_iter();
  }
  // Warm-up advanced by b applies to measurements made through a: 2 measured iterations.
  const std::string from_a = a.json();
  CHECK(from_a.find("\"iterations_measured\": 2") != std::string::npos);
  CHECK(from_a.find("{\"name\": \"step\", \"count\": 2") != std::string::npos);
  CHECK(from_a.find("{\"name\": \"inner\", \"count\": 2") != std::string::npos);
  CHECK(std::string(b.json()) == from_a);
  CHECK(laptime::Stopwatch::instance().to_json() == from_a);
#endif
}

#if LAPTIME_ENABLED
namespace {
// How many NVTX ranges the calling thread has open, read from the process-wide registry without
// going through this copy's per-thread cache (reading it through the cache would fill it).
std::size_t open_ranges() {
  std::size_t n = 0;
  const long me = laptime::detail::current_tid();
  laptime::detail::nvtx_state().threads.for_each(
      [&](laptime::detail::NvtxThread& t, long tid, bool alive) {
        if (alive && tid == me) n = t.stack.size;
      });
  return n;
}

void (*b_scoped_range)(void (*inside)()) = nullptr;

void program_range() {
  LAPTIME_RANGE("program range");
  CHECK(open_ranges() == 3);
}
void b_range_around_program_range() {
  b_scoped_range(program_range);
}
}  // namespace
#endif

TEST_CASE("NVTX scoped ranges close in every copy, whichever copy enabled the wrapper" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  Plugin a(PLUGIN_A, "plugin_a_");
  Plugin b(PLUGIN_B, "plugin_b_");
  b_scoped_range = b.scoped_range;
  // A plugin enables first (its copy makes the state), as an extension loaded with RTLD_LOCAL may.
  a.nvtx_enable();
  REQUIRE(laptime::NVTXRangeWrapper::instance().is_enabled());
  for (int i = 0; i < 3; ++i) {
    {
      LAPTIME_RANGE("program range");  // the program's own copy, which did not enable
      CHECK(open_ranges() == 1);
    }
    CHECK(open_ranges() == 0);
    b.scoped_range(nullptr);  // another plugin's copy, which did not enable either
    CHECK(open_ranges() == 0);
    a.scoped_range(nullptr);
    CHECK(open_ranges() == 0);
    a.scoped_range(b_range_around_program_range);  // nested across the three copies
    CHECK(open_ranges() == 0);
  }
  laptime::NVTXRangeWrapper::instance().range_push("last");
  laptime::NVTXRangeWrapper::instance().range_pop("last");  // a matched pop: nothing was left open
#endif
}

namespace {
// Runs the test cases matching `filter` in a fresh image of this program (fork, then exec),
// after `in_child` ran in the forked child. Returns the exit status (77: skipped there).
template <class Fn>
int run_exec_child(const char* filter, Fn&& in_child) {
  const pid_t child = ::fork();
  if (child == 0) {
    in_child();
    const std::string arg = std::string("--test-case=") + filter;
    ::execl("/proc/self/exe", "singleton-test", arg.c_str(), "--no-intro=true", "--no-version=true",
            "--no-skip=true", static_cast<char*>(nullptr));
    ::_exit(99);
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Two objects of one size, told apart by their marker; `touched` is 0 in a fresh one.
template <char Tag>
struct Probe {
  char marker = Tag;
  int touched = 0;
};
}  // namespace

TEST_CASE("a program started by exec() does not trust an inherited singleton address" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  // The address published in the environment is inherited by exec'd children, where it means
  // nothing. A child that execs itself must start with a fresh, empty Stopwatch, whatever the
  // variable holds.
  laptime::detail::stopwatch_state();  // make sure the variable is published
  CHECK(run_exec_child("*exec child*", [] {}) == 0);
  char local[64] = {};
  const std::string self = std::to_string(reinterpret_cast<std::uintptr_t>(local));
  for (const std::string& value : std::vector<std::string>{
           "", "0:0", "1:1", "ffffffffffffffff:1", "7ffffffff000:1234", "zz", ":", "1234",
           self + ":1", std::string(5000, 'f') + ":1", std::string("\x1b[2J")}) {
    CAPTURE(value);
    CHECK(run_exec_child("*exec child*",
                         [&] { ::setenv("LAPTIME_SINGLETON_ANCHOR_2", value.c_str(), 1); }) == 0);
  }
#endif
}

TEST_CASE("an exec'd child with address-space randomisation off gets fresh singletons" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  // With ASLR off (setarch -R, debuggers, some containers) an exec'd image lays out its memory
  // as its parent did: an inherited address can point at a live object of the new image, of
  // another type. Stage 1 (ASLR off) makes Probe<'A'> then Probe<'B'>; it execs stage 2, which
  // makes them in the other order and must still get a fresh Probe<'A'>.
  const int rc = run_exec_child("*ASLR stage 1*", [] {
    if (::personality(ADDR_NO_RANDOMIZE) == -1) ::_exit(77);
  });
  if (rc == 77) {
    MESSAGE("skipped: personality(ADDR_NO_RANDOMIZE) is not allowed here");
  } else {
    CHECK(rc == 0);
  }
#endif
}

TEST_CASE("ASLR stage 1" * doctest::skip(true)) {
#if LAPTIME_ENABLED
  if ((::personality(0xffffffff) & ADDR_NO_RANDOMIZE) == 0) std::_Exit(77);
  auto& a = laptime::detail::process_singleton<Probe<'A'>>("aslr-probe-a");
  auto& b = laptime::detail::process_singleton<Probe<'B'>>("aslr-probe-b");
  a.touched = b.touched = 1;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("stage 1");
  sw.end_meas("stage 1");
  ::execl("/proc/self/exe", "singleton-test", "--test-case=*ASLR stage 2*", "--no-intro=true",
          "--no-version=true", "--no-skip=true", static_cast<char*>(nullptr));
  std::_Exit(98);
#endif
}

TEST_CASE("ASLR stage 2" * doctest::skip(true)) {
#if LAPTIME_ENABLED
  auto& b = laptime::detail::process_singleton<Probe<'B'>>("aslr-probe-b");
  auto& a = laptime::detail::process_singleton<Probe<'A'>>("aslr-probe-a");
  CHECK(static_cast<void*>(&a) != static_cast<void*>(&b));
  CHECK(a.marker == 'A');
  CHECK(a.touched == 0);
  CHECK(b.marker == 'B');
  CHECK(b.touched == 0);
  auto& sw = laptime::Stopwatch::instance();
  // Fresh and empty. Enabled only as a worker of a parent that enabled its Stopwatch (it finds
  // the parent's shared file in the environment: docs/workers.md); its own enable() makes it a
  // program of its own.
  CHECK(sw.is_enabled() == sw.is_worker());
  CHECK(sw.results().measurements.empty());
  sw.enable(0, std::nullopt, false);
  CHECK_FALSE(sw.is_worker());
  sw.start_meas("stage 2");
  sw.end_meas("stage 2");
  sw.finish_iter();
  CHECK(sw.to_json().find("\"stage 1\"") == std::string::npos);
#endif
}

TEST_CASE("a copy first used after clearenv() finds the same Stopwatch" * LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  laptime::detail::stopwatch_state();
  const pid_t child = ::fork();
  if (child == 0) {  // in a child: clearenv() would change the environment of later cases
    ::clearenv();
    void* handle = ::dlopen(PLUGIN_C, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) ::_exit(2);
    auto address = reinterpret_cast<const void* (*)()>(::dlsym(handle, "plugin_c_state_address"));
    if (address == nullptr) ::_exit(3);
    ::_exit(address() == &laptime::detail::stopwatch_state() ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
#endif
}

TEST_CASE("exec child: the singleton is created afresh and works" * doctest::skip(true)) {
#if LAPTIME_ENABLED
  auto& sw = laptime::Stopwatch::instance();
  // Fresh and empty. Enabled only as a worker of a parent that enabled its Stopwatch (it finds
  // the parent's shared file in the environment: docs/workers.md); its own enable() makes it a
  // program of its own.
  CHECK(sw.is_enabled() == sw.is_worker());
  CHECK(sw.results().measurements.empty());
  sw.enable(0, std::nullopt, false);
  CHECK_FALSE(sw.is_worker());
  sw.start_meas("x");
  sw.end_meas("x");
  CHECK(sw.results().measurements.size() == 1);
#endif
}
