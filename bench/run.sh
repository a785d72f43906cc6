#!/usr/bin/env bash
# Builds laptime_bench (Release, -O2) in build/bench, runs every benchmark with repetitions and
# prints the cost table (docs/performance.md): each hot path's median next to its raw baseline, with PASS/MISS.
#
#   bench/run.sh              5 repetitions
#   bench/run.sh 9            9 repetitions
#   bench/run.sh 5 --benchmark_filter=Stopwatch   more flags go to laptime_bench
#
# LAPTIME_BENCH_BUILD=DIR picks another build directory; LAPTIME_JOBS the build's parallelism.
# Exits 1 when a goal is missed. The machine is shared: rerun when in doubt.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=5
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then
  REPS=$1
  shift
fi
BUILD=${LAPTIME_BENCH_BUILD:-build/bench}
JOBS=${LAPTIME_JOBS:-2}

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
  -DLAPTIME_BUILD_TESTS=ON -DLAPTIME_BUILD_EXAMPLES=OFF -DLAPTIME_BUILD_BENCH=ON \
  -DLAPTIME_WERROR=ON >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target laptime_bench

RESULTS=$BUILD/bench-results.json
# No profiler attached: the NVTX goals are for "no tool attached" (docs/performance.md).
env -u NVTX_INJECTION64_PATH -u NVTX_INJECTION32_PATH "$BUILD/bench/laptime_bench" \
  --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
  --benchmark_out="$RESULTS" --benchmark_out_format=json "$@"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores," \
  "$REPS repetitions"
echo
python3 bench/table.py "$RESULTS"
