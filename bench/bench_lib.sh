# Sourced by bench/run.sh and bench/goals.sh: the one way laptime_bench is built and run.

# bench_build SRC BUILD: laptime_bench (Release, -O2) from the source tree SRC, built in BUILD.
# LAPTIME_JOBS sets the build's parallelism (default 2).
bench_build() {
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DLAPTIME_BUILD_TESTS=ON \
    -DLAPTIME_BUILD_EXAMPLES=OFF -DLAPTIME_BUILD_BENCH=ON -DLAPTIME_WERROR=ON >/dev/null &&
    cmake --build "$2" -j "${LAPTIME_JOBS:-2}" --target laptime_bench
}

# bench_run BUILD OUT REPS [FLAGS...]: one run of BUILD's laptime_bench, REPS repetitions of each
# benchmark, the JSON results in OUT, FLAGS passed on. No profiler attached: the NVTX goals are
# for "no tool attached" (docs/performance.md).
bench_run() {
  local build=$1 out=$2 reps=$3
  shift 3
  env -u NVTX_INJECTION64_PATH -u NVTX_INJECTION32_PATH "$build/bench/laptime_bench" \
    --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
    --benchmark_out="$out" --benchmark_out_format=json "$@"
}

# bench_machine: when and where, one line.
bench_machine() {
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
}

# bench_filter_of FLAGS...: the value of a --benchmark_filter=... among FLAGS (empty if none).
bench_filter_of() {
  local flag filter=
  for flag in "$@"; do
    case $flag in --benchmark_filter=*) filter=${flag#--benchmark_filter=} ;; esac
  done
  echo "$filter"
}
