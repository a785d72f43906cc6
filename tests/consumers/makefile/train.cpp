// A tiny training loop built by make (tests/consumers/makefile/Makefile): a linear model fitted
// by SGD, batches made by a loader thread, five names timed as a trainer times them.
#include <laptime/laptime.hpp>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr int kFeatures = 16;
constexpr int kBatch = 64;

struct Batch {
  std::vector<float> x, y;
};

// One batch ahead, made on its own thread: y = sum_i (i + 1) / kFeatures * x_i + noise.
class Loader {
 public:
  Loader() : thread_([this] { run(); }) {}
  ~Loader() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Batch next() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return ready_; });
    ready_ = false;
    Batch b = std::move(batch_);
    cv_.notify_all();
    return b;
  }

 private:
  void run() {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (;;) {
      Batch b;
      {
        laptime::ScopedMeasurement m("loader: make batch");
        b.x.resize(kBatch * kFeatures);
        b.y.resize(kBatch);
        for (int r = 0; r < kBatch; ++r) {
          float y = 0.01f * normal(rng);
          for (int f = 0; f < kFeatures; ++f) {
            const float v = normal(rng);
            b.x[r * kFeatures + f] = v;
            y += static_cast<float>(f + 1) / kFeatures * v;
          }
          b.y[r] = y;
        }
      }
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return !ready_ || stop_; });
      if (stop_) return;
      batch_ = std::move(b);
      ready_ = true;
      cv_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  Batch batch_;
  bool ready_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace

int main() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(/*num_warmup_iters=*/5, /*print_every_n_iters=*/0, /*do_cuda_sync=*/false);
  std::vector<float> w(kFeatures, 0.0f), grad(kFeatures), err(kBatch);
  float first_loss = 0, loss = 0;
  Loader loader;
  for (int it = 0; it < 200; ++it) {
    sw.start_meas("step");
    sw.start_meas("data fetch");
    const Batch b = loader.next();
    sw.end_meas("data fetch");
    sw.start_meas("forward");
    loss = 0;
    for (int r = 0; r < kBatch; ++r) {
      float p = 0;
      for (int f = 0; f < kFeatures; ++f) p += w[f] * b.x[r * kFeatures + f];
      err[r] = p - b.y[r];
      loss += err[r] * err[r] / kBatch;
    }
    sw.end_meas("forward");
    sw.start_meas("backward");
    for (int f = 0; f < kFeatures; ++f) {
      float g = 0;
      for (int r = 0; r < kBatch; ++r) g += 2 * err[r] * b.x[r * kFeatures + f] / kBatch;
      grad[f] = g;
    }
    sw.end_meas("backward");
    sw.start_meas("optimizer update");
    for (int f = 0; f < kFeatures; ++f) w[f] -= 0.05f * grad[f];
    sw.end_meas("optimizer update");
    sw.end_meas("step");
    sw.finish_iter();
    if (it == 0) first_loss = loss;
  }
  std::printf("trained: loss %.4f -> %.4f\n", first_loss, loss);
  sw.print_eval_times();
  return loss < first_loss / 10 ? 0 : 1;
}
