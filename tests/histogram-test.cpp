// The percentile histogram (detail/histogram.hpp): within 1 % on known distributions, exact when
// merged, and small: blocks are allocated only for the powers of two the values touch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "laptime/detail/histogram.hpp"
#include "test_support.hpp"

using laptime::detail::Histogram;
using laptime::detail::IntervalStats;
using laptime_test::exact_quantile;

namespace {

// Every percentile a report shows (and a few more) within 1 % of the exact one (linear between the
// closest ranks).
void check_within_1_percent(const std::vector<std::uint64_t>& values) {
  IntervalStats stats;
  for (const auto v : values) stats.add(v);
  for (const double q : {0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999}) {
    CAPTURE(q);
    const double exact = exact_quantile(values, q);
    const double got = stats.quantile_ns(q);
    CAPTURE(exact);
    CAPTURE(got);
    CHECK(std::fabs(got - exact) <= 0.01 * exact);
  }
}

}  // namespace

TEST_CASE("percentiles are within 1 % on known distributions") {
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> values;
  SUBCASE("uniform, 1 µs .. 10 ms") {
    std::uniform_int_distribution<std::uint64_t> d(1000, 10'000'000);
    for (int i = 0; i < 200000; ++i) values.push_back(d(rng));
  }
  SUBCASE("lognormal around 2 ms, heavy tail") {
    std::lognormal_distribution<double> d(std::log(2e6), 1.2);
    for (int i = 0; i < 200000; ++i) values.push_back(static_cast<std::uint64_t>(d(rng)) + 1);
  }
  SUBCASE("bimodal: 50 µs steps and 20 ms stalls") {
    std::normal_distribution<double> fast(50e3, 5e3), slow(20e6, 2e6);
    for (int i = 0; i < 200000; ++i) {
      const double v = (i % 10 == 0) ? slow(rng) : fast(rng);
      values.push_back(static_cast<std::uint64_t>(std::max(1.0, v)));
    }
  }
  SUBCASE("log-uniform from 1 ns to 100 s") {
    std::uniform_real_distribution<double> d(0.0, std::log(100e9));
    for (int i = 0; i < 200000; ++i) {
      values.push_back(static_cast<std::uint64_t>(std::exp(d(rng))));
    }
  }
  check_within_1_percent(values);
}

TEST_CASE("up to 2^48 ns (78 hours) within 1 %; longer intervals share the last bucket") {
  // A name timed several times for days (a known limit, docs/stopwatch.md): its percentiles read
  // low, its count, total, min and max stay exact.
  constexpr std::uint64_t kHour = 3'600'000'000'000;
  std::vector<std::uint64_t> days;
  for (std::uint64_t h = 40; h <= 77; ++h) days.push_back(h * kHour);
  check_within_1_percent(days);
  CHECK(Histogram::bucket_of(std::uint64_t{1} << 48) == Histogram::kBuckets - 1);
  CHECK(Histogram::bucket_of(~std::uint64_t{0}) == Histogram::kBuckets - 1);
  IntervalStats longer;
  for (const std::uint64_t h : {80, 100, 120}) longer.add(h * kHour);
  CHECK(longer.quantile_ns(0.5) < 100.0 * kHour);  // the limit, as it is
  CHECK(longer.quantile_ns(0.0) == 80.0 * kHour);
  CHECK(longer.quantile_ns(1.0) == 120.0 * kHour);
}

TEST_CASE("merging equals accumulating in one, across every power of two") {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> d(0.0, std::log(100e9));
  IntervalStats parts[4], all, merged;
  for (int i = 0; i < 100000; ++i) {
    const auto v = static_cast<std::uint64_t>(std::exp(d(rng)));
    parts[i % 4].add(v);
    all.add(v);
  }
  for (const auto& p : parts) merged.merge_from(p);
  CHECK(merged.count() == all.count());
  CHECK(merged.total_ns() == all.total_ns());
  CHECK(merged.min_ns() == all.min_ns());
  CHECK(merged.max_ns() == all.max_ns());
  for (double q = 0.0; q <= 1.0; q += 0.01) {
    CAPTURE(q);
    CHECK(merged.quantile_ns(q) == all.quantile_ns(q));
  }
}

TEST_CASE("counts past 2^32 in one bucket carry, by add and by merge") {
  // 2^32 - 1 values of 1000 ns, built by doubling merges (adding them one by one takes seconds)
  Histogram one, power, almost;
  one.add(1000);
  power.merge_from(one);  // 1
  for (int i = 0; i < 32; ++i) {
    almost.merge_from(power);  // + 2^i
    power.merge_from(power);   // 2^(i+1)
  }
  const std::size_t b = Histogram::bucket_of(1000);
  CHECK(power.count(b) == (std::uint64_t{1} << 32));  // a merge carried
  CHECK(almost.count(b) == (std::uint64_t{1} << 32) - 1);
  almost.add(1000);  // the low word wraps: the writer's carry
  CHECK(almost.count(b) == (std::uint64_t{1} << 32));
  almost.add(1000);
  CHECK(almost.count(b) == (std::uint64_t{1} << 32) + 1);
  almost.add(5);
  CHECK(almost.total_count() == (std::uint64_t{1} << 32) + 2);
  CHECK(almost.quantile(0.5) == doctest::Approx(1000).epsilon(0.01));
  CHECK(almost.quantile(0.0) == 5);
  almost.clear();
  CHECK(almost.total_count() == 0);
}

TEST_CASE("memory: the table, and one block per power of two the values touch") {
  Histogram h;
  const std::size_t empty = h.memory_bytes();
  CHECK(empty <= 368);
  for (std::uint64_t v = 1'000'000; v < 2'000'000; v += 997) h.add(v);  // within [2^19, 2^21)
  CHECK(h.memory_bytes() == empty + 2 * 256);
  for (int i = 0; i < 1000; ++i) h.add(1'500'000);
  CHECK(h.memory_bytes() == empty + 2 * 256);  // nothing more for more values
  h.clear();
  CHECK(h.memory_bytes() == empty + 2 * 256);  // kept for reuse
  CHECK(h.total_count() == 0);
  // A name timed at ~1 ms with tails from 0.25 ms to 8 ms: five powers of two, ≈ 1.6 KiB.
  Histogram typical;
  for (std::uint64_t v = 250'000; v < 8'000'000; v += 1009) typical.add(v);
  CHECK(typical.memory_bytes() <= empty + 6 * 256);
  CHECK(typical.memory_bytes() + sizeof(IntervalStats) <= 2048);
}

TEST_CASE("the median of an even count is the mean of the middle two, as numpy's and the tail's") {
  IntervalStats two;
  two.add(10'100'000);
  two.add(30'100'000);
  CHECK(two.quantile_ns(0.5) == doctest::Approx(20'100'000).epsilon(0.01));
  IntervalStats four;
  for (const std::uint64_t v : {4'100'000, 4'200'000, 5'100'000, 5'200'000}) four.add(v);
  CHECK(four.quantile_ns(0.5) == doctest::Approx(4'650'000).epsilon(0.01));
  CHECK(four.quantile_ns(0.0) == 4'100'000);  // the ends stay exact
  CHECK(four.quantile_ns(1.0) == 5'200'000);
  for (const std::size_t n : {2, 3, 5, 10, 101}) {
    CAPTURE(n);
    std::vector<std::uint64_t> values;
    for (std::size_t i = 0; i < n; ++i) values.push_back(1'000'000 + 37'000 * i * i);
    check_within_1_percent(values);
  }
}
