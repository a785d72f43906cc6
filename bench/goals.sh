#!/usr/bin/env bash
# Every performance goal (docs/performance.md; a Stopwatch interval as an NVTX range against the
# same written by hand: docs/nvtx.md) beside its measured ratio, from one run of bench/:
#   1. the C++ table (bench/run.sh: laptime_bench, then bench/table.py: the cost contract's rows
#      and the stricter goals' rows, PASS/MISS each);
#   2. the Python ratios (bench/python_bench.py against the extension built in build-py).
# Exits 0 when every goal is met, 1 when one is missed, 2 when a row is absent or a build fails.
# Developers run it; CI only builds the benchmark (machines there are too noisy for ratios).
#
#   bench/goals.sh           5 repetitions (C++), 51 (Python)
#   bench/goals.sh 9         9 repetitions (C++), 51 (Python)
#
# LAPTIME_PY_BUILD=DIR picks the Python build directory (default build-py); LAPTIME_PY_REPS the
# Python repetitions. The GPU rows (GPU timing and do_cuda_sync, goals 7a-7d) come from scripts/gpu-check.sh on an H200.
set -uo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-5}
PY_BUILD=${LAPTIME_PY_BUILD:-build-py}
PY_REPS=${LAPTIME_PY_REPS:-51}
JOBS=${LAPTIME_JOBS:-2}

status=0
note() { [[ $1 -gt $status ]] && status=$1; }

echo "== C++ (bench/run.sh $REPS) =="
bench/run.sh "$REPS"
note $?

echo
echo "== Python (bench/python_bench.py, $PY_BUILD) =="
if cmake -S . -B "$PY_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAPTIME_BUILD_PYTHON=ON \
     -DLAPTIME_BUILD_TESTS=OFF -DLAPTIME_BUILD_BENCH=OFF -DLAPTIME_BUILD_EXAMPLES=OFF >/dev/null &&
   cmake --build "$PY_BUILD" -j "$JOBS" >/dev/null; then
  PYTHONPATH="$PY_BUILD/python" python3 bench/python_bench.py --n 2000 --reps "$PY_REPS"
  note $?
else
  echo "goals: the Python extension did not build"
  note 2
fi

echo
case $status in
  0) echo "performance goals: all met" ;;
  1) echo "performance goals: some missed (MISS rows above)" ;;
  *) echo "performance goals: a row is absent or a build failed" ;;
esac
exit $status
