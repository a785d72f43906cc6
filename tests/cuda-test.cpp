// laptime::cuda: the run-time driver layer, the sync and the GPU event timer.
//
// Most of the logic is checked against a fake driver (a table of plain functions that simulate
// contexts, events and a GPU clock), so CI without a GPU tests the pooling, the non-blocking
// resolution and the context handling. Tests that need a real GPU are skipped where there is none;
// tests/gpu/ holds the CUDA programs that measure real kernels on one.
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "laptime/cuda.hpp"
#include "test_support.hpp"

namespace {

bool gpu_here() {
  static const bool here = [] {
    const bool ok = laptime::cuda::driver_available();
    std::fprintf(stderr, "cuda-test: %s; %s\n", laptime::cuda::status().c_str(),
                 ok ? "the test for machines without a driver is skipped"
                    : "the tests that need a CUDA GPU are skipped");
    return ok;
  }();
  return here;
}

// Decorators evaluated at start-up: the summary counts these tests as skipped, and gpu_here()
// prints why once.
#define LAPTIME_NEEDS_GPU doctest::skip(!LAPTIME_ENABLED || !gpu_here())
#define LAPTIME_NEEDS_NO_GPU doctest::skip(!LAPTIME_ENABLED || gpu_here())

}  // namespace

TEST_CASE("a user sync function replaces the context sync, for the whole process" *
          LAPTIME_NEEDS_ENABLED) {
  int calls = 0;
  laptime::cuda::set_sync_function([](void* n) { ++*static_cast<int*>(n); }, &calls);
  CHECK(laptime::cuda::synchronize());
  CHECK(laptime::cuda::synchronize());
  CHECK(calls == 2);
  laptime::cuda::set_sync_function(nullptr, nullptr);  // back to cuCtxSynchronize
  (void)laptime::cuda::synchronize();
  CHECK(calls == 2);
}

TEST_CASE(
    "without a CUDA driver, sync, profiler and GPU timing say unavailable and timing goes on" *
    LAPTIME_NEEDS_NO_GPU) {
  CHECK_FALSE(laptime::cuda::driver_available());
  CHECK(laptime::cuda::status().rfind("unavailable: ", 0) == 0);
  CHECK(laptime::cuda::current_context() == nullptr);
  CHECK_FALSE(laptime::cuda::synchronize());
  CHECK_FALSE(laptime::cuda::synchronize());  // warned once; still no crash
  CHECK_FALSE(laptime::cuda::profiler_start());
  CHECK_FALSE(laptime::cuda::profiler_stop());
  auto& timer = laptime::cuda::GpuEventTimer::instance();
  CHECK_FALSE(timer.available());
  const std::uint32_t token = timer.start(nullptr);
  CHECK(token == laptime::cuda::GpuEventTimer::kInvalid);
  timer.stop(token, nullptr, 7);
  int results = 0;
  CHECK(timer.poll([&](std::uint64_t, std::uint64_t) { ++results; }) == 0);
  timer.drain([&](std::uint64_t, std::uint64_t) { ++results; });
  CHECK(results == 0);
  CHECK(&timer == &laptime::cuda::GpuEventTimer::instance());
}

