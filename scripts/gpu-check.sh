#!/usr/bin/env bash
# laptime's GPU check: builds and runs everything GPU-side in one go and prints a short table last.
#
#   scripts/gpu-check.sh            (on a machine with an NVIDIA GPU, CUDA toolkit, cmake, ninja)
#
# 1. environment: GPU, driver, toolkit, whether libcuda.so.1 loads, where nsys / ncu are;
# 2. builds cuda-test, the CUDA test programs in tests/gpu and examples/cuda_train_step;
# 3. runs cuda-test and the GPU tests (do_cuda_sync, GPU event timing, context following);
# 4. runs the example plain, with GPU event timing and with do_cuda_sync;
# 5. runs the example under Nsight Systems (nsys profile -t nvtx,cuda with the cudaProfilerApi
#    capture range, then nsys stats --report nvtx_sum) and checks every range by name and count;
# 6. runs it under Nsight Compute (ncu --clock-control none --nvtx --nvtx-include) and checks that
#    the profiled kernels carry the example's NVTX ranges;
# 7. builds the Python extension and runs the pytest suite with the machine's PyTorch (the GPU
#    cases: event timing on torch streams, do_cuda_sync).
#
# Debian packages the machine lacks (fmt, doctest for the build; libdw for nsys's importer) are
# taken from .debs/ in the repository if present (see docs/cuda.md), unpacked into $DEPS.
# Logs go to $OUT (the device tool's output folder) or /tmp/laptime-gpu-check. Exit status: 0 if
# every check passed. Never changes GPU clocks or settings (ncu runs with --clock-control none).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-/tmp/laptime-gpu-build}
DEPS=${DEPS:-/tmp/deps}
LOGS=${OUT:-/tmp/laptime-gpu-check}
WORK=$(mktemp -d /tmp/laptime-gpu-work.XXXXXX)
mkdir -p "$LOGS" "$DEPS"
export PATH="/usr/local/cuda/bin:$PATH"

ROWS=()     # table rows: "check|result|numbers"
FAILED=0
row() {     # row CHECK RESULT NUMBERS
  ROWS+=("$1|$2|$3")
  if [ "$2" = FAIL ]; then FAILED=1; fi
}
# kv FILE KEY: the value of KEY=VALUE on the RESULT lines of FILE (first match).
kv() { grep -o "[[:space:]]$2=[^[:space:]]*" "$1" 2>/dev/null | head -n1 | cut -d= -f2; }
pass_fail() { grep -q "$2" "$1" 2>/dev/null && echo PASS || echo FAIL; }

# ---------------------------------------------------------------- 1. environment
ENVLOG="$LOGS/env.log"
{
  echo "date: $(date -u '+%F %T UTC')"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -n2
  echo "kernel: $(uname -r)"
  echo "libcuda: $(ldconfig -p | grep -m1 'libcuda.so.1' || echo 'not in ldconfig')"
  python3 "$ROOT/scripts/gpu-check/driver_probe.py" 2>&1
} >"$ENVLOG" 2>&1
cat "$ENVLOG"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)
CUDA_TK=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')

source "$ROOT/scripts/nsight-tools.sh"  # NSYS, NCU
echo "nsys: ${NSYS:-not found}" | tee -a "$ENVLOG"
echo "ncu: ${NCU:-not found}" | tee -a "$ENVLOG"

