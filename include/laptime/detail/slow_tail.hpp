// laptime internals: the slow tail of the loop, explained from the recorded intervals. Which
// iterations were slowest, how many took over 3x the median, and for each slow one which names
// took longer than their own median, by how much, and on which thread. Pure functions of a
// Results (its samples), tested with recorded runs in tests/tail-test.cpp; docs/reports.md
// ("The slow tail") states the rule for users.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/format.hpp"
#include "laptime/results.hpp"

/// The slowest iterations a report lists (Results::tail). Define it where the implementation
/// part is compiled (src/laptime.cpp, or the file that includes laptime.hpp header-only) to list
/// more or fewer; your definition wins.
#ifndef LAPTIME_SLOW_TAIL
#define LAPTIME_SLOW_TAIL 5
#endif

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// Tail-bound: the iterations' p99 is over this multiple of their median.
inline constexpr double kTailBoundRatio = 2.0;
/// An iteration counted in SlowTail::over_3x_median takes over this multiple of the median.
inline constexpr double kSlowIterationRatio = 3.0;

/// The median of `v` (the mean of the middle two for an even count); 0 for none. Reorders `v`.
inline double median_of(std::vector<double>& v) {
  if (v.empty()) return 0;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  return (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
}

/// The measured iterations recorded whole, with their times: [iteration, ns], in order. An
/// iteration is whole when both finish_iter() calls that bound it are in `iteration_ends`, it is
/// past warm-up, and it comes after the oldest interval of every thread whose ring is full (the
/// ring may have overwritten some of its intervals).
inline std::vector<std::pair<std::int64_t, double>> whole_iterations(const Samples& s,
                                                                     std::int64_t warmup) {
  std::int64_t first = warmup;
  for (const ThreadSamples& t : s.threads) {
    if (s.capacity == 0 || t.intervals.size() < s.capacity) continue;
    std::int64_t oldest = t.intervals.front().iteration;
    for (const RecordedInterval& iv : t.intervals) oldest = std::min(oldest, iv.iteration);
    first = std::max(first, oldest + 1);
  }
  std::vector<std::pair<std::int64_t, double>> out;
  for (std::size_t i = 1; i < s.iteration_ends.size(); ++i) {
    const auto& [k, end] = s.iteration_ends[i];
    const auto& [before, start] = s.iteration_ends[i - 1];
    if (k >= first && before == k - 1) out.emplace_back(k, static_cast<double>(end - start));
  }
  return out;
}

/// What each name cost in each whole iteration: [name][position in `iters`], nanoseconds, all
/// threads together.
inline std::vector<std::vector<double>> per_iteration_ns(
    const Samples& s, const std::vector<std::pair<std::int64_t, double>>& iters) {
  std::vector<std::vector<double>> out(s.names.size(), std::vector<double>(iters.size(), 0.0));
  for (const ThreadSamples& t : s.threads) {
    for (const RecordedInterval& iv : t.intervals) {
      const auto at = std::lower_bound(
          iters.begin(), iters.end(), iv.iteration,
          [](const std::pair<std::int64_t, double>& p, std::int64_t k) { return p.first < k; });
      if (at == iters.end() || at->first != iv.iteration || iv.name >= out.size()) continue;
      out[iv.name][static_cast<std::size_t>(at - iters.begin())] +=
          static_cast<double>(iv.duration_ns);
    }
  }
  return out;
}

/// For name `name` in iteration `k`: the thread that spent most of it, and how many threads
/// recorded the name at all.
inline void cause_thread(const Samples& s, std::uint32_t name, std::int64_t k, TailCause& c) {
  std::int64_t best = -1;
  c.threads = 0;
  for (const ThreadSamples& t : s.threads) {
    std::int64_t mine = 0;
    bool has_name = false;
    for (const RecordedInterval& iv : t.intervals) {
      if (iv.name != name) continue;
      has_name = true;
      if (iv.iteration == k) mine += iv.duration_ns;
    }
    c.threads += has_name ? 1 : 0;
    if (has_name && mine > best) {
      best = mine;
      c.tid = t.tid;
      c.thread = t.name;
    }
  }
}

/// The names of the iteration at position `at` that took longer than their own median, the
/// largest excess first.
inline std::vector<TailCause> causes_of(const Samples& s,
                                        const std::vector<std::vector<double>>& per_name,
                                        const std::vector<double>& medians, std::int64_t k,
                                        std::size_t at) {
  std::vector<TailCause> out;
  for (std::uint32_t name = 0; name < per_name.size(); ++name) {
    const double ns = per_name[name][at];
    if (ns <= medians[name]) continue;
    TailCause c;
    c.name = s.names[name];
    c.ns = ns;
    c.median_ns = medians[name];
    cause_thread(s, name, k, c);
    out.push_back(std::move(c));
  }
  std::stable_sort(out.begin(), out.end(), [](const TailCause& a, const TailCause& b) {
    return a.ns - a.median_ns > b.ns - b.median_ns;
  });
  return out;
}

/// The slow tail of `r` (what Stopwatch::results() puts in Results::tail): none without recorded
/// intervals or without a measured iteration recorded whole. The `count` slowest iterations,
/// slowest first (the earlier of two equal ones first), each with its causes; the iterations'
/// median and p99 (nearest rank); how many took over kSlowIterationRatio x the median; tail-bound
/// when the p99 is over kTailBoundRatio x the median.
inline std::optional<SlowTail> slow_tail_of(const Results& r,
                                            std::size_t count = LAPTIME_SLOW_TAIL) {
  if (!r.samples) return std::nullopt;
  const Samples& s = *r.samples;
  const auto iters = whole_iterations(s, r.num_warmup_iters);
  if (iters.empty()) return std::nullopt;
  SlowTail tail;
  tail.iterations = iters.size();
  std::vector<double> times;
  for (const auto& it : iters) times.push_back(it.second);
  std::sort(times.begin(), times.end());
  tail.median_ns = median_of(times);
  const std::size_t rank = (times.size() * 99 + 99) / 100;  // ceil(0.99 n), nearest rank
  tail.p99_ns = times[std::max<std::size_t>(rank, 1) - 1];
  for (const double t : times) {
    if (t > kSlowIterationRatio * tail.median_ns) ++tail.over_3x_median;
  }
  tail.tail_bound = tail.p99_ns > kTailBoundRatio * tail.median_ns;
  const auto per_name = per_iteration_ns(s, iters);
  std::vector<double> medians;
  for (const std::vector<double>& v : per_name) {
    std::vector<double> copy = v;
    medians.push_back(median_of(copy));
  }
  std::vector<std::size_t> order(iters.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return iters[a].second > iters[b].second; });
  order.resize(std::min(count, order.size()));
  for (const std::size_t at : order) {
    SlowIteration slow;
    slow.iteration = iters[at].first;
    slow.ns = iters[at].second;
    slow.causes = causes_of(s, per_name, medians, slow.iteration, at);
    tail.slowest.push_back(std::move(slow));
  }
  return tail;
}

/// The verdict's words for a tail-bound loop: "; the tail, not the median, is the problem: p99
/// 12.3 ms is 12.1x the median 1.02 ms; slowest iteration 37 (12.3 ms): 'data' +11.1 ms over its
/// median". Empty when the loop is not tail-bound.
inline std::string tail_verdict(const SlowTail& t) {
  if (!t.tail_bound) return {};
  std::string out = "; the tail, not the median, is the problem: p99 " + format_duration(t.p99_ns);
  out += " is ";
  append_fixed(out, t.median_ns > 0 ? t.p99_ns / t.median_ns : 0.0, 1);
  out += "x the median " + format_duration(t.median_ns);
  if (!t.slowest.empty()) {
    const SlowIteration& s = t.slowest.front();
    out += "; slowest iteration ";
    append_int(out, s.iteration);
    out += " (" + format_duration(s.ns) + ")";
    if (!s.causes.empty()) {
      const TailCause& c = s.causes.front();
      out +=
          ": " + quoted(c.name) + " +" + format_duration(c.ns - c.median_ns) + " over its median";
    }
  }
  return out;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
