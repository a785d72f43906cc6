// ddp_train: data-parallel training in C++/CUDA, one process per GPU, gradients all-reduced with
// NCCL on the trainer's stream: the C++ counterpart of examples/nuscenes/train.py, instrumented
// with the same names (seeds/001: IterBasedRunnerWithTime, Fp16OptimizerHookWithTime), so that
// `laptime merge DIR/rank*.json` gives the same cross-rank report for both.
//
//   ddp_launch --nproc N --out DIR -- ddp_train [--iters N] [--warmup W] [--batch B] [--hidden H]
//
// Started by ddp_launch (or any launcher that sets torchrun's RANK, WORLD_SIZE, LOCAL_RANK and, for
// more than one rank, DDP_NCCL_ID_FILE); alone it runs as rank 0 of 1. The run type comes from
// LAPTIME_PROFILE (laptime::configure_from_env): evaluation measures, profiling and debugging add
// NVTX ranges and the profiler capture from the end of warm-up on rank 0 (nsys
// --capture-range=cudaProfilerApi). Every rank measures (LAPTIME_RANKS=all unless set), as the
// cross-rank report needs; LAPTIME_WARMUP defaults to --warmup.
//
// Each rank generates its own batches on the host (pinned, double-buffered) and copies them to the
// GPU ("data fetch"); a two-layer MLP learns a fixed linear teacher ("Training step": forward and
// MSE loss); "Optimizer step" is backward, ncclAllReduce of the gradients and SGD.
//
// Exit status: 0 when the loss fell; 77 with the reason when there is no GPU (ctest's "skipped";
// ddp_launch passes it on); 1 on an error or when the loss did not fall.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "laptime/laptime.hpp"

