// The statistics and formatting are plain code: tested here with known data.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "laptime/detail/env.hpp"
#include "laptime/detail/histogram.hpp"
#include "laptime/impl/format.hpp"
#include "laptime/impl/stopwatch_figures.hpp"
#include "test_support.hpp"

using laptime::detail::Histogram;
using laptime::detail::IntervalStats;
using laptime_test::exact_quantile;

TEST_CASE("every value falls in a bucket whose range contains it") {
  for (std::uint64_t v : {0ull, 1ull, 63ull, 64ull, 65ull, 127ull, 128ull, 1000ull, 123456789ull,
                          (1ull << 47) - 1, (1ull << 47)}) {
    const std::size_t b = Histogram::bucket_of(v);
    CAPTURE(v);
    REQUIRE(b < Histogram::kBuckets);
    CHECK(Histogram::bucket_low(b) <= v);
    if (v < (1ull << 47)) CHECK(v < Histogram::bucket_low(b) + Histogram::bucket_width(b));
  }
  // buckets are contiguous and increasing
  for (std::size_t b = 1; b < Histogram::kBuckets; ++b) {
    CHECK(Histogram::bucket_low(b) ==
          Histogram::bucket_low(b - 1) + Histogram::bucket_width(b - 1));
  }
}

TEST_CASE("percentiles are within 1 % of the exact ones on known data") {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(std::log(2e6), 0.8);  // ~2 ms, heavy tail
  std::vector<std::uint64_t> values;
  IntervalStats stats;
  for (int i = 0; i < 100000; ++i) {
    const auto v = static_cast<std::uint64_t>(dist(rng));
    values.push_back(v);
    stats.add(v);
  }
  for (double q : {0.01, 0.1, 0.5, 0.9, 0.99, 0.999}) {
    CAPTURE(q);
    const double exact = exact_quantile(values, q);
    CHECK(std::fabs(stats.quantile_ns(q) - exact) / exact <= 0.01);
  }
  CHECK(stats.min_ns() == *std::min_element(values.begin(), values.end()));
  CHECK(stats.max_ns() == *std::max_element(values.begin(), values.end()));
  std::uint64_t total = 0;
  for (auto v : values) total += v;
  CHECK(stats.total_ns() == total);  // exact
  CHECK(stats.count() == values.size());
  CHECK(stats.quantile_ns(0.0) == stats.min_ns());
  CHECK(stats.quantile_ns(1.0) == stats.max_ns());
}

TEST_CASE("small values are exact and uniform data gives the textbook percentiles") {
  IntervalStats stats;
  for (std::uint64_t v = 1; v <= 50; ++v) stats.add(v);
  // numpy.percentile(range(1, 51), [50, 90]): linear between the closest ranks
  CHECK(stats.quantile_ns(0.5) == doctest::Approx(25.5));
  CHECK(stats.quantile_ns(0.9) == doctest::Approx(45.1));
  CHECK(stats.mean_ns() == doctest::Approx(25.5));

  IntervalStats uniform;
  for (std::uint64_t v = 1; v <= 1000000; ++v) uniform.add(v * 1000);  // 1 µs .. 1 s
  CHECK(uniform.quantile_ns(0.5) == doctest::Approx(500e6).epsilon(0.01));
  CHECK(uniform.quantile_ns(0.9) == doctest::Approx(900e6).epsilon(0.01));
  CHECK(uniform.quantile_ns(0.99) == doctest::Approx(990e6).epsilon(0.01));
}

TEST_CASE("memory is bounded: the statistics have a fixed size whatever the number of values") {
  // At most every block allocated, whatever the values (tests/histogram-test.cpp: what it takes)
  Histogram h;
  for (std::uint64_t i = 0; i < 64; ++i) h.add(std::uint64_t{1} << i);
  CHECK(h.memory_bytes() <= 12 * 1024);
  CHECK(h.total_count() == 64);
  IntervalStats stats;
  for (std::uint64_t i = 0; i < 5000000; ++i) stats.add(i * 7919 % 100000000);
  CHECK(stats.count() == 5000000);
  // values beyond the range share the last bucket instead of growing anything
  stats.add(~0ull);
  CHECK(stats.max_ns() == ~0ull);
}

TEST_CASE("merging per-thread statistics equals accumulating them in one") {
  IntervalStats a, b, all, merged;
  for (std::uint64_t v = 1; v < 5000; ++v) {
    (v % 3 ? a : b).add(v * 13);
    all.add(v * 13);
  }
  merged.merge_from(a);
  merged.merge_from(b);
  CHECK(merged.count() == all.count());
  CHECK(merged.total_ns() == all.total_ns());
  CHECK(merged.min_ns() == all.min_ns());
  CHECK(merged.max_ns() == all.max_ns());
  for (double q : {0.1, 0.5, 0.99}) CHECK(merged.quantile_ns(q) == all.quantile_ns(q));
  IntervalStats empty;
  CHECK(empty.mean_ns() == 0);
  CHECK(empty.quantile_ns(0.5) == 0);
  CHECK(empty.min_ns() == 0);
}