TEST_CASE("compiled out, CUDA reads as unavailable: nothing syncs, times or loads a driver" *
          doctest::skip(LAPTIME_ENABLED)) {
  CHECK_FALSE(laptime::cuda::driver_available());
  CHECK(laptime::cuda::status() == "unavailable: laptime is compiled out (LAPTIME_DISABLE)");
  CHECK(laptime::cuda::gpu_timing_off_reason() == "laptime is compiled out (LAPTIME_DISABLE)");
  CHECK(laptime::cuda::driver_version() == 0);
  CHECK(laptime::cuda::current_context() == nullptr);
  int calls = 0;
  laptime::cuda::set_sync_function([](void* n) { ++*static_cast<int*>(n); }, &calls);
  CHECK_FALSE(laptime::cuda::synchronize());
  CHECK(calls == 0);  // the sync function is not even kept
  laptime::cuda::set_sync_function(nullptr, nullptr);
  CHECK_FALSE(laptime::cuda::profiler_start());
  CHECK_FALSE(laptime::cuda::profiler_stop());
  auto& timer = laptime::cuda::GpuEventTimer::instance();
  CHECK(&timer == &laptime::cuda::GpuEventTimer::instance());
  CHECK_FALSE(timer.available());
  const std::uint32_t token = timer.start(nullptr);
  CHECK(token == laptime::cuda::GpuEventTimer::kInvalid);
  timer.stop(token, nullptr, 7);
  timer.cancel(token);
  int results = 0;
  CHECK(timer.poll([&](std::uint64_t, std::uint64_t) { ++results; }) == 0);
  timer.drain([&](std::uint64_t, std::uint64_t) { ++results; });
  timer.for_each_pending([&](std::uint64_t) { ++results; });
  CHECK(results == 0);
  CHECK(timer.reserve(8) == 0);
  timer.reset();
  const laptime::cuda::GpuEventTimer::Stats stats = timer.stats();
  CHECK(stats.events_created + stats.contexts + stats.in_flight + stats.pending + stats.resolved +
            stats.dropped + stats.grown_in_start ==
        0);
}

TEST_CASE("with a GPU, the driver is found and a thread with no current context gets no sync" *
          LAPTIME_NEEDS_GPU) {
  CHECK(laptime::cuda::status().rfind("CUDA driver ", 0) == 0);
  CHECK(laptime::cuda::driver_version() >= 11030);
  // A fresh thread has no current context until a framework makes one current (tests/gpu/ checks
  // that the sync then follows it).
  bool synced = true;
  void* ctx = &synced;
  std::uint32_t token = 0;
  std::thread([&] {
    ctx = laptime::cuda::current_context();
    synced = laptime::cuda::synchronize();
    token = laptime::cuda::GpuEventTimer::instance().start(nullptr);
  }).join();
  CHECK(ctx == nullptr);
  CHECK_FALSE(synced);
  CHECK(token == laptime::cuda::GpuEventTimer::kInvalid);
}

#if LAPTIME_ENABLED
namespace cu = laptime::detail::cu;

#if __has_include(<cuda.h>)
#include <cuda.h>
// laptime declares the driver's interface itself (detail/cuda_abi.hpp); here, where the toolkit is
// found, every value and handle is checked against cuda.h's.
static_assert(cu::kSuccess == CUDA_SUCCESS && cu::kErrorDeinitialized == CUDA_ERROR_DEINITIALIZED &&
              cu::kErrorInvalidContext == CUDA_ERROR_INVALID_CONTEXT &&
              cu::kErrorInvalidHandle == CUDA_ERROR_INVALID_HANDLE &&
              cu::kErrorNotReady == CUDA_ERROR_NOT_READY &&
              cu::kErrorContextIsDestroyed == CUDA_ERROR_CONTEXT_IS_DESTROYED);