namespace {

#define CHECK(ok, what, detail)                                                                    \
  do {                                                                                             \
    if (!(ok)) {                                                                                   \
      std::fprintf(stderr, "ddp_train rank %d: %s:%d: %s: %s\n", g_rank, __FILE__, __LINE__, what, \
                   detail);                                                                        \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
#define CUDA_OK(call)                                        \
  do {                                                       \
    const cudaError_t e_ = (call);                           \
    CHECK(e_ == cudaSuccess, #call, cudaGetErrorString(e_)); \
  } while (0)
#define CUBLAS_OK(call)                                                   \
  do {                                                                    \
    const cublasStatus_t s_ = (call);                                     \
    CHECK(s_ == CUBLAS_STATUS_SUCCESS, #call, cublasGetStatusString(s_)); \
  } while (0)
#define NCCL_OK(call)                                        \
  do {                                                       \
    const ncclResult_t r_ = (call);                          \
    CHECK(r_ == ncclSuccess, #call, ncclGetErrorString(r_)); \
  } while (0)

int g_rank = 0;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// ---- kernels (column-major: element (r, c) of a rows x cols matrix is at r + c * rows) ----

constexpr int kThreads = 256;
int grid(int n) {
  return std::min((n + kThreads - 1) / kThreads, 2048);
}

__global__ void init_uniform(float* x, int n, float scale, std::uint32_t seed) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    std::uint32_t h = (static_cast<std::uint32_t>(i) + 1u) * 2654435761u ^ seed * 97531u;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    h *= 0x297a2d39u;
    h ^= h >> 15;
    x[i] = scale * (static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

// y = act(y + b[row])
__global__ void add_bias(float* y, const float* b, int rows, int n, bool relu) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float v = y[i] + b[i % rows];
    y[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

// grad = 2 (y - t) / n; *loss += sum (y - t)^2 / n
__global__ void mse(const float* y, const float* t, float* grad, float* loss, int n) {
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float d = y[i] - t[i];
    grad[i] = 2.0f * d / static_cast<float>(n);
    acc += d * d / static_cast<float>(n);
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(loss, acc);
}

__global__ void relu_grad(float* g, const float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if (y[i] <= 0.0f) g[i] = 0.0f;
  }
}

__global__ void bias_grad(const float* g, float* db, int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float s = 0.0f;
  for (int c = 0; c < cols; ++c) s += g[r + c * rows];
  db[r] = s;
}

// w -= lr * g / world: the all-reduce summed the ranks' gradients
__global__ void sgd_step(float* w, const float* g, float scale, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    w[i] -= scale * g[i];
  }
}

// ---- options ----

struct Options {
  int iters = 300;
  int warmup = 50;
  int batch = 256;
  int in = 1024;
  int hidden = 4096;
  int out = 256;
  float lr = 0.5f;  // the loss falls visibly within the 30 iterations of ddp-launch-test
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "ddp_train: unknown or incomplete argument %s\n", a.c_str());
      std::exit(2);
    }
    const int v = std::atoi(argv[++i]);
    if (a == "--iters") {
      o.iters = v;
    } else if (a == "--warmup") {
      o.warmup = v;
    } else if (a == "--batch") {
      o.batch = v;
    } else if (a == "--hidden") {
      o.hidden = v;
    } else {
      std::fprintf(stderr, "ddp_train: unknown argument %s (see the top of ddp_train.cu)\n",
                   a.c_str());
      std::exit(2);
    }
  }
  if (o.iters < 1 || o.warmup < 0 || o.batch < 1 || o.hidden < 1) {
    std::fprintf(stderr, "ddp_train: --iters, --batch, --hidden must be >= 1, --warmup >= 0\n");
    std::exit(2);
  }
  return o;
}

// ---- NCCL unique id: rank 0 makes it and writes it; the others wait for the file ----

ncclUniqueId exchange_id(int rank, int world) {
  ncclUniqueId id{};
  if (world == 1) {
    NCCL_OK(ncclGetUniqueId(&id));
    return id;
  }
  const char* path = std::getenv("DDP_NCCL_ID_FILE");
  CHECK(path != nullptr && *path != '\0', "DDP_NCCL_ID_FILE",
        "not set: start the ranks with ddp_launch");
  if (rank == 0) {
    NCCL_OK(ncclGetUniqueId(&id));
    const std::string tmp = std::string(path) + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    CHECK(f != nullptr, "fopen", tmp.c_str());
    CHECK(std::fwrite(&id, sizeof id, 1, f) == 1, "fwrite", tmp.c_str());
    std::fclose(f);
    CHECK(std::rename(tmp.c_str(), path) == 0, "rename", path);  // the others see all or nothing
    return id;
  }
  for (int waited_ms = 0;; waited_ms += 10) {
    if (FILE* f = std::fopen(path, "rb")) {
      const bool ok = std::fread(&id, sizeof id, 1, f) == 1;
      std::fclose(f);
      CHECK(ok, "fread", path);
      return id;
    }
    CHECK(waited_ms < 120000, "waiting for the NCCL id from rank 0", path);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// ---- the trainer ----

struct Trainer {
  Options o;
  int rank = 0, world = 1;
  cudaStream_t stream{};
  cublasHandle_t blas{};
  ncclComm_t comm{};
  int n_params = 0;
  float *params = nullptr, *grads = nullptr;
  float *w1, *b1, *w2, *b2, *dw1, *db1, *dw2, *db2;
  float *teacher, *x, *t, *y1, *y2, *g1, *g2, *losses;
  float* host_x[2] = {nullptr, nullptr};  // pinned, double-buffered host batches
  cudaEvent_t copied[2]{};
  std::uint64_t rng = 0;

  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* a,
            int lda, const float* b, int ldb, float* c, int ldc) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_OK(cublasSgemm(blas, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc));
  }

  void setup() {
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUBLAS_OK(cublasCreate(&blas));
    CUBLAS_OK(cublasSetStream(blas, stream));
    CUBLAS_OK(cublasSetMathMode(blas, CUBLAS_TF32_TENSOR_OP_MATH));
    const int n1 = o.hidden * o.in, n2 = o.out * o.hidden;
    n_params = n1 + o.hidden + n2 + o.out;
    CUDA_OK(cudaMalloc(&params, sizeof(float) * n_params));
    CUDA_OK(cudaMalloc(&grads, sizeof(float) * n_params));
    w1 = params, b1 = w1 + n1, w2 = b1 + o.hidden, b2 = w2 + n2;
    dw1 = grads, db1 = dw1 + n1, dw2 = db1 + o.hidden, db2 = dw2 + n2;
    auto alloc = [](float** p, long n) { CUDA_OK(cudaMalloc(p, sizeof(float) * n)); };
    alloc(&teacher, static_cast<long>(o.out) * o.in);
    alloc(&x, static_cast<long>(o.in) * o.batch);
    alloc(&t, static_cast<long>(o.out) * o.batch);
    alloc(&y1, static_cast<long>(o.hidden) * o.batch);
    alloc(&g1, static_cast<long>(o.hidden) * o.batch);
    alloc(&y2, static_cast<long>(o.out) * o.batch);
    alloc(&g2, static_cast<long>(o.out) * o.batch);
    alloc(&losses, o.iters);
    for (auto& h : host_x) CUDA_OK(cudaMallocHost(&h, sizeof(float) * o.in * o.batch));
    for (auto& e : copied) CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_OK(cudaMemsetAsync(losses, 0, sizeof(float) * o.iters, stream));
    CUDA_OK(cudaMemsetAsync(params, 0, sizeof(float) * n_params, stream));
    // The same initial weights on every rank (same seeds), as DDP broadcasts them.
    init_uniform<<<grid(n1), kThreads, 0, stream>>>(w1, n1, std::sqrt(3.0f / o.in), 11);
    init_uniform<<<grid(n2), kThreads, 0, stream>>>(w2, n2, std::sqrt(3.0f / o.hidden), 12);
    init_uniform<<<grid(o.out * o.in), kThreads, 0, stream>>>(teacher, o.out * o.in,
                                                              std::sqrt(3.0f / o.in), 13);
    CUDA_OK(cudaGetLastError());
    rng = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(rank + 1);  // each rank its own data
  }

  // data_batch = next(data_loader): fill a pinned host buffer, copy it, compute the targets.
  void next_batch(int iter) {
    const int slot = iter & 1;
    CUDA_OK(cudaEventSynchronize(copied[slot]));  // its previous copy has left the buffer
    float* h = host_x[slot];
    for (int i = 0, n = o.in * o.batch; i < n; ++i) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;  // xorshift64
      h[i] = static_cast<float>(rng >> 40) * (2.0f / 16777216.0f) - 1.0f;
    }
    CUDA_OK(cudaMemcpyAsync(x, h, sizeof(float) * o.in * o.batch, cudaMemcpyHostToDevice, stream));
    CUDA_OK(cudaEventRecord(copied[slot], stream));
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, o.out, o.batch, o.in, teacher, o.out, x, o.in, t, o.out);
  }

  // model.train_step: forward and loss
  void forward(int iter) {
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, o.hidden, o.batch, o.in, w1, o.hidden, x, o.in, y1, o.hidden);
    add_bias<<<grid(o.hidden * o.batch), kThreads, 0, stream>>>(y1, b1, o.hidden,
                                                                o.hidden * o.batch, true);
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, o.out, o.batch, o.hidden, w2, o.out, y1, o.hidden, y2, o.out);
    add_bias<<<grid(o.out * o.batch), kThreads, 0, stream>>>(y2, b2, o.out, o.out * o.batch, false);
    mse<<<grid(o.out * o.batch), kThreads, 0, stream>>>(y2, t, g2, losses + iter, o.out * o.batch);
    CUDA_OK(cudaGetLastError());
  }

  void backward() {
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, o.out, o.hidden, o.batch, g2, o.out, y1, o.hidden, dw2, o.out);
    bias_grad<<<(o.out + kThreads - 1) / kThreads, kThreads, 0, stream>>>(g2, db2, o.out, o.batch);
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, o.hidden, o.batch, o.out, w2, o.out, g2, o.out, g1, o.hidden);
    relu_grad<<<grid(o.hidden * o.batch), kThreads, 0, stream>>>(g1, y1, o.hidden * o.batch);
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, o.hidden, o.in, o.batch, g1, o.hidden, x, o.in, dw1, o.hidden);
    bias_grad<<<(o.hidden + kThreads - 1) / kThreads, kThreads, 0, stream>>>(g1, db1, o.hidden,
                                                                             o.batch);
    CUDA_OK(cudaGetLastError());
  }

  // Fp16OptimizerHookWithTime.after_train_iter: the seed's range and "Optimizer step".
  void after_train_iter() {
    auto& sw = laptime::Stopwatch::instance();
    auto& nvtx = laptime::NVTXRangeWrapper::instance();
    nvtx.range_push("optimizer.after_train_iter");
    sw.start_meas("Optimizer step");
    nvtx.range_push("loss.backward");
    backward();
    nvtx.range_pop("loss.backward");
    nvtx.range_push("ncclAllReduce");
    NCCL_OK(ncclAllReduce(grads, grads, static_cast<std::size_t>(n_params), ncclFloat, ncclSum,
                          comm, stream));
    nvtx.range_pop("ncclAllReduce");
    nvtx.range_push("optimizer.step");
    sgd_step<<<grid(n_params), kThreads, 0, stream>>>(params, grads, o.lr / world, n_params);
    CUDA_OK(cudaGetLastError());
    nvtx.range_pop("optimizer.step");
    nvtx.range_pop("optimizer.after_train_iter");  // checked in LAPTIME_PROFILE=debugging
    sw.end_meas("Optimizer step");
  }

  // IterBasedRunnerWithTime.train
  void train(int iter) {
    auto& sw = laptime::Stopwatch::instance();
    auto& nvtx = laptime::NVTXRangeWrapper::instance();
    sw.start_meas("IterBasedRunnerWithTime.train");
    nvtx.range_push("data fetch");
    sw.start_meas("data fetch");
    next_batch(iter);
    sw.end_meas("data fetch");
    nvtx.range_pop("data fetch");
    nvtx.range_push("Training step");
    sw.start_meas("Training step");
    forward(iter);
    sw.end_meas("Training step");
    nvtx.range_pop("Training step");
    after_train_iter();
    sw.end_meas("IterBasedRunnerWithTime.train");
  }
};

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  const int rank = env_int("RANK", 0), world = env_int("WORLD_SIZE", 1);
  const int local_rank = env_int("LOCAL_RANK", rank);
  g_rank = rank;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("ddp_train rank %d: skipped: needs a CUDA GPU; none found\n", rank);
    return 77;
  }
  CUDA_OK(cudaSetDevice(local_rank % devices));
  CUDA_OK(cudaFree(nullptr));

  // ===== Runtime measurement & profiling configuration (seed: train.py), from the environment
  // ===== Every rank measures, for the cross-rank report (the seed: rank 0 only); the user's
  // LAPTIME_RANKS / LAPTIME_WARMUP win.
  ::setenv("LAPTIME_RANKS", "all", 0);
  ::setenv("LAPTIME_WARMUP", std::to_string(opt.warmup).c_str(), 0);
  laptime::configure_from_env();
  auto& sw = laptime::Stopwatch::instance();
  auto& nvtx = laptime::NVTXRangeWrapper::instance();
  if (rank == 0) {
    const char* profile = std::getenv("LAPTIME_PROFILE");
    std::printf(
        "ddp_train: world size %d, %d GPU(s) here, LAPTIME_PROFILE=%s, Stopwatch %s, NVTX %s\n",
        world, devices, profile != nullptr ? profile : "(unset: all off)",
        sw.is_enabled() ? "on" : "off", nvtx.is_enabled() ? "on" : "off");
  }

  Trainer tr;
  tr.o = opt;
  tr.rank = rank;
  tr.world = world;
  nvtx.range_push("setup");
  tr.setup();
  const ncclUniqueId id = exchange_id(rank, world);
  NCCL_OK(ncclCommInitRank(&tr.comm, world, id, rank));
  CUDA_OK(cudaStreamSynchronize(tr.stream));
  nvtx.range_pop("setup");

  // ===== Training loop & timing (seed: IterBasedRunnerWithTime.run) =====
  sw.set_cpu_usage_meas_name("training loop");
  bool profiling = false;
  for (int iter = 0; iter < opt.iters; ++iter) {
    if (iter == opt.warmup && nvtx.is_enabled() && rank == 0) {
      std::printf("Starting profiling\n");
      profiling = nvtx.profiler_start();
    }
    sw.start_meas("training loop");
    tr.train(iter);
    sw.end_meas("training loop");
    sw.finish_iter();
  }
  CUDA_OK(cudaStreamSynchronize(tr.stream));
  if (profiling) {
    nvtx.profiler_stop();
    std::printf("Stopping profiling\n");
  }

  std::vector<float> losses(static_cast<std::size_t>(opt.iters));
  CUDA_OK(cudaMemcpy(losses.data(), tr.losses, sizeof(float) * opt.iters, cudaMemcpyDeviceToHost));
  const int k = std::max(1, std::min(10, opt.iters / 2));
  double first = 0, last = 0;
  for (int i = 0; i < k; ++i) first += losses[i] / k, last += losses[opt.iters - 1 - i] / k;
  if (rank == 0) {
    if (sw.is_enabled()) sw.print_eval_times();  // rank 0's own; `laptime merge` for all ranks
    std::printf(
        "loss: first iteration %.5f, last iteration %.5f; mean of the first %d %.5f, of "
        "the last %d %.5f (%s)\n",
        losses.front(), losses.back(), k, first, k, last, last < first ? "falls" : "DOES NOT FALL");
    std::printf(
        "RANGES data fetch=%d Training step=%d optimizer.after_train_iter=%d (from "
        "iteration %d on, rank 0)\n",
        opt.iters - opt.warmup, opt.iters - opt.warmup, opt.iters - opt.warmup, opt.warmup);
  }
  NCCL_OK(ncclCommDestroy(tr.comm));
  CUBLAS_OK(cublasDestroy(tr.blas));
  CUDA_OK(cudaStreamDestroy(tr.stream));
  return last < first ? 0 : 1;
}