TEST_CASE("durations are printed with a readable unit") {
  using laptime::detail::format_duration;
  CHECK(format_duration(812) == "812 ns");
  CHECK(format_duration(3410) == "3.41 \xC2\xB5s");
  CHECK(format_duration(17.24e6) == "17.2 ms");
  CHECK(format_duration(723e9) == "723 s");
  CHECK(format_duration(0) == "0 ns");
  // Three significant digits also where rounding reaches the next unit.
  CHECK(format_duration(999.5) == "1.00 \xC2\xB5s");
  CHECK(format_duration(99.95e3) == "100 \xC2\xB5s");
  CHECK(format_duration(999999) == "1.00 ms");
  CHECK(format_duration(999.5e6) == "1.00 s");
  CHECK(format_duration(-999.5) == "-1.00 \xC2\xB5s");
  CHECK(format_duration(9.996) == "10.0 ns");
  // From 10,000 s on, three significant digits too, not every digit of a huge figure.
  CHECK(format_duration(12345e9) == "1.23e+04 s");
  CHECK(format_duration(1.7e308) == "1.7e+299 s");
  CHECK(format_duration(-1e15) == "-1e+06 s");
}

TEST_CASE("JSON strings are escaped and always valid UTF-8") {
  std::string out;
  laptime::detail::json_string(out,
                               std::string("a\"b\\c\n\x01 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  CHECK(out == "\"a\\\"b\\\\c\\u000a\\u0001 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  out.clear();
  laptime::detail::json_string(out, "\xff\xc0\x80\xed\xa0\x80");  // invalid, overlong, surrogate
  CHECK(out == "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
  out.clear();
  laptime::detail::json_number(out, std::nullopt);
  laptime::detail::json_number(out, 1.5);
  laptime::detail::json_number(out, std::nan(""));
  CHECK(out == "null1.5null");
}

TEST_CASE("rank and world size come from the usual launchers' variables") {
  auto env = [](std::initializer_list<std::pair<const char*, const char*>> vars) {
    return [vars](const char* name) -> const char* {
      for (const auto& [k, v] : vars) {
        if (std::string(k) == name) return v;
      }
      return nullptr;
    };
  };
  auto r = laptime::detail::detect_rank(env({}));
  CHECK(r.rank == 0);
  CHECK(r.world_size == 1);
  r = laptime::detail::detect_rank(env({{"RANK", "3"}, {"WORLD_SIZE", "8"}}));
  CHECK(r.rank == 3);
  CHECK(r.world_size == 8);
  r = laptime::detail::detect_rank(
      env({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "16"}}));
  CHECK(r.rank == 5);
  CHECK(r.world_size == 16);
  r = laptime::detail::detect_rank(env({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}}));
  CHECK(r.rank == 2);
  CHECK(std::string(r.source) == "SLURM_PROCID");
  r = laptime::detail::detect_rank(env({{"RANK", "banana"}, {"SLURM_PROCID", "1"}}));
  CHECK(r.rank == 1);  // a malformed variable is skipped
  r = laptime::detail::detect_rank(env({{"RANK", "7"}}));
  CHECK(r.world_size == 8);  // at least rank + 1
}

TEST_CASE("environment values are parsed strictly") {
  using laptime::detail::parse_bool;
  using laptime::detail::parse_int;
  CHECK(parse_bool("TRUE") == true);
  CHECK(parse_bool("off") == false);
  CHECK_FALSE(parse_bool("2").has_value());
  CHECK(parse_int(" 42 ") == 42);
  CHECK_FALSE(parse_int("4x").has_value());
  CHECK_FALSE(parse_int("99999999999").has_value());
  CHECK_FALSE(parse_int("").has_value());
}

TEST_CASE("a malformed or overflowing rank variable is never guessed at: skipped with a warning") {
  auto env = [](std::initializer_list<std::pair<const char*, std::string>> vars) {
    return [vars](const char* name) -> const char* {
      for (const auto& [k, v] : vars) {
        if (std::string(k) == name) return v.c_str();
      }
      return nullptr;
    };
  };
  const std::string hostile[] = {
      " ",           "-1",   "+3",          "0x10",       "1e3",
      "3.0",         "1 2",  "99999999999", "2147483648", "2147483647",
      "-2147483648", "\xff", "\x1b[2J",     "1\n",        std::string(100000, '9')};
  for (const char* var : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"}) {
    for (const std::string& value : hostile) {
      INFO(var);
      CAPTURE(value.substr(0, 20));
      std::vector<std::string> warnings;
      auto r = laptime::detail::detect_rank(env({{var, value}}), &warnings);
      CHECK(r.rank == 0);
      CHECK(r.world_size == 1);
      CHECK(std::string(r.source) == "none");
      REQUIRE(warnings.size() == 1);
      CHECK(warnings[0].rfind(var, 0) == 0);
      CHECK(warnings[0].find('\x1b') == std::string::npos);
      CHECK(warnings[0].size() < 200);
      // The next launcher's variable is used instead.
      warnings.clear();
      r = laptime::detail::detect_rank(env({{var, value}, {"PMI_RANK", "2"}, {"PMI_SIZE", "4"}}),
                                       &warnings);
      if (std::string(var) != "PMI_RANK") {
        CHECK(r.rank == 2);
        CHECK(r.world_size == 4);
        CHECK(warnings.size() == 1);
      }
    }
  }
  for (const auto& [rank_var, size_var] :
       {std::pair{"RANK", "WORLD_SIZE"}, std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        std::pair{"SLURM_PROCID", "SLURM_NTASKS"}, std::pair{"PMI_RANK", "PMI_SIZE"}}) {
    for (const std::string& value : hostile) {
      if (value == "2147483647") continue;  // a valid (if large) world size
      INFO(size_var);
      CAPTURE(value.substr(0, 20));
      std::vector<std::string> warnings;
      const auto r =
          laptime::detail::detect_rank(env({{rank_var, "3"}, {size_var, value}}), &warnings);
      CHECK(r.rank == 3);
      CHECK(r.world_size == 4);  // rank + 1, never a guess from the malformed text
      CHECK(warnings.size() == 1);
    }
    // A world size not above the rank is refused too.
    std::vector<std::string> warnings;
    auto r = laptime::detail::detect_rank(env({{rank_var, "3"}, {size_var, "3"}}), &warnings);
    CHECK(r.world_size == 4);
    CHECK(warnings.size() == 1);
    // The largest rank whose world size is an int.
    warnings.clear();
    r = laptime::detail::detect_rank(env({{rank_var, "2147483646"}}), &warnings);
    CHECK(r.rank == 2147483646);
    CHECK(r.world_size == 2147483647);
    CHECK(warnings.empty());
  }
  // LOCAL_RANK and WORLD_SIZE alone say nothing about the global rank.
  std::vector<std::string> warnings;
  const auto r = laptime::detail::detect_rank(
      env({{"LOCAL_RANK", "\x1b[2J"}, {"WORLD_SIZE", "banana"}}), &warnings);
  CHECK(r.rank == 0);
  CHECK(r.world_size == 1);
  CHECK(warnings.empty());
}

TEST_CASE("integers in the environment are parsed whole, without a sign but '-' or a base") {
  using laptime::detail::parse_int;
  CHECK(parse_int("2147483647") == 2147483647);
  CHECK(parse_int("-2147483648") == -2147483647 - 1);
  for (const char* bad : {"+3", "0x10", "1e3", "3.0", "1 2", "2147483648", "-2147483649", "\t3",
                          "3\n", "", " ", "-", "\xef\xbc\x93"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_int(bad).has_value());
  }
}

TEST_CASE("a report's figures of a name come from its statistics: known data, known figures") {
  IntervalStats st;
  for (std::uint64_t v = 1; v <= 100; ++v) st.add(v * 1000);  // 1 µs .. 100 µs
  laptime::MeasurementResult m;
  laptime::detail::set_host_figures(m, st, /*iterations_measured=*/10);
  CHECK(m.count == 100);
  CHECK(m.total_ns == 5050000.0);
  CHECK(m.mean_per_iter_ns == 505000.0);  // the total over the 10 measured iterations
  CHECK(m.mean_per_interval_ns == 50500.0);
  CHECK(m.min_ns == 1000.0);
  CHECK(m.max_ns == 100000.0);
  CHECK(m.median_ns == doctest::Approx(50000.0).epsilon(0.01));
  CHECK(m.p90_ns == doctest::Approx(90000.0).epsilon(0.01));
  CHECK(m.p99_ns == doctest::Approx(99000.0).epsilon(0.01));

  // No measured iteration yet (all in warm-up): no division by zero, 0 per iteration.
  laptime::detail::set_host_figures(m, st, 0);
  CHECK(m.mean_per_iter_ns == 0.0);
  CHECK(m.total_ns == 5050000.0);

  const laptime::GpuFigures g = laptime::detail::gpu_figures(&st, 4, /*pending=*/3);
  CHECK(g.count == 100);
  CHECK(g.total_ns == 5050000.0);
  CHECK(g.mean_per_iter_ns == 5050000.0 / 4);
  CHECK(g.mean_per_interval_ns == 50500.0);
  CHECK(g.min_ns == 1000.0);
  CHECK(g.max_ns == 100000.0);
  CHECK(g.median_ns == doctest::Approx(50000.0).epsilon(0.01));
  CHECK(g.pending == 3);

  // GPU timing asked for a name whose event pairs have not resolved yet: zeros and the pending.
  const laptime::GpuFigures none = laptime::detail::gpu_figures(nullptr, 4, 2);
  CHECK(none.count == 0);
  CHECK(none.total_ns == 0.0);
  CHECK(none.pending == 2);

  // A tracked name never sampled: every resource figure absent, none made up.
  const laptime::ResourceFigures r = laptime::detail::resource_figures(nullptr);
  CHECK_FALSE(r.process_cores.has_value());
  CHECK_FALSE(r.read_mb_per_s.has_value());
}