static_assert(cu::kEventDefault == CU_EVENT_DEFAULT &&
              cu::kEventDisableTiming == CU_EVENT_DISABLE_TIMING &&
              cu::kCaptureNone == CU_STREAM_CAPTURE_STATUS_NONE &&
              cu::kCaptureActive == CU_STREAM_CAPTURE_STATUS_ACTIVE &&
              cu::kProcLegacyStream == CU_GET_PROC_ADDRESS_LEGACY_STREAM &&
              cu::kProcFound == CU_GET_PROC_ADDRESS_SUCCESS &&
              cu::kProcNotFound == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
static_assert(sizeof(cu::Result) == sizeof(CUresult) && sizeof(cu::Context) == sizeof(CUcontext) &&
              sizeof(cu::Stream) == sizeof(CUstream) && sizeof(cu::Event) == sizeof(CUevent) &&
              sizeof(cu::CaptureStatus) == sizeof(CUstreamCaptureStatus) &&
              sizeof(cu::ProcQuery) == sizeof(CUdriverProcAddressQueryResult) &&
              sizeof(cu::ProcFlags) == sizeof(cuuint64_t));
#endif

TEST_CASE("the loader names what went wrong: a missing library, the toolkit's stub driver") {
  const laptime::detail::CudaDriver missing =
      laptime::detail::load_cuda_driver("/nonexistent/libcuda.so.1");
  CHECK_FALSE(missing.available);
  CHECK(missing.status.find("cannot load the CUDA driver /nonexistent/libcuda.so.1") !=
        std::string::npos);

  // The toolkit ships a stub libcuda for linking on machines without a driver: its cuInit fails.
  const char* stubs[] = {"/usr/local/cuda/lib64/stubs/libcuda.so",
                         "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"};
  const char* stub = nullptr;
  for (const char* p : stubs) {
    struct stat st {};
    if (::stat(p, &st) == 0) {
      stub = p;
      break;
    }
  }
  if (stub == nullptr) {
    MESSAGE("part skipped: no CUDA toolkit stub libcuda.so in the usual places");
    return;
  }
  const laptime::detail::CudaDriver d = laptime::detail::load_cuda_driver(stub);
  CHECK_FALSE(d.available);
  CHECK(d.status.find("cuInit failed: CUDA_ERROR_STUB_LIBRARY") != std::string::npos);
}

namespace fake {

// A GPU that runs only when told to: each record stamps the event with the fake GPU clock, and an
// event completes when the test advances "done_until" past its stamp (or something waits on it).
struct Event {
  cu::Context ctx = nullptr;
  unsigned flags = 0;
  bool recorded = false;
  double stamp_ms = 0;
};

struct Driver {
  std::vector<std::unique_ptr<Event>> events;
  double now_ms = 0;       // stamp of the next record
  double done_until = -1;  // events stamped at or before this have completed
  bool capturing = false;
  std::vector<cu::Context> destroyed;
  int creates = 0, records = 0, queries = 0, event_syncs = 0, ctx_syncs = 0, pushes = 0, pops = 0;
  int timing_disabled = 0;  // events created with CU_EVENT_DISABLE_TIMING
};

Driver* g = nullptr;
thread_local cu::Context current = nullptr;
thread_local std::vector<cu::Context> stack;

const auto ctx_a = reinterpret_cast<cu::Context>(std::uintptr_t{0xa000});
const auto ctx_b = reinterpret_cast<cu::Context>(std::uintptr_t{0xb000});

Event* ev(cu::Event e) {
  return reinterpret_cast<Event*>(e);
}
bool dead(cu::Context c) {
  return std::find(g->destroyed.begin(), g->destroyed.end(), c) != g->destroyed.end();
}
bool complete(const Event* e) {
  return e->recorded && e->stamp_ms <= g->done_until;
}

cu::Result ctx_get_current(cu::Context* c) {
  *c = current;
  return cu::kSuccess;
}
cu::Result ctx_push_current(cu::Context c) {
  ++g->pushes;
  stack.push_back(current);
  current = c;
  return cu::kSuccess;
}
cu::Result ctx_pop_current(cu::Context* c) {
  ++g->pops;
  *c = current;
  current = stack.back();
  stack.pop_back();
  return cu::kSuccess;
}
cu::Result ctx_synchronize() {
  if (current == nullptr) return cu::kErrorInvalidContext;
  ++g->ctx_syncs;
  g->done_until = g->now_ms;
  return cu::kSuccess;
}
cu::Result stream_is_capturing(cu::Stream, cu::CaptureStatus* s) {
  *s = g->capturing ? cu::kCaptureActive : cu::kCaptureNone;
  return cu::kSuccess;
}
cu::Result event_create(cu::Event* e, unsigned flags) {
  if (current == nullptr) return cu::kErrorInvalidContext;
  g->events.push_back(std::make_unique<Event>());
  g->events.back()->ctx = current;
  g->events.back()->flags = flags;
  if (flags & cu::kEventDisableTiming) ++g->timing_disabled;
  ++g->creates;
  *e = reinterpret_cast<cu::Event>(g->events.back().get());
  return cu::kSuccess;
}
cu::Result event_destroy(cu::Event) {
  return cu::kSuccess;
}
cu::Result event_record(cu::Event e, cu::Stream) {
  // As the real driver: an event is recorded in its own context (here: with a null stream).
  if (ev(e)->ctx != current) return cu::kErrorInvalidHandle;
  ++g->records;
  ev(e)->recorded = true;
  ev(e)->stamp_ms = g->now_ms;
  return cu::kSuccess;
}
cu::Result event_query(cu::Event e) {
  ++g->queries;
  if (dead(ev(e)->ctx)) return cu::kErrorContextIsDestroyed;
  return complete(ev(e)) ? cu::kSuccess : cu::kErrorNotReady;
}
cu::Result event_synchronize(cu::Event e) {
  ++g->event_syncs;
  g->done_until = std::max(g->done_until, ev(e)->stamp_ms);
  return cu::kSuccess;
}
cu::Result event_elapsed_time(float* ms, cu::Event a, cu::Event b) {
  if (!complete(ev(a)) || !complete(ev(b))) return cu::kErrorNotReady;
  *ms = static_cast<float>(ev(b)->stamp_ms - ev(a)->stamp_ms);
  return cu::kSuccess;
}

laptime::detail::CudaDriverApi api() {
  laptime::detail::CudaDriverApi a;
  a.ctx_synchronize = ctx_synchronize;
  a.ctx_get_current = ctx_get_current;
  a.ctx_push_current = ctx_push_current;
  a.ctx_pop_current = ctx_pop_current;
  a.stream_is_capturing = stream_is_capturing;
  a.event_create = event_create;
  a.event_destroy = event_destroy;
  a.event_record = event_record;
  a.event_query = event_query;
  a.event_synchronize = event_synchronize;
  a.event_elapsed_time = event_elapsed_time;
  return a;  // get_error_name stays null: laptime names errors itself then
}

// One fresh fake GPU per test case, with ctx_a current on the test's thread.
struct Fixture {
  Fixture() {
    g = &driver;
    current = ctx_a;
    stack.clear();
  }
  ~Fixture() {
    g = nullptr;
    current = nullptr;
  }
  Driver driver;
  laptime::detail::CudaDriverApi table = api();
};

}  // namespace fake

using laptime::cuda::GpuEventTimer;
using Results = std::map<std::uint64_t, std::uint64_t>;  // tag -> gpu_ns

TEST_CASE_FIXTURE(fake::Fixture,
                  "GPU intervals reuse pooled events: none is created per interval") {
  GpuEventTimer timer(&table);
  CHECK(timer.reserve(8) >= 8);  // ahead of time, as at setup
  CHECK(driver.creates >= 16);
  Results got;
  int created_after_warmup = 0;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    if (i == 10) created_after_warmup = driver.creates;
    const std::uint32_t t = timer.start(nullptr);
    REQUIRE(t != GpuEventTimer::kInvalid);
    driver.now_ms += 1.5;  // the "kernel"
    timer.stop(t, nullptr, i);
    driver.done_until = driver.now_ms;
    CHECK(timer.poll([&](std::uint64_t tag, std::uint64_t ns) { got[tag] = ns; }) == 0);
  }
  CHECK(got.size() == 1000);
  CHECK(got[999] == 1500000);
  CHECK(driver.creates == created_after_warmup);  // recycled, never created per interval
  CHECK(driver.records == 2000);
  CHECK(driver.timing_disabled == 0);  // every event can time
  CHECK(driver.event_syncs == 0);
  CHECK(driver.ctx_syncs == 0);
  const GpuEventTimer::Stats s = timer.stats();
  CHECK(s.resolved == 1000);
  CHECK(s.grown_in_start == 0);  // growth happened ahead (reserve) or between intervals (poll)
  CHECK(s.events_created == static_cast<std::size_t>(driver.creates));
}

