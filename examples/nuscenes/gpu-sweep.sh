#!/usr/bin/env bash
# The GPU side of the NuScenes study in one command, by stages (docs/studies/training.md,
# docs/studies/loader.md): builds laptime's Python package into /tmp/laptime-profile-build where
# `import laptime` fails, generates the NuScenes-layout data (324 samples) into
# /tmp/nuscenes-synth, runs the stages named, and prints a short table last.
#
#   examples/nuscenes/gpu-sweep.sh [--device cpu] [--tiny] [--seed-cells DIR [--seed-skip L,...]] \
#       [STAGE ...] [sweep.py options ...]
#
# Stages, in the order given (none named: sweep):
#   equivalence  equivalence.py on the first 18 samples (108 images): DALI's decoders (mixed, cpu)
#                and torchvision's (nvJPEG, cpu) against Pillow, and the dali and gpu loaders'
#                batches against the reference loader's
#   losscurves   train.py with ResNet-18 at image scale 0.5, batch 8, bf16, seed 0, 10 warm-up + 300
#                iterations, from each loader (reference with 8 workers, dali, gpu), dali with seed
#                1 (the noise: what another seed changes; the cheapest loader) and dali with seed 0
#                again (does a run repeat?), then losscurves.py
#   nancheck     train.py with ResNet-50 at scale 1, the gpu loader, bf16, 300 iterations (at most
#                40 s measured), without and then with the wait before nvJPEG (--no-decode-wait):
#                the first non-finite iteration of each
#   sweep        sweep.py into /tmp/laptime-sweep with the options given; a cell whose rank0.json
#                is there is not run again
#
# --seed-cells DIR copies DIR/cells/* into /tmp/laptime-sweep/cells (cells already there are
# kept) and DIR/machine.txt beside them; the sweep stage then refuses to run when this GPU is not
# the one of DIR/machine.txt (SWEEP_MIXED_OK=1 runs anyway): a cell's spread over two machines is
# no run-to-run spread. --seed-skip LOADERS (e.g. gpu) leaves those loaders' cells out of the
# copy, so they run again (cells whose loader changed since). --device cpu --tiny: the same stages
# in seconds on a CPU (small data, a tiny backbone, a few iterations), to check the driver.
#
# One device call is 10 minutes at most: CALL_S (default 540; SWEEP_CALL_S is read too) is this
# call's budget. Each stage's commands stop when it is spent, the sweep starts no cell after it,
# and what is left runs in the next call on the same warm machine (/tmp survives while it is warm).
# $OUT gets at most 8 files: machine.txt, stages.md (the table), equivalence.json,
# losscurves.json, losscurves.svg, sweep.md, sweep.svg and results.tar.gz (every log, loss file,
# cell and table). DALI is used where `import nvidia.dali` works: its wheels unpacked at /tmp/site
# (../shared/GPU.md) are put on PYTHONPATH. Nothing here changes GPU settings. STUDY_WORK,
# STUDY_DATA, SWEEP_DIR and PYTHON change the folders and the interpreter above.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
HERE=examples/nuscenes
PY=${PYTHON:-python3}
RESULTS=${OUT:-/tmp/laptime-gpu-study-out}
BUILD=/tmp/laptime-profile-build
WORK=${STUDY_WORK:-/tmp/laptime-gpu-study}  # every stage's output
SWEEP=${SWEEP_DIR:-/tmp/laptime-sweep}  # sweep.py --out
CALL_S=${CALL_S:-${SWEEP_CALL_S:-540}}
NPROC=$(nproc)
DEVICE=cuda TINY=0 SEED_CELLS="" SEED_SKIP="" STAGES=() SWEEP_ARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    equivalence|losscurves|nancheck|sweep) STAGES+=("$1") ;;
    --device) DEVICE=$2; shift ;;
    --tiny) TINY=1 ;;
    --seed-cells) SEED_CELLS=$2; shift ;;
    --seed-skip) SEED_SKIP=$2; shift ;;
    *) SWEEP_ARGS+=("$1") ;;
  esac
  shift
