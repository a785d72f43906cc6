#!/usr/bin/env bash
# Builds laptime_bench (Release, -O2) in build/bench, runs every benchmark with repetitions and
# prints the cost table (docs/performance.md): each hot path's median next to its raw baseline, with PASS/MISS.
#
#   bench/run.sh              5 repetitions
#   bench/run.sh 9            9 repetitions
#   bench/run.sh 5 --benchmark_filter=Stopwatch   more flags go to laptime_bench
#
# LAPTIME_BENCH_BUILD=DIR picks another build directory; LAPTIME_JOBS the build's parallelism.
# Exits 1 when a goal is missed. The machine is shared: rerun when in doubt, or run
# bench/goals.sh --runs N (several runs, medians and spreads).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/bench_lib.sh
REPS=5
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then
  REPS=$1
  shift
fi
BUILD=${LAPTIME_BENCH_BUILD:-build/bench}

bench_build . "$BUILD"
RESULTS=$BUILD/bench-results.json
bench_run "$BUILD" "$RESULTS" "$REPS" "$@"
echo
echo "$(bench_machine), $REPS repetitions"
echo
python3 bench/table.py "--filter=$(bench_filter_of "$@")" "$RESULTS"
