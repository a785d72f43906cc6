// trainer.cu: a small GPT-style language model trained on the GPU, in one CUDA file, the way
// single-file CUDA trainers are written (kernels, templates, cuBLAS, a data-loader thread). It is
// the "trainer-sized CUDA file" of bench/compile/trainer/run.sh (docs/build.md): the compile
// time of this file built four ways, from the same source:
//
//   plain      nvcc -O3 -arch=sm_90 -std=c++17 trainer.cu -lcublas                 no laptime
//   laptime    ... -DTRAINER_LAPTIME -I<laptime>/include  (+ laptime.o)            instrumented
//   single     ... -DTRAINER_LAPTIME -DTRAINER_SINGLE_INCLUDE -I<laptime>/include  header-only
//   disabled   ... -DTRAINER_LAPTIME -DLAPTIME_DISABLE -I<laptime>/include          compiled out
//
// Instrumented, every step is timed under five names (step, data fetch, forward, backward,
// optimizer update) by laptime's Stopwatch, with NVTX ranges of the same names and GPU time from
// CUDA events recorded on the trainer's own stream; the report is printed and written as JSON at
// the end. Nothing else differs between the builds.
//
// The model: token + position embeddings, L transformer blocks (pre-layernorm, causal multi-head
// self-attention, GELU MLP, residual connections), a final layernorm and logits tied to the token
// embedding; cross-entropy loss; AdamW with global gradient-norm clipping, linear warm-up and a
// cosine learning-rate schedule. The data: sequences drawn from a fixed random Markov chain over
// 256 tokens (each token has four likely successors), made by a loader thread into pinned host
// buffers and copied on the trainer's stream, so the loss falls from ln(256) = 5.55 towards the
// chain's entropy (about 1.1 nats) within a few hundred steps.
//
// Layout conventions: every matrix is row-major. A linear layer y = x W^T + b keeps W as
// (out_features, in_features), as PyTorch does. cuBLAS is column-major: a row-major (r x c)
// matrix is a column-major (c x r) one, so C = op(A) op(B) in row-major is computed as
// C^T = op(B)^T op(A)^T in column-major (see matmul() below).
//
// Usage: trainer [--steps N] [--batch B] [--seq T] [--layers L] [--channels C] [--heads H]
//                [--lr LR] [--eval-every N] [--json PATH] [--save PATH] [--gradcheck] [--quiet]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(TRAINER_LAPTIME) && defined(TRAINER_SINGLE_INCLUDE)
// The header-only way (docs/build.md): one include, laptime's implementation compiled here.
#include <laptime/laptime.hpp>
#elif defined(TRAINER_LAPTIME)
// The fast recipe (docs/build.md): the light headers here, laptime's implementation compiled
// once beside this file (src/laptime.cpp, the Makefile's laptime.o).
#include <laptime/nvtx.hpp>
#include <laptime/settings.hpp>
#include <laptime/stopwatch.hpp>
#endif
#ifdef TRAINER_LAPTIME
// One name, three calls: the Stopwatch interval (host time, and GPU time from events on the
// trainer's stream) and an NVTX range for Nsight Systems.
#define TRAINER_BEGIN(name)                                 \
  do {                                                      \
    laptime::NVTXRangeWrapper::instance().range_push(name); \
    laptime::Stopwatch::instance().start_meas(name);        \
  } while (0)
#define TRAINER_END(name)                                  \
  do {                                                     \
    laptime::Stopwatch::instance().end_meas(name);         \
    laptime::NVTXRangeWrapper::instance().range_pop(name); \
  } while (0)
#else
#define TRAINER_BEGIN(name) ((void)0)
#define TRAINER_END(name) ((void)0)
#endif

// ---------------------------------------------------------------------------------------------
// Error checking

#define CUDA_CHECK(call) cuda_check((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) cublas_check((call), #call, __FILE__, __LINE__)

static void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, what, cudaGetErrorString(e),
                 cudaGetErrorName(e));
    std::exit(EXIT_FAILURE);
  }
}

static const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "unknown cuBLAS status";
  }
}

static void cublas_check(cublasStatus_t s, const char* what, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", file, line, what, cublas_status_name(s),
                 static_cast<int>(s));
    std::exit(EXIT_FAILURE);
  }
}

// Checks a kernel launch (configuration errors surface at once; faults at the next sync).
#define KERNEL_CHECK() CUDA_CHECK(cudaGetLastError())

static inline int ceil_div(long long a, long long b) {
  return static_cast<int>((a + b - 1) / b);
}

// ---------------------------------------------------------------------------------------------
// Reductions: warp and block reductions, templated over the value type and the operation.

template <typename T>
struct SumOp {
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
  __device__ __forceinline__ static T identity() { return T(0); }
};

template <typename T>
struct MaxOp {
  __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
  __device__ __forceinline__ static T identity() { return -INFINITY; }
};

// A value and where it was found; the larger value wins, the smaller index on a tie.
struct ArgMax {
  float value;
  int index;
};

struct ArgMaxOp {
  __device__ __forceinline__ ArgMax operator()(ArgMax a, ArgMax b) const {
    if (a.value > b.value) return a;
    if (b.value > a.value) return b;
    return a.index <= b.index ? a : b;
  }
  __device__ __forceinline__ static ArgMax identity() { return ArgMax{-INFINITY, 0x7fffffff}; }
};

template <typename T>
__device__ __forceinline__ T shfl_xor(T v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}

template <>
__device__ __forceinline__ ArgMax shfl_xor<ArgMax>(ArgMax v, int mask) {
  ArgMax o;
  o.value = __shfl_xor_sync(0xffffffffu, v.value, mask);
  o.index = __shfl_xor_sync(0xffffffffu, v.index, mask);
  return o;
}

// Every lane of the warp ends with the reduction of the 32 values.
template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, shfl_xor(v, offset));
  return v;
}

// Every thread of the block ends with the reduction of the block's values. blockDim.x must be a
// multiple of 32 (at most 1024). Safe to call several times in a row in one kernel.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op) {
  __shared__ T partial[32];
  __shared__ T result;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = warp_reduce(v, op);
  __syncthreads();  // the previous call's readers of partial/result are done
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? partial[lane] : Op::identity();
    w = warp_reduce(w, op);
    if (lane == 0) result = w;
  }
  __syncthreads();
  return result;
}

// out[blockIdx.x] = the reduction of f(i) over a grid-stride share of [0, n). One partial per
// block; reduce_partials() finishes in a single block.
template <typename T, typename Op, typename F, int kBlock>
__global__ void __launch_bounds__(kBlock) reduce_partials_kernel(T* out, long long n, F f) {
  Op op;
  T acc = Op::identity();
  for (long long i = blockIdx.x * static_cast<long long>(kBlock) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * kBlock) {
    acc = op(acc, f(i));
  }
  acc = block_reduce(acc, op);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

// out[0] = reduce(in[0..n)) (one block), optionally transformed: out[0] = post(result).
template <typename T, typename Op, typename Post, int kBlock>
__global__ void __launch_bounds__(kBlock)
    reduce_final_kernel(T* out, const T* in, int n, Post post) {
  Op op;
  T acc = Op::identity();
  for (int i = threadIdx.x; i < n; i += kBlock) acc = op(acc, in[i]);
  acc = block_reduce(acc, op);
  if (threadIdx.x == 0) out[0] = post(acc);
}

struct Identity {
  template <typename T>
  __device__ __forceinline__ T operator()(T v) const {
    return v;
  }
};

struct Scale {
  float factor;
  __device__ __forceinline__ float operator()(float v) const { return v * factor; }
};

struct SquareOf {
  const float* x;
  __device__ __forceinline__ float operator()(long long i) const { return x[i] * x[i]; }
};

struct ValueOf {
  const float* x;
  __device__ __forceinline__ float operator()(long long i) const { return x[i]; }
};

// Two-pass deterministic reduction of n values given by f; the result lands in out[0] on the
// device (no host sync). `scratch` holds at least kReduceBlocks values.
constexpr int kReduceBlocks = 256;
constexpr int kReduceThreads = 512;

template <typename Op, typename F, typename Post = Identity>
void reduce_on_device(float* out, float* scratch, long long n, F f, cudaStream_t stream,
                      Post post = Post()) {
  const int blocks = std::max(1, std::min(kReduceBlocks, ceil_div(n, kReduceThreads)));
  reduce_partials_kernel<float, Op, F, kReduceThreads>
      <<<blocks, kReduceThreads, 0, stream>>>(scratch, n, f);
  KERNEL_CHECK();
  reduce_final_kernel<float, Op, Post, kReduceThreads>
      <<<1, kReduceThreads, 0, stream>>>(out, scratch, blocks, post);
  KERNEL_CHECK();
}

// ---------------------------------------------------------------------------------------------
// Element-wise kernels, templated over the operation.

template <typename F>
__global__ void map_kernel(float* out, const float* in, long long n, F f) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    out[i] = f(in[i]);
  }
}

template <typename F>
__global__ void zip_kernel(float* out, const float* a, const float* b, long long n, F f) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    out[i] = f(a[i], b[i]);
  }
}

struct Add {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// GELU, tanh approximation, and its derivative.
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)

struct GeluForward {
  __device__ __forceinline__ float operator()(float x) const {
    const float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(kGeluScale * (x + cube)));
  }
};

// out = dout * gelu'(x)
struct GeluBackward {
  __device__ __forceinline__ float operator()(float x, float dout) const {
    const float cube = 0.044715f * x * x * x;
    const float arg = kGeluScale * (x + cube);
    const float t = tanhf(arg);
    const float sech2 = 1.0f - t * t;
    const float local =
        0.5f * (1.0f + t) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    return local * dout;
  }
};

template <typename F>
void launch_map(float* out, const float* in, long long n, F f, cudaStream_t stream) {
  const int threads = 256;
  const int blocks = std::min(ceil_div(n, threads), 65535);
  map_kernel<<<blocks, threads, 0, stream>>>(out, in, n, f);
  KERNEL_CHECK();
}

template <typename F>
void launch_zip(float* out, const float* a, const float* b, long long n, F f, cudaStream_t stream) {
  const int threads = 256;
  const int blocks = std::min(ceil_div(n, threads), 65535);
  zip_kernel<<<blocks, threads, 0, stream>>>(out, a, b, n, f);
  KERNEL_CHECK();
}

// ---------------------------------------------------------------------------------------------
// Embedding

// out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]
__global__ void embedding_forward_kernel(float* out, const int* tokens, const float* wte,
                                         const float* wpe, int B, int T, int C) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long total = static_cast<long long>(B) * T * C;
  if (idx >= total) return;
  const int c = static_cast<int>(idx % C);
  const long long bt = idx / C;
  const int t = static_cast<int>(bt % T);
  const int token = tokens[bt];
  out[idx] = wte[static_cast<long long>(token) * C + c] + wpe[static_cast<long long>(t) * C + c];
}

