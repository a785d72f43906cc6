#!/usr/bin/env bash
# The seed's profiling flow (seeds/000 "Profiling", seeds/001) for the NuScenes training study:
# each loader's training run under Nsight Systems with the CUDA-profiler-API capture range and
# LAPTIME_PROFILE=profiling, then nsys's NVTX summary, checked by range name and count; the same
# for the C++ example (examples/ddp_train through ddp_launch). Prints a short table last.
#
#   examples/nuscenes/profile.sh [--loaders "reference gpu"] [--iters 60] [--warmup 10] [--nproc 1]
#                                [--batch-size 8] [--workers 8] [--dataroot DIR] [--samples 32]
#                                [--only python|cpp]
#
# The capture starts when warm-up ends (profiler_start on rank 0) and stops after the last
# iteration, so each checked range must appear (iters - warmup) times for one process (at least
# that many with several: every rank's ranges are recorded while the capture runs).
# Loaders: "reference gpu" by default, plus "dali" where `import nvidia.dali` works (DALI's wheels
# unpacked at PYTHONPATH=/tmp/site, docs/studies/training.md). The data are generated into
# --dataroot if missing. laptime's Python package is built here (CMake, LAPTIME_BUILD_PYTHON) unless
# it imports already; ddp_train and ddp_launch too. Debian packages the GPU machine lacks (fmt for
# the build, libdw for nsys's importer) are taken from .debs/ as in scripts/gpu-check.sh.
# Reports, CSVs and logs go to $OUT (the device tool's output folder) or /tmp/laptime-profile.
# Exit status: 0 if every check passed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${BUILD:-/tmp/laptime-profile-build}
DEPS=${DEPS:-/tmp/deps}
LOGS=${OUT:-/tmp/laptime-profile}
LOADERS=""
ITERS=60
WARMUP=10
NPROC=1
BATCH=8
WORKERS=8
DATA=/tmp/nuscenes-synth
SAMPLES=32
ONLY=""
while [ $# -gt 0 ]; do
  case $1 in
    --loaders) LOADERS=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --nproc) NPROC=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --dataroot) DATA=$2; shift 2 ;;
    --samples) SAMPLES=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    *) echo "usage: see the top of $0" >&2; exit 2 ;;
  esac
done
mkdir -p "$LOGS" "$DEPS"
export PATH="/usr/local/cuda/bin:$PATH"
PY=${PYTHON:-python3}
EXPECT=$((ITERS - WARMUP))

ROWS=()
FAILED=0
row() {  # row RUN CHECK RESULT NUMBERS
  ROWS+=("$1|$2|$3|$4")
  if [ "$3" = FAIL ]; then FAILED=1; fi
}