TEST_CASE_FIXTURE(
    fake::Fixture,
    "poll never blocks: unfinished pairs pend, finished ones bring tag and GPU time") {
  GpuEventTimer timer(&table);
  for (std::uint64_t tag = 1; tag <= 3; ++tag) {
    const std::uint32_t t = timer.start(nullptr);
    driver.now_ms += static_cast<double>(tag);  // 1, 2 and 3 ms of GPU work
    timer.stop(t, nullptr, tag);
  }
  Results got;
  auto record = [&](std::uint64_t tag, std::uint64_t ns) { got[tag] = ns; };
  CHECK(timer.poll(record) == 3);  // the GPU has not run yet
  CHECK(got.empty());
  driver.done_until = 3.0;  // the first two pairs are done
  CHECK(timer.poll(record) == 1);
  CHECK(got == Results{{1, 1000000}, {2, 2000000}});
  CHECK(driver.event_syncs == 0);  // nothing waited
  CHECK(driver.ctx_syncs == 0);
  timer.drain(record);  // report time: waits for the rest
  CHECK(got == Results{{1, 1000000}, {2, 2000000}, {3, 3000000}});
  CHECK(driver.event_syncs == 2);  // the pending pair's start and end
  CHECK(timer.stats().pending == 0);
  CHECK(timer.poll(record) == 0);
}

