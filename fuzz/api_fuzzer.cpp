// libFuzzer target: random sequences of laptime's public API, from one thread or from two, with
// odd arguments and names (empty, very long, not UTF-8, embedded NUL, the same buffer reused for
// different text), checked after every step against a model of what the Stopwatch and the NVTX
// wrapper must do (docs/stopwatch.md and docs/nvtx.md; the JSON's keys: docs/python.md):
//
//   - every error is a laptime::UsageError, raised exactly when the model says the call is misuse
//     (anything else thrown: __builtin_trap), and a failed call changes nothing;
//   - a name's count equals its completed intervals after warm-up; iterations, one-time
//     measurements, running flags and tracked figures agree with the model; statistics are
//     ordered (min <= median <= p90 <= p99 <= max) and never negative;
//   - to_json() is strict JSON in valid UTF-8, and its counts are those of results().
//
// Input: byte 0 picks the mode (one thread or two, NVTX settings fuzzed or fixed); the rest is a
// stream of operations, an opcode byte followed by its arguments (two threads: the stream is cut
// in halves, one per thread). scripts/fuzz.sh builds and runs it; fuzz/corpus holds seeds.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "laptime/laptime.hpp"
#include "reliability_support.hpp"

namespace {

#define FUZZ_CHECK(cond)                                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "api_fuzzer: check failed at line %d: %s\n", __LINE__, #cond); \
      __builtin_trap();                                                                   \
    }                                                                                     \
  } while (0)

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}
  bool empty() const { return p_ >= end_; }
  std::uint8_t byte() { return empty() ? 0 : *p_++; }
  std::string bytes(std::size_t n) {
    n = std::min<std::size_t>(n, static_cast<std::size_t>(end_ - p_));
    std::string out(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return out;
  }

 private:
  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

// Names a user may pass: ordinary, empty, embedded NUL, not UTF-8, overlong and surrogate forms,
// control characters and JSON's special characters, a valid multi-byte name, a very long one.
const std::vector<std::string>& dictionary() {
  static const std::vector<std::string> names = {
      "step",
      "",
      std::string("a\0b", 3),
      std::string("\0", 1),
      "\xff\xfe",
      "\xc0\xaf",
      "\xed\xa0\x80",
      "\xc3\xa9t\xc3\xa9 \xf0\x9f\x9a\x80",
      "line\nbreak\t\"quote\\ \x7f",
      "data fetch",
      std::string(5000, 'x'),
      "\xe2\x82",
  };
  return names;
}

// A name from the input. Half of the time it is passed from one reused buffer, so that different
// texts arrive at the same address (the Stopwatch caches names by address and length).
struct NamePicker {
  std::string scratch = std::string(8192, '\0');

  std::string pick(Reader& in, const std::string& prefix = "") {
    const std::uint8_t b = in.byte();
    std::string name;
    if (b >= 0xf0) {
      name = in.bytes(in.byte() % 48);  // fresh bytes: anything at all
    } else {
      name = dictionary()[b % dictionary().size()];
    }
    return prefix + name;
  }

  std::string_view view(const std::string& name, Reader& in) {
    if ((in.byte() & 1) == 0 || name.size() > scratch.size()) return name;
    std::memcpy(scratch.data(), name.data(), name.size());
    return std::string_view(scratch.data(), name.size());
  }
};

bool is_names_limit(const laptime::UsageError& e) {
  return std::strstr(e.what(), "LAPTIME_MAX_NAMES") != nullptr;
}

// Runs `f`, which the model says must fail (`misuse`) or succeed. A UsageError must name laptime
// and the thread. Returns whether the call succeeded. Beyond LAPTIME_MAX_NAMES distinct names
// (the fuzzer makes many), a call with a new name fails, which the caller's model allows when
// `may_hit_limit`.
template <class F>
bool expect(bool misuse, bool may_hit_limit, F&& f) {
  try {
    f();
  } catch (const laptime::UsageError& e) {
    FUZZ_CHECK(std::strncmp(e.what(), "laptime: ", 9) == 0);
    FUZZ_CHECK(std::strstr(e.what(), "[thread ") != nullptr);
    if (!(misuse || (may_hit_limit && is_names_limit(e))))
      std::fprintf(stderr, "unexpected: %s\n", e.what());
    FUZZ_CHECK(misuse || (may_hit_limit && is_names_limit(e)));
    return false;
  } catch (...) {
    __builtin_trap();  // only laptime::UsageError may come out of laptime
  }
  FUZZ_CHECK(!misuse);
  return true;
}

void count_print(const char*, std::size_t size, void* user) {
  FUZZ_CHECK(size > 0);
  ++*static_cast<long*>(user);
}

// to_json of `r` is strict JSON, and its measurements match r's.
void check_json(const laptime::Results& r, const std::string& text) {
  std::string error;
  const auto json = reliability::parse_json(text, &error);
  if (!json) {
    std::fprintf(stderr, "api_fuzzer: invalid JSON (%s)\n", error.c_str());
    __builtin_trap();
  }
  FUZZ_CHECK(reliability::utf8_valid(text));
  const reliability::Json* ms = json->get("measurements");
  FUZZ_CHECK(ms != nullptr && ms->is_array());
  FUZZ_CHECK(ms->array.size() == r.measurements.size());
  for (std::size_t i = 0; i < r.measurements.size(); ++i) {
    const reliability::Json& m = ms->array[i];
    const reliability::Json* count = m.get("count");
    FUZZ_CHECK(count != nullptr && count->number == static_cast<double>(r.measurements[i].count));
    const reliability::Json* name = m.get("name");
    FUZZ_CHECK(name != nullptr && name->is_string());
    if (reliability::utf8_valid(r.measurements[i].name)) {
      FUZZ_CHECK(name->string == r.measurements[i].name);
    }
  }
  const reliability::Json* one_time = json->get("one_time");
  FUZZ_CHECK(one_time != nullptr && one_time->array.size() == r.one_time.size());
  const reliability::Json* iters = json->get("iterations_measured");
  FUZZ_CHECK(iters != nullptr && iters->number == static_cast<double>(r.iterations_measured));
}

// What holds for any snapshot: ordered, non-negative statistics; JSON and text render it.
// `quiescent`: no other thread is measuring. A live snapshot reads each thread's count, total,
// min and max as separate relaxed counters (docs/design.md), so its mean may be off by the
// interval being added while it reads; only a quiescent one must have min <= mean <= max.
void check_results_shape(const laptime::Results& r, bool quiescent = true) {
  std::set<std::string> names;
  for (const auto& m : r.measurements) {
    FUZZ_CHECK(names.insert(m.name).second);  // each name once
    FUZZ_CHECK(m.running >= 0);
    FUZZ_CHECK(m.total_ns >= 0);
    if (m.count > 0) {
      FUZZ_CHECK(m.min_ns >= 0);
      FUZZ_CHECK(m.min_ns <= m.median_ns && m.median_ns <= m.p90_ns && m.p90_ns <= m.p99_ns &&
                 m.p99_ns <= m.max_ns);
      if (quiescent) {
        FUZZ_CHECK(m.mean_per_interval_ns >= m.min_ns * 0.999999 &&
                   m.mean_per_interval_ns <= m.max_ns * 1.000001 + 1);
      }
    }
  }
  FUZZ_CHECK(r.iterations_measured >= 0);
  check_json(r, r.to_json());
  const std::string text = r.to_text();
  FUZZ_CHECK(text.rfind("laptime stopwatch: ", 0) == 0);
}

// ---------------------------------------------------------------------------------------------
// One thread: the exact model.

struct StopwatchModel {
  bool configured = false;
  bool enabled = false;
  int warmup = 0;       // what enable() asked for last
  int gate_warmup = 0;  // the warm-up in force: one that was done stays until reset()
  std::optional<int> every;
  bool cuda_sync = false;
  bool gpu_timing = false;
  std::int64_t finished = 0;
  std::map<std::string, std::uint64_t> count;
  std::set<std::string> seen, running, tracked;
  std::set<std::string> stale;  // running when their enable/reset period ended
  bool ever_enabled = false;    // after a disable() calls are remembered, before enable() not
  void drop_running() {
    stale.insert(running.begin(), running.end());
    running.clear();
  }
  std::vector<std::pair<std::string, bool>> one_time;  // name, running
  // One-time names running at a reset(): the next end of each is dropped without an error.
  std::vector<std::string> one_time_dropped;
};

struct NvtxModel {
  bool enabled = false;
  std::uint32_t flags = 0;  // 1 sync_push, 2 sync_pop, 4 track
  std::string domain;
  std::vector<std::string> stack;
  bool track() const { return (flags & 4) != 0; }
};

constexpr std::uint32_t kCanonicalNvtx = 4;  // order tracking on, no syncs, global domain
NvtxModel g_nvtx;                            // the wrapper's state between inputs
long g_nvtx_resets = 0;
constexpr long kMaxNvtxResets = 20000;  // each leaves a small session behind (never freed)

void nvtx_enable(const NvtxModel& want) {
  laptime::NVTXOptions options;
  options.domain = want.domain;
  laptime::NVTXRangeWrapper::instance().enable((want.flags & 1) != 0, (want.flags & 2) != 0,
                                               (want.flags & 4) != 0, options);
}

void nvtx_reset() {
  laptime::detail::nvtx_reset_for_testing();
  g_nvtx = NvtxModel();
  ++g_nvtx_resets;
}

void check_against_model(const laptime::Results& r, const StopwatchModel& m) {
  check_results_shape(r);
  FUZZ_CHECK(r.iterations_finished == m.finished);
  FUZZ_CHECK(r.iterations_measured == std::max<std::int64_t>(0, m.finished - r.num_warmup_iters));
  FUZZ_CHECK(r.num_warmup_iters == m.gate_warmup);
  FUZZ_CHECK(r.measurements.size() == m.seen.size());
  for (const auto& x : r.measurements) {
    FUZZ_CHECK(m.seen.count(x.name) == 1);
    const auto it = m.count.find(x.name);
    FUZZ_CHECK(x.count == (it == m.count.end() ? 0 : it->second));
    FUZZ_CHECK(x.running == (m.running.count(x.name) ? 1 : 0));
    FUZZ_CHECK(x.resources.has_value() == (m.tracked.count(x.name) == 1));
    // GPU timing on: a GPU figure, or (no driver here) none and the reason once, at the top.
    if (m.gpu_timing)
      FUZZ_CHECK(x.gpu.has_value() || (x.gpu_unavailable && !r.gpu_timing_off.empty()));
    FUZZ_CHECK(!(x.gpu.has_value() && x.gpu_unavailable));
  }
  FUZZ_CHECK(r.one_time.size() == m.one_time.size());
  for (std::size_t i = 0; i < r.one_time.size(); ++i) {
    FUZZ_CHECK(r.one_time[i].name == m.one_time[i].first);
    FUZZ_CHECK(r.one_time[i].running == m.one_time[i].second);
    FUZZ_CHECK(r.one_time[i].duration_ns >= 0);
  }
}

void run_single(Reader& in, bool fuzz_nvtx_settings) {
  auto& sw = laptime::Stopwatch::instance();
  auto& nvtx = laptime::NVTXRangeWrapper::instance();
  StopwatchModel m;
  NamePicker names;
  long printed = 0;
  sw.set_print_function(&count_print, &printed);

  for (int step = 0; step < 512 && !in.empty(); ++step) {
    const std::uint8_t op = in.byte() % 20;
    switch (op) {
      case 0: {  // enable, with odd arguments
        static const int kWarmups[] = {0, 1, 2, 3, -1, 7};
        static const int kEvery[] = {1, 2, 5, 0, -3};
        const std::uint8_t a = in.byte();
        const int warmup = kWarmups[a % 6];
        const std::optional<int> every =
            (a & 0x40) ? std::optional<int>(kEvery[(a >> 3) % 5]) : std::nullopt;
        const bool sync = (a & 0x80) != 0;
        const bool bad = warmup < 0 || (every && *every < 0);
        // print_every_n_iters = 0 means never, the same as std::nullopt
        const std::optional<int> every_rule = every && *every == 0 ? std::nullopt : every;
        const bool same =
            m.configured && m.warmup == warmup && m.every == every_rule && m.cuda_sync == sync;
        const bool misuse = bad || (m.configured && !same);
        if (expect(misuse, false, [&] { sw.enable(warmup, every, sync); }) && !m.configured) {
          m.configured = m.enabled = m.ever_enabled = true;
          m.warmup = warmup;
          // Past a warm-up that was done, the warm-up in force stays (measured iterations stay
          // measured); a shorter one while it runs ends it where it is.
          if (m.finished <= m.gate_warmup) {
            m.gate_warmup = static_cast<int>(std::max<std::int64_t>(warmup, m.finished));
          }
          m.every = every_rule;
          m.cuda_sync = sync;
          m.drop_running();  // a new enable period
        }
        FUZZ_CHECK(sw.is_enabled() == m.enabled);
        break;
      }
      case 1: {  // start_meas
        const std::string name = names.pick(in);
        const std::string_view v = names.view(name, in);
        const bool misuse = m.enabled && m.running.count(name) == 1;
        if (expect(misuse, true, [&] { sw.start_meas(v); }) && m.enabled) {
          m.stale.erase(name);  // an interval of an earlier period is dropped
          m.running.insert(name);
          m.seen.insert(name);
        } else if (!m.enabled && m.ever_enabled) {
          // Started while disabled after an enable(): remembered, so that its end after the next
          // enable() is dropped silently (docs/stopwatch.md), as an interval of an ended period.
          m.stale.insert(name);
        }
        break;
      }
      case 2:
      case 3: {  // end_meas: of a running name (op 2) or of any name (op 3)
        std::string name;
        if (op == 2 && !m.running.empty()) {
          auto it = m.running.begin();
          std::advance(it, in.byte() % m.running.size());
          name = *it;
        } else {
          name = names.pick(in);
        }
        const std::string_view v = names.view(name, in);
        // An interval belongs to the enable/reset period it started in: one of an earlier period
        // is dropped silently.
        const bool stale = m.enabled && m.running.count(name) == 0 && m.stale.count(name) == 1;
        const bool misuse = m.enabled && m.running.count(name) == 0 && !stale;
        if (op == 3 && in.byte() % 4 == 0) {  // discard_meas: the same rules, nothing counted;
          // while disabled it does nothing at all (the interval stays of its period)
          if (expect(misuse, true, [&] { sw.discard_meas(v); }) && m.enabled) {
            m.stale.erase(name);
            m.running.erase(name);
          }
          break;
        }
        if (!m.enabled && m.ever_enabled) m.stale.erase(name);  // ended while disabled: cleared
        if (expect(misuse, true, [&] { sw.end_meas(v); }) && m.enabled) {
          if (stale) {
            m.stale.erase(name);
            break;
          }
          m.running.erase(name);
          m.seen.insert(name);
          if (m.finished >= m.gate_warmup) ++m.count[name];
        }
        break;
      }
      case 4: {  // finish_iter
        const bool misuse = m.enabled && !m.running.empty();
        if (expect(misuse, false, [&] { sw.finish_iter(); }) && m.enabled) ++m.finished;
        FUZZ_CHECK(sw.get_num_nonwarmup_iters_measured() ==
                   std::max<std::int64_t>(0, m.finished - m.gate_warmup));
        break;
      }
      case 5: {  // start_one_time_measurement
        const std::string name = names.pick(in);
        const bool used = std::any_of(m.one_time.begin(), m.one_time.end(),
                                      [&](const auto& o) { return o.first == name; });
        if (expect(m.enabled && used, false,
                   [&] { sw.start_one_time_measurement(names.view(name, in)); }) &&
            m.enabled) {
          m.one_time.emplace_back(name, true);
        }
        break;
      }
      case 6: {  // end_one_time_measurement
        std::string name = names.pick(in);
        if ((in.byte() & 1) && !m.one_time.empty()) name = m.one_time.back().first;
        auto it = std::find_if(m.one_time.begin(), m.one_time.end(),
                               [&](const auto& o) { return o.first == name && o.second; });
        auto dropped = std::find(m.one_time_dropped.begin(), m.one_time_dropped.end(), name);
        if (m.ever_enabled && it == m.one_time.end() && dropped != m.one_time_dropped.end()) {
          FUZZ_CHECK(expect(false, false, [&] { sw.end_one_time_measurement(name); }));
          m.one_time_dropped.erase(dropped);
          break;
        }
        // Kept across disable(): ended while disabled it is counted; none running while
        // disabled is no error.
        if (expect(m.enabled && it == m.one_time.end(), false,
                   [&] { sw.end_one_time_measurement(names.view(name, in)); }) &&
            m.ever_enabled && it != m.one_time.end()) {
          it->second = false;
        }
        break;
      }
      case 7:  // results, checked against the model (a report costs ~100 µs: not every step)
        check_against_model(sw.results(), m);
        break;
      case 9: {  // to_json and the report straight from the Stopwatch
        check_json(sw.results(), sw.to_json());
        std::ostringstream os;
        sw.print_eval_times(os);
        // Not enabled and nothing measured: silent, as the seed was.
        FUZZ_CHECK(os.str().empty() ? !sw.is_enabled()
                                    : os.str().rfind("laptime stopwatch: ", 0) == 0);
        break;
      }
      case 10:                          // reset
        if (in.byte() % 4 != 0) break;  // rarely: it wipes what the other steps built
        sw.reset();
        m.drop_running();
        m.finished = 0;
        if (m.configured) m.gate_warmup = m.warmup;  // a new run: the warm-up asked for last
        m.count.clear();
        m.seen.clear();
        for (const auto& o : m.one_time) {
          if (o.second) m.one_time_dropped.push_back(o.first);
        }
        m.one_time.clear();
        break;
      case 11: {  // track_cpu_usage / set_cpu_usage_meas_name (samples /proc: slow, so rarely)
        if (in.byte() % 8 != 0) break;
        const std::string name = names.pick(in);
        if (expect(false, true, [&] { sw.track_cpu_usage(names.view(name, in)); })) {
          m.tracked.insert(name);
        }
        break;
      }
      case 12: {  // disable (results stay), or GPU timing on/off (no driver: one warning)
        const std::uint8_t a = in.byte() % 4;
        if (a == 0) {
          sw.disable();
          m.enabled = m.configured = false;
          m.drop_running();
        } else if (a == 1) {
          sw.enable_gpu_timing();
          m.gpu_timing = true;
        } else if (a == 2) {
          sw.disable_gpu_timing();
          m.gpu_timing = false;
        }
        break;
      }
      case 13: {  // NVTX enable
        NvtxModel want = g_nvtx;
        const std::uint8_t a = in.byte();
        want.flags = fuzz_nvtx_settings ? (a & 7) : kCanonicalNvtx;
        want.domain = fuzz_nvtx_settings && (a & 8) ? "fuzz" : "";
        const bool misuse =
            g_nvtx.enabled && (g_nvtx.flags != want.flags || g_nvtx.domain != want.domain);
        if (expect(misuse, false, [&] { nvtx_enable(want); }) && !g_nvtx.enabled) {
          g_nvtx = want;
          g_nvtx.enabled = true;
        }
        FUZZ_CHECK(nvtx.is_enabled() == g_nvtx.enabled);
        break;
      }
      case 14: {  // range_push
        const std::string name = names.pick(in);
        expect(false, false, [&] { nvtx.range_push(names.view(name, in)); });
        if (g_nvtx.enabled && g_nvtx.track()) g_nvtx.stack.push_back(name);
        break;
      }
      case 15: {  // range_pop()
        const bool misuse = g_nvtx.enabled && g_nvtx.track() && g_nvtx.stack.empty();
        if (expect(misuse, false, [&] { nvtx.range_pop(); }) && g_nvtx.enabled && g_nvtx.track()) {
          g_nvtx.stack.pop_back();
        }
        break;
      }
      case 16:
      case 17: {  // range_pop(expected): the right name (op 16) or any name (op 17)
        std::string name = names.pick(in);
        if (op == 16 && !g_nvtx.stack.empty()) name = g_nvtx.stack.back();
        const bool misuse = g_nvtx.enabled && g_nvtx.track() &&
                            (g_nvtx.stack.empty() || g_nvtx.stack.back() != name);
        if (expect(misuse, false, [&] { nvtx.range_pop(names.view(name, in)); }) &&
            g_nvtx.enabled && g_nvtx.track()) {
          g_nvtx.stack.pop_back();
        }
        break;
      }
      case 18: {  // mark, and scoped ranges and measurements
        const std::string name = names.pick(in);
        nvtx.mark(names.view(name, in));
        if (in.byte() & 1) {
          laptime::NVTXScopedRange range{std::string_view(name)};
        }
        break;
      }
      case 8:
      case 19:  // a full check now and then besides op 7 (a report costs ~100 µs)
        if (step % 8 == 0) check_against_model(sw.results(), m);
        break;
    }
    // After every step: the cheap invariants.
    FUZZ_CHECK(sw.is_enabled() == m.enabled);
    FUZZ_CHECK(nvtx.is_enabled() == g_nvtx.enabled);
    FUZZ_CHECK(sw.get_num_nonwarmup_iters_measured() ==
               std::max<std::int64_t>(0, m.finished - m.gate_warmup));
  }
  check_against_model(sw.results(), m);
  // Leave the NVTX stack empty for the next input.
  if (g_nvtx.enabled && g_nvtx.track()) {
    while (!g_nvtx.stack.empty()) {
      nvtx.range_pop(g_nvtx.stack.back());
      g_nvtx.stack.pop_back();
    }
  }
  sw.set_print_function(nullptr, nullptr);
}

// ---------------------------------------------------------------------------------------------
// Two threads: each runs its own stream against its own part of the model; shared totals are
// checked when both are done. Warm-up is 0, so every completed interval counts.

struct ThreadOutcome {
  std::map<std::string, std::uint64_t> ends;
  std::map<std::string, std::uint64_t> left_running;  // started, never ended, at the thread's exit
  long finished = 0;
  long one_time = 0;
};

void run_thread(Reader in, int index, ThreadOutcome& out) {
  auto& sw = laptime::Stopwatch::instance();
  auto& nvtx = laptime::NVTXRangeWrapper::instance();
  NamePicker names;
  std::set<std::string> running;
  std::vector<std::string> stack;
  std::set<std::string> one_time_names;
  std::map<std::string, std::uint64_t> last_seen;  // counts never go down
  const std::string prefix = index == 0 ? "t0:" : "t1:";
  for (int step = 0; step < 256 && !in.empty(); ++step) {
    switch (in.byte() % 10) {
      case 0: {
        const std::string name = names.pick(in);
        if (expect(running.count(name) == 1, true, [&] { sw.start_meas(names.view(name, in)); })) {
          running.insert(name);
        }
        break;
      }
      case 1: {
        std::string name = names.pick(in);
        if ((in.byte() & 1) && !running.empty()) name = *running.begin();
        // A name not running here may run on the other thread, and end_meas would end it there
        // (it ends the one interval of that name running elsewhere): a misused end takes a name of
        // this thread's own.
        if (running.count(name) == 0) name = prefix + name;
        if (expect(running.count(name) == 0, true, [&] { sw.end_meas(names.view(name, in)); })) {
          running.erase(name);
          ++out.ends[name];
        }
        break;
      }
      case 2:
        if (expect(!running.empty(), false, [&] { sw.finish_iter(); })) ++out.finished;
        break;
      case 3: {  // one-time names of this thread only (they are process-wide)
        const std::string name = names.pick(in, prefix);
        if (expect(one_time_names.count(name) == 1, false,
                   [&] { sw.start_one_time_measurement(name); })) {
          one_time_names.insert(name);
          ++out.one_time;
          expect(false, false, [&] { sw.end_one_time_measurement(name); });
        }
        break;
      }
      case 4: {  // a snapshot while the other thread works
        if (in.byte() % 4 != 0) break;
        const laptime::Results r = sw.results();
        check_results_shape(r, /*quiescent=*/false);
        for (const auto& x : r.measurements) {
          std::uint64_t& last = last_seen[x.name];
          FUZZ_CHECK(x.count >= last);
          last = x.count;
          const auto mine = out.ends.find(x.name);
          FUZZ_CHECK(x.count >= (mine == out.ends.end() ? 0 : mine->second));
          FUZZ_CHECK(x.running >= (running.count(x.name) ? 1 : 0) && x.running <= 2);
        }
        break;
      }
      case 5: {  // the other thread may add names between two snapshots: one at a time
        if (in.byte() % 4 != 0) break;
        std::string error;
        FUZZ_CHECK(reliability::parse_json(sw.to_json(), &error) != nullptr);
        break;
      }
      case 6: {
        const std::string name = names.pick(in);
        nvtx.range_push(names.view(name, in));
        stack.push_back(name);
        break;
      }
      case 7: {
        std::string name = names.pick(in);
        if ((in.byte() & 1) && !stack.empty()) name = stack.back();
        if (expect(stack.empty() || stack.back() != name, false,
                   [&] { nvtx.range_pop(names.view(name, in)); })) {
          stack.pop_back();
        }
        break;
      }
      case 8:
        nvtx.mark(names.pick(in));
        break;
      case 9:
        if (in.byte() % 16 == 0) {
          const std::string name = names.pick(in);
          expect(false, true, [&] { sw.track_cpu_usage(name); });
        }
        break;
    }
  }
  for (const auto& name : running) ++out.left_running[name];
}

void run_two_threads(Reader& in, const std::uint8_t* data, std::size_t size) {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  (void)in;
  const std::size_t half = size / 2;
  ThreadOutcome a, b;
  std::thread t0(run_thread, Reader(data, half), 0, std::ref(a));
  std::thread t1(run_thread, Reader(data + half, size - half), 1, std::ref(b));
  t0.join();
  t1.join();
  const laptime::Results r = sw.results();
  check_results_shape(r);
  std::map<std::string, std::uint64_t> ends = a.ends;
  for (const auto& [name, n] : b.ends) ends[name] += n;
  for (const auto& x : r.measurements) {
    const auto it = ends.find(x.name);
    FUZZ_CHECK(x.count == (it == ends.end() ? 0 : it->second));
    // Both threads have exited: what they left open still runs (another thread may end it).
    const auto left = [&](const ThreadOutcome& o) {
      const auto l = o.left_running.find(x.name);
      return l == o.left_running.end() ? 0 : static_cast<int>(l->second);
    };
    FUZZ_CHECK(x.running == left(a) + left(b));
  }
  for (const auto& e : ends) {
    FUZZ_CHECK(std::any_of(r.measurements.begin(), r.measurements.end(),
                           [&](const auto& x) { return x.name == e.first; }));
  }
  FUZZ_CHECK(r.iterations_finished == a.finished + b.finished);
  FUZZ_CHECK(r.one_time.size() == static_cast<std::size_t>(a.one_time + b.one_time));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  laptime::detail::testing_reset_stopwatch();
  laptime::set_error_policy(laptime::ErrorPolicy::Throw);
  Reader in(data + 1, size - 1);
  const std::uint8_t mode = data[0];
  const bool fuzz_nvtx_settings = mode >= 0xc0 && g_nvtx_resets < kMaxNvtxResets;
  if (fuzz_nvtx_settings) {
    nvtx_reset();  // starts disabled: enable() is fuzzed
  } else if (!g_nvtx.enabled || g_nvtx.flags != kCanonicalNvtx || !g_nvtx.domain.empty()) {
    nvtx_reset();
    g_nvtx.flags = kCanonicalNvtx;
    nvtx_enable(g_nvtx);
    g_nvtx.enabled = true;
  }
  if ((mode & 1) != 0 && !fuzz_nvtx_settings) {
    run_two_threads(in, data + 1, size - 1);
  } else {
    run_single(in, fuzz_nvtx_settings);
  }
  laptime::detail::testing_reset_stopwatch();
  return 0;
}