// dwte[tokens[b, t], :] += dout[b, t, :]; dwpe[t, :] += dout[b, t, :]
__global__ void embedding_backward_kernel(float* dwte, float* dwpe, const float* dout,
                                          const int* tokens, int B, int T, int C) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long total = static_cast<long long>(B) * T * C;
  if (idx >= total) return;
  const int c = static_cast<int>(idx % C);
  const long long bt = idx / C;
  const int t = static_cast<int>(bt % T);
  const int token = tokens[bt];
  const float d = dout[idx];
  atomicAdd(&dwte[static_cast<long long>(token) * C + c], d);
  atomicAdd(&dwpe[static_cast<long long>(t) * C + c], d);
}

// ---------------------------------------------------------------------------------------------
// LayerNorm: one block per row.

template <int kBlock>
__global__ void __launch_bounds__(kBlock)
    layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                             const float* weight, const float* bias, int N, int C) {
  const int row = blockIdx.x;
  if (row >= N) return;
  const float* x = inp + static_cast<long long>(row) * C;
  float* y = out + static_cast<long long>(row) * C;
  SumOp<float> sum;
  float s = 0.0f;
  for (int i = threadIdx.x; i < C; i += kBlock) s += x[i];
  const float m = block_reduce(s, sum) / C;
  float v = 0.0f;
  for (int i = threadIdx.x; i < C; i += kBlock) {
    const float d = x[i] - m;
    v += d * d;
  }
  const float var = block_reduce(v, sum) / C;
  const float r = rsqrtf(var + 1e-5f);
  for (int i = threadIdx.x; i < C; i += kBlock) {
    y[i] = (x[i] - m) * r * weight[i] + bias[i];
  }
  if (threadIdx.x == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// dinp += d/dx, dweight += sum over rows of dout * norm, dbias += sum over rows of dout.
template <int kBlock>
__global__ void __launch_bounds__(kBlock)
    layernorm_backward_kernel(float* dinp, float* dweight, float* dbias, const float* dout,
                              const float* inp, const float* weight, const float* mean,
                              const float* rstd, int N, int C) {
  const int row = blockIdx.x;
  if (row >= N) return;
  const float* dy = dout + static_cast<long long>(row) * C;
  const float* x = inp + static_cast<long long>(row) * C;
  float* dx = dinp + static_cast<long long>(row) * C;
  const float m = mean[row];
  const float r = rstd[row];
  SumOp<float> sum;
  // The two means the gradient needs: of dnorm and of dnorm * norm.
  float a = 0.0f, b = 0.0f;
  for (int i = threadIdx.x; i < C; i += kBlock) {
    const float norm = (x[i] - m) * r;
    const float dnorm = weight[i] * dy[i];
    a += dnorm;
    b += dnorm * norm;
  }
  const float mean_dnorm = block_reduce(a, sum) / C;
  const float mean_dnorm_norm = block_reduce(b, sum) / C;
  for (int i = threadIdx.x; i < C; i += kBlock) {
    const float norm = (x[i] - m) * r;
    const float dnorm = weight[i] * dy[i];
    dx[i] += r * (dnorm - mean_dnorm - norm * mean_dnorm_norm);
    atomicAdd(&dweight[i], norm * dy[i]);
    atomicAdd(&dbias[i], dy[i]);
  }
}

// ---------------------------------------------------------------------------------------------
// Bias: forward adds it to every row; backward sums the rows (one block per column).

__global__ void add_bias_kernel(float* out, const float* bias, int N, int OC) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<long long>(N) * OC) return;
  out[idx] += bias[idx % OC];
}

template <int kBlock>
__global__ void __launch_bounds__(kBlock)
    bias_backward_kernel(float* dbias, const float* dout, int N, int OC) {
  const int col = blockIdx.x;
  if (col >= OC) return;
  float s = 0.0f;
  for (int r = threadIdx.x; r < N; r += kBlock) s += dout[static_cast<long long>(r) * OC + col];
  s = block_reduce(s, SumOp<float>());
  if (threadIdx.x == 0) dbias[col] += s;
}

// ---------------------------------------------------------------------------------------------
// Attention layout: qkv is (B, T, 3, NH, HS) as the QKV projection writes it; attention works on
// q, k, v as (B, NH, T, HS) each, contiguous, so that every (batch, head) is one matrix.

__global__ void permute_qkv_kernel(float* q, float* k, float* v, const float* qkv, int B, int T,
                                   int NH, int HS) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long total = static_cast<long long>(B) * NH * T * HS;
  if (idx >= total) return;
  // idx enumerates (b, h, t, d) of the destination
  const int d = static_cast<int>(idx % HS);
  long long rest = idx / HS;
  const int t = static_cast<int>(rest % T);
  rest /= T;
  const int h = static_cast<int>(rest % NH);
  const int b = static_cast<int>(rest / NH);
  const int C = NH * HS;
  const long long src =
      (static_cast<long long>(b) * T + t) * 3 * C + static_cast<long long>(h) * HS + d;
  q[idx] = qkv[src];
  k[idx] = qkv[src + C];
  v[idx] = qkv[src + 2 * C];
}

// The inverse: dq, dk, dv (B, NH, T, HS) into dqkv (B, T, 3, NH, HS).
__global__ void permute_qkv_backward_kernel(float* dqkv, const float* dq, const float* dk,
                                            const float* dv, int B, int T, int NH, int HS) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long total = static_cast<long long>(B) * NH * T * HS;
  if (idx >= total) return;
  const int d = static_cast<int>(idx % HS);
  long long rest = idx / HS;
  const int t = static_cast<int>(rest % T);
  rest /= T;
  const int h = static_cast<int>(rest % NH);
  const int b = static_cast<int>(rest / NH);
  const int C = NH * HS;
  const long long dst =
      (static_cast<long long>(b) * T + t) * 3 * C + static_cast<long long>(h) * HS + d;
  dqkv[dst] = dq[idx];
  dqkv[dst + C] = dk[idx];
  dqkv[dst + 2 * C] = dv[idx];
}

// y (B, NH, T, HS) -> out (B, T, NH * HS)
__global__ void unpermute_kernel(float* out, const float* y, int B, int T, int NH, int HS) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long total = static_cast<long long>(B) * NH * T * HS;
  if (idx >= total) return;
  const int d = static_cast<int>(idx % HS);
  long long rest = idx / HS;
  const int t = static_cast<int>(rest % T);
  rest /= T;
  const int h = static_cast<int>(rest % NH);
  const int b = static_cast<int>(rest / NH);
  out[(static_cast<long long>(b) * T + t) * NH * HS + static_cast<long long>(h) * HS + d] = y[idx];
}

// The inverse: dout (B, T, NH * HS) -> dy (B, NH, T, HS)
__global__ void unpermute_backward_kernel(float* dy, const float* dout, int B, int T, int NH,
                                          int HS) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long total = static_cast<long long>(B) * NH * T * HS;
  if (idx >= total) return;
  const int d = static_cast<int>(idx % HS);
  long long rest = idx / HS;
  const int t = static_cast<int>(rest % T);
  rest /= T;
  const int h = static_cast<int>(rest % NH);
  const int b = static_cast<int>(rest / NH);
  dy[idx] =
      dout[(static_cast<long long>(b) * T + t) * NH * HS + static_cast<long long>(h) * HS + d];
}

// Causal softmax of scale * pre over each row of a (T x T) matrix; rows are (b, h, t). Entries
// past the diagonal are 0. One block per row.
template <int kBlock>
__global__ void __launch_bounds__(kBlock)
    causal_softmax_forward_kernel(float* att, const float* pre, float scale, int rows, int T) {
  const int row = blockIdx.x;
  if (row >= rows) return;
  const int t = row % T;  // the query position: keys 0..t are visible
  const float* x = pre + static_cast<long long>(row) * T;
  float* y = att + static_cast<long long>(row) * T;
  float m = -INFINITY;
  for (int j = threadIdx.x; j <= t; j += kBlock) m = fmaxf(m, scale * x[j]);
  m = block_reduce(m, MaxOp<float>());
  float s = 0.0f;
  for (int j = threadIdx.x; j <= t; j += kBlock) s += expf(scale * x[j] - m);
  s = block_reduce(s, SumOp<float>());
  const float inv = 1.0f / s;
  for (int j = threadIdx.x; j < T; j += kBlock) {
    y[j] = j <= t ? expf(scale * x[j] - m) * inv : 0.0f;
  }
}

// dpre = scale * att * (datt - sum_j att * datt), 0 past the diagonal.
template <int kBlock>
__global__ void __launch_bounds__(kBlock)
    causal_softmax_backward_kernel(float* dpre, const float* datt, const float* att, float scale,
                                   int rows, int T) {
  const int row = blockIdx.x;
  if (row >= rows) return;
  const int t = row % T;
  const float* a = att + static_cast<long long>(row) * T;
  const float* da = datt + static_cast<long long>(row) * T;
  float* dp = dpre + static_cast<long long>(row) * T;
  float s = 0.0f;
  for (int j = threadIdx.x; j <= t; j += kBlock) s += a[j] * da[j];
  s = block_reduce(s, SumOp<float>());
  for (int j = threadIdx.x; j < T; j += kBlock) {
    dp[j] = j <= t ? scale * a[j] * (da[j] - s) : 0.0f;
  }
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy over the vocabulary, fused with the softmax and its gradient: per row (b, t)
// losses[row] = -log softmax(logits)[target], and logits is overwritten with
// dlogits = (softmax - onehot(target)) * dloss (dloss = 1 / (B * T) for a mean loss). With
// `backward` false (evaluation) logits stay as they are.
template <int kBlock>
__global__ void __launch_bounds__(kBlock)
    crossentropy_softmax_kernel(float* logits, float* losses, const int* targets, int V,
                                float dloss, bool backward) {
  const int row = blockIdx.x;
  float* x = logits + static_cast<long long>(row) * V;
  const int target = targets[row];
  float m = -INFINITY;
  for (int i = threadIdx.x; i < V; i += kBlock) m = fmaxf(m, x[i]);
  m = block_reduce(m, MaxOp<float>());
  float s = 0.0f;
  for (int i = threadIdx.x; i < V; i += kBlock) s += expf(x[i] - m);
  s = block_reduce(s, SumOp<float>());
  const float log_sum = logf(s) + m;
  if (threadIdx.x == 0) losses[row] = log_sum - x[target];
  __syncthreads();  // x[target] is read before it is overwritten
  if (!backward) return;
  for (int i = threadIdx.x; i < V; i += kBlock) {
    const float p = expf(x[i] - log_sum);
    x[i] = (p - (i == target ? 1.0f : 0.0f)) * dloss;
  }
}

// Greedy next token of each row: argmax of the logits (for the sample printed at the end).
template <int kBlock>
__global__ void __launch_bounds__(kBlock)
    argmax_rows_kernel(int* out, const float* logits, int rows, int V) {
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* x = logits + static_cast<long long>(row) * V;
  ArgMax best = ArgMaxOp::identity();
  ArgMaxOp op;
  for (int i = threadIdx.x; i < V; i += kBlock) best = op(best, ArgMax{x[i], i});
  best = block_reduce(best, op);
  if (threadIdx.x == 0) out[row] = best.index;
}

// ---------------------------------------------------------------------------------------------
// AdamW with the global gradient norm clipped to `max_norm` (norm2 is the squared norm, on the
// device: no host sync). Decoupled weight decay on the parameters flagged in decay_mask.
__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v,
                             const unsigned char* decay_mask, long long n, float lr, float beta1,
                             float beta2, float eps, float weight_decay, float bias_correction1,
                             float bias_correction2, const float* norm2, float max_norm) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float norm = sqrtf(*norm2);
  const float clip = norm > max_norm ? max_norm / (norm + 1e-6f) : 1.0f;
  const float g = grads[i] * clip;
  const float mi = beta1 * m[i] + (1.0f - beta1) * g;
  const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  const float mhat = mi / bias_correction1;
  const float vhat = vi / bias_correction2;
  const float decay = decay_mask[i] ? weight_decay : 0.0f;
  params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + decay * params[i]);
}

