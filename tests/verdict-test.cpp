// The report's bottleneck verdict: the rule on constructed figures (impl/verdict.hpp), and real
// loops: one whose data part sleeps longer than its step, the reverse, and loader workers (child
// processes) that burn CPU during the tracked loop.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "laptime/impl/verdict.hpp"  // pure: tested in the compiled-out build too
#include "laptime/laptime.hpp"
#include "stopwatch_support.hpp"
#include "test_support.hpp"

using laptime::detail::VerdictFigures;

namespace {

VerdictFigures figures(double loop_ms, double data_ms) {
  VerdictFigures f;
  f.loop_ns = loop_ms * 1e6;
  f.data_name = "data fetch";
  f.data_seen = true;
  f.data_ns = data_ms * 1e6;
  return f;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

[[maybe_unused]] void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Keeps the CPU busy for `ms` of wall time.
[[maybe_unused]] void spin_ms(int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  volatile unsigned x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
}

}  // namespace

TEST_CASE("a loop that waits for data most of each iteration is data-bound") {
  const laptime::Verdict v = laptime::detail::verdict(figures(20.0, 12.2));
  CHECK(v.kind == "data-bound");
  REQUIRE(v.data_share);
  CHECK(*v.data_share == doctest::Approx(0.61));
  CHECK(contains(v.text, "data-bound: 61 % of each iteration waits in 'data fetch'"));
  CHECK(contains(v.text, "12.2 ms of 20.0 ms per iteration"));
}

TEST_CASE("a loop whose host step dominates is compute-bound, and says whether the GPU was timed") {
  SUBCASE("no GPU timing") {
    const laptime::Verdict v = laptime::detail::verdict(figures(20.0, 2.0));
    CHECK(v.kind == "compute-bound");
    CHECK(contains(v.text, "the host step takes 90 % of each iteration"));
    CHECK(contains(v.text, "GPU time not measured"));
    CHECK_FALSE(v.gpu_share);
    VerdictFigures off = figures(20.0, 2.0);  // asked for where it cannot run: says why
    off.gpu_timing_off = "CUDA unavailable";
    CHECK(contains(laptime::detail::verdict(off).text, "(GPU timing is off: CUDA unavailable)"));
  }
  SUBCASE("the GPU idles most of the step") {
    VerdictFigures f = figures(20.0, 2.0);
    f.gpu_ns = 5e6;
    f.gpu_name = "step";
    const laptime::Verdict v = laptime::detail::verdict(f);
    CHECK(v.kind == "compute-bound");
    CHECK(contains(v.text, "the GPU is busy 25 % ('step')"));
    CHECK(*v.gpu_share == doctest::Approx(0.25));
  }
  SUBCASE("just below half the iteration in data is still the step's") {
    CHECK(laptime::detail::verdict(figures(20.0, 9.9)).kind == "compute-bound");
    CHECK(laptime::detail::verdict(figures(20.0, 10.0)).kind == "data-bound");
  }
}

TEST_CASE("a loop whose GPU is busy nearly all of the step is GPU-bound") {
  VerdictFigures f = figures(20.0, 1.0);
  f.gpu_ns = 18.6e6;
  f.gpu_name = "step";
  laptime::Verdict v = laptime::detail::verdict(f);
  CHECK(v.kind == "gpu-bound");
  CHECK(contains(v.text, "gpu-bound: the GPU is busy 93 % of each iteration ('step'"));
  // Busy 80 % of the step (the iteration less the data wait) is the threshold.
  f.gpu_ns = 0.8 * 19e6;
  CHECK(laptime::detail::verdict(f).kind == "gpu-bound");
  f.gpu_ns = 0.79 * 19e6;
  CHECK(laptime::detail::verdict(f).kind == "compute-bound");
  // Data-bound first: a GPU busy during the whole step does not hide a longer wait for data.
  f = figures(20.0, 15.0);
  f.gpu_ns = 5e6;
  f.gpu_name = "step";
  CHECK(laptime::detail::verdict(f).kind == "data-bound");
}

TEST_CASE("missing figures give no verdict, with the reason") {
  SUBCASE("no loop time") {
    VerdictFigures f = figures(20.0, 12.0);
    f.loop_ns.reset();
    const laptime::Verdict v = laptime::detail::verdict(f);
    CHECK(v.kind == "none");
    CHECK(contains(v.text, "no verdict: no loop time yet"));
    CHECK_FALSE(v.data_share);
  }
  SUBCASE("no data-wait name") {
    VerdictFigures f = figures(20.0, 0.0);
    f.data_name.clear();
    f.data_seen = false;
    const laptime::Verdict v = laptime::detail::verdict(f);
    CHECK(v.kind == "none");
    CHECK(contains(v.text, "no verdict: no data-wait name"));
    CHECK(contains(v.text, "set_data_name()"));
  }
  SUBCASE("a data-wait name that was never measured") {
    VerdictFigures f = figures(20.0, 0.0);
    f.data_seen = false;
    const laptime::Verdict v = laptime::detail::verdict(f);
    CHECK(v.kind == "none");
    CHECK(contains(v.text, "'data fetch' was never measured"));
  }
}

TEST_CASE("a data-wait name that sums more than the loop is not its wait: no verdict, and why") {
  // A user's OpenMP trainer: 8 threads at once 3 ms each in "data" (24.8 ms summed), then a 20 ms
  // step; the loop took 23.3 ms. It read "data-bound: 100 % ... (23.3 ms of 23.3 ms)".
  laptime::Verdict v = laptime::detail::verdict(figures(23.3, 24.8));
  CHECK(v.kind == "none");
  CHECK_FALSE(v.data_share);
  CHECK(contains(v.text,
                 "no verdict: 'data fetch' sums 24.8 ms per iteration, more than the "
                 "loop's 23.3 ms, so it is not the loop's wait: it was timed on several "
                 "threads or processes at once, or outside the timed iterations"));
  CHECK(contains(v.text, "; time only the loop thread's wait for the batch as 'data fetch'"));
  CHECK_FALSE(contains(v.text, "100 %"));
  // Up to 1 % over the loop: the whole iteration, with the figures measured.
  v = laptime::detail::verdict(figures(20.0, 20.18));
  CHECK(v.kind == "data-bound");
  CHECK(v.data_share == 1.0);
  CHECK(contains(v.text, "100 % of each iteration waits in 'data fetch' (20.2 ms of 20.0 ms"));
  CHECK(laptime::detail::verdict(figures(20.0, 20.3)).kind == "none");
}

TEST_CASE(
    "loader workers are the process tree less the main process; saturated when they fill the "
    "cores the main process leaves") {
  VerdictFigures f = figures(20.0, 12.0);
  f.tree_cores = 8.6;
  f.main_cores = 1.0;
  f.cpu_name = "training loop";
  f.cpus = 16;
  laptime::Verdict v = laptime::detail::verdict(f);
  REQUIRE(v.worker_cores);
  CHECK(*v.worker_cores == doctest::Approx(7.6));
  CHECK(*v.main_cores == doctest::Approx(1.0));
  CHECK(v.workers_saturated == false);
  CHECK(contains(v.text, "loader workers (child processes) use 7.6 of 16 cores (not saturated)"));
  CHECK(contains(v.text, "main process 1.0 (CPU of 'training loop')"));

  VerdictFigures alone = f;  // no child process: no claim about workers that do not exist
  alone.tree_cores = 1.01;
  alone.child_processes = 0.0;
  v = laptime::detail::verdict(alone);
  CHECK(
      contains(v.text, "; no loader worker processes, main process 1.0 (CPU of 'training loop')"));
  CHECK((v.workers == 0 && v.workers_saturated == false));

  f.tree_cores = 14.6;  // 13.6 of the 15 cores left: >= 90 %
  v = laptime::detail::verdict(f);
  CHECK(v.workers_saturated == true);
  CHECK(contains(v.text, "13.6 of 16 cores (saturated: no core left for more)"));

  f.cpus = 0;  // unknown: the cores, but no saturation claim
  v = laptime::detail::verdict(f);
  CHECK_FALSE(v.workers_saturated);
  CHECK(contains(v.text, "use 13.6 cores, main process"));

  // Known worker processes (docs/workers.md): 8 workers using 7.9 of 16 cores are each busy
  // 99 % of the time: saturated, though cores are free.
  f.cpus = 16;
  f.tree_cores = 8.32;
  f.main_cores = 0.4;
  f.workers = 8;
  v = laptime::detail::verdict(f);
  CHECK(v.workers_saturated == true);
  CHECK(contains(v.text,
                 "use 7.9 of 16 cores, 8 workers each busy 99 % of the time (saturated: "
                 "every worker is busy; free cores: more workers would help)"));
  f.tree_cores = 4.4;  // 4.0 cores for 8 workers: half busy
  v = laptime::detail::verdict(f);
  CHECK(v.workers_saturated == false);
  CHECK(contains(v.text, "8 workers each busy 50 % of the time (not saturated)"));
  f.workers = 0;

  // Workers that do not measure with laptime are counted as the live child processes: 8
  // DataLoader workers using 7.4 of 16 cores are each busy 93 % of the time.
  f.tree_cores = 7.84;
  f.main_cores = 0.4;
  f.child_processes = 7.9;  // a mean over the tracked intervals
  v = laptime::detail::verdict(f);
  CHECK(v.workers == 8);
  CHECK(v.workers_saturated == true);
  CHECK(contains(v.text,
                 "use 7.4 of 16 cores, 8 workers each busy 93 % of the time (saturated: "
                 "every worker is busy; free cores: more workers would help)"));
  f.workers = 16;  // those that measure with laptime are the count where known
  v = laptime::detail::verdict(f);
  CHECK(v.workers == 16);
  CHECK(contains(v.text, "16 workers each busy 46 % of the time (not saturated)"));
  f.workers = 0;
  f.child_processes = 0.0;  // counted, none alive at the ends: short-lived, no count, no claim
  v = laptime::detail::verdict(f);
  CHECK((!v.workers && !v.workers_saturated));
  CHECK(contains(v.text, "(short-lived child processes) use 7.4 of 16 cores, main process"));

  f = figures(20.0, 12.0);  // no tracked name: nothing about workers
  v = laptime::detail::verdict(f);
  CHECK_FALSE(v.worker_cores);
  CHECK_FALSE(v.workers);
  CHECK_FALSE(contains(v.text, "workers"));
}

TEST_CASE("the data-wait name: the one set, else the first of the documented default names") {
  using laptime::detail::is_default_data_name;
  for (const char* name : {"data", "Data fetch", "data_fetch", "DATA-LOADING", "data  load",
                           "dataloader", "data_loader", "next batch", "next_batch", "get-batch",
                           "load batch", "data wait", "data time", " data "}) {
    CAPTURE(name);
    CHECK(is_default_data_name(name));
  }
  // The seed's names, and names that merely mention data, are not taken for the wait.
  for (const char* name : {"training loop", "Training step", "IterBasedRunnerWithTime.train",
                           "Optimizer step", "data augmentation", "metadata", "update data", ""}) {
    CAPTURE(name);
    CHECK_FALSE(is_default_data_name(name));
  }
  std::vector<laptime::MeasurementResult> ms(3);
  ms[0].name = "training loop";
  ms[1].name = "Data_Fetch";
  ms[2].name = "data";
  CHECK(laptime::detail::find_data_name(ms, "") == "Data_Fetch");  // first seen
  CHECK(laptime::detail::find_data_name(ms, "training loop") == "training loop");
  ms.erase(ms.begin() + 1, ms.end());
  CHECK(laptime::detail::find_data_name(ms, "").empty());
}

TEST_CASE("the verdict's GPU figure leaves out the data wait and the names that enclose it" *
          LAPTIME_NEEDS_ENABLED) {
  laptime::Results r;
  r.loop = laptime::LoopFigures{};
  r.loop->count = 10;
  r.loop->mean_ns = 20e6;
  r.data_name = "data";
  r.cpus = 4;
  auto add = [&](const char* name, double host_ns, std::optional<double> gpu_ns) {
    laptime::MeasurementResult m;
    m.name = name;
    m.count = 10;
    m.mean_per_iter_ns = host_ns;
    m.total_ns = host_ns * 10;
    if (gpu_ns) {
      m.gpu = laptime::GpuFigures{};
      m.gpu->count = 10;
      m.gpu->mean_per_iter_ns = *gpu_ns;
    }
    r.measurements.push_back(m);
    return &r.measurements.back();
  };
  add("training loop", 20e6, 19.9e6);  // encloses the fetch: its GPU span counts the idle wait
  add("data", 12e6, 11e6);             // the wait itself
  add("step", 8e6, 3e6);
  add("optimizer", 1e6, 0.5e6);
  r.measurements[0].resources = laptime::ResourceFigures{};
  r.measurements[0].resources->process_cores = 3.8;
  r.measurements[0].resources->main_cores = 0.5;
  const VerdictFigures f = laptime::detail::verdict_figures(r);
  CHECK(f.data_seen);
  CHECK(f.data_ns == doctest::Approx(12e6));
  REQUIRE(f.gpu_ns);
  CHECK(f.gpu_name == "step");
  CHECK(*f.gpu_ns == doctest::Approx(3e6));
  CHECK(f.cpu_name == "training loop");
  CHECK(*f.tree_cores == doctest::Approx(3.8));
  const laptime::Verdict v = laptime::detail::verdict_of(r);
  CHECK(v.kind == "data-bound");
  CHECK(v.workers_saturated == true);  // 3.3 of the 3.5 cores left: >= 90 %

  // The renderings: one line in the text, an object in the JSON.
  r.verdict = v;
  const std::string text = r.to_text();
  CHECK(contains(text, "\n  loop (between finish_iter calls): 20.0 ms per iteration"));
  CHECK(contains(text, "\n  verdict: data-bound: 60 % of each iteration waits in 'data'"));
  const std::string json = r.to_json();
  CHECK(contains(json, "\"verdict\": {\"kind\": \"data-bound\", \"text\": \"data-bound: 60 %"));
  CHECK(contains(json,
                 "\"data_name\": \"data\", \"data_share\": 0.6, \"gpu_share\": 0.15, "
                 "\"worker_cores\": 3.3, \"main_cores\": 0.5, \"cpus\": 4, "
                 "\"workers_saturated\": true, \"workers\": null}"));
  CHECK(contains(json, "\"loop\": {\"count\": 10, "));
  CHECK(contains(json, "\"main_cores\": 0.5"));  // the tracked name's cpu object
}

#if LAPTIME_ENABLED

namespace {

// A loop of `iters` iterations after `warmup`: `data_ms` in "data fetch", then `step_ms` in
// "step", both on the loop's thread.
laptime::Results run_loop(int warmup, int iters, int data_ms, int step_ms) {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(warmup);
  for (int i = 0; i < warmup + iters; ++i) {
    sw.start_meas("data fetch");
    sleep_ms(data_ms);
    sw.end_meas("data fetch");
    sw.start_meas("step");
    sleep_ms(step_ms);
    sw.end_meas("step");
    sw.finish_iter();
  }
  return sw.results();
}

}  // namespace

TEST_CASE("a real loop whose data fetch sleeps longer than its step is data-bound") {
  laptime_test::Fresh fresh;
  const laptime::Results r = run_loop(2, 12, 8, 1);
  REQUIRE(r.loop);
  // Iteration 3 (the first measured) is timed from the finish_iter of iteration 2.
  CHECK(r.loop->count == 12);
  const auto data = laptime_test::find(r, "data fetch");
  const auto step = laptime_test::find(r, "step");
  REQUIRE(data);
  REQUIRE(step);
  // The loop is the two parts plus what little lies between them.
  CHECK(r.loop->mean_ns >= data->mean_per_iter_ns + step->mean_per_iter_ns);
  CHECK(r.loop->mean_ns < 1.5 * (data->mean_per_iter_ns + step->mean_per_iter_ns));
  CHECK(r.data_name == "data fetch");
  REQUIRE(r.verdict);
  CHECK(r.verdict->kind == "data-bound");
  CHECK(*r.verdict->data_share > 0.5);
  CHECK(contains(r.to_text(), "verdict: data-bound: "));
  CHECK(contains(r.to_json(), "\"verdict\": {\"kind\": \"data-bound\""));
}

TEST_CASE("a real loop whose step sleeps longer than its data fetch is compute-bound") {
  laptime_test::Fresh fresh;
  const laptime::Results r = run_loop(1, 12, 1, 8);
  REQUIRE(r.verdict);
  CHECK(r.verdict->kind == "compute-bound");
  CHECK(*r.verdict->data_share < 0.5);
  CHECK(contains(r.verdict->text, "GPU time not measured"));
}

TEST_CASE("the data-wait name set by the program, and LAPTIME_DATA_NAME over it") {
  laptime_test::Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.set_data_name("step");  // nonsense on purpose: the step taken for the wait
  laptime::Results r = run_loop(0, 6, 1, 6);
  CHECK(r.data_name == "step");
  CHECK(r.verdict->kind == "data-bound");
  // The environment's choice wins over the code's, whichever comes first (docs/configuration.md).
  laptime::Settings s;
  s.data_name = "data fetch";
  laptime::apply_settings(s, 0);
  sw.set_data_name("step");
  r = sw.results();
  CHECK(r.data_name == "data fetch");
  CHECK(r.verdict->kind == "compute-bound");
}

TEST_CASE("without a loop time or a data-wait name, the real report says why there is no verdict") {
  laptime_test::Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0);
  sw.start_meas("step");
  sw.end_meas("step");
  sw.finish_iter();  // one iteration: nothing before it to time it from
  laptime::Results r = sw.results();
  CHECK_FALSE(r.loop);
  CHECK(r.verdict->kind == "none");
  CHECK(contains(r.to_text(), "verdict: no verdict: no loop time yet"));
  sw.finish_iter();
  r = sw.results();
  REQUIRE(r.loop);
  CHECK(r.loop->count == 1);
  CHECK(contains(r.verdict->text, "no verdict: no data-wait name"));
  sw.reset();  // drops the loop time with the rest
  CHECK_FALSE(sw.results().loop);
}