# ---------------------------------------------------------------- tools
source "$ROOT/scripts/nsight-tools.sh"  # NSYS, NCU
echo "nsys: ${NSYS:-not found}"
if compgen -G "$ROOT/.debs/*.deb" >/dev/null; then
  for f in "$ROOT"/.debs/*.deb; do dpkg -x "$f" "$DEPS"; done
fi
DEPS_LIB="$DEPS/usr/lib/x86_64-linux-gnu"
nsys_() { LD_LIBRARY_PATH="$DEPS_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$NSYS" "$@"; }
if [ -z "${NSYS:-}" ]; then
  echo "profile.sh: nsys not found (set NSYS=/path/to/nsys)" >&2
  exit 1
fi

# ---------------------------------------------------------------- build: laptime (Python), C++ example
BUILDLOG="$LOGS/build.log"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$DEPS/usr" \
  -DLAPTIME_BUILD_PYTHON=ON -DLAPTIME_BUILD_TESTS=OFF -DLAPTIME_BUILD_BENCH=OFF \
  -DLAPTIME_BUILD_EXAMPLES=ON -DCMAKE_CUDA_ARCHITECTURES=90 >"$BUILDLOG" 2>&1 &&
  cmake --build "$BUILD" --target laptime_python ddp_launch ddp_train -j "$(nproc)" >>"$BUILDLOG" 2>&1
built=$?
tail -n 3 "$BUILDLOG"
row build "laptime_python, ddp_launch, ddp_train" "$([ $built = 0 ] && echo PASS || echo FAIL)" "see build.log"
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
[ -d /tmp/site ] && export PYTHONPATH="$PYTHONPATH:/tmp/site"

if [ -z "$LOADERS" ]; then
  LOADERS="reference gpu"
  if "$PY" -c "import nvidia.dali" >/dev/null 2>&1; then LOADERS="reference dali gpu"; fi
fi

# check_run RUN LOG: the run exited 0 and its loss fell
check_run() {
  local ok=FAIL loss
  grep -q '^exit status 0$' "$2" && grep -q '(falls)' "$2" && ok=PASS
  loss=$(grep -m1 -o 'mean of the first.*' "$2")
  row "$1" "exit status 0, loss falls" "$ok" "${loss:-no loss line} ($(grep -m1 '^exit status' "$2"))"
}

# check_ranges RUN COUNTS_FILE RANGE...: a table row per range
check_ranges() {
  local run=$1 file=$2 r n total avg ok
  shift 2
  for r in "$@"; do
    IFS=$'\t' read -r _ n total avg < <(awk -F'\t' -v name="$r" '$1 == name' "$file")
    ok=FAIL
    if [ "$NPROC" = 1 ]; then
      [ "${n:-0}" = "$EXPECT" ] && ok=PASS
    else
      [ "${n:-0}" -ge "$EXPECT" ] && ok=PASS
    fi
    row "$run" "range '$r'" "$ok" "${n:-0} instances (expected $([ "$NPROC" = 1 ] || echo '>= ')$EXPECT), ${total:-?} ms total, ${avg:-?} ms avg"
  done
}

profile_run() {  # profile_run NAME COMMAND...: nsys profile + nvtx_sum CSV + counts
  local name=$1
  shift
  local log="$LOGS/$name.log"
  {
    echo "=== LAPTIME_PROFILE=profiling nsys profile -t nvtx,cuda --capture-range=cudaProfilerApi --capture-range-end=stop $*"
    LAPTIME_PROFILE=profiling LD_LIBRARY_PATH="$DEPS_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      timeout 300 "$NSYS" profile -t nvtx,cuda \
      --capture-range=cudaProfilerApi --capture-range-end=stop \
      -o "$LOGS/$name" --force-overwrite true "$@"
    echo "exit status $?"
    echo "=== nsys stats --report nvtx_sum --format csv --force-export=true"
  } >"$log" 2>&1
  nsys_ stats --report nvtx_sum --format csv --force-export=true "$LOGS/$name.nsys-rep" \
    >"$LOGS/$name.nvtx_sum.csv" 2>>"$log"
  cat "$LOGS/$name.nvtx_sum.csv" >>"$log"
  "$PY" "$HERE/nvtx_counts.py" "$LOGS/$name.nvtx_sum.csv" >"$LOGS/$name.counts"
  grep -E '^(loss:|RESULT|exit status|ddp_launch:|Starting|Stopping)|Error|error:' "$log" | head -n 12
}

# ---------------------------------------------------------------- data
if [ "$ONLY" != cpp ] && [ ! -d "$DATA/v1.0-mini" ]; then
  "$PY" "$HERE/generate.py" --out "$DATA" --samples "$SAMPLES" --seed 0 \
    >"$LOGS/generate.log" 2>&1 || { tail "$LOGS/generate.log"; row data generate FAIL "$DATA"; }
fi

# ---------------------------------------------------------------- Python, one report per loader
RANGES=("optimizer.after_train_iter" "data fetch" "Training step")
[ "$ONLY" = cpp ] && LOADERS=""
for loader in $LOADERS; do
  echo "=== $loader"
  profile_run "train-$loader" "$PY" -m torch.distributed.run --standalone --nproc_per_node "$NPROC" \
    "$HERE/train.py" --loader "$loader" --dataroot "$DATA" --iters "$ITERS" \
    --warmup "$WARMUP" --batch-size "$BATCH" --workers "$WORKERS" --replicate-dataset-per-gpu \
    --results-dir "$LOGS/train-$loader-results"
  check_run "train.py --loader $loader" "$LOGS/train-$loader.log"
  check_ranges "train.py --loader $loader" "$LOGS/train-$loader.counts" "${RANGES[@]}"
done

# ---------------------------------------------------------------- C++, world size 1
if [ "$ONLY" != python ]; then
  echo "=== ddp_train"
  APP_DIR="$BUILD/examples/ddp_train"
  rm -rf "$LOGS/cpp-results"
  profile_run cpp-ddp_train "$APP_DIR/ddp_launch" --nproc 1 --out "$LOGS/cpp-results" -- \
    "$APP_DIR/ddp_train" --iters "$ITERS" --warmup "$WARMUP"
  check_run "ddp_train (world size 1)" "$LOGS/cpp-ddp_train.log"
  NPROC_SAVED=$NPROC
  NPROC=1
  check_ranges "ddp_train (world size 1)" "$LOGS/cpp-ddp_train.counts" "${RANGES[@]}" ncclAllReduce
  NPROC=$NPROC_SAVED
  "$PY" -m laptime merge "$LOGS"/cpp-results/rank*.json | tee "$LOGS/cpp-merge.txt"
fi

# ---------------------------------------------------------------- table
TABLE="$LOGS/table.txt"
{
  echo
  echo "laptime profile.sh, $(date -u '+%F %T UTC'), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1), $NPROC process(es), $ITERS iterations ($WARMUP warm-up)"
  echo
  echo "| run | check | result | numbers |"
  echo "|---|---|---|---|"
  for r in "${ROWS[@]}"; do
    IFS='|' read -r a b c d <<<"$r"
    echo "| $a | $b | $c | $d |"
  done
  echo
  if [ $FAILED = 0 ]; then echo "ALL PASSED"; else echo "SOME CHECKS FAILED (logs: $LOGS)"; fi
} >"$TABLE"
cat "$TABLE"
exit $FAILED