TEST_CASE_FIXTURE(fake::Fixture,
                  "poll queries one unfinished pair per stream, however far the GPU lags") {
  GpuEventTimer timer(&table);
  const auto s1 = reinterpret_cast<void*>(std::uintptr_t{0x51});
  const auto s2 = reinterpret_cast<void*>(std::uintptr_t{0x52});
  for (std::uint64_t tag = 0; tag < 20; ++tag) {  // two streams, interleaved, 1 ms each
    void* s = tag % 2 == 0 ? s1 : s2;
    const std::uint32_t t = timer.start(s);
    driver.now_ms += 1.0;
    timer.stop(t, s, tag);
  }
  Results got;
  auto record = [&](std::uint64_t tag, std::uint64_t ns) { got[tag] = ns; };
  CHECK(timer.poll(record) == 20);
  CHECK(driver.queries == 2);  // the oldest pair of each stream, not all 20
  driver.queries = 0;
  driver.done_until = 6.0;  // pairs 0..5 have ended
  CHECK(timer.poll(record) == 14);
  CHECK(got.size() == 6);
  CHECK(driver.queries == 8);  // 6 finished + the first unfinished pair of each stream
  timer.drain(record);
  CHECK(got.size() == 20);
  CHECK(got[19] == 1000000);
}

TEST_CASE_FIXTURE(fake::Fixture,
                  "events belong to the context current at start; each context has its pool") {
  GpuEventTimer timer(&table);
  const std::uint32_t in_a = timer.start(nullptr);
  REQUIRE(in_a != GpuEventTimer::kInvalid);
  fake::current = fake::ctx_b;  // the framework switched devices
  const std::uint32_t in_b = timer.start(nullptr);
  REQUIRE(in_b != GpuEventTimer::kInvalid);
  CHECK(timer.stats().contexts == 2);
  // The pair started in ctx_a is stopped while ctx_b is current: laptime records its end event in
  // ctx_a (the fake driver refuses a record in a foreign context, as the real one does).
  timer.stop(in_a, nullptr, 1);
  CHECK(driver.pushes == 1);
  CHECK(driver.pops == 1);
  CHECK(fake::current == fake::ctx_b);  // restored
  timer.stop(in_b, nullptr, 2);
  CHECK(driver.pushes == 1);  // already current: no push
  for (const auto& e : driver.events) {
    if (e->recorded) CHECK((e->ctx == fake::ctx_a || e->ctx == fake::ctx_b));
  }
  Results got;
  timer.drain([&](std::uint64_t tag, std::uint64_t ns) { got[tag] = ns; });
  CHECK(got.size() == 2);
  CHECK(timer.stats().dropped == 0);
}

