// Loads the plugin (argv[1]) after enabling the Stopwatch through its own, header-only copy of
// laptime, and prints each name's count: one state, whoever measured.
#include <dlfcn.h>

#include <cstdio>
#include <laptime/laptime.hpp>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0);
  void* plugin = ::dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (plugin == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", ::dlerror());
    return 1;
  }
  auto* work = reinterpret_cast<void (*)()>(::dlsym(plugin, "plugin_work"));
  if (work == nullptr) return 1;
  sw.start_meas("main");
  work();
  work();
  sw.end_meas("main");
  for (const auto& m : sw.results().measurements) {
    std::printf("%s %llu\n", m.name.c_str(), static_cast<unsigned long long>(m.count));
  }
  return 0;
}
