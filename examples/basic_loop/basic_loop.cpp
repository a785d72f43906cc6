// A small CPU "training loop" instrumented the way the seed's runner and optimizer hook are:
// the outer "training loop" (with CPU usage tracked), the inner "IterBasedRunnerWithTime.train",
// "data fetch" from a multi-threaded loader, "Training step" and "Optimizer step" (also an NVTX
// range). Loader threads time their own "decode batch" intervals at the same time.
//
//   ./basic_loop [iterations]            # report at the end
//   LAPTIME_PROFILE=profiling nsys profile -t nvtx ./basic_loop   # ranges in Nsight Systems
//   LAPTIME_RECORD=4096 LAPTIME_OUTPUT=run.json ./basic_loop     # for laptime plot/trace/html
#include <pthread.h>
#include <laptime/laptime.hpp>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using Batch = std::vector<float>;

// A bounded queue fed by loader threads, like a DataLoader with prefetching.
class Loader {
 public:
  Loader(int workers, std::size_t batch_size) : batch_size_(batch_size) {
    for (int w = 0; w < workers; ++w) {
      threads_.emplace_back([this, w] { work(w); });
    }
  }
  ~Loader() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  Batch next() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return !queue_.empty(); });
    Batch b = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return b;
  }

 private:
  void work(int w) {
    const std::string name = "loader-" + std::to_string(w);
    ::pthread_setname_np(::pthread_self(), name.c_str());  // for top -H and laptime's traces
    laptime::NVTXRangeWrapper::instance().name_current_thread(name);
    std::mt19937 rng(static_cast<unsigned>(w));
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    auto& sw = laptime::Stopwatch::instance();
    for (;;) {
      sw.start_meas("decode batch");  // runs on loader threads, alongside the main loop
      Batch b(batch_size_);
      for (float& x : b) x = dist(rng);  // "decode and augment"
      sw.end_meas("decode batch");
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stop_ || queue_.size() < 4; });
      if (stop_) return;
      queue_.push_back(std::move(b));
      cv_.notify_all();
    }
  }

  std::size_t batch_size_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// "forward and backward": a small dense layer over the batch.
float training_step(const Batch& batch, std::vector<float>& weights) {
  float loss = 0;
  const std::size_t n = weights.size();
  for (std::size_t i = 0; i + n <= batch.size(); i += n) {
    float y = 0;
    for (std::size_t j = 0; j < n; ++j) y += weights[j] * batch[i + j];
    loss += y * y;
  }
  return loss;
}

void optimizer_step(std::vector<float>& weights, float loss) {
  auto& nvtx = laptime::NVTXRangeWrapper::instance();
  auto& sw = laptime::Stopwatch::instance();
  nvtx.range_push("optimizer.after_train_iter");
  sw.start_meas("Optimizer step");
  for (float& w : weights) w -= 1e-9f * loss * w;
  nvtx.range_pop();
  sw.end_meas("Optimizer step");
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 60;
  auto& sw = laptime::Stopwatch::instance();
  auto& nvtx = laptime::NVTXRangeWrapper::instance();

  // The environment decides first (LAPTIME_PROFILE=...); without it, measure as an evaluation run.
  const laptime::Settings settings = laptime::configure_from_env();
  if (!sw.is_enabled() && !settings.stopwatch)
    sw.enable(/*num_warmup_iters=*/10, std::nullopt,
              /*do_cuda_sync=*/false);

  sw.start_one_time_measurement("pipeline creation");
  Loader loader(/*workers=*/2, /*batch_size=*/1 << 16);
  std::vector<float> weights(256, 0.5f);
  sw.end_one_time_measurement("pipeline creation");

  if (nvtx.is_enabled()) nvtx.profiler_start();
  sw.set_cpu_usage_meas_name("training loop");
  for (int it = 0; it < iterations; ++it) {
    sw.start_meas("training loop");
    sw.start_meas("IterBasedRunnerWithTime.train");
    Batch batch;
    {
      LAPTIME_MEAS("data fetch");
      LAPTIME_RANGE("data fetch");
      batch = loader.next();
    }
    sw.start_meas("Training step");
    float loss;
    {
      LAPTIME_RANGE("Training step");
      loss = training_step(batch, weights);
    }
    sw.end_meas("Training step");
    optimizer_step(weights, loss);
    sw.end_meas("IterBasedRunnerWithTime.train");
    sw.end_meas("training loop");
    sw.finish_iter();
  }
  if (nvtx.is_enabled()) nvtx.profiler_stop();
  sw.print_eval_times();
  return 0;
}
