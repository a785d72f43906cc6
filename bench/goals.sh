#!/usr/bin/env bash
# Every performance goal (docs/performance.md; a Stopwatch interval as an NVTX range against the
# same written by hand: docs/nvtx.md) beside its measured ratio:
#   1. the C++ table: laptime_bench (built in build/bench as bench/run.sh builds it) run --runs
#      times, each run with --reps Google Benchmark repetitions; bench/table.py reads every run and
#      prints per row the median over runs of the runs' medians, its spread, and PASS/MISS on the
#      median of the runs' ratios;
#   2. the GPU rows (goals 7a-7d, bench/gpu) where laptime_gpu_bench was built and a GPU is
#      visible; elsewhere each says why it did not run;
#   3. the Python ratios (bench/python_bench.py against the extension built in build-py; its
#      repetitions run round-robin inside one run, and it prints medians and quartiles).
# With --before REF, REF's tree (a git worktree in a temporary folder under build/, removed
# afterwards) and the current tree are built and their binaries run in turn (before, after,
# before, after, ...), so that the machine's drift hits both; one table shows both builds, after /
# before, and the goals' verdicts for the current tree. The Python and GPU rows are not compared.
# Exits 0 when every goal is met, 1 when one is missed, 2 when a row is absent or a build fails.
# Developers run it; CI only builds the benchmark (machines there are too noisy for ratios).
#
#   bench/goals.sh                       1 run, 5 repetitions (C++); 51 (Python)
#   bench/goals.sh 9                     1 run, 9 repetitions
#   bench/goals.sh --runs 3 --reps 3     3 runs of 3 repetitions: medians over runs, spreads
#   bench/goals.sh --before main --runs 3             the current tree against main's
#   bench/goals.sh --runs 3 --no-python -- --benchmark_filter=Stopwatch   flags for laptime_bench
#
# The runs' JSON and console output stay in build/bench/goals/. LAPTIME_PY_BUILD=DIR picks the
# Python build directory (default build-py); LAPTIME_PY_REPS the Python repetitions;
# LAPTIME_JOBS the builds' parallelism. ccache is used where installed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
source bench/bench_lib.sh
REPS=5 RUNS=1 BEFORE= PYTHON=1 FLAGS=()
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) RUNS=${2:-} && shift ;;
    --reps) REPS=${2:-} && shift ;;
    --before) BEFORE=${2:-} && shift ;;
    --no-python) PYTHON=0 ;;
    --) shift && FLAGS=("$@") && break ;;
    -h | --help) usage && exit 0 ;;
    [0-9]*) REPS=$1 ;;
    *) echo "goals: unknown argument '$1' (bench/goals.sh --help)" >&2 && exit 2 ;;
  esac
  shift
done
if ! [[ $RUNS =~ ^[1-9][0-9]*$ && $REPS =~ ^[1-9][0-9]*$ ]]; then
  echo "goals: --runs and --reps take a positive number" >&2 && exit 2
fi
BUILD=${LAPTIME_BENCH_BUILD:-build/bench}
PY_BUILD=${LAPTIME_PY_BUILD:-build-py}
PY_REPS=${LAPTIME_PY_REPS:-51}
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  # Paths under the repository hashed as relative ones: REF's tree, built in a new temporary
  # folder each time, takes its objects from the cache when that tree was built before.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT}
fi

status=0
note() { [[ $1 -gt $status ]] && status=$1; }

BEFORE_DIR=
cleanup() {
  [[ -z $BEFORE_DIR ]] && return
  git worktree remove --force "$BEFORE_DIR/src" >/dev/null 2>&1
  rm -rf "$BEFORE_DIR"
}
trap cleanup EXIT

# build_logged SRC BUILD: bench_build, its last line shown (all of it when it fails).
build_logged() {
  local log
  log=$(mktemp) && bench_build "$1" "$2" >"$log" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    tail -n 1 "$log"
  else
    cat "$log" && echo "goals: the build of $1 failed"
  fi
  rm -f "$log"
  return $rc
}

if [[ -n $BEFORE ]]; then
  echo "== build: before ($BEFORE, $(git rev-parse --short "$BEFORE^{commit}" 2>/dev/null))"
  mkdir -p build && BEFORE_DIR=$(mktemp -d "$ROOT/build/goals-before.XXXXXX")
  git worktree add --detach "$BEFORE_DIR/src" "$BEFORE" >/dev/null &&
    build_logged "$BEFORE_DIR/src" "$BEFORE_DIR/build" || exit 2
