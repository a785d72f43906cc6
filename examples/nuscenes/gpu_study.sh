#!/usr/bin/env bash
# The GPU-side runs of the studies in one script, for the GPU machine (an H200 or an H100;
# docs/studies/): run it from anywhere with the stages wanted; each stage's output goes to
# $OUT/<stage>.log and a table of stages, exit status and time is printed last. The goals and
# compile stages run the benchmarks of bench/.
#
#   examples/nuscenes/gpu_study.sh setup check loader train profile cpp
#
#   setup    unpack .debs/ into /tmp/deps; build laptime's Python package and examples/ddp_train
#            into /tmp/laptime-profile-build (the folder examples/nuscenes/profile.sh uses);
#            generate the NuScenes-layout data (324 samples, NuScenes mini's train split size)
#            into /tmp/nuscenes-synth
#   check    scripts/gpu-check.sh (tests, GPU timing, nsys, ncu, Python with PyTorch)
#   loader   the loader study (examples/nuscenes/run_study.sh): the reference loader with 8 workers
#            against the GPU loaders (DALI one Python worker, as the seed), then 16 workers
#   train    the training study: examples/nuscenes/train.py per loader, 300 iterations, 50 warm-up,
#            then `laptime compare`
#   profile  examples/nuscenes/profile.sh: each loader's training run under nsys, and the C++
#            example
#   cpp      examples/ddp_train at world size 1 through ddp_launch, `laptime merge`, the launcher test
#   workers  worker processes (docs/workers.md): the reference loader with 8 DataLoader workers (laptime's per-worker figures
#            in the main report), python/tests/test_workers.py with PyTorch (fork, spawn,
#            forkserver, DataLoader), and scripts/nsys-counters.sh (CPU/IO counters and unified
#            Stopwatch/NVTX ranges read back from an nsys report)
#   goals    the performance goals (docs/performance.md): bench/gpu (event timing and do_cuda_sync
#            against raw CUDA calls), every row of laptime_bench (bench/table.py),
#            bench/python_bench.py: one build, one run
#   compile  bench/compile/trainer/run.sh: the trainer-sized CUDA file built plain, with laptime and
#            with LAPTIME_DISABLE (nvcc -O3 -arch=sm_90, best of 3), then each build trained 300 steps;
#            and the Makefile consumer's program built with README's nvcc line
#
# DALI is used where `import nvidia.dali` works: its wheels unpacked at /tmp/site (../shared/GPU.md)
# are put on PYTHONPATH. Nothing here changes GPU settings.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# Everything is written under /tmp/laptime-h200 (kept while the machine stays warm, so later calls
# add to it); what comes back from the device tool is this call's stage logs and one archive of
# all results and logs (its $OUT returns at most 8 files).
RESULTS=${RESULTS_OUT:-${OUT:-/tmp/laptime-h200-out}}
OUT=/tmp/laptime-h200
mkdir -p "$OUT" "$RESULTS"
export PATH="/usr/local/cuda/bin:$PATH"
BUILD=/tmp/laptime-profile-build
DATA=/tmp/nuscenes-synth
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
[ -d /tmp/site ] && export PYTHONPATH="$PYTHONPATH:/tmp/site"
NPROC=$(nproc)

dali_loader() {  # ",dali" where DALI imports
  python3 -c "import nvidia.dali" 2>/dev/null && echo ",dali"
}

