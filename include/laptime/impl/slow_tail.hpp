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
#include "laptime/impl/format.hpp"
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

/// Iterations as [iteration, ns], in order.
using IterationTimes = std::vector<std::pair<std::int64_t, double>>;

/// The measured iterations recorded whole, with their times: [iteration, ns], in order. An
/// iteration is whole when both finish_iter() calls that bound it are in `iteration_ends`, it is
/// past warm-up, and it comes after the oldest interval of every thread whose ring is full (the
/// ring may have overwritten some of its intervals).
inline IterationTimes whole_iterations(const Samples& s, std::int64_t warmup) {
  std::int64_t first = warmup;
  for (const ThreadSamples& t : s.threads) {
    if (s.capacity == 0 || t.intervals.size() < s.capacity) continue;
    std::int64_t oldest = t.intervals.front().iteration;
    for (const RecordedInterval& iv : t.intervals) oldest = std::min(oldest, iv.iteration);
    first = std::max(first, oldest + 1);
  }
  IterationTimes out;
  for (std::size_t i = 1; i < s.iteration_ends.size(); ++i) {
    const auto& [k, end] = s.iteration_ends[i];
    const auto& [before, start] = s.iteration_ends[i - 1];
    if (k >= first && before == k - 1) out.emplace_back(k, static_cast<double>(end - start));
  }
  return out;
}

/// The position of iteration `k` in `iters`, or iters.size() where it is not there.
inline std::size_t position_of(const IterationTimes& iters, std::int64_t k) {
  if (iters.empty()) return 0;
  const std::int64_t first = iters.front().first, last = iters.back().first;
  if (k < first || k > last) return iters.size();
  if (last - first + 1 == static_cast<std::int64_t>(iters.size())) {  // no gap: the usual case
    return static_cast<std::size_t>(k - first);
  }
  const auto at = std::lower_bound(
      iters.begin(), iters.end(), k,
      [](const std::pair<std::int64_t, double>& p, std::int64_t key) { return p.first < key; });
  return at != iters.end() && at->first == k ? static_cast<std::size_t>(at - iters.begin())
                                             : iters.size();
}

/// What one name cost in the iterations it ran in: [position in the iterations, ns] sorted by
/// position, all threads together (an iteration it did not run in costs 0 and is not listed:
/// the memory is that of the recorded intervals, however many names and iterations there are).
using NameCosts = std::vector<std::pair<std::size_t, double>>;

inline std::vector<NameCosts> name_costs(const Samples& s, const IterationTimes& iters) {
  std::vector<NameCosts> out(s.names.size());
  for (const ThreadSamples& t : s.threads) {
    for (const RecordedInterval& iv : t.intervals) {
      const std::size_t at = position_of(iters, iv.iteration);
      if (at == iters.size() || iv.name >= out.size()) continue;
      out[iv.name].emplace_back(at, static_cast<double>(iv.duration_ns));
    }
  }
  for (NameCosts& costs : out) {  // one entry per iteration: the sum of its intervals
    std::sort(costs.begin(), costs.end());
    std::size_t kept = 0;
    for (std::size_t i = 0; i < costs.size(); ++i) {
      if (kept > 0 && costs[kept - 1].first == costs[i].first) {
        costs[kept - 1].second += costs[i].second;
      } else {
        costs[kept++] = costs[i];
      }
    }
    costs.resize(kept);
  }
  return out;
}

/// A name's median per iteration over `iterations` iterations, those it did not run in at 0.
inline double median_cost(const NameCosts& costs, std::size_t iterations) {
  std::vector<double> v(costs.size());
  for (std::size_t i = 0; i < costs.size(); ++i) v[i] = costs[i].second;
  std::sort(v.begin(), v.end());
  // The k-th smallest of the zeros and `v` together (durations are never negative).
  const std::size_t zeros = iterations - v.size();
  auto kth = [&](std::size_t k) { return k < zeros ? 0.0 : v[k - zeros]; };
  if (iterations == 0) return 0;
  const std::size_t mid = iterations / 2;
  return iterations % 2 == 1 ? kth(mid) : (kth(mid - 1) + kth(mid)) / 2;
}

