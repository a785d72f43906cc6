// nvtx_ranges: what laptime's NVTX ranges look like in Nsight Systems.
//
// A fake training loop (no GPU needed): a loader thread named "loader-0" prepares batches inside
// "load batch" ranges; the main thread runs "train step" > "forward" / "backward" / "optimizer"
// and marks the end of each iteration. Run it under Nsight Systems and open the report:
//
//   nsys profile -t nvtx -o nvtx_ranges ./nvtx_ranges
//   nsys stats --report nvtx_sum nvtx_ranges.nsys-rep
//
// Options: --iters N (default 30), --warmup N (iterations before profiler_start, default 5),
// --check-order (keep_track_of_range_order), --domain NAME (default: NVTX's global domain).
// With --capture-range=cudaProfilerApi nsys records only between profiler_start and profiler_stop
// (that needs a CUDA driver; without one both calls do nothing). docs/nvtx.md explains more.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "laptime/nvtx.hpp"

namespace {

// Stands in for real work: keeps the CPU busy for about `us` microseconds.
void busy_for(int us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  volatile unsigned sink = 0;
  while (std::chrono::steady_clock::now() < until) sink = sink + 1;
}

// A bounded queue of batch numbers between the loader and the training loop.
class BatchQueue {
 public:
  void put(int batch) {
    std::unique_lock<std::mutex> lock(mutex_);
    not_full_.wait(lock, [&] { return batches_.size() < 2; });
    batches_.push_back(batch);
    not_empty_.notify_one();
  }
  int take() {
    std::unique_lock<std::mutex> lock(mutex_);
    not_empty_.wait(lock, [&] { return !batches_.empty(); });
    const int batch = batches_.front();
    batches_.pop_front();
    not_full_.notify_one();
    return batch;
  }

 private:
  std::mutex mutex_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<int> batches_;
};

void loader(BatchQueue& queue, int iterations) {
  laptime::NVTXRangeWrapper::instance().name_current_thread("loader-0");
  for (int i = 0; i < iterations; ++i) {
    {
      LAPTIME_RANGE("load batch");  // decode + augment, on the loader's own timeline row
      busy_for(3000);
    }
    queue.put(i);
  }
}

void forward() {
  LAPTIME_FUNC_RANGE();  // a range named "forward"
  for (int layer = 0; layer < 3; ++layer) {
    // Names made at run time work too; each distinct text is registered with NVTX once.
    const laptime::NVTXScopedRange range{"layer " + std::to_string(layer)};
    busy_for(400);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 30;
  int warmup = 5;
  bool check_order = false;
  laptime::NVTXOptions options;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iterations = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--warmup") == 0 && i + 1 < argc) {
      warmup = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--check-order") == 0) {
      check_order = true;
    } else if (std::strcmp(argv[i], "--domain") == 0 && i + 1 < argc) {
      options.domain = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--iters N] [--warmup N] [--check-order] [--domain NAME]\n",
                   argv[0]);
      return 2;
    }
  }

  auto& nvtx = laptime::NVTXRangeWrapper::instance();
  nvtx.enable(/*sync_on_push=*/false, /*sync_on_pop=*/false, check_order, options);
  nvtx.name_current_thread("trainer");

  BatchQueue queue;
  std::thread loader_thread(loader, std::ref(queue), iterations);

  for (int iter = 0; iter < iterations; ++iter) {
    // For nsys --capture-range=cudaProfilerApi: record only after warm-up. (Without a CUDA context
    // the driver refuses and laptime warns once, but nsys still sees the call.)
    if (iter == warmup) nvtx.profiler_start();
    LAPTIME_RANGE("train step");

    nvtx.range_push("wait for batch");
    const int batch = queue.take();
    nvtx.range_pop("wait for batch");

    forward();

    nvtx.range_push("backward");
    busy_for(2000);
    nvtx.range_pop("backward");

    nvtx.range_push("optimizer");
    busy_for(500);
    nvtx.range_pop("optimizer");

    // What the Stopwatch's finish_iter() emits when the wrapper is enabled.
    nvtx.mark("iteration " + std::to_string(iter) + " (batch " + std::to_string(batch) + ")");
  }
  if (iterations > warmup) nvtx.profiler_stop();
  loader_thread.join();
  std::printf("nvtx_ranges: %d iterations done. Under Nsight Systems: nsys profile -t nvtx %s\n",
              iterations, argv[0]);
  return 0;
}
