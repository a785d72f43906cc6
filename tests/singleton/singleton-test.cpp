// One Stopwatch per process, also across shared objects loaded with RTLD_LOCAL (SPEC §1).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

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
  }
  void* handle = nullptr;
  void (*enable)(int) = nullptr;
  void (*start)(const char*) = nullptr;
  void (*end)(const char*) = nullptr;
  void (*finish_iter)() = nullptr;
  const char* (*json)() = nullptr;
  const void* (*state_address)() = nullptr;
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

TEST_CASE("a program started by exec() does not trust an inherited singleton address" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  // The address published in the environment is inherited by exec'd children, where it means
  // nothing. A child that execs itself must start with a fresh, empty Stopwatch.
  laptime::detail::stopwatch_state();  // make sure the variable is published
  const pid_t child = ::fork();
  if (child == 0) {
    ::execl("/proc/self/exe", "singleton-test", "--test-case=*exec child*", "--no-intro=true",
            "--no-version=true", "--no-skip=true", static_cast<char*>(nullptr));
    ::_exit(99);
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
  CHECK_FALSE(sw.is_enabled());
  sw.enable(0, std::nullopt, false);
  sw.start_meas("x");
  sw.end_meas("x");
  CHECK(sw.results().measurements.size() == 1);
#endif
}