// ---------------------------------------------------------------------------------------------
// Matrix products, row-major, through cuBLAS (column-major).
//
// C (M x N) = alpha * op(A) op(B) + beta * C, every matrix row-major, where A is stored (M x K)
// or, with trans_a, (K x M); B is stored (K x N) or, with trans_b, (N x K). Read column-major, a
// row-major (r x c) matrix is its transpose, so cuBLAS computes C^T (N x M) = op(B)^T op(A)^T:
// B goes first, with its own transposition flag; the leading dimension of a row-major matrix is
// its number of columns.

struct Blas {
  cublasHandle_t handle = nullptr;
};

static void matmul(const Blas& blas, bool trans_a, bool trans_b, int M, int N, int K,
                   const float* A, const float* B, float* C, float alpha = 1.0f,
                   float beta = 0.0f) {
  const int lda = trans_a ? M : K;
  const int ldb = trans_b ? K : N;
  CUBLAS_CHECK(cublasSgemm(blas.handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                           trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb, A, lda,
                           &beta, C, N));
}

// The same for `batch` independent products, each operand `stride_*` floats after the previous.
static void matmul_batched(const Blas& blas, bool trans_a, bool trans_b, int M, int N, int K,
                           const float* A, long long stride_a, const float* B, long long stride_b,
                           float* C, long long stride_c, int batch, float alpha = 1.0f,
                           float beta = 0.0f) {
  const int lda = trans_a ? M : K;
  const int ldb = trans_b ? K : N;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      blas.handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M,
      K, &alpha, B, CUDA_R_32F, ldb, stride_b, A, CUDA_R_32F, lda, stride_a, &beta, C, CUDA_R_32F,
      N, stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// A linear layer, y (N x OC) = x (N x IC) W^T + b, W stored (OC x IC).
static void linear_forward(const Blas& blas, float* out, const float* inp, const float* weight,
                           const float* bias, int N, int IC, int OC, cudaStream_t stream) {
  matmul(blas, false, true, N, OC, IC, inp, weight, out);
  if (bias != nullptr) {
    const long long total = static_cast<long long>(N) * OC;
    add_bias_kernel<<<ceil_div(total, 256), 256, 0, stream>>>(out, bias, N, OC);
    KERNEL_CHECK();
  }
}

// Its gradients: dinp = dout W (overwritten), dweight += dout^T inp, dbias += column sums of dout.
static void linear_backward(const Blas& blas, float* dinp, float* dweight, float* dbias,
                            const float* dout, const float* inp, const float* weight, int N, int IC,
                            int OC, cudaStream_t stream) {
  matmul(blas, false, false, N, IC, OC, dout, weight, dinp);
  matmul(blas, true, false, OC, IC, N, dout, inp, dweight, 1.0f, 1.0f);
  if (dbias != nullptr) {
    bias_backward_kernel<256><<<OC, 256, 0, stream>>>(dbias, dout, N, OC);
    KERNEL_CHECK();
  }
}

// ---------------------------------------------------------------------------------------------
// The model

struct Config {
  int vocab = 256;
  int seq = 64;        // T
  int layers = 4;      // L
  int channels = 192;  // C
  int heads = 6;       // NH
};

// Every parameter tensor, as views into one contiguous buffer (and the same layout for the
// gradients and both AdamW moments). Per-layer tensors are stacked over the layers.
struct ParamTensors {
  float* wte;       // (V, C)
  float* wpe;       // (T, C)
  float* ln1w;      // (L, C)
  float* ln1b;      // (L, C)
  float* qkvw;      // (L, 3C, C)
  float* qkvb;      // (L, 3C)
  float* attprojw;  // (L, C, C)
  float* attprojb;  // (L, C)
  float* ln2w;      // (L, C)
  float* ln2b;      // (L, C)
  float* fcw;       // (L, 4C, C)
  float* fcb;       // (L, 4C)
  float* fcprojw;   // (L, C, 4C)
  float* fcprojb;   // (L, C)
  float* lnfw;      // (C)
  float* lnfb;      // (C)
};

constexpr int kNumParamTensors = 16;

struct ParamShape {
  const char* name;
  long long size;
  bool decay;  // weight decay applies (matrices), not to biases and norms
  int init;    // 0: normal(0, 0.02), 1: normal scaled for residual projections, 2: ones, 3: zeros
};

static std::vector<ParamShape> param_shapes(const Config& c) {
  const long long V = c.vocab, T = c.seq, L = c.layers, C = c.channels;
  return {
      {"wte", V * C, true, 0},
      {"wpe", T * C, true, 0},
      {"ln1w", L * C, false, 2},
      {"ln1b", L * C, false, 3},
      {"qkvw", L * 3 * C * C, true, 0},
      {"qkvb", L * 3 * C, false, 3},
      {"attprojw", L * C * C, true, 1},
      {"attprojb", L * C, false, 3},
      {"ln2w", L * C, false, 2},
      {"ln2b", L * C, false, 3},
      {"fcw", L * 4 * C * C, true, 0},
      {"fcb", L * 4 * C, false, 3},
      {"fcprojw", L * C * 4 * C, true, 1},
      {"fcprojb", L * C, false, 3},
      {"lnfw", C, false, 2},
      {"lnfb", C, false, 3},
  };
}

static long long param_count(const Config& c) {
  long long n = 0;
  for (const ParamShape& s : param_shapes(c)) n += s.size;
  return n;
}

static ParamTensors param_views(float* base, const Config& c) {
  float** slots[kNumParamTensors];
  ParamTensors p{};
  float** fields[kNumParamTensors] = {&p.wte,      &p.wpe,      &p.ln1w, &p.ln1b, &p.qkvw, &p.qkvb,
                                      &p.attprojw, &p.attprojb, &p.ln2w, &p.ln2b, &p.fcw,  &p.fcb,
                                      &p.fcprojw,  &p.fcprojb,  &p.lnfw, &p.lnfb};
  std::copy(fields, fields + kNumParamTensors, slots);
  const std::vector<ParamShape> shapes = param_shapes(c);
  float* at = base;
  for (int i = 0; i < kNumParamTensors; ++i) {
    *slots[i] = at;
    at += shapes[i].size;
  }
  return p;
}

// The activations a forward pass keeps for the backward pass, and the backward pass's buffers.
struct Activations {
  float* encoded;    // (B, T, C)
  float* ln1;        // (L, B, T, C)
  float* ln1_mean;   // (L, B, T)
  float* ln1_rstd;   // (L, B, T)
  float* qkv;        // (L, B, T, 3C)
  float* qkvr;       // (L, 3, B, NH, T, HS): q, k, v, permuted
  float* att;        // (L, B, NH, T, T): softmax
  float* atty;       // (L, B, NH, T, HS)
  float* attout;     // (L, B, T, C)
  float* attproj;    // (L, B, T, C)
  float* residual2;  // (L, B, T, C)
  float* ln2;        // (L, B, T, C)
  float* ln2_mean;   // (L, B, T)
  float* ln2_rstd;   // (L, B, T)
  float* fch;        // (L, B, T, 4C)
  float* fch_gelu;   // (L, B, T, 4C)
  float* fcproj;     // (L, B, T, C)
  float* residual3;  // (L, B, T, C)
  float* lnf;        // (B, T, C)
  float* lnf_mean;   // (B, T)
  float* lnf_rstd;   // (B, T)
  float* logits;     // (B, T, V), dlogits after the loss
  float* losses;     // (B, T)
  float* preatt;     // (B, NH, T, T): scratch, one layer at a time
  // backward scratch
  float* dresidual;  // (B, T, C)
  float* dbuf;       // (B, T, C)
  float* dln;        // (B, T, C)
  float* dfch;       // (B, T, 4C)
  float* dqkv;       // (B, T, 3C)
  float* dqkvr;      // (3, B, NH, T, HS)
  float* datty;      // (B, NH, T, HS)
  float* datt;       // (B, NH, T, T)
  float* dpreatt;    // (B, NH, T, T)
};

struct Model {
  Config config;
  int B = 0;  // batch size the buffers were made for
  long long num_params = 0;
  float* params_memory = nullptr;
  float* grads_memory = nullptr;
  float* m_memory = nullptr;
  float* v_memory = nullptr;
  unsigned char* decay_mask = nullptr;
  ParamTensors params{};
  ParamTensors grads{};
  float* acts_memory = nullptr;
  Activations acts{};
  float* scratch = nullptr;      // reductions (kReduceBlocks floats)
  float* grad_norm2 = nullptr;   // squared global gradient norm
  float* step_losses = nullptr;  // one mean loss per step, on the device
  int max_steps = 0;
  int* tokens = nullptr;   // (B, T) inputs on the device
  int* targets = nullptr;  // (B, T) the next tokens
};

static float* carve(float*& at, long long n) {
  float* p = at;
  at += n;
  return p;
}

static long long activation_floats(const Config& c, int B) {
  const long long T = c.seq, L = c.layers, C = c.channels, NH = c.heads, V = c.vocab;
  const long long BT = B * T;
  long long n = 0;
  n += BT * C;              // encoded
  n += L * BT * C;          // ln1
  n += 2 * L * BT;          // ln1 mean, rstd
  n += L * BT * 3 * C;      // qkv
  n += L * BT * 3 * C;      // qkvr
  n += L * B * NH * T * T;  // att
  n += L * BT * C;          // atty
  n += L * BT * C;          // attout
  n += L * BT * C;          // attproj
  n += L * BT * C;          // residual2
  n += L * BT * C;          // ln2
  n += 2 * L * BT;          // ln2 mean, rstd
  n += L * BT * 4 * C;      // fch
  n += L * BT * 4 * C;      // fch_gelu
  n += L * BT * C;          // fcproj
  n += L * BT * C;          // residual3
  n += BT * C + 2 * BT;     // lnf, mean, rstd
  n += BT * V;              // logits
  n += BT;                  // losses
  n += B * NH * T * T;      // preatt
  n += 3 * BT * C;          // dresidual, dbuf, dln
  n += BT * 4 * C;          // dfch
  n += BT * 3 * C;          // dqkv
  n += BT * 3 * C;          // dqkvr
  n += BT * C;              // datty
  n += 2 * B * NH * T * T;  // datt, dpreatt
  return n;
}

static Activations activation_views(float* base, const Config& c, int B) {
  const long long T = c.seq, L = c.layers, C = c.channels, NH = c.heads, V = c.vocab;
  const long long BT = B * T;
  Activations a{};
  float* at = base;
  a.encoded = carve(at, BT * C);
  a.ln1 = carve(at, L * BT * C);
  a.ln1_mean = carve(at, L * BT);
  a.ln1_rstd = carve(at, L * BT);
  a.qkv = carve(at, L * BT * 3 * C);
  a.qkvr = carve(at, L * BT * 3 * C);
  a.att = carve(at, L * B * NH * T * T);
  a.atty = carve(at, L * BT * C);
  a.attout = carve(at, L * BT * C);
  a.attproj = carve(at, L * BT * C);
  a.residual2 = carve(at, L * BT * C);
  a.ln2 = carve(at, L * BT * C);
  a.ln2_mean = carve(at, L * BT);
  a.ln2_rstd = carve(at, L * BT);
  a.fch = carve(at, L * BT * 4 * C);
  a.fch_gelu = carve(at, L * BT * 4 * C);
  a.fcproj = carve(at, L * BT * C);
  a.residual3 = carve(at, L * BT * C);
  a.lnf = carve(at, BT * C);
  a.lnf_mean = carve(at, BT);
  a.lnf_rstd = carve(at, BT);
  a.logits = carve(at, BT * V);
  a.losses = carve(at, BT);
  a.preatt = carve(at, B * NH * T * T);
  a.dresidual = carve(at, BT * C);
  a.dbuf = carve(at, BT * C);
  a.dln = carve(at, BT * C);
  a.dfch = carve(at, BT * 4 * C);
  a.dqkv = carve(at, BT * 3 * C);
  a.dqkvr = carve(at, BT * 3 * C);
  a.datty = carve(at, BT * C);
  a.datt = carve(at, B * NH * T * T);
  a.dpreatt = carve(at, B * NH * T * T);
  if (at - base != activation_floats(c, B)) {
    std::fprintf(stderr, "activation layout mismatch: %lld vs %lld floats\n",
                 static_cast<long long>(at - base), activation_floats(c, B));
    std::exit(EXIT_FAILURE);
  }
  return a;
}

// Host-side initialisation: GPT-2's scheme (normal(0, 0.02); residual projections scaled by
// 1 / sqrt(2 L); layernorm weights 1, biases 0), from a fixed seed.
static std::vector<float> initial_params(const Config& c, unsigned seed) {
  std::vector<float> host(static_cast<std::size_t>(param_count(c)));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const float residual_scale = 1.0f / std::sqrt(2.0f * c.layers);
  std::size_t at = 0;
  for (const ParamShape& s : param_shapes(c)) {
    for (long long i = 0; i < s.size; ++i) {
      float v = 0.0f;
      switch (s.init) {
        case 0:
          v = normal(rng);
          break;
        case 1:
          v = normal(rng) * residual_scale;
          break;
        case 2:
          v = 1.0f;
          break;
        default:
          v = 0.0f;
          break;
      }
      host[at++] = v;
    }
  }
  return host;
}

static void model_create(Model& model, const Config& c, int B, int max_steps, unsigned seed,
                         cudaStream_t stream) {
  if (c.channels % c.heads != 0) {
    std::fprintf(stderr, "channels (%d) must be a multiple of heads (%d)\n", c.channels, c.heads);
    std::exit(EXIT_FAILURE);
  }
  model.config = c;
  model.B = B;
  model.max_steps = max_steps;
  model.num_params = param_count(c);
  const std::size_t bytes = static_cast<std::size_t>(model.num_params) * sizeof(float);
  CUDA_CHECK(cudaMalloc(&model.params_memory, bytes));
  CUDA_CHECK(cudaMalloc(&model.grads_memory, bytes));
  CUDA_CHECK(cudaMalloc(&model.m_memory, bytes));
  CUDA_CHECK(cudaMalloc(&model.v_memory, bytes));
  CUDA_CHECK(cudaMalloc(&model.decay_mask, static_cast<std::size_t>(model.num_params)));
  model.params = param_views(model.params_memory, c);
  model.grads = param_views(model.grads_memory, c);

  const std::vector<float> host = initial_params(c, seed);
  CUDA_CHECK(
      cudaMemcpyAsync(model.params_memory, host.data(), bytes, cudaMemcpyHostToDevice, stream));
  std::vector<unsigned char> mask(static_cast<std::size_t>(model.num_params));
  std::size_t at = 0;
  for (const ParamShape& s : param_shapes(c)) {
    std::fill(mask.begin() + static_cast<long long>(at),
              mask.begin() + static_cast<long long>(at) + s.size, s.decay ? 1 : 0);
    at += static_cast<std::size_t>(s.size);
  }
  CUDA_CHECK(
      cudaMemcpyAsync(model.decay_mask, mask.data(), mask.size(), cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemsetAsync(model.m_memory, 0, bytes, stream));
  CUDA_CHECK(cudaMemsetAsync(model.v_memory, 0, bytes, stream));
  CUDA_CHECK(cudaMemsetAsync(model.grads_memory, 0, bytes, stream));

  const long long acts = activation_floats(c, B);
  CUDA_CHECK(cudaMalloc(&model.acts_memory, static_cast<std::size_t>(acts) * sizeof(float)));
  CUDA_CHECK(cudaMemsetAsync(model.acts_memory, 0, static_cast<std::size_t>(acts) * sizeof(float),
                             stream));
  model.acts = activation_views(model.acts_memory, c, B);
  CUDA_CHECK(cudaMalloc(&model.scratch, kReduceBlocks * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&model.grad_norm2, sizeof(float)));
  CUDA_CHECK(
      cudaMalloc(&model.step_losses, static_cast<std::size_t>(max_steps + 1) * sizeof(float)));
  CUDA_CHECK(cudaMemsetAsync(model.step_losses, 0,
                             static_cast<std::size_t>(max_steps + 1) * sizeof(float), stream));
  const std::size_t token_bytes = static_cast<std::size_t>(B) * c.seq * sizeof(int);
  CUDA_CHECK(cudaMalloc(&model.tokens, token_bytes));
  CUDA_CHECK(cudaMalloc(&model.targets, token_bytes));
  // The copies above read host vectors that go out of scope here.
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

static void model_destroy(Model& model) {
  CUDA_CHECK(cudaFree(model.params_memory));
  CUDA_CHECK(cudaFree(model.grads_memory));
  CUDA_CHECK(cudaFree(model.m_memory));
  CUDA_CHECK(cudaFree(model.v_memory));
  CUDA_CHECK(cudaFree(model.decay_mask));
  CUDA_CHECK(cudaFree(model.acts_memory));
  CUDA_CHECK(cudaFree(model.scratch));
  CUDA_CHECK(cudaFree(model.grad_norm2));
  CUDA_CHECK(cudaFree(model.step_losses));
  CUDA_CHECK(cudaFree(model.tokens));
  CUDA_CHECK(cudaFree(model.targets));
  model = Model{};
}

// ---------------------------------------------------------------------------------------------
// Forward and backward passes

// One layer's views of the stacked tensors.
struct LayerParams {
  const float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
  const float *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};

struct LayerGrads {
  float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
  float *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};

struct LayerActs {
  float *ln1, *ln1_mean, *ln1_rstd, *qkv, *q, *k, *v, *att, *atty, *attout, *attproj, *residual2;
  float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *fcproj, *residual3;
};

template <typename P, typename Tensors>
static P layer_view(const Tensors& t, const Config& c, int l) {
  const long long C = c.channels;
  P p;
  p.ln1w = t.ln1w + l * C;
  p.ln1b = t.ln1b + l * C;
  p.qkvw = t.qkvw + l * 3 * C * C;
  p.qkvb = t.qkvb + l * 3 * C;
  p.attprojw = t.attprojw + l * C * C;
  p.attprojb = t.attprojb + l * C;
  p.ln2w = t.ln2w + l * C;
  p.ln2b = t.ln2b + l * C;
  p.fcw = t.fcw + l * 4 * C * C;
  p.fcb = t.fcb + l * 4 * C;
  p.fcprojw = t.fcprojw + l * C * 4 * C;
  p.fcprojb = t.fcprojb + l * C;
  return p;
}

static LayerActs layer_acts(const Activations& a, const Config& c, int B, int l) {
  const long long BT = static_cast<long long>(B) * c.seq, C = c.channels;
  const long long TT = static_cast<long long>(B) * c.heads * c.seq * c.seq;
  LayerActs x;
  x.ln1 = a.ln1 + l * BT * C;
  x.ln1_mean = a.ln1_mean + l * BT;
  x.ln1_rstd = a.ln1_rstd + l * BT;
  x.qkv = a.qkv + l * BT * 3 * C;
  x.q = a.qkvr + l * BT * 3 * C;
  x.k = x.q + BT * C;
  x.v = x.k + BT * C;
  x.att = a.att + l * TT;
  x.atty = a.atty + l * BT * C;
  x.attout = a.attout + l * BT * C;
  x.attproj = a.attproj + l * BT * C;
  x.residual2 = a.residual2 + l * BT * C;
  x.ln2 = a.ln2 + l * BT * C;
  x.ln2_mean = a.ln2_mean + l * BT;
  x.ln2_rstd = a.ln2_rstd + l * BT;
  x.fch = a.fch + l * BT * 4 * C;
  x.fch_gelu = a.fch_gelu + l * BT * 4 * C;
  x.fcproj = a.fcproj + l * BT * C;
  x.residual3 = a.residual3 + l * BT * C;
  return x;
}

// Causal self-attention of one layer: qkv (B, T, 3C) -> attout (B, T, C).
static void attention_forward(const Blas& blas, const LayerActs& x, float* preatt, int B, int T,
                              int NH, int HS, cudaStream_t stream) {
  const long long total = static_cast<long long>(B) * NH * T * HS;
  permute_qkv_kernel<<<ceil_div(total, 256), 256, 0, stream>>>(x.q, x.k, x.v, x.qkv, B, T, NH, HS);
  KERNEL_CHECK();
  const int batch = B * NH;
  const long long sq = static_cast<long long>(T) * HS;  // one head's q, k, v
  const long long sa = static_cast<long long>(T) * T;   // one head's attention matrix
  // preatt (T x T) = q (T x HS) k^T
  matmul_batched(blas, false, true, T, T, HS, x.q, sq, x.k, sq, preatt, sa, batch);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  causal_softmax_forward_kernel<64>
      <<<batch * T, 64, 0, stream>>>(x.att, preatt, scale, batch * T, T);
  KERNEL_CHECK();
  // atty (T x HS) = att (T x T) v (T x HS)
  matmul_batched(blas, false, false, T, HS, T, x.att, sa, x.v, sq, x.atty, sq, batch);
  unpermute_kernel<<<ceil_div(total, 256), 256, 0, stream>>>(x.attout, x.atty, B, T, NH, HS);
  KERNEL_CHECK();
}

// Its backward: dattout (B, T, C) -> dqkv (B, T, 3C), from the saved q, k, v and att.
static void attention_backward(const Blas& blas, float* dqkv, const float* dattout,
                               const LayerActs& x, const Activations& a, int B, int T, int NH,
                               int HS, cudaStream_t stream) {
  const long long total = static_cast<long long>(B) * NH * T * HS;
  const int batch = B * NH;
  const long long sq = static_cast<long long>(T) * HS;
  const long long sa = static_cast<long long>(T) * T;
  float* dq = a.dqkvr;
  float* dk = dq + total;
  float* dv = dk + total;
  unpermute_backward_kernel<<<ceil_div(total, 256), 256, 0, stream>>>(a.datty, dattout, B, T, NH,
                                                                      HS);
  KERNEL_CHECK();
  // datt (T x T) = datty (T x HS) v^T; dv (T x HS) = att^T (T x T) datty
  matmul_batched(blas, false, true, T, T, HS, a.datty, sq, x.v, sq, a.datt, sa, batch);
  matmul_batched(blas, true, false, T, HS, T, x.att, sa, a.datty, sq, dv, sq, batch);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  causal_softmax_backward_kernel<64>
      <<<batch * T, 64, 0, stream>>>(a.dpreatt, a.datt, x.att, scale, batch * T, T);
  KERNEL_CHECK();
  // preatt = q k^T: dq = dpreatt k, dk = dpreatt^T q
  matmul_batched(blas, false, false, T, HS, T, a.dpreatt, sa, x.k, sq, dq, sq, batch);
  matmul_batched(blas, true, false, T, HS, T, a.dpreatt, sa, x.q, sq, dk, sq, batch);
  permute_qkv_backward_kernel<<<ceil_div(total, 256), 256, 0, stream>>>(dqkv, dq, dk, dv, B, T, NH,
                                                                        HS);
  KERNEL_CHECK();
}

// The forward pass over model.tokens; with `train`, the loss's gradient is left in the logits
// buffer (dlogits). The mean loss is written to *loss_out on the device (no host sync).
static void forward(Model& model, const Blas& blas, bool train, float* loss_out,
                    cudaStream_t stream) {
  const Config& c = model.config;
  const int B = model.B, T = c.seq, C = c.channels, NH = c.heads, HS = C / NH, V = c.vocab;
  const int BT = B * T;
  Activations& a = model.acts;
  const long long btc = static_cast<long long>(BT) * C;
  embedding_forward_kernel<<<ceil_div(btc, 256), 256, 0, stream>>>(
      a.encoded, model.tokens, model.params.wte, model.params.wpe, B, T, C);
  KERNEL_CHECK();
  const float* residual = a.encoded;
  for (int l = 0; l < c.layers; ++l) {
    const LayerParams p = layer_view<LayerParams>(model.params, c, l);
    const LayerActs x = layer_acts(a, c, B, l);
    layernorm_forward_kernel<128>
        <<<BT, 128, 0, stream>>>(x.ln1, x.ln1_mean, x.ln1_rstd, residual, p.ln1w, p.ln1b, BT, C);
    KERNEL_CHECK();
    linear_forward(blas, x.qkv, x.ln1, p.qkvw, p.qkvb, BT, C, 3 * C, stream);
    attention_forward(blas, x, a.preatt, B, T, NH, HS, stream);
    linear_forward(blas, x.attproj, x.attout, p.attprojw, p.attprojb, BT, C, C, stream);
    launch_zip(x.residual2, residual, x.attproj, btc, Add(), stream);
    layernorm_forward_kernel<128>
        <<<BT, 128, 0, stream>>>(x.ln2, x.ln2_mean, x.ln2_rstd, x.residual2, p.ln2w, p.ln2b, BT, C);
    KERNEL_CHECK();
    linear_forward(blas, x.fch, x.ln2, p.fcw, p.fcb, BT, C, 4 * C, stream);
    launch_map(x.fch_gelu, x.fch, btc * 4, GeluForward(), stream);
    linear_forward(blas, x.fcproj, x.fch_gelu, p.fcprojw, p.fcprojb, BT, 4 * C, C, stream);
    launch_zip(x.residual3, x.residual2, x.fcproj, btc, Add(), stream);
    residual = x.residual3;
  }
  layernorm_forward_kernel<128><<<BT, 128, 0, stream>>>(
      a.lnf, a.lnf_mean, a.lnf_rstd, residual, model.params.lnfw, model.params.lnfb, BT, C);
  KERNEL_CHECK();
  // logits (BT x V) = lnf (BT x C) wte^T: the output layer shares the token embedding.
  linear_forward(blas, a.logits, a.lnf, model.params.wte, nullptr, BT, C, V, stream);
  crossentropy_softmax_kernel<256>
      <<<BT, 256, 0, stream>>>(a.logits, a.losses, model.targets, V, 1.0f / BT, train);
  KERNEL_CHECK();
  reduce_on_device<SumOp<float>>(loss_out, model.scratch, BT, ValueOf{a.losses}, stream,
                                 Scale{1.0f / BT});
}

// The backward pass: gradients of the mean loss, accumulated into model.grads (zeroed by the
// caller once per step). Expects forward(train = true) just before.
static void backward(Model& model, const Blas& blas, cudaStream_t stream) {
  const Config& c = model.config;
  const int B = model.B, T = c.seq, C = c.channels, NH = c.heads, HS = C / NH, V = c.vocab;
  const int BT = B * T;
  Activations& a = model.acts;
  const long long btc = static_cast<long long>(BT) * C;
  ParamTensors& g = model.grads;
  // logits = lnf wte^T: dlnf = dlogits wte, dwte += dlogits^T lnf
  linear_backward(blas, a.dln, g.wte, nullptr, a.logits, a.lnf, model.params.wte, BT, C, V, stream);
  CUDA_CHECK(
      cudaMemsetAsync(a.dresidual, 0, static_cast<std::size_t>(btc) * sizeof(float), stream));
  const float* last = c.layers > 0 ? layer_acts(a, c, B, c.layers - 1).residual3 : a.encoded;
  layernorm_backward_kernel<128><<<BT, 128, 0, stream>>>(
      a.dresidual, g.lnfw, g.lnfb, a.dln, last, model.params.lnfw, a.lnf_mean, a.lnf_rstd, BT, C);
  KERNEL_CHECK();
  // dresidual now holds the gradient of the last residual stream; walk the layers back.
  for (int l = c.layers - 1; l >= 0; --l) {
    const LayerParams p = layer_view<LayerParams>(model.params, c, l);
    const LayerGrads d = layer_view<LayerGrads>(g, c, l);
    const LayerActs x = layer_acts(a, c, B, l);
    const float* residual = l == 0 ? a.encoded : layer_acts(a, c, B, l - 1).residual3;
    // residual3 = residual2 + fcproj: both get dresidual.
    linear_backward(blas, a.dfch, d.fcprojw, d.fcprojb, a.dresidual, x.fch_gelu, p.fcprojw, BT,
                    4 * C, C, stream);
    launch_zip(a.dfch, x.fch, a.dfch, btc * 4, GeluBackward(), stream);
    linear_backward(blas, a.dln, d.fcw, d.fcb, a.dfch, x.ln2, p.fcw, BT, C, 4 * C, stream);
    layernorm_backward_kernel<128><<<BT, 128, 0, stream>>>(
        a.dresidual, d.ln2w, d.ln2b, a.dln, x.residual2, p.ln2w, x.ln2_mean, x.ln2_rstd, BT, C);
    KERNEL_CHECK();
    // residual2 = residual + attproj: both get dresidual.
    linear_backward(blas, a.dbuf, d.attprojw, d.attprojb, a.dresidual, x.attout, p.attprojw, BT, C,
                    C, stream);
    attention_backward(blas, a.dqkv, a.dbuf, x, a, B, T, NH, HS, stream);
    linear_backward(blas, a.dln, d.qkvw, d.qkvb, a.dqkv, x.ln1, p.qkvw, BT, C, 3 * C, stream);
    layernorm_backward_kernel<128><<<BT, 128, 0, stream>>>(
        a.dresidual, d.ln1w, d.ln1b, a.dln, residual, p.ln1w, x.ln1_mean, x.ln1_rstd, BT, C);
    KERNEL_CHECK();
  }
  embedding_backward_kernel<<<ceil_div(btc, 256), 256, 0, stream>>>(g.wte, g.wpe, a.dresidual,
                                                                    model.tokens, B, T, C);
  KERNEL_CHECK();
}

struct AdamW {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  float max_grad_norm = 1.0f;
  int warmup_steps = 20;
  int total_steps = 1000;
  float min_lr_fraction = 0.1f;

  // Linear warm-up, then cosine decay to min_lr_fraction * lr.
  float lr_at(int step) const {
    if (step < warmup_steps) return lr * static_cast<float>(step + 1) / warmup_steps;
    const float progress = total_steps > warmup_steps
                               ? static_cast<float>(step - warmup_steps) /
                                     static_cast<float>(total_steps - warmup_steps)
                               : 1.0f;
    const float cosine = 0.5f * (1.0f + std::cos(3.14159265358979f * std::min(progress, 1.0f)));
    return lr * (min_lr_fraction + (1.0f - min_lr_fraction) * cosine);
  }
};

// The optimizer update of step `step` (0-based): global norm, clipping, AdamW. No host sync.
static void update(Model& model, const AdamW& opt, int step, cudaStream_t stream) {
  reduce_on_device<SumOp<float>>(model.grad_norm2, model.scratch, model.num_params,
                                 SquareOf{model.grads_memory}, stream);
  const int t = step + 1;
  const float bc1 = 1.0f - std::pow(opt.beta1, static_cast<float>(t));
  const float bc2 = 1.0f - std::pow(opt.beta2, static_cast<float>(t));
  adamw_kernel<<<ceil_div(model.num_params, 256), 256, 0, stream>>>(
      model.params_memory, model.grads_memory, model.m_memory, model.v_memory, model.decay_mask,
      model.num_params, opt.lr_at(step), opt.beta1, opt.beta2, opt.eps, opt.weight_decay, bc1, bc2,
      model.grad_norm2, opt.max_grad_norm);
  KERNEL_CHECK();
}

static void zero_grads(Model& model, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(model.grads_memory, 0,
                             static_cast<std::size_t>(model.num_params) * sizeof(float), stream));
}

// ---------------------------------------------------------------------------------------------
// Data: sequences of a fixed random Markov chain over the vocabulary. Each token has four
// successors, drawn with probabilities 0.6, 0.25, 0.1 and 0.05, so the best possible loss is the
// chain's entropy, about 1.03 nats, against ln(V) = 5.55 for a model that knows nothing.

class MarkovChain {
 public:
  static constexpr int kSuccessors = 4;

  MarkovChain(int vocab, unsigned seed)
      : vocab_(vocab), next_(static_cast<std::size_t>(vocab) * kSuccessors) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> token(0, vocab - 1);
    for (int a = 0; a < vocab; ++a) {
      for (int k = 0; k < kSuccessors; ++k) {
        int t = 0;
        bool fresh = false;
        while (!fresh) {  // four different successors
          t = token(rng);
          fresh = true;
          for (int j = 0; j < k; ++j) fresh = fresh && next_[a * kSuccessors + j] != t;
        }
        next_[a * kSuccessors + k] = t;
      }
    }
  }

  int vocab() const { return vocab_; }

  // The most likely successor of `a`.
  int likeliest(int a) const { return next_[a * kSuccessors]; }

  int sample(int a, std::mt19937& rng) const {
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    const float r = u(rng);
    static constexpr float kCumulative[kSuccessors] = {0.6f, 0.85f, 0.95f, 1.0f};
    for (int k = 0; k < kSuccessors; ++k) {
      if (r < kCumulative[k]) return next_[a * kSuccessors + k];
    }
    return next_[a * kSuccessors + kSuccessors - 1];
  }

  // The chain's entropy rate in nats: the loss a perfect model reaches.
  static double entropy() {
    const double p[kSuccessors] = {0.6, 0.25, 0.1, 0.05};
    double h = 0;
    for (double x : p) h -= x * std::log(x);
    return h;
  }

  // B sequences of T + 1 tokens: inputs are the first T, targets the last T.
  void fill(int* tokens, int* targets, int B, int T, std::mt19937& rng) const {
    std::uniform_int_distribution<int> start(0, vocab_ - 1);
    for (int b = 0; b < B; ++b) {
      int cur = start(rng);
      for (int t = 0; t < T; ++t) {
        const int nxt = sample(cur, rng);
        tokens[b * T + t] = cur;
        targets[b * T + t] = nxt;
        cur = nxt;
      }
    }
  }

 private:
  int vocab_;
  std::vector<int> next_;
};

// A loader thread that keeps kSlots batches ready in pinned host memory. next() copies the oldest
// ready batch to the model's device buffers on the trainer's stream; the loader refills a slot
// only after that copy has completed (an event recorded after it).
class DataLoader {
 public:
  static constexpr int kSlots = 3;

  DataLoader(const MarkovChain& chain, int B, int T, unsigned seed, int produce_delay_us)
      : chain_(chain), B_(B), T_(T), delay_us_(produce_delay_us), rng_(seed) {
    const std::size_t bytes = static_cast<std::size_t>(B) * T * sizeof(int);
    for (Slot& s : slots_) {
      CUDA_CHECK(cudaMallocHost(&s.tokens, bytes));
      CUDA_CHECK(cudaMallocHost(&s.targets, bytes));
      CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
    }
    thread_ = std::thread([this] { run(); });
  }

  ~DataLoader() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    for (Slot& s : slots_) {
      CUDA_CHECK(cudaEventSynchronize(s.copied));
      CUDA_CHECK(cudaFreeHost(s.tokens));
      CUDA_CHECK(cudaFreeHost(s.targets));
      CUDA_CHECK(cudaEventDestroy(s.copied));
    }
  }

  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Waits for a ready batch and enqueues its copy into tokens / targets on `stream`.
  void next(int* tokens, int* targets, cudaStream_t stream) {
    std::unique_lock<std::mutex> lock(mutex_);
    Slot& s = slots_[consume_];
    cv_.wait(lock, [&] { return s.state == State::kReady; });
    const std::size_t bytes = static_cast<std::size_t>(B_) * T_ * sizeof(int);
    CUDA_CHECK(cudaMemcpyAsync(tokens, s.tokens, bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(targets, s.targets, bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaEventRecord(s.copied, stream));
    s.state = State::kCopying;
    consume_ = (consume_ + 1) % kSlots;
    ++batches_;
    cv_.notify_all();
  }

  long long batches() const { return batches_; }

 private:
  enum class State { kFree, kReady, kCopying };
  struct Slot {
    int* tokens = nullptr;
    int* targets = nullptr;
    cudaEvent_t copied = nullptr;
    State state = State::kFree;
  };

  void run() {
    int produce = 0;
    for (;;) {
      Slot& s = slots_[produce];
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || s.state != State::kReady; });
        if (stop_) return;
      }
      // The slot is not ready: free, or its copy was enqueued. Wait for the copy, then refill.
      CUDA_CHECK(cudaEventSynchronize(s.copied));
      chain_.fill(s.tokens, s.targets, B_, T_, rng_);
      if (delay_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us_));
      {
        std::lock_guard<std::mutex> lock(mutex_);
        s.state = State::kReady;
      }
      cv_.notify_all();
      produce = (produce + 1) % kSlots;
    }
  }

  const MarkovChain& chain_;
  const int B_, T_;
  const int delay_us_;
  std::mt19937 rng_;
  Slot slots_[kSlots];
  int consume_ = 0;
  long long batches_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// Evaluation on held-out batches, a gradient check, sampling, checkpoints.

