// A bad environment gives one clear message and laptime keeps working (docs/reliability.md):
// /proc missing, no CUDA driver, malformed LAPTIME_* variables. What laptime reads at first use
// needs a fresh process: each case runs this binary again as a helper ("--helper MODE",
// environment_helpers.hpp) and checks its output. (Unwritable LAPTIME_OUTPUT paths:
// tests/exit-test.cpp.)
#include <sys/stat.h>

#include <map>
#include <set>
#include <string>
#include <string_view>

#include "environment_helpers.hpp"  // the programs each case runs, and run_helper
#include "laptime/laptime.hpp"
#include "reliability_support.hpp"
#include "test_support.hpp"

using namespace environment_test;

TEST_CASE(
    "without /proc, tracked figures are unavailable (null, n/a) with one warning, and "
    "timing goes on" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::RunResult r;
  const auto json = run_helper("no-proc", {}, r, kIters);
  if (r.exit_code == 77) {
    MESSAGE("skipped: no private mount namespace here (" << r.err << ")");
    return;
  }
  REQUIRE(json != nullptr);
  const reliability::Json* tracked = reliability::find_measurement(*json, "tracked");
  REQUIRE(tracked != nullptr);
  CHECK(tracked->get("count")->number == kIters);
  for (const char* group : {"cpu", "io"}) {
    const reliability::Json* g = tracked->get(group);
    REQUIRE(g != nullptr);
    for (const auto& figure : g->object) {  // not a structured binding: clang 14 cannot capture one
      CAPTURE(figure.first);
      CHECK(figure.second.is_null());
    }
  }
  const std::string report = between(r.out, "--- report\n", "--- json");
  CHECK(report.find("cpu: process tree n/a of machine (n/a cores), system n/a") !=
        std::string::npos);
  CHECK(reliability::lines_with(r.err, "laptime") == 1);
  CHECK(reliability::lines_with(r.err, "laptime: warning: resources: ") == 1);
}

TEST_CASE(
    "without a CUDA driver, CUDA features are unavailable with one warning each, and "
    "timing goes on" *
    LAPTIME_NEEDS_ENABLED) {
  const std::map<std::string, std::string> no_driver = {
      {"LAPTIME_CUDA_DRIVER", "/nonexistent/libcuda.so.1"}};
  reliability::RunResult r;
  // The Stopwatch's and the NVTX wrapper's syncs: one warning.
  CHECK(run_helper("no-cuda-sync", no_driver, r, kIters) != nullptr);
  CHECK(reliability::lines_with(r.err, "laptime") == 1);
  CHECK(reliability::lines_with(r.err,
                                "laptime: warning: CUDA sync requested but CUDA is "
                                "unavailable: cannot load the CUDA driver "
                                "/nonexistent/libcuda.so.1") == 1);
  // Syncs and GPU event timing: one line for each feature that is off, each saying why.
  CHECK(run_helper("no-cuda-sync-timing", no_driver, r, kIters) != nullptr);
  CHECK(reliability::lines_with(r.err, "laptime") == 2);
  CHECK(reliability::lines_with(r.err, "/nonexistent/libcuda.so.1") == 2);
  CHECK(reliability::lines_with(r.err, "GPU event timing requested but CUDA is unavailable") == 1);
  // A FIFO nobody writes to: refused, not waited on forever in dlopen's open().
  reliability::TempDir dir;
  const std::string fifo = dir.file("libcuda.so.1");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(run_helper("no-cuda-sync", {{"LAPTIME_CUDA_DRIVER", fifo}}, r, kIters) != nullptr);
  CHECK(reliability::lines_with(r.err, "(not a file)") == 1);
}