stage_setup() {
  mkdir -p /tmp/deps && for f in .debs/*.deb; do dpkg -x "$f" /tmp/deps; done
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/tmp/deps/usr \
    -DLAPTIME_BUILD_PYTHON=ON -DLAPTIME_BUILD_TESTS=OFF -DLAPTIME_BUILD_BENCH=OFF \
    -DLAPTIME_BUILD_EXAMPLES=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DPython_EXECUTABLE="$(command -v python3)" &&
    cmake --build "$BUILD" --target laptime_python -j "$NPROC" &&
    { cmake --build "$BUILD" --target ddp_launch ddp_train -j "$NPROC" || echo "examples/ddp_train: build FAILED"; } &&
    python3 -c "import laptime, torch; print('laptime', laptime.__version__, laptime.build_info()); print('torch', torch.__version__, torch.cuda.get_device_name())" &&
    { python3 -c "import nvidia.dali as d; print('DALI', d.__version__)" || echo "no DALI"; } &&
    { [ -d "$DATA/v1.0-mini" ] ||
      python3 examples/nuscenes/generate.py --out "$DATA" --samples 324 --seed 0 --jobs "$NPROC"; }
}

stage_check() {
  OUT="$OUT/gpu-check" scripts/gpu-check.sh
}

stage_loader() {
  local loaders="reference,gpu$(dali_loader)"
  examples/nuscenes/run_study.sh --dataroot "$DATA" --device cuda --workers 8 --batches 200 \
    --warmup 50 --loaders "$loaders" --breakdown 3 --out "$OUT/loader-w8" &&
    examples/nuscenes/run_study.sh --dataroot "$DATA" --device cuda --workers 16 --batches 200 \
      --warmup 50 --loaders reference,gpu --breakdown 0 --out "$OUT/loader-w16"
}

stage_train() {
  local rc=0 files=() labels=()
  for L in reference gpu $(dali_loader | tr -d ,); do
    echo "=== training with the $L loader"
    LAPTIME_PROFILE=evaluation python3 -m torch.distributed.run --standalone --nproc_per_node 1 \
      examples/nuscenes/train.py --loader "$L" --dataroot "$DATA" --iters 300 --warmup 50 \
      --batch-size 8 --workers 8 --replicate-dataset-per-gpu --results-dir "$OUT/train/$L" \
      --summary "$OUT/train/$L/summary.json" --check-loss-falls || rc=1
    files+=("$OUT/train/$L/rank0.json")
    labels+=("$L")
  done
  echo "=== table"
  python3 -m laptime compare "${files[@]}" --name "training loop" \
    --labels "$(IFS=,; echo "${labels[*]}")" --unit iter || rc=1
  return $rc
}

stage_profile() {
  OUT="$OUT/profile" bash examples/nuscenes/profile.sh --dataroot "$DATA" --iters 40 --warmup 10 \
    --loaders "reference gpu$(dali_loader | tr , ' ')"
}

stage_cpp() {
  local B=$BUILD/examples/ddp_train rc=0
  rm -rf "$OUT/cpp"
  LAPTIME_PROFILE=evaluation "$B/ddp_launch" --nproc 1 --out "$OUT/cpp" -- "$B/ddp_train" \
    --iters 300 --warmup 50 || rc=1
  python3 -m laptime merge "$OUT"/cpp/rank*.json || rc=1
  bash tests/ddp-launch-test.sh "$B/ddp_launch" "$B/ddp_train" || rc=1
  return $rc
}

stage_workers() {
  local rc=0
  mkdir -p "$OUT/workers"
  python3 examples/nuscenes/runner.py --loader reference --dataroot "$DATA" --device cuda \
    --workers 8 --batches 200 --warmup 50 --json "$OUT/workers/reference-w8.json" || rc=1
  (cd python/tests && python3 -m pytest -q -p no:cacheprovider test_workers.py) || rc=1
  OUT="$OUT/workers/nsys" bash scripts/nsys-counters.sh --iters 20 --hz 20 || rc=1
  return $rc
}

stage_compile() {
  local rc=0
  bench/compile/trainer/run.sh 3 --run 300 || rc=1
  echo "=== the README's nvcc line on tests/consumers/makefile/main.cpp"
  nvcc -std=c++17 -O2 -I include tests/consumers/makefile/main.cpp -o /tmp/laptime-consumer-nvcc &&
    /tmp/laptime-consumer-nvcc | tail -n 12 || rc=1
  return $rc
}

stage_goals() {
  # One build (16 cores), then by priority: bench/gpu (GPU timing), the C++ rows of the stricter
  # goals that differ between machines (the clock, names, NVTX, unified ranges, workers), Python. The
  # whole of bench/goals.sh takes longer than a device call can spare; this machine runs it whole.
  local rc=0 deps=/tmp/deps b=/tmp/laptime-goals
  mkdir -p "$deps" && for f in .debs/*.deb; do dpkg -x "$f" "$deps"; done
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
    -DCMAKE_PREFIX_PATH="$deps/usr" -DLAPTIME_BUILD_BENCH=ON -DLAPTIME_BUILD_TESTS=ON \
    -DLAPTIME_BUILD_EXAMPLES=OFF -DLAPTIME_BUILD_PYTHON=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DPython_EXECUTABLE="$(command -v python3)" >/dev/null &&
    cmake --build "$b" --target laptime_gpu_bench laptime_bench laptime_python -j "$NPROC" |
    tail -n 2 || return 2
  echo "=== bench/gpu (GPU timing and do_cuda_sync vs raw CUDA), medians of 5"
  "$b/bench/gpu/laptime_gpu_bench" --benchmark_repetitions=5 \
    --benchmark_report_aggregates_only=true --benchmark_out="$OUT/gpu-bench.json" \
    --benchmark_out_format=json | grep -E "median|Run on|Load" &&
    python3 bench/gpu/ratios.py "$OUT/gpu-bench.json" || rc=1
  echo "=== laptime_bench, every row of bench/table.py, medians of 5"
  env -u NVTX_INJECTION64_PATH "$b/bench/laptime_bench" --benchmark_repetitions=5 \
    --benchmark_report_aggregates_only=true --benchmark_out="$OUT/bench-results.json" \
    --benchmark_out_format=json | grep median
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $NPROC cores"
  python3 bench/table.py "$OUT/bench-results.json" || true
  echo "=== bench/python_bench.py --n 2000 --reps 21"
  PYTHONPATH="$b/python" python3 bench/python_bench.py --n 2000 --reps 21 || rc=1
  return $rc
}

ROWS=()
for s in "$@"; do
  start=$SECONDS
  echo "######## $s"
  "stage_$s" >"$OUT/$s.log" 2>&1
  rc=$?
  tail -n 25 "$OUT/$s.log"
  ROWS+=("| $s | $([ $rc = 0 ] && echo ok || echo "FAILED rc=$rc") | $((SECONDS - start)) s |")
done
for s in "$@"; do cp "$OUT/$s.log" "$RESULTS/" 2>/dev/null; done
tar -czf "$RESULTS/artifacts.tar.gz" -C "$OUT" --exclude='*.nsys-rep' --exclude='*.sqlite' \
  --exclude='*.qdstrm' . 2>/dev/null
echo
echo "| stage | result | time |"
echo "|---|---|---|"
printf '%s\n' "${ROWS[@]}"