# Debian packages carried along (no registry on the GPU machine).
if compgen -G "$ROOT/.debs/*.deb" >/dev/null; then
  for f in "$ROOT"/.debs/*.deb; do dpkg -x "$f" "$DEPS"; done
fi
DEPS_LIB="$DEPS/usr/lib/x86_64-linux-gnu"

# ---------------------------------------------------------------- 2. build
BUILDLOG="$LOGS/build.log"
TARGETS=(cuda-test gpu-sync-test gpu-event-timing-test gpu-context-test gpu-report-test
  gpu-verdict-test cuda_train_step laptime_gpu_bench)
built=0
if cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$DEPS/usr" -DLAPTIME_BUILD_BENCH=ON -DLAPTIME_BUILD_TESTS=ON \
    -DLAPTIME_BUILD_EXAMPLES=ON -DCMAKE_CUDA_ARCHITECTURES=90 >"$BUILDLOG" 2>&1 &&
  cmake --build "$BUILD" --target "${TARGETS[@]}" -j "$(nproc)" >>"$BUILDLOG" 2>&1; then
  built=1
fi
tail -n 5 "$BUILDLOG"
row "build: cuda-test, tests/gpu, example (nvcc sm_90)" \
  "$([ $built = 1 ] && echo PASS || echo FAIL)" "CUDA $CUDA_TK, $(nproc) cores"
if [ $built != 1 ]; then
  tail -n 40 "$BUILDLOG"
fi

# ---------------------------------------------------------------- 3. tests
TESTLOG="$LOGS/tests.log"
: >"$TESTLOG"
if [ $built = 1 ]; then
  "$BUILD/tests/cuda-test" >>"$TESTLOG" 2>&1
  rc=$?
  cases=$(sed -n 's/.*test cases: *\([0-9]*\) |.*passed.*| *\([0-9]*\) skipped.*/\1 cases, \2 skipped/p' "$TESTLOG" | tail -n1)
  row "cuda-test (doctest, real driver)" "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$cases"

  (cd "$BUILD" && ctest -L gpu -V --timeout 120) >>"$TESTLOG" 2>&1
  grep -E '^[0-9]+: (RESULT|  ok|  FAIL|  device|SKIP)|tests passed|Skipped|Failed' "$TESTLOG"

  f=$(mktemp -p "$WORK")
  grep 'RESULT gpu-sync-test mode=sync ' "$TESTLOG" >"$f"
  row "do_cuda_sync: kernel inside host time" "$(pass_fail "$f" PASS)" \
    "$(kv "$f" kernel_ms) ms kernel -> host $(kv "$f" host_mean_ms) ms/interval"
  grep 'RESULT gpu-sync-test mode=nosync ' "$TESTLOG" >"$f"
  row "no sync: kernel not in host time" "$(pass_fail "$f" PASS)" \
    "$(kv "$f" kernel_ms) ms kernel -> host $(kv "$f" host_mean_ms) ms/interval"
  grep 'RESULT gpu-event-timing-test' "$TESTLOG" >"$f"
  row "GPU event time within 5 %" "$(pass_fail "$f" PASS)" \
    "$(kv "$f" kernel_ms) ms kernel: median $(kv "$f" gpu_median_ms), min $(kv "$f" gpu_min_ms), max $(kv "$f" gpu_max_ms) ms ($(kv "$f" gpu_count) intervals)"
  row "host loop not stalled (<= +10 %)" "$(pass_fail "$f" PASS)" \
    "loop $(kv "$f" loop_plain_ms) ms plain, $(kv "$f" loop_gpu_timing_ms) ms with events (x$(kv "$f" ratio)), $(kv "$f" loop_do_cuda_sync_ms) ms with do_cuda_sync; $(kv "$f" pending_at_loop_end) pending at loop end"
  grep 'RESULT gpu-verdict-test' "$TESTLOG" | sed 's/^[0-9]*: //' >"$f"
  row "bottleneck verdict on three GPU loops" "$(grep -q . "$f" && ! grep -q FAIL "$f" && echo PASS || echo FAIL)" \
    "$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^(expected|kind)=/) printf "%s ", $i; printf "; "}' "$f")"
  grep 'RESULT gpu-report-test' "$TESTLOG" >"$f"
  row "reports wait for the GPU; pending per name" "$(pass_fail "$f" PASS)" \
    "periodic: forward $(kv "$f" pending_forward) + backward $(kv "$f" pending_backward) pending of $(kv "$f" timer_pending); report: $(kv "$f" report_forward_count)/$(kv "$f" report_backward_count) resolved, medians $(kv "$f" forward_ms)/$(kv "$f" backward_ms) ms; data fetch GPU figure: $(kv "$f" data_fetch_gpu)"
  grep 'RESULT gpu-context-test' "$TESTLOG" >"$f"
  row "sync follows the runtime's context" "$(pass_fail "$f" PASS)" \
    "$(kv "$f" kernel_ms) ms kernel on a non-blocking stream -> sync $(kv "$f" sync_ms) ms; new thread after cudaSetDevice $(kv "$f" thread_sync_ms) ms; before: synced=$(kv "$f" fresh_thread_synced)"