/// The cost of a name in the iteration at position `at` (0 where it did not run).
inline double cost_at(const NameCosts& costs, std::size_t at) {
  const auto it =
      std::lower_bound(costs.begin(), costs.end(), std::pair<std::size_t, double>(at, -1.0));
  return it != costs.end() && it->first == at ? it->second : 0.0;
}

/// Fills in each cause's thread: of the threads that recorded its name, the one that spent most
/// of it in iteration `k` (the first such, on a tie), and how many recorded the name at all.
/// `names[c]` is the index (into s.names) of causes[c]'s name.
inline void cause_threads(const Samples& s, std::int64_t k, const std::vector<std::size_t>& names,
                          std::vector<TailCause>& causes) {
  std::vector<std::size_t> index(s.names.size(), causes.size());  // name -> cause
  for (std::size_t c = 0; c < causes.size(); ++c) {
    index[names[c]] = c;
    causes[c].threads = 0;
  }
  std::vector<std::int64_t> best(causes.size(), -1), mine(causes.size());
  std::vector<bool> has(causes.size());
  for (const ThreadSamples& t : s.threads) {
    std::fill(mine.begin(), mine.end(), 0);
    std::fill(has.begin(), has.end(), false);
    for (const RecordedInterval& iv : t.intervals) {
      const std::size_t c = iv.name < index.size() ? index[iv.name] : causes.size();
      if (c == causes.size()) continue;
      has[c] = true;
      if (iv.iteration == k) mine[c] += iv.duration_ns;
    }
    for (std::size_t c = 0; c < causes.size(); ++c) {
      if (!has[c]) continue;
      ++causes[c].threads;
      if (mine[c] > best[c]) {
        best[c] = mine[c];
        causes[c].tid = t.tid;
        causes[c].thread = t.name;
      }
    }
  }
}

/// The names of the iteration at position `at` (iteration `k`) that took longer than their own
/// median, the largest excess first.
inline std::vector<TailCause> causes_of(const Samples& s, const std::vector<NameCosts>& costs,
                                        const std::vector<double>& medians, std::int64_t k,
                                        std::size_t at) {
  std::vector<std::size_t> names;  // the names over their median, the largest excess first
  for (std::size_t name = 0; name < costs.size(); ++name) {
    if (cost_at(costs[name], at) > medians[name]) names.push_back(name);
  }
  auto excess = [&](std::size_t name) { return cost_at(costs[name], at) - medians[name]; };
  std::stable_sort(names.begin(), names.end(),
                   [&](std::size_t x, std::size_t y) { return excess(x) > excess(y); });
  std::vector<TailCause> out(names.size());
  for (std::size_t c = 0; c < names.size(); ++c) {
    out[c].name = s.names[names[c]];
    out[c].ns = cost_at(costs[names[c]], at);
    out[c].median_ns = medians[names[c]];
  }
  cause_threads(s, k, names, out);
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
  const IterationTimes iters = whole_iterations(s, r.num_warmup_iters);
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
  const std::vector<NameCosts> costs = name_costs(s, iters);
  std::vector<double> medians;
  for (const NameCosts& c : costs) medians.push_back(median_cost(c, iters.size()));
  std::vector<std::size_t> order(iters.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return iters[a].second > iters[b].second; });
  order.resize(std::min(count, order.size()));
  for (const std::size_t at : order) {
    SlowIteration slow;
    slow.iteration = iters[at].first;
    slow.ns = iters[at].second;
    slow.causes = causes_of(s, costs, medians, slow.iteration, at);
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
      out += ": " + detail::quoted(c.name) + " +" + format_duration(c.ns - c.median_ns) +
             " over its median";
    }
  }
  return out;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
