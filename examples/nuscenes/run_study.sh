#!/usr/bin/env bash
# The data-loading-only study of seed 000 in one command: generates a NuScenes-layout dataset if
# none is there, runs each loader with the same settings through runner.py (laptime's Stopwatch:
# pipeline creation, data fetch, the CPU-tracked data loading loop), then prints the seed's table
# with `laptime compare` and docs/studies/loader_table.py's (medians; CPU as % of the machine and
# as core-ms per batch; medians first on the CPU).
#
#   examples/nuscenes/run_study.sh                       # small: this 2-core machine, CPU only
#   examples/nuscenes/run_study.sh --device cuda --samples 324 --workers 8 --batches 200 \
#       --warmup 50 --loaders reference,gpu,dali --out $OUT/loader
#   examples/nuscenes/run_study.sh --seed-settings ...    # the seed's 1000 batches, 300 warm-up, 8 workers
#
# Options (defaults in brackets):
#   --dataroot DIR     dataset to use; generated there if it has no v1.0-mini/ [build/nuscenes-synth]
#                      (point it at the real NuScenes mini to measure that instead)
#   --samples N        samples to generate [32]; NuScenes mini's train split has 323
#   --loaders LIST     comma-separated, the first is the reference of the table [reference,dali]
#   --device cpu|cuda  where batches end up [cuda if torch sees a GPU, else cpu]
#   --workers N        DataLoader workers of reference and gpu [2]
#   --dali-workers N   DALI Python (external source) workers [1, as the seed]
#   --dali-threads N   DALI operator threads [4, as the seed]
#   --batches N        batches fetched per loader [20]     --warmup N   warm-up batches among them [5]
#   --batch-size N     [8]
#   --breakdown N      batches of an extra reference run without workers, where laptime times
#                      decode / augment / collate itself (0: skip) [3]
#   --out DIR          JSON results and logs [build/loader-study]
#   --seed-settings    --batches 1000 --warmup 300 --workers 8
# Environment: PYTHON (interpreter with torch, torchvision, pillow, laptime; DALI for `dali`).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PYTHON=${PYTHON:-python3}

DATAROOT=$ROOT/build/nuscenes-synth
SAMPLES=32
LOADERS=reference,dali
DEVICE=
WORKERS=2
DALI_WORKERS=1
DALI_THREADS=4
BATCHES=20
WARMUP=5
BATCH_SIZE=8
BREAKDOWN=3
OUT=$ROOT/build/loader-study
while [ $# -gt 0 ]; do
  case $1 in
    --dataroot) DATAROOT=$2; shift ;;
    --samples) SAMPLES=$2; shift ;;
    --loaders) LOADERS=$2; shift ;;
    --device) DEVICE=$2; shift ;;
    --workers) WORKERS=$2; shift ;;
    --dali-workers) DALI_WORKERS=$2; shift ;;
    --dali-threads) DALI_THREADS=$2; shift ;;
    --batches) BATCHES=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --batch-size) BATCH_SIZE=$2; shift ;;
    --breakdown) BREAKDOWN=$2; shift ;;
    --out) OUT=$2; shift ;;
    --seed-settings) BATCHES=1000; WARMUP=300; WORKERS=8 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_study.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if ! "$PYTHON" -c "import laptime, torch, torchvision, PIL" 2>/dev/null; then
  echo "run_study.sh: $PYTHON cannot import laptime, torch, torchvision and PIL" \
       "(pip install . and examples/nuscenes/requirements.txt, or set PYTHONPATH)" >&2
  exit 1
fi
if [ -z "$DEVICE" ]; then
  DEVICE=$("$PYTHON" -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
fi
mkdir -p "$OUT"

if [ ! -d "$DATAROOT/v1.0-mini" ]; then
  jobs=$(nproc 2>/dev/null || echo 2)
  "$PYTHON" "$HERE/generate.py" --out "$DATAROOT" --samples "$SAMPLES" --jobs "$jobs"
fi

echo "=== machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB," \
     "$("$PYTHON" -c "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')")," \
     "device $DEVICE, batch $BATCH_SIZE, $BATCHES batches ($WARMUP warm-up)"

files=()
labels=()
IFS=, read -r -a kinds <<<"$LOADERS"
for kind in "${kinds[@]}"; do
  workers=$WORKERS
  label="$kind ($WORKERS workers)"
  if [ "$kind" = dali ]; then
    workers=$DALI_WORKERS
    label="dali ($DALI_WORKERS py worker + $DALI_THREADS threads)"
  fi
  json=$OUT/$kind-w$workers.json
  echo "=== $label"
  "$PYTHON" "$HERE/runner.py" --loader "$kind" --dataroot "$DATAROOT" --device "$DEVICE" \
    --workers "$workers" --dali-threads "$DALI_THREADS" --batches "$BATCHES" --warmup "$WARMUP" \
    --batch-size "$BATCH_SIZE" --json "$json" 2>&1 | tee "$OUT/$kind-w$workers.log"
  files+=("$json")
  labels+=("$label")
done

if [ "$BREAKDOWN" -gt 0 ]; then
  echo "=== breakdown: reference without workers (laptime times decode / augment / collate itself)"
  "$PYTHON" "$HERE/runner.py" --loader reference --dataroot "$DATAROOT" --device "$DEVICE" \
    --workers 0 --batches $((BREAKDOWN + 1)) --warmup 1 --batch-size "$BATCH_SIZE" \
    --json "$OUT/reference-inline.json" 2>&1 | tee "$OUT/reference-inline.log"
fi

echo "=== table ($OUT)"
joined=$(IFS=,; echo "${labels[*]}")
"$PYTHON" -m laptime compare "${files[@]}" --labels "$joined" | tee "$OUT/table.txt"
# The same runs with medians beside the means and both CPU figures (% of the machine, a rate, and
# core-ms per batch, the work). On the CPU the median leads: with this machine's small data an
# epoch is a few batches, and each epoch's first batch is a stall that carries the mean.
by=mean
[ "$DEVICE" = cpu ] && by=median
specs=()
for i in "${!files[@]}"; do specs+=("${labels[$i]}=${files[$i]}"); done
echo | tee -a "$OUT/table.txt"
"$PYTHON" "$ROOT/docs/studies/loader_table.py" --by "$by" "${specs[@]}" | tee -a "$OUT/table.txt"