fi
echo "== build: $([[ -n $BEFORE ]] && echo 'after (the current tree)' || echo 'the current tree')"
build_logged . "$BUILD" || exit 2

# run_one WHICH BUILD I: the I-th run of one build, its files in build/bench/goals/WHICH-I.*
OUT=$BUILD/goals
rm -rf "$OUT" && mkdir -p "$OUT"
BEFORE_RUNS=() AFTER_RUNS=()
run_one() {
  local which=$1 build=$2 i=$3 start=$SECONDS
  if bench_run "$build" "$OUT/$which-$i.json" "$REPS" "${FLAGS[@]}" >"$OUT/$which-$i.txt" 2>&1; then
    if [[ $which == before ]]; then BEFORE_RUNS+=("$OUT/$which-$i.json"); else
      AFTER_RUNS+=("$OUT/$which-$i.json"); fi
    echo "run $i of $RUNS${BEFORE:+ ($which)}: $((SECONDS - start)) s," \
      "load $(cut -d' ' -f1 /proc/loadavg)"
  else
    echo "run $i of $RUNS${BEFORE:+ ($which)} failed: $OUT/$which-$i.txt" && note 2
  fi
}

echo
TURNS=${BEFORE:+, before and after in turn}
echo "== C++ (laptime_bench: $RUNS run(s) of $REPS repetitions$TURNS)"
for ((i = 1; i <= RUNS; i++)); do
  [[ -n $BEFORE ]] && run_one before "$BEFORE_DIR/build" "$i"
  run_one after "$BUILD" "$i"
done
echo
echo "$(bench_machine), $RUNS run(s) of $REPS repetitions, commit $(git rev-parse --short HEAD)$(
  git diff --quiet HEAD 2>/dev/null || echo ' with local changes')${BEFORE:+, before: $BEFORE}"
echo
TABLE=(python3 bench/table.py "--filter=$(bench_filter_of "${FLAGS[@]}")")
if [[ ${#AFTER_RUNS[@]} -eq 0 || (-n $BEFORE && ${#BEFORE_RUNS[@]} -eq 0) ]]; then
  echo "goals: no run succeeded" && note 2
elif [[ -n $BEFORE ]]; then
  "${TABLE[@]}" --before "${BEFORE_RUNS[@]}" --after "${AFTER_RUNS[@]}"
  note $?
else
  "${TABLE[@]}" "${AFTER_RUNS[@]}"
  note $?
fi

echo
echo "== GPU (bench/gpu: GPU timing and do_cuda_sync, goals 7a-7d)"
GPU_BENCH=$BUILD/bench/gpu/laptime_gpu_bench
if [[ -n $BEFORE ]]; then
  python3 bench/gpu/ratios.py --not-run "not compared by --before"
elif ! cmake --build "$BUILD" --target help 2>/dev/null | grep -q '^laptime_gpu_bench:'; then
  python3 bench/gpu/ratios.py --not-run "no CUDA compiler found when $BUILD was configured"
elif ! nvidia-smi -L >/dev/null 2>&1; then
  python3 bench/gpu/ratios.py --not-run "no GPU visible (nvidia-smi -L failed)"
else
  cmake --build "$BUILD" -j "${LAPTIME_JOBS:-2}" --target laptime_gpu_bench | tail -n 1 &&
    "$GPU_BENCH" --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
      --benchmark_out="$OUT/gpu.json" --benchmark_out_format=json >"$OUT/gpu.txt" 2>&1 &&
    python3 bench/gpu/ratios.py "$OUT/gpu.json"
  note $?
fi

echo
echo "== Python (bench/python_bench.py, $PY_BUILD)"
if [[ -n $BEFORE || $PYTHON -eq 0 ]]; then
  why=--no-python
  [[ -n $BEFORE ]] && why="--before compares the C++ rows only"
  echo "not run: $why"
elif cmake -S . -B "$PY_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAPTIME_BUILD_PYTHON=ON \
  -DLAPTIME_BUILD_TESTS=OFF -DLAPTIME_BUILD_BENCH=OFF -DLAPTIME_BUILD_EXAMPLES=OFF >/dev/null &&
  cmake --build "$PY_BUILD" -j "${LAPTIME_JOBS:-2}" >/dev/null; then
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