// Fixed validation batches, made once from another seed.
struct EvalSet {
  std::vector<int> tokens, targets;
  int batches = 0;
};

static EvalSet make_eval_set(const MarkovChain& chain, int batches, int B, int T, unsigned seed) {
  EvalSet e;
  e.batches = batches;
  e.tokens.resize(static_cast<std::size_t>(batches) * B * T);
  e.targets.resize(e.tokens.size());
  std::mt19937 rng(seed);
  for (int i = 0; i < batches; ++i) {
    const std::size_t at = static_cast<std::size_t>(i) * B * T;
    chain.fill(e.tokens.data() + at, e.targets.data() + at, B, T, rng);
  }
  return e;
}

// The mean loss over the evaluation set (waits for the GPU: outside the timed step).
static float evaluate(Model& model, const Blas& blas, const EvalSet& e, float* d_loss,
                      cudaStream_t stream) {
  const int B = model.B, T = model.config.seq;
  const std::size_t bytes = static_cast<std::size_t>(B) * T * sizeof(int);
  double sum = 0;
  for (int i = 0; i < e.batches; ++i) {
    const std::size_t at = static_cast<std::size_t>(i) * B * T;
    CUDA_CHECK(
        cudaMemcpyAsync(model.tokens, e.tokens.data() + at, bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(model.targets, e.targets.data() + at, bytes, cudaMemcpyHostToDevice,
                               stream));
    forward(model, blas, /*train=*/false, d_loss, stream);
    float loss = 0;
    CUDA_CHECK(cudaMemcpyAsync(&loss, d_loss, sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    sum += loss;
  }
  return static_cast<float>(sum / std::max(1, e.batches));
}

static float read_float(const float* d, cudaStream_t stream) {
  float v = 0;
  CUDA_CHECK(cudaMemcpyAsync(&v, d, sizeof(float), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return v;
}

static void write_float(float* d, float v, cudaStream_t stream) {
  CUDA_CHECK(cudaMemcpyAsync(d, &v, sizeof(float), cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

// Compares the backward pass with central finite differences of the loss, for the parameter with
// the largest gradient in each tensor, on the evaluation set's first batch. Returns whether every
// one agrees (relative error under 5 %, or absolute under 2e-4 where the gradient is tiny).
static bool gradient_check(Model& model, const Blas& blas, const EvalSet& e, float* d_loss,
                           cudaStream_t stream) {
  const int B = model.B, T = model.config.seq;
  const std::size_t bytes = static_cast<std::size_t>(B) * T * sizeof(int);
  CUDA_CHECK(cudaMemcpyAsync(model.tokens, e.tokens.data(), bytes, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(
      cudaMemcpyAsync(model.targets, e.targets.data(), bytes, cudaMemcpyHostToDevice, stream));
  zero_grads(model, stream);
  forward(model, blas, /*train=*/true, d_loss, stream);
  backward(model, blas, stream);
  std::vector<float> grads(static_cast<std::size_t>(model.num_params));
  CUDA_CHECK(cudaMemcpyAsync(grads.data(), model.grads_memory, grads.size() * sizeof(float),
                             cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const float h = 1e-2f;
  bool all_ok = true;
  long long at = 0;
  std::printf("gradient check (central differences, h = %g):\n", static_cast<double>(h));
  for (const ParamShape& s : param_shapes(model.config)) {
    long long best = at;
    for (long long i = at; i < at + s.size; ++i) {
      if (std::fabs(grads[i]) > std::fabs(grads[best])) best = i;
    }
    float* p = model.params_memory + best;
    const float original = read_float(p, stream);
    write_float(p, original + h, stream);
    forward(model, blas, false, d_loss, stream);
    const float plus = read_float(d_loss, stream);
    write_float(p, original - h, stream);
    forward(model, blas, false, d_loss, stream);
    const float minus = read_float(d_loss, stream);
    write_float(p, original, stream);
    const float numeric = (plus - minus) / (2 * h);
    const float analytic = grads[best];
    const float err = std::fabs(numeric - analytic);
    const float rel = err / std::max(std::fabs(numeric), std::fabs(analytic));
    const bool ok = rel < 0.05f || err < 2e-4f;
    all_ok = all_ok && ok;
    std::printf("  %-9s [%8lld] analytic %+.6e numeric %+.6e rel.err %.3f %s\n", s.name, best - at,
                static_cast<double>(analytic), static_cast<double>(numeric),
                static_cast<double>(rel), ok ? "ok" : "MISMATCH");
    at += s.size;
  }
  return all_ok;
}

// Greedy generation from `start`: the fraction of generated transitions that are the chain's most
// likely one (a trained model approaches 1; an untrained one is near 1 / V).
static float sample_accuracy(Model& model, const Blas& blas, const MarkovChain& chain, int start,
                             float* d_loss, int* d_next, cudaStream_t stream, std::string* text) {
  const int B = model.B, T = model.config.seq;
  std::vector<int> tokens(static_cast<std::size_t>(B) * T, 0);
  std::vector<int> next(static_cast<std::size_t>(B) * T, 0);
  tokens[0] = start;
  CUDA_CHECK(cudaMemsetAsync(model.targets, 0, tokens.size() * sizeof(int), stream));
  int good = 0;
  for (int t = 0; t + 1 < T; ++t) {
    CUDA_CHECK(cudaMemcpyAsync(model.tokens, tokens.data(), tokens.size() * sizeof(int),
                               cudaMemcpyHostToDevice, stream));
    forward(model, blas, false, d_loss, stream);
    argmax_rows_kernel<256>
        <<<B * T, 256, 0, stream>>>(d_next, model.acts.logits, B * T, model.config.vocab);
    KERNEL_CHECK();
    CUDA_CHECK(cudaMemcpyAsync(next.data(), d_next, next.size() * sizeof(int),
                               cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    tokens[t + 1] = next[t];  // row 0, position t predicts position t + 1
    good += next[t] == chain.likeliest(tokens[t]) ? 1 : 0;
  }
  if (text != nullptr) {
    text->clear();
    for (int t = 0; t < std::min(T, 16); ++t) *text += std::to_string(tokens[t]) + " ";
  }
  return static_cast<float>(good) / static_cast<float>(T - 1);
}

// Parameters and configuration, in a small binary file.
static bool save_checkpoint(const Model& model, const std::string& path, int step,
                            cudaStream_t stream) {
  std::vector<float> host(static_cast<std::size_t>(model.num_params));
  CUDA_CHECK(cudaMemcpyAsync(host.data(), model.params_memory, host.size() * sizeof(float),
                             cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const int header[8] = {0x54524e52,  // "TRNR"
                         1,
                         model.config.vocab,
                         model.config.seq,
                         model.config.layers,
                         model.config.channels,
                         model.config.heads,
                         step};
  bool ok = std::fwrite(header, sizeof header, 1, f) == 1;
  ok = ok && std::fwrite(host.data(), sizeof(float), host.size(), f) == host.size();
  ok = std::fclose(f) == 0 && ok;
  return ok;
}

static bool load_checkpoint(Model& model, const std::string& path, cudaStream_t stream) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  int header[8] = {};
  bool ok = std::fread(header, sizeof header, 1, f) == 1 && header[0] == 0x54524e52 &&
            header[1] == 1 && header[2] == model.config.vocab && header[3] == model.config.seq &&
            header[4] == model.config.layers && header[5] == model.config.channels &&
            header[6] == model.config.heads;
  std::vector<float> host(static_cast<std::size_t>(model.num_params));
  ok = ok && std::fread(host.data(), sizeof(float), host.size(), f) == host.size();
  std::fclose(f);
  if (!ok) return false;
  CUDA_CHECK(cudaMemcpyAsync(model.params_memory, host.data(), host.size() * sizeof(float),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return true;
}

// ---------------------------------------------------------------------------------------------
// A CPU reference of the forward pass (double precision, plain loops), to check the GPU's loss:
// the layouts, the cuBLAS transpositions and every kernel of the forward pass have to agree with
// it. Slow; meant for the small default model and one batch.

namespace reference {

using Matrix = std::vector<double>;  // row-major

// y (N x OC) = x (N x IC) W^T + b, W (OC x IC)
static Matrix linear(const Matrix& x, const float* w, const float* b, int N, int IC, int OC) {
  Matrix y(static_cast<std::size_t>(N) * OC);
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      double acc = b != nullptr ? b[o] : 0.0;
      const double* xr = &x[static_cast<std::size_t>(n) * IC];
      const float* wr = w + static_cast<std::size_t>(o) * IC;
      for (int i = 0; i < IC; ++i) acc += xr[i] * wr[i];
      y[static_cast<std::size_t>(n) * OC + o] = acc;
    }
  }
  return y;
}

static Matrix layernorm(const Matrix& x, const float* w, const float* b, int N, int C) {
  Matrix y(x.size());
  for (int n = 0; n < N; ++n) {
    const double* xr = &x[static_cast<std::size_t>(n) * C];
    double mean = 0, var = 0;
    for (int i = 0; i < C; ++i) mean += xr[i];
    mean /= C;
    for (int i = 0; i < C; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= C;
    const double rstd = 1.0 / std::sqrt(var + 1e-5);
    for (int i = 0; i < C; ++i) {
      y[static_cast<std::size_t>(n) * C + i] = (xr[i] - mean) * rstd * w[i] + b[i];
    }
  }
  return y;
}

static double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// Causal multi-head attention: qkv (B*T x 3C) -> (B*T x C)
static Matrix attention(const Matrix& qkv, int B, int T, int C, int NH) {
  const int HS = C / NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  Matrix out(static_cast<std::size_t>(B) * T * C, 0.0);
  std::vector<double> w(static_cast<std::size_t>(T));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < T; ++t) {
        const double* q = &qkv[(static_cast<std::size_t>(b) * T + t) * 3 * C + h * HS];
        double m = -1e300;
        for (int j = 0; j <= t; ++j) {
          const double* k = &qkv[(static_cast<std::size_t>(b) * T + j) * 3 * C + C + h * HS];
          double dot = 0;
          for (int d = 0; d < HS; ++d) dot += q[d] * k[d];
          w[j] = dot * scale;
          m = std::max(m, w[j]);
        }
        double sum = 0;
        for (int j = 0; j <= t; ++j) {
          w[j] = std::exp(w[j] - m);
          sum += w[j];
        }
        double* o = &out[(static_cast<std::size_t>(b) * T + t) * C + h * HS];
        for (int j = 0; j <= t; ++j) {
          const double* v = &qkv[(static_cast<std::size_t>(b) * T + j) * 3 * C + 2 * C + h * HS];
          for (int d = 0; d < HS; ++d) o[d] += w[j] / sum * v[d];
        }
      }
    }
  }
  return out;
}

// The mean cross-entropy loss of the model with parameters `params` (host copy) on one batch.
static double loss(const std::vector<float>& params, const Config& c, const int* tokens,
                   const int* targets, int B) {
  // The same views as on the device, into the host copy.
  const ParamTensors p = param_views(const_cast<float*>(params.data()), c);
  const int T = c.seq, C = c.channels, V = c.vocab, N = B * T;
  Matrix x(static_cast<std::size_t>(N) * C);
  for (int n = 0; n < N; ++n) {
    const int t = n % T;
    for (int i = 0; i < C; ++i) {
      x[static_cast<std::size_t>(n) * C + i] =
          static_cast<double>(p.wte[static_cast<std::size_t>(tokens[n]) * C + i]) +
          p.wpe[static_cast<std::size_t>(t) * C + i];
    }
  }
  for (int l = 0; l < c.layers; ++l) {
    const LayerParams lp = layer_view<LayerParams>(p, c, l);
    const Matrix ln1 = layernorm(x, lp.ln1w, lp.ln1b, N, C);
    const Matrix qkv = linear(ln1, lp.qkvw, lp.qkvb, N, C, 3 * C);
    const Matrix att = attention(qkv, B, T, C, c.heads);
    const Matrix proj = linear(att, lp.attprojw, lp.attprojb, N, C, C);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
    const Matrix ln2 = layernorm(x, lp.ln2w, lp.ln2b, N, C);
    Matrix h = linear(ln2, lp.fcw, lp.fcb, N, C, 4 * C);
    for (double& v : h) v = gelu(v);
    const Matrix mlp = linear(h, lp.fcprojw, lp.fcprojb, N, 4 * C, C);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += mlp[i];
  }
  const Matrix lnf = layernorm(x, p.lnfw, p.lnfb, N, C);
  const Matrix logits = linear(lnf, p.wte, nullptr, N, C, V);
  double total = 0;
  for (int n = 0; n < N; ++n) {
    const double* row = &logits[static_cast<std::size_t>(n) * V];
    double m = -1e300;
    for (int i = 0; i < V; ++i) m = std::max(m, row[i]);
    double sum = 0;
    for (int i = 0; i < V; ++i) sum += std::exp(row[i] - m);
    total += std::log(sum) + m - row[targets[n]];
  }
  return total / N;
}

}  // namespace reference

// The GPU's loss against the CPU reference on the evaluation set's first batch (trained or not:
// after --load, too). Returns whether they agree within 1e-4 relative.
static bool reference_check(Model& model, const Blas& blas, const EvalSet& e, float* d_loss,
                            int batch_rows, cudaStream_t stream) {
  const int B = model.B, T = model.config.seq;
  const std::size_t bytes = static_cast<std::size_t>(B) * T * sizeof(int);
  CUDA_CHECK(cudaMemcpyAsync(model.tokens, e.tokens.data(), bytes, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(
      cudaMemcpyAsync(model.targets, e.targets.data(), bytes, cudaMemcpyHostToDevice, stream));
  forward(model, blas, /*train=*/false, d_loss, stream);
  // The GPU's per-position losses, for the first batch_rows sequences only (the CPU is slow).
  std::vector<float> losses(static_cast<std::size_t>(B) * T);
  CUDA_CHECK(cudaMemcpyAsync(losses.data(), model.acts.losses, losses.size() * sizeof(float),
                             cudaMemcpyDeviceToHost, stream));
  std::vector<float> params(static_cast<std::size_t>(model.num_params));
  CUDA_CHECK(cudaMemcpyAsync(params.data(), model.params_memory, params.size() * sizeof(float),
                             cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const int rows = std::min(batch_rows, B);
  double gpu = 0;
  for (int i = 0; i < rows * T; ++i) gpu += losses[static_cast<std::size_t>(i)];
  gpu /= rows * T;
  const double cpu = reference::loss(params, model.config, e.tokens.data(), e.targets.data(), rows);
  const double rel = std::fabs(gpu - cpu) / std::max(1e-12, std::fabs(cpu));
  const bool ok = rel < 1e-4;
  std::printf("reference check (%d sequences): GPU loss %.7f, CPU loss %.7f, rel. diff %.2e %s\n",
              rows, gpu, cpu, rel, ok ? "ok" : "MISMATCH");
  return ok;
}

// ---------------------------------------------------------------------------------------------
// Command line

struct Options {
  Config config;
  int batch = 16;
  int steps = 200;
  float lr = 1e-3f;
  int eval_every = 50;
  int eval_batches = 4;
  int loader_delay_us = 0;
  unsigned seed = 1337;
  bool gradcheck = false;
  bool check = false;
  bool quiet = false;
  std::string json = "trainer-laptime.json";
  std::string save;
  std::string load;
};

static void usage(const char* argv0) {
  std::printf(
      "usage: %s [options]\n"
      "  --steps N          training steps (200)\n"
      "  --batch B          sequences per batch (16)\n"
      "  --seq T            tokens per sequence (64)\n"
      "  --layers L         transformer blocks (4)\n"
      "  --channels C       model width (192)\n"
      "  --heads H          attention heads (6)\n"
      "  --lr LR            peak learning rate (1e-3)\n"
      "  --eval-every N     validation loss every N steps (50; 0: only at the end)\n"
      "  --loader-delay US  the loader sleeps US microseconds per batch (0)\n"
      "  --seed S           initialisation and data seed (1337)\n"
      "  --json PATH        laptime's JSON results (instrumented build; trainer-laptime.json)\n"
      "  --save PATH        write the parameters at the end\n"
      "  --load PATH        start from saved parameters\n"
      "  --gradcheck        compare the backward pass with finite differences, then exit\n"
      "  --check            compare the forward pass with a CPU reference, then exit\n"
      "  --quiet            print only the summary\n",
      argv0);
}

static bool parse_int(const char* s, int& out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 0 || v > 1000000000L) return false;
  out = static_cast<int>(v);
  return true;
}

static bool parse_options(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char*& v) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        return false;
      }
      v = argv[++i];
      return true;
    };
    const char* v = nullptr;
    bool ok = true;
    if (a == "--help" || a == "-h") {
      usage(argv[0]);
      std::exit(0);
    } else if (a == "--steps") {
      ok = value(v) && parse_int(v, o.steps);
    } else if (a == "--batch") {
      ok = value(v) && parse_int(v, o.batch) && o.batch > 0;
    } else if (a == "--seq") {
      ok = value(v) && parse_int(v, o.config.seq) && o.config.seq > 1;
    } else if (a == "--layers") {
      ok = value(v) && parse_int(v, o.config.layers) && o.config.layers > 0;
    } else if (a == "--channels") {
      ok = value(v) && parse_int(v, o.config.channels) && o.config.channels > 0;
    } else if (a == "--heads") {
      ok = value(v) && parse_int(v, o.config.heads) && o.config.heads > 0;
    } else if (a == "--lr") {
      ok = value(v);
      if (ok) {
        char* end = nullptr;
        o.lr = std::strtof(v, &end);
        ok = end != v && *end == '\0' && o.lr > 0;
      }
    } else if (a == "--eval-every") {
      ok = value(v) && parse_int(v, o.eval_every);
    } else if (a == "--loader-delay") {
      ok = value(v) && parse_int(v, o.loader_delay_us);
    } else if (a == "--seed") {
      int s = 0;
      ok = value(v) && parse_int(v, s);
      o.seed = static_cast<unsigned>(s);
    } else if (a == "--json") {
      ok = value(v);
      if (ok) o.json = v;
    } else if (a == "--save") {
      ok = value(v);
      if (ok) o.save = v;
    } else if (a == "--load") {
      ok = value(v);
      if (ok) o.load = v;
    } else if (a == "--gradcheck") {
      o.gradcheck = true;
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--quiet") {
      o.quiet = true;
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "bad value for %s\n", a.c_str());
      usage(argv[0]);
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Training

int main(int argc, char** argv) {
  Options opt;
  if (!parse_options(argc, argv, opt)) return 2;
  const Config& c = opt.config;

  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::fprintf(stderr, "trainer: no CUDA device\n");
    return 77;  // skipped, as ctest counts it
  }
  CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));

  // The trainer's own stream: cuBLAS, the kernels, the copies and laptime's GPU events all go on
  // it (not on the legacy default stream).
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Blas blas;
  CUBLAS_CHECK(cublasCreate(&blas.handle));
  CUBLAS_CHECK(cublasSetStream(blas.handle, stream));
  CUBLAS_CHECK(cublasSetMathMode(blas.handle, CUBLAS_DEFAULT_MATH));

#ifdef TRAINER_LAPTIME
  laptime::configure_from_env();  // LAPTIME_* variables, where set, override the calls below
  auto& sw = laptime::Stopwatch::instance();
  auto& nvtx = laptime::NVTXRangeWrapper::instance();
  sw.enable(/*num_warmup_iters=*/5, /*print_every_n_iters=*/0, /*do_cuda_sync=*/false);
  nvtx.enable(/*sync_on_push=*/false, /*sync_on_pop=*/false, /*keep_track_of_range_order=*/true);
  sw.enable_gpu_timing(stream);  // GPU time of every name, from events on this stream
  sw.start_one_time_measurement("setup");
#endif

  Model model;
  model_create(model, c, opt.batch, opt.steps, opt.seed, stream);
  if (!opt.load.empty() && !load_checkpoint(model, opt.load, stream)) {
    std::fprintf(stderr, "trainer: cannot load %s (missing, or another configuration)\n",
                 opt.load.c_str());
    return 1;
  }
  const MarkovChain chain(c.vocab, opt.seed + 1);
  const EvalSet eval = make_eval_set(chain, opt.eval_batches, opt.batch, c.seq, opt.seed + 2);
  float* d_eval_loss = nullptr;
  int* d_next = nullptr;
  CUDA_CHECK(cudaMalloc(&d_eval_loss, sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_next, static_cast<std::size_t>(opt.batch) * c.seq * sizeof(int)));

  if (!opt.quiet) {
    std::printf("trainer: %s, %lld parameters, L=%d C=%d heads=%d, B=%d T=%d, %d steps\n",
                prop.name, model.num_params, c.layers, c.channels, c.heads, opt.batch, c.seq,
                opt.steps);
  }
  if (opt.check) {
    const bool ok = reference_check(model, blas, eval, d_eval_loss, 2, stream);
    return ok ? 0 : 1;
  }
  if (opt.gradcheck) {
    const bool ok = gradient_check(model, blas, eval, d_eval_loss, stream);
    std::printf("gradient check: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  }

  AdamW adam;
  adam.lr = opt.lr;
  adam.total_steps = opt.steps;
  adam.warmup_steps = std::max(1, std::min(20, opt.steps / 10));
  const float initial_eval = evaluate(model, blas, eval, d_eval_loss, stream);
  if (!opt.quiet) {
    std::printf("step %5d: eval loss %.4f (uniform guess %.4f, best possible %.4f)\n", 0,
                static_cast<double>(initial_eval), std::log(static_cast<double>(c.vocab)),
                MarkovChain::entropy());
  }

  auto loader =
      std::make_unique<DataLoader>(chain, opt.batch, c.seq, opt.seed + 3, opt.loader_delay_us);
#ifdef TRAINER_LAPTIME
  sw.end_one_time_measurement("setup");
#endif
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < opt.steps; ++step) {
    TRAINER_BEGIN("step");
    TRAINER_BEGIN("data fetch");
    loader->next(model.tokens, model.targets, stream);
    TRAINER_END("data fetch");
    TRAINER_BEGIN("forward");
    forward(model, blas, /*train=*/true, model.step_losses + step, stream);
    TRAINER_END("forward");
    TRAINER_BEGIN("backward");
    zero_grads(model, stream);
    backward(model, blas, stream);
    TRAINER_END("backward");
    TRAINER_BEGIN("optimizer update");
    update(model, adam, step, stream);
    TRAINER_END("optimizer update");
    TRAINER_END("step");
#ifdef TRAINER_LAPTIME
    sw.finish_iter();
#endif
    if (opt.eval_every > 0 && (step + 1) % opt.eval_every == 0 && step + 1 < opt.steps) {
      const float l = evaluate(model, blas, eval, d_eval_loss, stream);
      if (!opt.quiet) std::printf("step %5d: eval loss %.4f\n", step + 1, static_cast<double>(l));
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  loader.reset();  // its thread stops; it may have made a batch or two ahead
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::vector<float> losses(static_cast<std::size_t>(opt.steps));
  if (opt.steps > 0) {
    CUDA_CHECK(cudaMemcpy(losses.data(), model.step_losses, losses.size() * sizeof(float),
                          cudaMemcpyDeviceToHost));
  }
  const float final_eval = evaluate(model, blas, eval, d_eval_loss, stream);
  std::string text;
  const float accuracy = sample_accuracy(model, blas, chain, 0, d_eval_loss, d_next, stream, &text);
  // The mean of the first and the last tenth of the training losses.
  auto mean_of = [&](int from, int to) {
    double s = 0;
    for (int i = from; i < to; ++i) s += losses[i];
    return to > from ? s / (to - from) : 0.0;
  };
  const int tenth = std::max(1, opt.steps / 10);
  const double first = opt.steps > 0 ? mean_of(0, tenth) : 0.0;
  const double last = opt.steps > 0 ? mean_of(opt.steps - tenth, opt.steps) : 0.0;
  std::printf(
      "trained %d steps in %.3f s (%.2f ms/step): train loss %.4f -> %.4f, eval loss %.4f -> "
      "%.4f (best possible %.4f); greedy sample follows the likeliest transition %.0f %% of the "
      "time: %s...\n",
      opt.steps, seconds, opt.steps > 0 ? 1e3 * seconds / opt.steps : 0.0, first, last,
      static_cast<double>(initial_eval), static_cast<double>(final_eval), MarkovChain::entropy(),
      100.0 * accuracy, text.c_str());
  const bool learned = opt.steps < 50 || final_eval < 0.6f * initial_eval;
  std::printf("loss fell: %s\n", learned ? "yes" : "NO");

  if (!opt.save.empty() && !save_checkpoint(model, opt.save, opt.steps, stream)) {
    std::fprintf(stderr, "trainer: cannot write %s\n", opt.save.c_str());
  }
#ifdef TRAINER_LAPTIME
  sw.print_eval_times();    // waits for the GPU times of the intervals already ended
  sw.write_json(opt.json);  // the same results, as JSON
  if (LAPTIME_ENABLED) std::printf("laptime results: %s\n", opt.json.c_str());
#endif

  CUDA_CHECK(cudaFree(d_eval_loss));
  CUDA_CHECK(cudaFree(d_next));
  model_destroy(model);
  CUBLAS_CHECK(cublasDestroy(blas.handle));
  CUDA_CHECK(cudaStreamDestroy(stream));
  return learned ? 0 : 1;
}
