#!/usr/bin/env bash
# The training sweep on the H200 machine (docs/studies/training.md, "The sweep"): builds laptime's
# Python package into /tmp/laptime-profile-build (as scripts/h200-study.sh does), generates the
# NuScenes-layout data (324 samples) into /tmp/nuscenes-synth, runs examples/nuscenes/sweep.py
# into /tmp/laptime-sweep and copies its tables, drawing and an archive of every cell to $OUT.
#
#   scripts/h200-sweep.sh [sweep.py options...]
#
# One device call is 10 minutes at most and the whole sweep takes longer: the sweep stops
# starting cells SWEEP_CALL_S seconds (default 540) after this script started, and the next call
# of the same script on the same warm machine goes on with the cells not yet run (they are kept in
# /tmp). DALI is used where `import nvidia.dali` works: its wheels unpacked at /tmp/site
# (../shared/GPU.md) are put on PYTHONPATH. Nothing here changes GPU settings.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
RESULTS=${OUT:-/tmp/laptime-sweep-out}
BUILD=/tmp/laptime-profile-build
DATA=/tmp/nuscenes-synth
SWEEP=/tmp/laptime-sweep
NPROC=$(nproc)
mkdir -p "$RESULTS" "$SWEEP"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
[ -d /tmp/site ] && export PYTHONPATH="$PYTHONPATH:/tmp/site"

if ! python3 -c "import laptime._laptime" 2>/dev/null; then
  echo "=== building laptime's Python package"
  { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAPTIME_BUILD_PYTHON=ON \
      -DLAPTIME_BUILD_TESTS=OFF -DLAPTIME_BUILD_BENCH=OFF -DLAPTIME_BUILD_EXAMPLES=OFF \
      -DPython_EXECUTABLE="$(command -v python3)" &&
    cmake --build "$BUILD" --target laptime_python -j "$NPROC"; } >"$SWEEP/build.log" 2>&1 ||
    { tail -n 30 "$SWEEP/build.log"; exit 2; }
fi
python3 -c "import laptime, torch; print('laptime', laptime.__version__, '| torch', torch.__version__, torch.cuda.get_device_name())" || exit 2
python3 -c "import nvidia.dali as d; print('DALI', d.__version__)" || echo "no DALI: the dali cells will fail"
[ -d "$DATA/v1.0-mini" ] ||
  python3 examples/nuscenes/generate.py --out "$DATA" --samples 324 --seed 0 --jobs "$NPROC" || exit 2
{ date -u '+%Y-%m-%d %H:%M UTC'; cat .sweep-commit 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  lscpu | sed -n 's/^Model name: *//p'; echo "$NPROC cores"; } | tee -a "$SWEEP/machine.txt"

python3 examples/nuscenes/sweep.py --dataroot "$DATA" --out "$SWEEP" \
  --deadline $(( ${SWEEP_CALL_S:-540} - SECONDS )) "$@"
rc=$?
cp "$SWEEP"/sweep.md "$SWEEP"/sweep.csv "$SWEEP"/sweep.svg "$SWEEP"/machine.txt "$RESULTS"/ 2>/dev/null
tar -czf "$RESULTS/cells.tar.gz" -C "$SWEEP" cells
exit $rc
