#!/usr/bin/env bash
# What including laptime adds to a file's compile time (SPEC §5), next to what one
# nvtx3::scoped_range adds. Compiles bench/compile/tu.cpp in each variant with
# `g++ -std=c++17 -O3 -c`, best of N runs (default 3) of the compiler's CPU time, and prints per variant: the time, what it
# adds to the plain file, that addition against nvtx3's, and the time against the plain file.
#
#   bench/compile/run.sh          best of 3
#   bench/compile/run.sh 5        best of 5
#
# CXX picks the compiler; CUDA_INCLUDE the directory with nvtx3/ (default: the toolkit's, found
# as /usr/local/cuda/include); LAPTIME_INCLUDE the laptime headers (default: include/, this
# checkout; another version's to compare); EXTRA_FLAGS more flags for every variant. The machine is shared:
# best-of-N keeps the noise down, rerun when in doubt.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-3}
CXX=${CXX:-g++}
CUDA_INCLUDE=${CUDA_INCLUDE:-/usr/local/cuda/include}
if [[ ! -f $CUDA_INCLUDE/nvtx3/nvtx3.hpp ]]; then
  echo "bench/compile: no nvtx3/nvtx3.hpp under $CUDA_INCLUDE (set CUDA_INCLUDE)" >&2
  exit 2
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# shellcheck disable=SC2206
FLAGS=(-std=c++17 -O3 -c "-I${LAPTIME_INCLUDE:-include}" -isystem "$CUDA_INCLUDE" ${EXTRA_FLAGS:-})

# The compiler's CPU time (user + system), not wall time: on a shared machine a compile often
# waits for a core, which says nothing about the code it compiles.
best_of() {  # best_of FLAGS...: prints the fastest of RUNS compiles, in milliseconds
  local best="" ms
  for ((i = 0; i < RUNS; i++)); do
    ms=$( { TIMEFORMAT='%3U %3S'; time "$CXX" "${FLAGS[@]}" "$@" bench/compile/tu.cpp \
      -o "$OUT/tu.o"; } 2>&1 | awk 'NF == 2 { printf "%d", ($1 + $2) * 1000 }')
    if [[ -z $best || $ms -lt $best ]]; then best=$ms; fi
  done
  echo "$best"
}

declare -A T
names=(plain nvtx3 stopwatch report disabled wrapper)
T[plain]=$(best_of -DVARIANT=0)
T[nvtx3]=$(best_of -DVARIANT=1)
T[stopwatch]=$(best_of -DVARIANT=2)
T[report]=$(best_of -DVARIANT=3)
T[disabled]=$(best_of -DVARIANT=3 -DLAPTIME_DISABLE)
T[wrapper]=$(best_of -DVARIANT=4)

declare -A WHAT=(
  [plain]="plain file (<string> <vector> <chrono> <cstdio>)"
  [nvtx3]="+ nvtx3::scoped_range, five names"
  [stopwatch]="+ laptime Stopwatch, five names start/end/finish_iter"
  [report]="+ the same, print_eval_times and to_json"
  [disabled]="+ the same, LAPTIME_DISABLE"
  [wrapper]="+ laptime NVTX wrapper alone (LAPTIME_RANGE)"
)
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $($CXX --version | head -1), best of $RUNS," \
  "${FLAGS[*]}"
nvtx_add=$((T[nvtx3] - T[plain]))
printf '%-56s %8s %8s %12s %10s\n' variant ms "+ms" "+/+nvtx3" "/plain"
for n in "${names[@]}"; do
  add=$((T[$n] - T[plain]))
  printf '%-56s %8d %8d %12s %10s\n' "${WHAT[$n]}" "${T[$n]}" "$add" \
    "$(awk -v a="$add" -v b="$nvtx_add" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')" \
    "$(awk -v a="${T[$n]}" -v b="${T[plain]}" 'BEGIN { printf "%.2f", a / b }')"
done
