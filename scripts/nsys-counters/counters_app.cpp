// The program scripts/nsys-counters.sh runs under Nsight Systems: three tracked names with known
// CPU and I/O, their figures as NVTX counters. Each iteration "busy" spins 50 ms, "idle" sleeps
// 50 ms and "write" writes 16 MiB to FILE and fsyncs it; the background sampler publishes at HZ.
// Every interval is also an NVTX range of its name (set_nvtx_ranges: no range_push written by
// hand), "spin" nested in "busy".
//
//   counters_app [ITERS=20] [HZ=20] [FILE=counters-app.bin]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <laptime/laptime.hpp>

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  const double hz = argc > 2 ? std::atof(argv[2]) : 20;
  const std::string file = argc > 3 ? argv[3] : "counters-app.bin";
  auto& sw = laptime::Stopwatch::instance();
  auto& nvtx = laptime::NVTXRangeWrapper::instance();
  nvtx.enable(false, false, false);
  for (const char* n : {"busy", "idle", "write"}) sw.track_cpu_usage(n);
  sw.enable(0, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  laptime::enable_nvtx_counters(hz);
  const std::string block(16 << 20, 'w');
  for (int i = 0; i < iters; ++i) {
    {
      sw.start_meas("busy");
      sw.start_meas("spin");
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      volatile unsigned long sink = 0;
      while (std::chrono::steady_clock::now() < until) sink = sink + 1;
      sw.end_meas("spin");
      sw.end_meas("busy");
    }
    {
      sw.start_meas("idle");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      sw.end_meas("idle");
    }
    {
      const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      sw.start_meas("write");
      const bool ok =
          fd >= 0 &&
          ::write(fd, block.data(), block.size()) == static_cast<ssize_t>(block.size()) &&
          ::fsync(fd) == 0;
      sw.end_meas("write");
      if (fd >= 0) ::close(fd);
      if (!ok) std::perror("write");
    }
    sw.finish_iter();
  }
  ::unlink(file.c_str());
  laptime::disable_nvtx_counters();
  sw.print_eval_times();
  return 0;
}