done
[ ${#STAGES[@]} -eq 0 ] && STAGES=(sweep)
DATA=${STUDY_DATA:-/tmp/nuscenes-synth} SAMPLES=324
[ "$TINY" = 1 ] && DATA=$WORK/data-tiny SAMPLES=4 SWEEP=$WORK/sweep-tiny
mkdir -p "$RESULTS" "$WORK" "$SWEEP"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
[ -d /tmp/site ] && export PYTHONPATH="$PYTHONPATH:/tmp/site"

left() { echo $((CALL_S - SECONDS - 25)); }  # seconds a stage may still use (25 s to pack up)
T() {  # a command, stopped when the call's budget is spent
  local s
  s=$(left)
  [ "$s" -gt 5 ] || { echo "gpu-sweep.sh: no time left for: $*"; return 124; }
  timeout --kill-after=10 "$s" "$@"
}

setup() {
  if ! "$PY" -c "import laptime._laptime" 2>/dev/null; then
    echo "=== building laptime's Python package"
    { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAPTIME_BUILD_PYTHON=ON \
        -DLAPTIME_BUILD_TESTS=OFF -DLAPTIME_BUILD_BENCH=OFF -DLAPTIME_BUILD_EXAMPLES=OFF \
        -DPython_EXECUTABLE="$(command -v "$PY")" &&
      cmake --build "$BUILD" --target laptime_python -j "$NPROC"; } >"$WORK/build.log" 2>&1 ||
      { tail -n 30 "$WORK/build.log"; return 2; }
  fi
  "$PY" -c "import laptime, torch; print('laptime', laptime.__version__, '| torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')" || return 2
  "$PY" -c "import nvidia.dali as d; print('DALI', d.__version__)" || echo "no DALI: the dali runs will fail"
  [ -d "$DATA/v1.0-mini" ] ||
    "$PY" $HERE/generate.py --out "$DATA" --samples $SAMPLES --seed 0 --jobs "$NPROC" || return 2
  { date -u '+%Y-%m-%d %H:%M UTC'; cat .sweep-commit 2>/dev/null
    if [ "$DEVICE" = cuda ]; then nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    else echo "no GPU (--device cpu)"; fi
    lscpu | sed -n 's/^Model name: *//p'; echo "$NPROC cores"; } | tee "$WORK/machine.txt"
}

stage_equivalence() {
  local samples=18
  [ "$TINY" = 1 ] && samples=2
  T "$PY" $HERE/equivalence.py --dataroot "$DATA" --samples $samples --device "$DEVICE" \
    --workers 2 --json "$WORK/equivalence.json" &&
    "$PY" -c "import json; r = json.load(open('$WORK/equivalence.json'))
print('; '.join(f\"{p}: max {s['max_abs_max']:.2f}, PSNR >= {s['psnr_min_db'] or float('inf'):.1f} dB\"
                for k in ('decode', 'final') for p, s in r[k].items()))" >"$WORK/equivalence.figure"
}

# losscurves: LABEL LOADER WORKERS SEED for each run; the noise pair is the first two. With one
# seed a run repeats bit for bit (an H100 did, 2026-12-06: docs/studies/gpu-sweep.md), so the noise
# is what another seed changes (initial weights, augmentation, order); dali#2's difference
# from dali in the table shows whether a run repeats.
LOSS_RUNS=("dali dali 8 0" "dali-seed1 dali 8 1" "dali#2 dali 8 0" "reference reference 8 0"
           "gpu gpu 8 0")
stage_losscurves() {
  local run label loader workers seed files=() rc=0 window=20
  local opts=(--backbone resnet18 --image-scale 0.5 --batch-size 8 --amp bf16 --iters 310
              --warmup 10)
  [ "$TINY" = 1 ] && window=2 opts=(--backbone resnet18 --image-scale 0.125 --batch-size 1
                                    --amp off --iters 6 --warmup 1)
  mkdir -p "$WORK/loss"
  for run in "${LOSS_RUNS[@]}"; do
    read -r label loader workers seed <<<"$run"
    [ "$TINY" = 1 ] && workers=1
    echo "=== $label: train.py --loader $loader --workers $workers --seed $seed"
    LAPTIME_PROFILE=evaluation T "$PY" $HERE/train.py --loader "$loader" --workers "$workers" \
      "${opts[@]}" --device "$DEVICE" --dataroot "$DATA" --seed "$seed" \
      --replicate-dataset-per-gpu --loss-file "$WORK/loss/$label.csv" \
      --results-dir "$WORK/loss/$label" >"$WORK/loss/$label.log" 2>&1 || rc=1
    grep -E "^(loss|non-finite|RESULT)" "$WORK/loss/$label.log"
    [ -s "$WORK/loss/$label.csv" ] && files+=("$label=$WORK/loss/$label.csv")
  done
  [ ${#files[@]} -ge 2 ] || return 1
  "$PY" $HERE/losscurves.py "${files[@]}" --window "$window" --json "$WORK/losscurves.json" \
    --svg "$WORK/losscurves.svg" || rc=1
  "$PY" -c "import json; r = json.load(open('$WORK/losscurves.json'))
print(f\"noise {r['noise_mean']}; \" + ', '.join(f\"{x['label']} within: {x['within_noise']}\"
      for x in r['runs'] if 'within_noise' in x))" >"$WORK/losscurves.figure"
  return $rc
}

stage_nancheck() {
  local opts=(--backbone resnet50 --image-scale 1 --batch-size 8 --amp bf16 --iters 300
              --warmup 8 --max-seconds 40 --workers 8) wait rc=0
  [ "$TINY" = 1 ] && opts=(--backbone resnet18 --image-scale 0.125 --batch-size 1 --amp off
                          --iters 4 --warmup 1 --workers 1)
  mkdir -p "$WORK/nan"
  : >"$WORK/nancheck.figure"
  for wait in no-wait wait; do
    echo "=== gpu loader, $wait"
    LAPTIME_PROFILE=evaluation T "$PY" $HERE/train.py --loader gpu "${opts[@]}" \
      --device "$DEVICE" --dataroot "$DATA" --seed 0 --replicate-dataset-per-gpu \
      $([ $wait = no-wait ] && echo --no-decode-wait) --loss-file "$WORK/nan/$wait.csv" \
      --results-dir "$WORK/nan/$wait" >"$WORK/nan/$wait.log" 2>&1 || rc=1
    grep -E "^(loss|non-finite|RESULT)" "$WORK/nan/$wait.log"
    echo "$wait: $(grep -o '^non-finite: [^(]*' "$WORK/nan/$wait.log")" >>"$WORK/nancheck.figure"
  done
  return $rc
}

stage_sweep() {
  local rc=0 want have
  if [ -f "$SWEEP/seeded-machine.txt" ] && [ "$DEVICE" = cuda ]; then
    want=$(grep -m 1 NVIDIA "$SWEEP/seeded-machine.txt" | cut -d, -f1)
    have=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
    if [ "$want" != "$have" ] && [ "${SWEEP_MIXED_OK:-0}" != 1 ]; then
      echo "gpu-sweep.sh: the seeded cells ran on '$want', this GPU is '$have': not mixing them" \
           "(SWEEP_MIXED_OK=1 to run anyway)"
      echo "refused: seeded on $want, this is $have" >"$WORK/sweep.figure"
      return 3
    fi
  fi
  local tiny=()
  [ "$TINY" = 1 ] && tiny=(--tiny)
  echo "cells to run: $("$PY" $HERE/sweep.py "${tiny[@]}" --out "$SWEEP" "${SWEEP_ARGS[@]}" --dry-run | tr '\n' ' ')"
  "$PY" $HERE/sweep.py "${tiny[@]}" --dataroot "$DATA" --out "$SWEEP" --device "$DEVICE" \
    --deadline "$(left)" "${SWEEP_ARGS[@]}" || rc=$?
  echo "$("$PY" $HERE/sweep.py "${tiny[@]}" --out "$SWEEP" "${SWEEP_ARGS[@]}" --dry-run | wc -l) cells left" \
    >"$WORK/sweep.figure"
  return $rc
}

if [ -n "$SEED_CELLS" ]; then
  mkdir -p "$SWEEP/cells" && cp "$SEED_CELLS/machine.txt" "$SWEEP/seeded-machine.txt" || exit 2
  for cell in "$SEED_CELLS"/cells/*/; do  # a cell already there (run here) is kept
    name=$(basename "$cell")  # BACKBONE-xSCALE-LOADER-runN
    loader=${name%-run*}
    [[ ",$SEED_SKIP," == *",${loader##*-},"* ]] && continue
    [ -e "$SWEEP/cells/$name" ] || cp -r "$cell" "$SWEEP/cells/" || exit 2
  done
fi
ROWS=()
if setup; then
  for s in "${STAGES[@]}"; do
    start=$SECONDS
    echo "######## $s"
    rm -f "$WORK/$s.figure"
    "stage_$s" >"$WORK/$s.log" 2>&1
    rc=$?
    tail -n 25 "$WORK/$s.log"
    ROWS+=("| $s | $([ $rc = 0 ] && echo ok || echo "FAILED rc=$rc") | $((SECONDS - start)) s | $(cat "$WORK/$s.figure" 2>/dev/null | tr '\n' ' ') |")
  done
else
  ROWS+=("| setup | FAILED | $SECONDS s | see the output above |")
fi
cp "$WORK/machine.txt" "$RESULTS/" 2>/dev/null
for f in equivalence.json losscurves.json losscurves.svg; do cp "$WORK/$f" "$RESULTS/" 2>/dev/null; done
cp "$SWEEP/sweep.md" "$SWEEP/sweep.svg" "$RESULTS/" 2>/dev/null
dirs=("${WORK#/}")
[ "${SWEEP#"$WORK"}" = "$SWEEP" ] && dirs+=("${SWEEP#/}")
tar -czf "$RESULTS/results.tar.gz" --exclude=data-tiny -C / "${dirs[@]}"
{ echo "| stage | result | time | figures |"; echo "|---|---|---|---|"; printf '%s\n' "${ROWS[@]}"; } |
  tee "$RESULTS/stages.md"