TEST_CASE(
    "a malformed LAPTIME_* variable gives one message naming it, and laptime keeps "
    "working" *
    LAPTIME_NEEDS_ENABLED) {
  struct Case {
    std::map<std::string, std::string> vars;
    const char* named;  // what the one message must contain
    int measured;       // iterations measured after warm-up
  };
  const Case cases[] = {
      {{{"LAPTIME_ON_ERROR", "bogus"}}, "LAPTIME_ON_ERROR='bogus'", kIters},
      {{{"LAPTIME_PROFILE", "evaluation"}, {"LAPTIME_WARMUP", "abc"}},
       "LAPTIME_WARMUP='abc'",
       kIters - 10},  // the default warm-up (10) stays
      {{{"LAPTIME_PRINT_AT_EXIT", "maybe"}}, "LAPTIME_PRINT_AT_EXIT='maybe'", kIters},
      {{{"LAPTIME_PROFILE", "fast"}}, "LAPTIME_PROFILE='fast'", kIters},
      {{{"LAPTIME_PROFILE", "evaluation"}, {"LAPTIME_PRINT_EVERY", "-3"}},
       "LAPTIME_PRINT_EVERY='-3'",
       kIters - 10},
      {{{"LAPTIME_PROFILE", "evaluation"}, {"LAPTIME_WARMUP", "0"}, {"LAPTIME_STOPWATCH", "2"}},
       "LAPTIME_STOPWATCH='2'",
       kIters},
  };
  for (const Case& c : cases) {
    CAPTURE(std::string(c.named));
    reliability::RunResult r;
    const auto json = run_helper("configure", c.vars, r, c.measured);
    CHECK(reliability::lines_with(r.err, "laptime") == 1);
    CHECK(reliability::lines_with(r.err, c.named) == 1);
    // LAPTIME_PRINT_AT_EXIT=maybe is ignored: no report at exit (the helper prints one itself).
    CHECK(reliability::count_of(r.out, "laptime stopwatch: ") == 1);
  }
}

TEST_CASE(
    "hostile values in the rank and LAPTIME_* variables never throw, never guess, and print "
    "escaped" *
    LAPTIME_NEEDS_ENABLED) {
  std::string names = "step,tracked";
  for (int i = 0; i < LAPTIME_MAX_NAMES + 1000; ++i) names += ",n" + std::to_string(i);
  const std::map<std::string, std::string> vars = {
      {"LAPTIME_PROFILE", "evaluation"},
      {"LAPTIME_TRACK_CPU", names},  // more names than the table holds
      {"RANK", "\x1b[2J0"},
      {"WORLD_SIZE", "-1"},
      {"OMPI_COMM_WORLD_RANK", "99999999999999999999"},
      {"SLURM_PROCID", "0x1"},
      {"PMI_RANK", "1e3"},
      {"LAPTIME_ON_ERROR", "\x1b[31mwarn"},
      {"LAPTIME_WARMUP", "99999999999999999999"},
  };
  reliability::RunResult r;
  const auto json = run_helper("configure", vars, r, kIters - 10);  // the default warm-up
  CHECK(r.err.find('\x1b') == std::string::npos);
  CHECK(r.out.find('\x1b') == std::string::npos);
  for (const char* name : {"RANK=", "OMPI_COMM_WORLD_RANK=", "SLURM_PROCID=", "PMI_RANK=",
                           "LAPTIME_ON_ERROR=", "LAPTIME_WARMUP=", "LAPTIME_TRACK_CPU lists"}) {
    INFO(name);
    CHECK(reliability::lines_with(r.err, std::string("laptime: warning: ") + name) == 1);
  }
  if (json != nullptr) {
    CHECK(json->get("rank")->number == 0);  // the default, not a guess
    CHECK(json->get("world_size")->number == 1);
  }
}

// The booleans read at the first enable (the others, read by configure_from_env, are checked in
// settings-test without a process each).
TEST_CASE(
    "LAPTIME_WORKERS, LAPTIME_PRINT_AT_EXIT and LAPTIME_SIGNAL_HANDLERS take 1/0, true/false, "
    "on/off, yes/no in any case" *
    LAPTIME_NEEDS_ENABLED) {
  const std::pair<const char*, bool> spellings[] = {
      {"1", true},    {"TRUE", true}, {"True", true}, {"ON", true},     {"oN", true},
      {"YES", true},  {"yEs", true},  {"0", false},   {"FALSE", false}, {"fAlSe", false},
      {"OFF", false}, {"Off", false}, {"NO", false},  {"nO", false}};
  reliability::TempDir dir;
  for (const auto& spelling : spellings) {
    const char* text = spelling.first;
    const bool on = spelling.second;
    CAPTURE(text);
    reliability::RunResult r;
    run_helper("first-enable-flags",
               {{"LAPTIME_WORKERS", text},
                {"LAPTIME_PRINT_AT_EXIT", text},
                {"LAPTIME_SIGNAL_HANDLERS", text},
                {"LAPTIME_WORKER_SHARE", ""},
                {"LAPTIME_OUTPUT", dir.file("out.json")}},
               r, kIters);
    CHECK(reliability::lines_with(r.err, "laptime") == 0);
    const std::string flags =
        on ? "flags: workers=1 signal_handlers=1" : "flags: workers=0 signal_handlers=0";
    CHECK_MESSAGE(r.out.find(flags) != std::string::npos, r.out.substr(0, 200));
    // The helper prints the report once; LAPTIME_PRINT_AT_EXIT prints it again at exit.
    CHECK(reliability::count_of(r.out, "laptime stopwatch: ") == (on ? 2 : 1));
  }
}

