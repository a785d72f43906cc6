// laptime internals: the Stopwatch's GPU times, one part of its process-wide state
// (stopwatch_parts.hpp): the stream GPU events are recorded on, and the per-name statistics of
// the GPU event pairs resolved so far. gpu_mutex is this part's lock (held across fork, so that a
// child gets the table whole). The implementation part.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/cuda.hpp"
#include "laptime/detail/histogram.hpp"
#include "laptime/detail/stopwatch_hot.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

struct GpuAggregate {
  IntervalStats stats;
};

// A GPU event pair's tag: bit 63 = discard (warm-up), bits 32..62 = generation, bits 0..31 = id.
inline std::uint64_t gpu_tag(std::uint32_t id, std::uint32_t generation, bool measuring) {
  return (measuring ? 0 : (std::uint64_t{1} << 63)) |
         (std::uint64_t{generation & 0x7fffffffu} << 32) | id;
}

struct GpuCollection {
  std::atomic<void*> gpu_stream{nullptr};  // read by the rare branches of the hot path
  std::mutex gpu_mutex;
  std::unordered_map<std::uint32_t, std::unique_ptr<GpuAggregate>> gpu;

  /// Resolves finished GPU event pairs into the per-name GPU statistics of this generation
  /// (`wait`: waits for every pair stopped so far); returns how many pend.
  std::size_t collect_gpu(bool wait, const IterationGate& gate) {
    const std::uint32_t gen = gate.generation.load(std::memory_order_relaxed) & 0x7fffffffu;
    auto on_done = [&](std::uint64_t tag, std::uint64_t gpu_ns) {
      if (tag >> 63) return;                           // ended during warm-up
      if (((tag >> 32) & 0x7fffffffu) != gen) return;  // before a reset()
      const auto id = static_cast<std::uint32_t>(tag & 0xffffffffu);
      std::lock_guard<std::mutex> lock(gpu_mutex);
      auto& agg = gpu[id];
      if (!agg) agg = std::make_unique<GpuAggregate>();
      agg->stats.add(gpu_ns);
    };
    auto& timer = cuda::GpuEventTimer::instance();
    if (wait) {
      timer.drain(on_done);
      return 0;
    }
    return timer.poll(on_done);
  }

  /// How many GPU event pairs of this generation still pend, per name id below `n`.
  static std::vector<std::uint64_t> pending_per_name(std::uint32_t n, const IterationGate& gate) {
    std::vector<std::uint64_t> pending(n);
    const std::uint32_t g = gate.generation.load(std::memory_order_relaxed) & 0x7fffffffu;
    cuda::GpuEventTimer::instance().for_each_pending([&](std::uint64_t tag) {
      const auto id = static_cast<std::uint32_t>(tag & 0xffffffffu);
      if (!(tag >> 63) && ((tag >> 32) & 0x7fffffffu) == g && id < n) ++pending[id];
    });
    return pending;
  }

  /// Calls `read(stats_of)` under the lock; stats_of(id): the name's GPU statistics, or nullptr.
  template <class Read>
  void read_gpu(Read&& read) {
    std::lock_guard<std::mutex> lock(gpu_mutex);
    read([this](std::uint32_t id) -> const IntervalStats* {
      auto it = gpu.find(id);
      return it != gpu.end() ? &it->second->stats : nullptr;
    });
  }

  /// reset(): the GPU times so far are forgotten.
  void clear_gpu() {
    std::lock_guard<std::mutex> lock(gpu_mutex);
    gpu.clear();
  }

  // Fork (StopwatchState::before_fork): held across it, released on both sides.
  void lock_gpu_for_fork() { gpu_mutex.lock(); }
  void unlock_gpu_after_fork() { gpu_mutex.unlock(); }
};

}  // namespace detail
LAPTIME_END_NAMESPACE