fi

# ---------------------------------------------------------------- 3b. host cost of GPU features
# bench/gpu: an event-timed interval and do_cuda_sync against raw CUDA calls (medians of 5).
BENCHLOG="$LOGS/gpu-bench.log"
if [ $built = 1 ] && [ -x "$BUILD/bench/gpu/laptime_gpu_bench" ]; then
  LD_LIBRARY_PATH="$DEPS_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$BUILD/bench/gpu/laptime_gpu_bench" --benchmark_repetitions=5 \
      --benchmark_out="$LOGS/gpu-bench.json" --benchmark_out_format=json >"$BENCHLOG" 2>&1
  python3 "$ROOT/bench/gpu/ratios.py" "$LOGS/gpu-bench.json" >>"$BENCHLOG" 2>&1
  rc=$?
  tail -n 4 "$BENCHLOG"
  ratios=$(sed -n 's/^SUMMARY //p' "$BENCHLOG")
  row "host cost: event timing, do_cuda_sync (bench/gpu)" "$([ $rc = 0 ] && echo PASS || echo FAIL)" \
    "${ratios:-no ratios}"
else
  row "host cost: event timing, do_cuda_sync (bench/gpu)" FAIL "laptime_gpu_bench not built"
fi

# ---------------------------------------------------------------- 4. the example
EXLOG="$LOGS/example.log"
: >"$EXLOG"
APP="$BUILD/examples/cuda_train_step/cuda_train_step"
# per-iteration host time of "training loop" from the Stopwatch report of one run
loop_time() { awk '$1 == "training" && $2 == "loop" { print $3, $4; exit }' "$1"; }
gpu_time() { grep -A1 '^  training loop' "$1" | awk '/gpu:/ { print $2, $3; exit }'; }
if [ $built = 1 ]; then
  for mode in plain gpu-timing sync; do
    args=(--iters 300 --warmup 20)
    case $mode in
      gpu-timing) args+=(--gpu-timing) ;;
      sync) args+=(--sync) ;;
    esac
    echo "=== cuda_train_step ${args[*]}" >>"$EXLOG"
    "$APP" "${args[@]}" >"$WORK/ex-$mode.log" 2>&1
    echo "exit status $?" >>"$WORK/ex-$mode.log"
    cat "$WORK/ex-$mode.log" >>"$EXLOG"
  done
  cat "$WORK/ex-gpu-timing.log"
  ok=PASS
  for mode in plain gpu-timing sync; do
    grep -q '^exit status 0' "$WORK/ex-$mode.log" || ok=FAIL
  done
  row "example: 300 iterations, loss goes down" "$ok" \
    "training loop/iter: $(loop_time "$WORK/ex-plain.log") plain, $(loop_time "$WORK/ex-gpu-timing.log") with events (GPU $(gpu_time "$WORK/ex-gpu-timing.log")), $(loop_time "$WORK/ex-sync.log") do_cuda_sync"
fi