TEST_CASE(
    "a malformed value of any boolean variable is warned about once, with the same words, and "
    "ignored" *
    LAPTIME_NEEDS_ENABLED) {
  const char* booleans[] = {"LAPTIME_STOPWATCH",        "LAPTIME_CUDA_SYNC",
                            "LAPTIME_PRINT_RANK0_ONLY", "LAPTIME_NVTX",
                            "LAPTIME_NVTX_SYNC_PUSH",   "LAPTIME_NVTX_SYNC_POP",
                            "LAPTIME_NVTX_CHECK_ORDER", "LAPTIME_NVTX_COUNTERS",
                            "LAPTIME_NVTX_RANGES",      "LAPTIME_PRINT_AT_EXIT",
                            "LAPTIME_SIGNAL_HANDLERS",  "LAPTIME_WORKERS"};
  std::map<std::string, std::string> vars = {{"LAPTIME_WORKER_SHARE", ""}};
  for (const char* name : booleans) vars[name] = "maybe";
  reliability::RunResult r;
  run_helper("configure", vars, r, kIters);
  std::set<std::string> reasons;  // what follows the value: one text for every boolean
  for (const char* name : booleans) {
    CAPTURE(name);
    const std::string named = std::string("laptime: warning: ") + name + "='maybe' ";
    CHECK(reliability::lines_with(r.err, named) == 1);
    const auto at = r.err.find(named);
    if (at != std::string::npos) {
      const auto begin = at + named.size();
      reasons.insert(r.err.substr(begin, r.err.find('\n', begin) - begin));
    }
  }
  CHECK(reliability::lines_with(r.err, "laptime") == static_cast<int>(std::size(booleans)));
  CHECK_MESSAGE(reasons.size() == 1, r.err);
  CHECK(reasons.begin()->find("yes/no") != std::string::npos);
  // Ignored: the workers' shared file stays on (its default), no report at exit.
  CHECK(reliability::count_of(r.out, "laptime stopwatch: ") == 1);
}

namespace {
// Every LAPTIME_* variable docs/configuration.md names (macros and CMake options too: setting
// those in the environment is harmless), so that a variable documented later is covered here.
std::set<std::string> documented_variables() {
  const std::string doc =
      reliability::read_file(std::string(LAPTIME_TEST_FIXTURES) + "/../../docs/configuration.md");
  // Each LAPTIME_ followed by capitals, digits and underscores, the trailing underscores dropped
  // (<regex> is not used: GCC 12 warns inside it under the sanitizers' -O1, and -Werror fails).
  std::set<std::string> names;
  const auto word = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  for (std::size_t at = doc.find("LAPTIME_"); at != std::string::npos;
       at = doc.find("LAPTIME_", at + 1)) {
    std::size_t end = at + 8;
    while (end < doc.size() && word(doc[end])) ++end;
    while (end > at + 8 && doc[end - 1] == '_') --end;
    if (end > at + 8) names.insert(doc.substr(at, end - at));
  }
  return names;
}
}  // namespace

