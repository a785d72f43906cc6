// A shared object with its own copy of laptime that is dlclose'd after using it (docs/design.md,
// "One object per process"): the process-wide objects keep pointers into the code of the copies
// that used them (fork handlers, NVTX's function table, the at-exit output), so that copy stays
// loaded. Each case runs in a child process made before anything is loaded, so that a crash is a
// failed check, not the end of the suite.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "laptime/detail/process_singleton.hpp"  // loader_r_debug
#include "laptime/nvtx.hpp"
#include "laptime/results.hpp"
#include "laptime/stopwatch.hpp"
#include "test_support.hpp"

namespace {

// Whether the plugin's code is mapped in this process.
bool plugin_mapped() {
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  char line[4096];
  bool mapped = false;
  while (maps != nullptr && std::fgets(line, sizeof line, maps) != nullptr) {
    mapped = mapped || std::strstr(line, "laptime_singleton_d") != nullptr;
  }
  if (maps != nullptr) std::fclose(maps);
  return mapped;
}

// The plugin (built so that dlclose would unmap it: no STB_GNU_UNIQUE symbols) enables the
// Stopwatch and the NVTX wrapper with order tracking, measures and pushes a range, on a thread
// that exits (so that no thread-exit destructor of its code is pending), then is dlclose'd.
// Returns whether its code is still mapped.
bool use_plugin_then_close() {
  void* h = ::dlopen(PLUGIN_UNLOADABLE, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return false;
  const auto fn = [&](const char* name) {
    return ::dlsym(h, (std::string("plugin_d_") + name).c_str());
  };
  const auto enable = reinterpret_cast<void (*)(int)>(fn("enable"));
  const auto start = reinterpret_cast<void (*)(const char*)>(fn("start"));
  const auto end = reinterpret_cast<void (*)(const char*)>(fn("end"));
  const auto nvtx_enable = reinterpret_cast<void (*)()>(fn("nvtx_enable"));
  const auto scoped_range = reinterpret_cast<void (*)(void (*)())>(fn("scoped_range"));
  std::thread([&] {
    enable(0);
    nvtx_enable();
    scoped_range(nullptr);
    start("plugin work");
    end("plugin work");
  }).join();
  ::dlclose(h);
  return plugin_mapped();
}

// The same plugin, whose only call sets the error policy (the warning table's first use joins the
// fork plan, and registers the process's one pthread_atfork: glibc ties it to the plugin), then
// dlclose'd. Returns whether its code is still mapped.
bool set_policy_in_plugin_then_close() {
  void* h = ::dlopen(PLUGIN_UNLOADABLE, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return false;
  reinterpret_cast<void (*)()>(::dlsym(h, "plugin_d_warn_policy"))();
  ::dlclose(h);
  return plugin_mapped();
}

// A forked worker's intervals reach this process's results (the fork plan works): 0 if so.
int worker_merged() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.finish_iter();
  const pid_t worker = ::fork();
  if (worker == 0) {
    for (int i = 0; i < 100; ++i) {
      sw.start_meas("worker work");
      sw.end_meas("worker work");
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(worker, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 2;
  for (const auto& m : sw.results().measurements) {
    if (m.name == "worker work") return m.count == 100 ? 0 : 3;
  }
  return 4;
}

// Runs `body` in a child process; its exit status (-1: killed by a signal or hung).
int in_child(int (*body)()) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE}) std::signal(sig, SIG_DFL);
    ::alarm(20);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

#ifdef UNLOAD_TEST_COPIED_R_DEBUG
// This build compiles the implementation into the program without -fPIC: its _r_debug is a copy
// (R_X86_64_COPY) that the loader never updates, frozen at RT_ADD. The cases below must hold all
// the same (before, no copy of laptime was ever kept loaded in such a program).
TEST_CASE("this program's _r_debug is a copy of the loader's" * LAPTIME_NEEDS_ENABLED) {
  REQUIRE(&_r_debug != laptime::detail::loader_r_debug());
  CHECK(laptime::detail::loader_r_debug()->r_state == r_debug::RT_CONSISTENT);
}
#endif

TEST_CASE("a shared object that used laptime stays loaded after dlclose" * LAPTIME_NEEDS_ENABLED) {
  CHECK(in_child([] { return use_plugin_then_close() ? 0 : 1; }) == 0);
}

TEST_CASE("after dlclose of the copy that enabled it, the NVTX wrapper works in another copy" *
          LAPTIME_NEEDS_ENABLED) {
  CHECK(in_child([] {
          (void)use_plugin_then_close();
          auto& nvtx = laptime::NVTXRangeWrapper::instance();
          nvtx.range_push("main range");  // a new thread's first push: the enabling copy's code
          nvtx.range_pop("main range");
          return 0;
        }) == 0);
}

TEST_CASE(
    "after dlclose of the copy that enabled the Stopwatch, a forked worker's intervals are "
    "merged" *
    LAPTIME_NEEDS_ENABLED) {
  CHECK(in_child([] {
          (void)use_plugin_then_close();
          return worker_merged();
        }) == 0);
}

TEST_CASE(
    "a shared object whose only call set the error policy stays loaded after dlclose, and forked "
    "workers are still merged" *
    LAPTIME_NEEDS_ENABLED) {
  CHECK(in_child([] { return set_policy_in_plugin_then_close() ? 0 : 1; }) == 0);
  CHECK(in_child([] {
          (void)set_policy_in_plugin_then_close();
          return worker_merged();
        }) == 0);
}

TEST_CASE(
    "a forked child's first use of laptime, while the parent's loader is loading, keeps it "
    "working: the copy is not pinned then (dlopen would assert in the child)" *
    LAPTIME_NEEDS_ENABLED) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  // Not run under the sanitizers: their allocators (GCC 12's runtimes) are not fork-safe. A
  // child forked while the loader thread holds the allocator's lock hangs in its first
  // operator new, with or without laptime: a program of only the loader thread and children
  // that call new hung after 579 forks under AddressSanitizer (gdb: every child stuck in
  // SizeClassAllocator64::GetFromAllocator). glibc's malloc is fork-safe; the plain tree runs it.
  MESSAGE("not run under a sanitizer (its allocator is not fork-safe; see the comment)");
  return;
#endif
  CHECK(in_child([] {
          // Nothing of laptime is used here before the children's first use.
          std::atomic<bool> stop{false};
          std::thread loader([&] {
            while (!stop.load()) {
              if (void* h = ::dlopen(PLUGIN_EMPTY, RTLD_NOW | RTLD_LOCAL)) ::dlclose(h);
            }
          });
          int failed = 0;
          for (int i = 0; i < 100; ++i) {
            const pid_t pid = ::fork();
            if (pid == 0) {
              ::alarm(5);
              auto& sw = laptime::Stopwatch::instance();
              sw.enable(0, std::nullopt, false);
              sw.start_meas("child");
              sw.end_meas("child");
              ::_exit(sw.results().measurements.size() == 1 ? 0 : 3);
            }
            int status = 0;
            ::waitpid(pid, &status, 0);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
              ++failed;
              std::fprintf(stderr, "child: %s %d\n", WIFEXITED(status) ? "exit" : "signal",
                           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            }
          }
          stop = true;
          loader.join();
          if (failed != 0) std::fprintf(stderr, "%d of 100 children failed\n", failed);
          return failed == 0 ? 0 : 5;
        }) == 0);
}
