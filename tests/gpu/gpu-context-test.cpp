// The sync follows the context a framework made current through the CUDA runtime API
// (cudaSetDevice + cudaFree(0), as PyTorch and C++ trainers do), on every device and every thread:
// laptime links no CUDA runtime, yet its cuCtxSynchronize waits for work the runtime enqueued on a
// non-blocking stream of that device. A thread with no current context gets a warning, not a sync.
// Also: a user sync function (a stream sync) replaces the context sync; profiler start/stop work.
#include <cstdio>
#include <thread>
#include <vector>

#include "gpu_kernels.hpp"
#include "laptime/cuda.hpp"

namespace {

bool g_ok = true;
constexpr double kKernelMs = 50.0;

void expect(bool cond, const char* what) {
  std::printf("  %s: %s\n", cond ? "ok  " : "FAIL", what);
  if (!cond) g_ok = false;
}

/// Launches `ms` of GPU work on a non-blocking stream of the current device, then syncs through
/// laptime; returns how long the sync took (-1 if it did not sync).
double timed_sync(cudaStream_t stream, double ms, bool* stream_done) {
  GPU_CHECK(launch_spin(ms, stream));
  const double t0 = now_ms();
  const bool synced = laptime::cuda::synchronize();
  const double dt = now_ms() - t0;
  *stream_done = cudaStreamQuery(stream) == cudaSuccess;
  GPU_CHECK(cudaStreamSynchronize(stream));
  return synced ? dt : -1;
}

/// Each device made current as a framework does: its context is current, synchronize() waits
/// for the runtime's non-blocking stream there, and each device has a context of its own.
/// Returns the contexts, one per device; `min_sync_ms` gets the shortest sync.
std::vector<void*> check_each_device(double* min_sync_ms) {
  int devices = 0;
  GPU_CHECK(cudaGetDeviceCount(&devices));
  std::vector<void*> contexts(static_cast<std::size_t>(devices), nullptr);
  *min_sync_ms = 1e300;
  for (int d = 0; d < devices; ++d) {
    GPU_CHECK(cudaSetDevice(d));  // what the framework does
    GPU_CHECK(cudaFree(nullptr));
    contexts[static_cast<std::size_t>(d)] = laptime::cuda::current_context();
    cudaStream_t s = nullptr;
    GPU_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    bool done = false;
    const double dt = timed_sync(s, kKernelMs, &done);
    std::printf("  device %d: context %p, synchronize() took %.2f ms for a %.0f ms kernel\n", d,
                contexts[static_cast<std::size_t>(d)], dt, kKernelMs);
    expect(contexts[static_cast<std::size_t>(d)] != nullptr, "the runtime's context is current");
    expect(dt >= kKernelMs * 0.95 && done, "synchronize() waited for the runtime's stream");
    *min_sync_ms = dt < *min_sync_ms ? dt : *min_sync_ms;
    GPU_CHECK(cudaStreamDestroy(s));
  }
  for (int d = 1; d < devices; ++d) {
    expect(contexts[static_cast<std::size_t>(d)] != contexts[0], "each device has its context");
  }
  return contexts;
}

/// A new thread: nothing is current until the framework makes its device current there.
/// Returns how long its sync took; `fresh_synced` gets whether it synced before that.
double check_new_thread(void* device0_context, bool* fresh_synced) {
  GPU_CHECK(cudaSetDevice(0));
  void* fresh_ctx = &g_ok;
  *fresh_synced = true;
  void* thread_ctx = nullptr;
  double thread_dt = -1;
  bool thread_done = false;
  std::thread([&] {
    fresh_ctx = laptime::cuda::current_context();
    *fresh_synced = laptime::cuda::synchronize();  // warns once: no current context
    GPU_CHECK(cudaSetDevice(0));
    GPU_CHECK(cudaFree(nullptr));
    thread_ctx = laptime::cuda::current_context();
    cudaStream_t s = nullptr;
    GPU_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    thread_dt = timed_sync(s, kKernelMs, &thread_done);
    GPU_CHECK(cudaStreamDestroy(s));
  }).join();
  expect(fresh_ctx == nullptr && !*fresh_synced,
         "a thread without a current context: no sync, a warning, no crash");
  expect(thread_ctx == device0_context, "after cudaSetDevice(0) the thread has device 0's context");
  expect(thread_dt >= kKernelMs * 0.95 && thread_done, "and synchronize() waits for its work");
  return thread_dt;
}

/// A user sync function: only the named stream is waited for.
void check_user_sync() {
  cudaStream_t user = nullptr;
  GPU_CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking));
  static int hook_calls = 0;
  laptime::cuda::set_sync_function(
      [](void* s) {
        ++hook_calls;
        (void)cudaStreamSynchronize(static_cast<cudaStream_t>(s));
      },
      user);
  bool user_done = false;
  const double hook_dt = timed_sync(user, kKernelMs, &user_done);
  laptime::cuda::set_sync_function(nullptr, nullptr);
  expect(hook_calls == 1 && hook_dt >= kKernelMs * 0.95 && user_done,
         "an installed stream sync replaces the context sync");
  GPU_CHECK(cudaStreamDestroy(user));
}

}  // namespace

int main() {
  if (const int rc = skip_without_gpu("gpu-context-test")) return rc;
  std::printf("laptime: %s\n", laptime::cuda::status().c_str());
  expect(laptime::cuda::driver_available(), "the driver is loaded at run time");
  // Informational: whether cudaGetDeviceCount already made a context current is the runtime's
  // business.
  std::printf("  before cudaSetDevice: current context %p\n", laptime::cuda::current_context());

  double min_sync_ms = 0;
  const std::vector<void*> contexts = check_each_device(&min_sync_ms);
  bool fresh_synced = true;
  const double thread_dt = check_new_thread(contexts[0], &fresh_synced);
  check_user_sync();

  const bool started = laptime::cuda::profiler_start();
  const bool stopped = laptime::cuda::profiler_stop();
  expect(started && stopped, "cuProfilerStart / cuProfilerStop succeed");

  std::printf(
      "RESULT gpu-context-test devices=%d driver=%d kernel_ms=%.0f sync_ms=%.2f "
      "thread_sync_ms=%.2f fresh_thread_synced=%d %s\n",
      static_cast<int>(contexts.size()), laptime::cuda::driver_version(), kKernelMs, min_sync_ms,
      thread_dt, fresh_synced ? 1 : 0, g_ok ? "PASS" : "FAIL");
  return g_ok ? 0 : 1;
}