namespace {

// `n` child processes that spin (or sleep) until killed; their pids.
std::vector<pid_t> start_workers(int n, bool busy) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      for (;;) {
        if (busy) {
          spin_ms(100);
        } else {
          sleep_ms(100);
        }
      }
    }
    pids.push_back(pid);
  }
  return pids;
}

void stop_workers(const std::vector<pid_t>& pids) {
  for (const pid_t pid : pids) ::kill(pid, SIGKILL);
  for (const pid_t pid : pids) ::waitpid(pid, nullptr, 0);
}

// A loop tracked as "training loop" whose thread sleeps while `workers` run; the verdict.
laptime::Verdict tracked_loop(const std::vector<pid_t>&) {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1);
  sw.track_cpu_usage("training loop");
  for (int i = 0; i < 6; ++i) {
    sw.start_meas("training loop");
    sw.start_meas("data");
    sleep_ms(40);
    sw.end_meas("data");
    sw.end_meas("training loop");
    sw.finish_iter();
  }
  const laptime::Results r = sw.results();
  REQUIRE(r.verdict);
  return *r.verdict;
}

}  // namespace

TEST_CASE(
    "busy loader worker processes show as workers' CPU, a busy thread as the main process's") {
  if (!laptime::resources::sample().tree_cpu_ok) {
    MESSAGE("skipped: /proc gives no process-tree CPU here");
    return;
  }
  laptime::Verdict idle;
  laptime::Verdict busy;
  {
    laptime_test::Fresh fresh;
    const auto pids = start_workers(2, false);
    idle = tracked_loop(pids);
    stop_workers(pids);
  }
  {
    laptime_test::Fresh fresh;
    const auto pids = start_workers(2, true);
    busy = tracked_loop(pids);
    stop_workers(pids);
  }
  INFO("idle: " << idle.text);
  INFO("busy: " << busy.text);
  REQUIRE(idle.worker_cores);
  REQUIRE(busy.worker_cores);
  CHECK(busy.kind == "data-bound");
  CHECK(contains(busy.text, "loader workers (child processes) use "));
  // On a shared machine two spinning children get at least a share of a core (0.5 of 2 cores
  // seen beside four other builds); sleeping ones none.
  CHECK(*busy.worker_cores > 0.15);
  CHECK(*busy.worker_cores > 3 * *idle.worker_cores);
  CHECK(*busy.main_cores < 0.2);  // the loop's thread sleeps
  CHECK(idle.workers_saturated == false);
  // The two children are the workers (the live child processes), and saturation follows the
  // documented rule from the figures the verdict shows.
  CHECK(idle.workers == 2);
  CHECK(busy.workers == 2);
  REQUIRE(busy.workers_saturated);
  CHECK(*busy.workers_saturated == (*busy.worker_cores >= 0.9 * (busy.cpus - *busy.main_cores) ||
                                    *busy.worker_cores >= 0.9 * 2));

  // A busy thread of the main process is the main process's CPU, not a worker's.
  laptime_test::Fresh fresh;
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    while (!stop.load()) spin_ms(10);
  });
  const laptime::Verdict threaded = tracked_loop({});
  stop = true;
  spinner.join();
  INFO("threaded: " << threaded.text);
  CHECK(*threaded.main_cores > 0.15);
  CHECK(*threaded.worker_cores < 0.5 * *threaded.main_cores);
}

#endif  // LAPTIME_ENABLED