TEST_CASE(
    "every variable laptime reads, set to a value holding a terminal escape, reaches stderr and "
    "stdout escaped" *
    LAPTIME_NEEDS_ENABLED) {
  const std::string esc = "\x1b[31m";
  std::set<std::string> names = documented_variables();
  REQUIRE(names.size() > 30);
  for (const char* read_elsewhere :
       {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID",
        "SLURM_NTASKS", "PMI_RANK", "PMI_SIZE", "NVTX_INJECTION64_PATH"}) {
    names.insert(read_elsewhere);
  }
  std::map<std::string, std::string> vars;
  for (const std::string& name : names) vars[name] = esc + "1";
  reliability::TempDir dir;
  // Values that are taken and then echoed: paths that cannot be opened, names.
  vars["LAPTIME_OUTPUT"] = dir.file("no" + esc + "such/out.json");
  vars["LAPTIME_CUDA_DRIVER"] = "/nonexistent/" + esc + "libcuda.so.1";
  vars["LAPTIME_TRACK_CPU"] = "tracked," + esc + "t";
  vars["LAPTIME_DATA_NAME"] = esc + "data";
  vars["LAPTIME_NVTX_DOMAIN"] = esc + "domain";
  // Left alone: what the test's run needs.
  vars.erase("LAPTIME_DISABLE");
  reliability::RunResult r;
  run_helper("configure-everything", vars, r, kIters);
  CHECK_MESSAGE(r.err.find('\x1b') == std::string::npos, r.err);
  CHECK(r.out.find('\x1b') == std::string::npos);
  // The values were read and echoed (escaped), not skipped.
  for (const std::string echoed :
       {"LAPTIME_CLOCK=", "LAPTIME_MAX_NAMES=", "LAPTIME_PRINT_AT_EXIT=",
        "LAPTIME_SIGNAL_HANDLERS=", "LAPTIME_WORKERS=", "LAPTIME_ON_ERROR=",
        "/nonexistent/\\u001b[31mlibcuda.so.1", "such/out.json"}) {
    INFO(echoed);
    CHECK(reliability::lines_with(r.err, echoed) >= 1);
  }
  // The free-text variables valid, with the features that use them on: every tool of the
  // debugging profile (the NVTX domain), a tracked name, the data-wait name.
  vars = {{"LAPTIME_PROFILE", "debugging"},
          {"LAPTIME_NVTX_SYNC_PUSH", "1"},
          {"LAPTIME_OUTPUT", dir.file("no" + esc + "such/out.json")},
          {"LAPTIME_CUDA_DRIVER", "/nonexistent/" + esc + "libcuda.so.1"},
          {"LAPTIME_TRACK_CPU", "tracked," + esc + "t"},
          {"LAPTIME_DATA_NAME", esc + "data"},
          {"LAPTIME_NVTX_DOMAIN", esc + "domain"}};
  run_helper("configure-everything", vars, r, kIters);
  CHECK_MESSAGE(r.err.find('\x1b') == std::string::npos, r.err);
  CHECK(r.out.find('\x1b') == std::string::npos);
}

TEST_CASE(
    "LAPTIME_TRACK_CPU never fills the name table: names it does not list are still measured" *
    LAPTIME_NEEDS_ENABLED) {
  std::string list;
  for (int i = 0; i < LAPTIME_MAX_NAMES + 10; ++i) list += "n" + std::to_string(i) + ",";
  SUBCASE("more names than the table holds") {
    reliability::RunResult r;
    run_helper(
        "configure-untracked",
        {{"LAPTIME_PROFILE", "evaluation"}, {"LAPTIME_WARMUP", "0"}, {"LAPTIME_TRACK_CPU", list}},
        r, kIters);
    CHECK(reliability::lines_with(r.err, "laptime") == 1);
    CHECK(reliability::lines_with(r.err, "LAPTIME_TRACK_CPU") == 1);
    CHECK(reliability::lines_with(r.err, "256") == 1);                  // the bound, named
    CHECK(r.out.find("track_cpu applied=256\n") != std::string::npos);  // what was applied
  }
  SUBCASE("more names than half the run-time limit (LAPTIME_MAX_NAMES=100)") {
    reliability::RunResult r;
    run_helper("configure-untracked",
               {{"LAPTIME_PROFILE", "evaluation"},
                {"LAPTIME_WARMUP", "0"},
                {"LAPTIME_MAX_NAMES", "100"},
                {"LAPTIME_TRACK_CPU", list}},
               r, kIters);
    // One warning, naming the bound that holds (half of 100), and configure_from_env returns
    // the 50 names it applied, not the 256 it read.
    CHECK(reliability::lines_with(r.err, "laptime") == 1);
    CHECK(reliability::lines_with(r.err, "LAPTIME_TRACK_CPU") == 1);
    CHECK(reliability::lines_with(r.err, "50") == 1);
    CHECK(r.out.find("track_cpu applied=50\n") != std::string::npos);
  }
  SUBCASE("LAPTIME_GPU_TIMING: more names than a quarter of LAPTIME_MAX_NAMES=100") {
    std::string gpu;
    for (int i = 0; i < 30; ++i) gpu += (i != 0 ? "," : "") + ("g" + std::to_string(i));
    reliability::RunResult r;
    run_helper("configure-untracked",
               {{"LAPTIME_PROFILE", "evaluation"},
                {"LAPTIME_WARMUP", "0"},
                {"LAPTIME_MAX_NAMES", "100"},
                {"LAPTIME_GPU_TIMING", gpu}},
               r, kIters);
    // The first 25 are kept (not the whole list ignored), with one warning naming the variable.
    CHECK(reliability::lines_with(r.err, "laptime") == 1);
    CHECK(reliability::lines_with(r.err, "LAPTIME_GPU_TIMING") == 1);
    CHECK(r.out.find("gpu_timing_names applied=25\n") != std::string::npos);
  }
}