# ---------------------------------------------------------------- 5. Nsight Systems
NSYSLOG="$LOGS/nsys.log"
: >"$NSYSLOG"
NSYS_ITERS=50
RANGES=(data_loader.next model.forward optimizer.after_train_iter loss.backward optimizer.step)
if [ $built = 1 ] && [ -n "${NSYS:-}" ]; then
  {
    echo "=== $NSYS profile -t nvtx,cuda --capture-range=cudaProfilerApi"
    LD_LIBRARY_PATH="$DEPS_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 120 "$NSYS" profile \
      -t nvtx,cuda --capture-range=cudaProfilerApi --capture-range-end=stop \
      -o "$WORK/rep" --force-overwrite true "$APP" --iters $NSYS_ITERS --warmup 5
    echo "exit status $?"
    ls -la "$WORK"
    echo "=== $NSYS stats --report nvtx_sum"
    LD_LIBRARY_PATH="$DEPS_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 60 "$NSYS" stats \
      --report nvtx_sum --force-export=true "$WORK/rep.nsys-rep"
    echo "=== csv"
    LD_LIBRARY_PATH="$DEPS_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 60 "$NSYS" stats \
      --report nvtx_sum --format csv --force-export=true "$WORK/rep.nsys-rep" |
      tee "$WORK/nvtx_sum.csv"
  } >>"$NSYSLOG" 2>&1
  sed -n '/=== .*stats --report nvtx_sum$/,/=== csv/p' "$NSYSLOG"
  # CSV columns: Time (%),Total Time (ns),Instances,Avg (ns),...,Style,Range (names carry a
  # leading ':' for the default domain); nsys may print other lines before the header.
  counts=""
  ok=PASS
  for r in "${RANGES[@]}"; do
    n=$(awk -F, -v name="$r" '
      !hdr && /Instances/ && /Range/ {
        for (i = 1; i <= NF; i++) { h = $i; gsub(/"/, "", h); col[h] = i }
        hdr = 1; next }
      hdr { rng = $col["Range"]; gsub(/"/, "", rng); sub(/^:/, "", rng)
        if (rng == name) { v = $col["Instances"]; gsub(/"/, "", v); print v; exit } }' \
      "$WORK/nvtx_sum.csv" 2>/dev/null)
    counts+="$r ${n:-0}/$NSYS_ITERS, "
    [ "${n:-0}" = "$NSYS_ITERS" ] || ok=FAIL
  done
  setup=$(grep -c 'setup' "$WORK/nvtx_sum.csv" 2>/dev/null)
  counts+="setup ${setup:-0} (before profiler_start)"
  [ "${setup:-0}" = 0 ] || ok=FAIL
  [ -s "$WORK/nvtx_sum.csv" ] || { ok=FAIL; counts="no nvtx_sum report (see nsys.log): $(grep -m1 -iE 'error|fail' "$NSYSLOG")"; }
  row "nsys: NVTX ranges by name and count" "$ok" "$counts"
else
  row "nsys: NVTX ranges by name and count" FAIL "nsys not found or build failed"
fi

# ---------------------------------------------------------------- 6. Nsight Compute
NCULOG="$LOGS/ncu.log"
: >"$NCULOG"
if [ $built = 1 ] && [ -n "${NCU:-}" ]; then
  {
    echo "=== $NCU --clock-control none --nvtx --nvtx-include optimizer.after_train_iter/"
    timeout 150 "$NCU" --clock-control none --nvtx --nvtx-include "optimizer.after_train_iter/" \
      --profile-from-start off --section SpeedOfLight "$APP" --iters 3 --warmup 0
    echo "exit status $?"
  } >"$NCULOG" 2>&1
  # ncu prints each profiled kernel as "name (grid)x(block), Context c, Stream s, ..." followed by
  # its NVTX push/pop stack, one "<level,range>" line per open range.
  kernels=$(grep -cE ', Context [0-9]+, Stream [0-9]+' "$NCULOG")
  in_opt=$(grep -c '<0,optimizer.after_train_iter>' "$NCULOG")
  in_bwd=$(grep -c '<1,loss.backward>' "$NCULOG")
  in_step=$(grep -c '<1,optimizer.step>' "$NCULOG")
  in_fwd=$(grep -cE '<[0-9]+,model.forward>' "$NCULOG")
  ok=PASS
  # Every kernel profiled sits in optimizer.after_train_iter, inside loss.backward or
  # optimizer.step (one SGD kernel per iteration); forward kernels are filtered out.
  if [ "$kernels" -eq 0 ] || [ "$in_opt" -ne "$kernels" ] ||
    [ $((in_bwd + in_step)) -ne "$kernels" ] || [ "$in_step" -ne 3 ] || [ "$in_fwd" -ne 0 ]; then
    ok=FAIL
  fi
  grep -m1 -B2 -A8 -E ', Context [0-9]+, Stream [0-9]+' "$NCULOG"
  row "ncu --nvtx: kernels carry the ranges" "$ok" \
    "--nvtx-include optimizer.after_train_iter/, 3 iterations: $kernels kernels, all under optimizer.after_train_iter; $in_bwd in loss.backward, $in_step in optimizer.step, $in_fwd from model.forward"
else
  row "ncu --nvtx: kernels carry the ranges" FAIL "ncu not found or build failed"
fi

# ---------------------------------------------------------------- 7. Python with PyTorch
# The extension built in a CMake build (LAPTIME_BUILD_PYTHON), then the whole pytest suite with
# the machine's torch: the GPU cases (event timing on torch streams, do_cuda_sync) run here only.
PYLOG="$LOGS/python.log"
{
  cmake -S "$ROOT" -B "$BUILD-py" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$DEPS/usr" -DLAPTIME_BUILD_PYTHON=ON -DLAPTIME_BUILD_TESTS=OFF \
    -DLAPTIME_BUILD_BENCH=OFF -DLAPTIME_BUILD_EXAMPLES=OFF &&
    cmake --build "$BUILD-py" -j "$(nproc)" &&
    (cd "$ROOT/python/tests" && PYTHONPATH="$BUILD-py/python" \
      CPLUS_INCLUDE_PATH="$DEPS/usr/include" timeout 300 python3 -m pytest -q -rs \
      -p no:cacheprovider --junitxml="$WORK/pytest.xml" .)
  echo "exit status $?"
} >"$PYLOG" 2>&1
py_summary=$(grep -E "[0-9]+ (passed|failed)" "$PYLOG" | tail -n1)
# The GPU cases: those of test_gpu.py that ran and that were skipped, from pytest's record.
gpu_cases=$(python3 "$ROOT/scripts/gpu-check/gpu_cases.py" "$WORK/pytest.xml" 2>/dev/null)
read -r gpu_ran gpu_skipped <<<"${gpu_cases:-0 0}"
if grep -q "exit status 0" "$PYLOG" && [ "${gpu_ran:-0}" -gt 0 ] && [ "${gpu_skipped:-0}" = 0 ]; then
  row "python + torch: pytest (GPU cases included)" PASS "${py_summary:-?}; $gpu_ran GPU cases ran"
else
  row "python + torch: pytest (GPU cases included)" FAIL \
    "${py_summary:-no summary}; GPU cases: ${gpu_ran:-0} ran, ${gpu_skipped:-0} skipped (see python.log)"
fi
tail -n 15 "$PYLOG"

# ---------------------------------------------------------------- table
TABLE="$LOGS/table.txt"
{
  echo
  echo "laptime GPU check, $(date -u +%F), ${GPU:-no GPU} (driver ${DRIVER:-?}, CUDA toolkit ${CUDA_TK:-?})"
  echo
  echo "| check | result | numbers |"
  echo "|---|---|---|"
  for r in "${ROWS[@]}"; do
    IFS='|' read -r c res num <<<"$r"
    echo "| $c | $res | $num |"
  done
  echo
  if [ $FAILED = 0 ]; then echo "ALL PASSED"; else echo "SOME CHECKS FAILED (logs: $LOGS)"; fi
} >"$TABLE"
rm -rf "$WORK"
cat "$TABLE"
exit $FAILED