TEST_CASE_FIXTURE(fake::Fixture,
                  "no current context or a capturing stream: no GPU time, and nothing breaks") {
  GpuEventTimer timer(&table);
  fake::current = nullptr;
  CHECK(timer.start(nullptr) == GpuEventTimer::kInvalid);
  timer.stop(GpuEventTimer::kInvalid, nullptr, 1);  // ignored
  CHECK(timer.reserve(4) == 0);
  fake::current = fake::ctx_a;
  driver.capturing = true;  // a CUDA graph capture: events would become graph nodes
  CHECK(timer.start(nullptr) == GpuEventTimer::kInvalid);
  driver.capturing = false;
  CHECK(timer.start(nullptr) != GpuEventTimer::kInvalid);
  CHECK(driver.records == 1);
}

TEST_CASE_FIXTURE(fake::Fixture,
                  "cancel and reset return pairs to the pool; bad tokens are ignored") {
  GpuEventTimer timer(&table);
  const std::uint32_t t = timer.start(nullptr);
  CHECK(timer.stats().in_flight == 1);
  timer.cancel(t);
  CHECK(timer.stats().in_flight == 0);
  timer.stop(t, nullptr, 1);  // already returned: warned, ignored
  CHECK(timer.stats().pending == 0);
  const std::uint32_t u = timer.start(nullptr);
  timer.stop(u, nullptr, 2);
  CHECK(timer.stats().pending == 1);
  timer.reset();  // e.g. Stopwatch::reset(): the unresolved result is dropped
  CHECK(timer.stats().pending == 0);
  driver.done_until = driver.now_ms;
  int results = 0;
  CHECK(timer.poll([&](std::uint64_t, std::uint64_t) { ++results; }) == 0);
  CHECK(results == 0);
  const int created = driver.creates;
  for (int i = 0; i < 100; ++i) {
    const std::uint32_t v = timer.start(nullptr);
    timer.stop(v, nullptr, 3);
    driver.done_until = driver.now_ms;
    (void)timer.poll([](std::uint64_t, std::uint64_t) {});
  }
  CHECK(driver.creates == created);
}

TEST_CASE_FIXTURE(fake::Fixture, "pairs whose context was destroyed are dropped, never reused") {
  GpuEventTimer timer(&table);
  const std::uint32_t t = timer.start(nullptr);
  timer.stop(t, nullptr, 1);
  driver.destroyed.push_back(fake::ctx_a);  // e.g. the framework reset the device
  int results = 0;
  CHECK(timer.poll([&](std::uint64_t, std::uint64_t) { ++results; }) == 0);
  CHECK(results == 0);
  CHECK(timer.stats().dropped == 1);
}

TEST_CASE_FIXTURE(fake::Fixture, "pools grow in batches, and poll tops them up between intervals") {
  GpuEventTimer timer(&table);
  std::vector<std::uint32_t> open;
  for (int i = 0; i < 60; ++i) open.push_back(timer.start(nullptr));  // no reserve: grows
  CHECK(timer.stats().grown_in_start == 2);                           // two batches of 32 pairs
  for (std::uint32_t t : open) timer.stop(t, nullptr, 0);
  (void)timer.poll([](std::uint64_t, std::uint64_t) {});  // GPU not done: pool is low, top up
  const std::size_t grown = timer.stats().grown_in_start;
  for (int i = 0; i < 16; ++i) open.push_back(timer.start(nullptr));
  CHECK(timer.stats().grown_in_start == grown);  // served from the top-up
}

TEST_CASE_FIXTURE(fake::Fixture,
                  "the context sync syncs the current context, or warns without one") {
  CHECK(laptime::detail::cuda_synchronize_context(table));
  CHECK(driver.ctx_syncs == 1);
  fake::current = nullptr;
  CHECK_FALSE(laptime::detail::cuda_synchronize_context(table));  // warned once
  CHECK(driver.ctx_syncs == 1);
}

#endif  // LAPTIME_ENABLED