TEST_CASE(
    "a huge LAPTIME_RECORD or enable_recording is clamped to its bound with one warning, and "
    "measuring never throws" *
    LAPTIME_NEEDS_ENABLED) {
  struct Case {
    const char* mode;
    std::map<std::string, std::string> vars;
    const char* named;
  };
  const Case cases[] = {{"configure-untracked",
                         {{"LAPTIME_PROFILE", "evaluation"},
                          {"LAPTIME_WARMUP", "0"},
                          {"LAPTIME_RECORD", "2000000000"}},
                         "LAPTIME_RECORD=2000000000"},
                        {"record-from-code", {}, "enable_recording(2000000000)"}};
  for (const Case& c : cases) {
    CAPTURE(std::string(c.named));
    reliability::RunResult r;
    const auto json = run_helper(c.mode, c.vars, r, kIters);
    CHECK(reliability::lines_with(r.err, "laptime") == 1);
    CHECK(reliability::lines_with(r.err, c.named) == 1);
    CHECK(reliability::lines_with(r.err, "above 1000000, the bound") == 1);
    if (json != nullptr) {
      const reliability::Json* samples = json->get("samples");
      REQUIRE(samples != nullptr);
      CHECK(samples->get("capacity")->number == 1000000);
    }
  }
}

TEST_CASE("LAPTIME_RECORD records in a program that only calls enable(), and wins over its code" *
          LAPTIME_NEEDS_ENABLED) {
  reliability::RunResult r;
  const auto json = run_helper("enable-only", {{"LAPTIME_RECORD", "64"}}, r, kIters);
  REQUIRE(json != nullptr);
  const reliability::Json* samples = json->get("samples");
  REQUIRE(samples != nullptr);
  CHECK(samples->get("capacity")->number == 64);  // not the code's enable_recording(8)
  CHECK(r.err.find("laptime") == std::string::npos);
}

TEST_CASE(
    "without the memory for a thread's recording, recording turns off with one warning and "
    "start_meas goes on" *
    LAPTIME_NEEDS_ENABLED) {
  reliability::RunResult r;
  // No workers' region: under the address-space limit its 512 MiB mapping fails too, with a
  // warning of its own (file-size-limit-test has that one).
  const auto json = run_helper("record-no-memory", {{"LAPTIME_WORKERS", "0"}}, r, kIters);
  if (r.exit_code == 77) {
    MESSAGE("skipped: the address space cannot be limited here (a sanitizer build)");
    return;
  }
  CHECK(reliability::lines_with(r.err, "laptime") == 1);
  CHECK(reliability::lines_with(r.err, "laptime: warning: recording off: no memory for") == 1);
}

int main(int argc, char** argv) {
  if (argc >= 3 && std::string_view(argv[1]) == "--helper") return run_helper_program(argv[2]);
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
