#!/usr/bin/env bash
# The compile time laptime adds to a trainer-sized CUDA file (docs/build.md): trainer.cu
# (about 2,000 lines: kernels, templates, cuBLAS, a loader thread) built four ways by its
# Makefile with `nvcc -O3 -arch=sm_90 -std=c++17 ... -lcublas` (compile and link):
#
#   plain      no laptime
#   laptime    Stopwatch, NVTX ranges and GPU events under five names, report and JSON: the light
#              headers, laptime.o kept (the fast recipe)
#   single     the same calls with the single include <laptime/laptime.hpp> (header-only: the
#              implementation compiled with the file, in every clean build)
#   disabled   the same source with LAPTIME_DISABLE
#
# Best of N builds each (default 3), the compiler's CPU time (user + system of nvcc and everything
# it runs: on a shared machine a build often waits for a core, which says nothing about the code).
# Prints seconds and x plain; goals: laptime <= 1.05 x plain, single <= 1.3 x plain, disabled
# <= 1.02 x plain. Exits 1 on a miss.
#
#   bench/compile/trainer/run.sh              best of 3
#   bench/compile/trainer/run.sh 5            best of 5
#   bench/compile/trainer/run.sh 3 --run 300  then runs each build for 300 steps on the GPU (the
#                                             loss must fall), after a check of the forward pass
#                                             against a CPU reference and of the backward pass
#                                             against finite differences
#
# The laptime build is the fast recipe: the trainer includes the light headers and links laptime.o,
# laptime's implementation (src/laptime.cpp) compiled once per program and kept, as a project's
# build keeps it; its own compile time is printed on a row of its own (once, not per rebuild).
# NVCC and ARCH (sm_90) pass through to the Makefile.
set -euo pipefail
cd "$(dirname "$0")"
RUNS=3
STEPS=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --run) STEPS=${2:?--run needs a number of steps}; shift 2 ;;
    [0-9]*) RUNS=$1; shift ;;
    *) echo "usage: $0 [RUNS] [--run STEPS]" >&2; exit 2 ;;
  esac
done
NVCC=${NVCC:-nvcc}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
MAKEVARS=(O="$OUT" NVCC="$NVCC" ARCH="${ARCH:-sm_90}")

best_of() {  # best_of TARGET [SOURCE]: the fastest of RUNS rebuilds after SOURCE changed, ms of CPU
  local best="" ms src=${2:-trainer.cu}
  for ((i = 0; i < RUNS; i++)); do
    ms=$( { TIMEFORMAT='%3U %3S'; time make -s -W "$src" "${MAKEVARS[@]}" "$OUT/$1" >/dev/null; } 2>&1 |
      awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { printf "%d", ($1 + $2) * 1000 }')
    [[ -n $ms ]] || { echo "bench/compile/trainer: building $1 failed" >&2; make -B "${MAKEVARS[@]}" "$OUT/$1"; exit 1; }
    if [[ -z $best || $ms -lt $best ]]; then best=$ms; fi
  done
  echo "$best"
}

declare -A T
make -s "${MAKEVARS[@]}" "$OUT/laptime.o" >/dev/null  # built once, before the timed rebuilds
for v in plain laptime single disabled; do T[$v]=$(best_of "trainer-$v"); done
T[library]=$(best_of laptime.o ../../../src/laptime.cpp)

echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), $(nproc) cores," \
  "$("$NVCC" --version | tail -2 | head -1)," \
  "nvcc -O3 -arch=${ARCH:-sm_90} -std=c++17, $(wc -l <trainer.cu) lines, best of $RUNS, CPU s"
status=0
printf '%-10s %9s %9s %9s %s\n' build seconds "x plain" goal ""
for v in plain laptime single disabled; do
  ratio=$(awk -v a="${T[$v]}" -v b="${T[plain]}" 'BEGIN { printf "%.3f", a / b }')
  case $v in
    plain) goal="" ;;
    laptime) goal=1.05 ;;
    single) goal=1.3 ;;
    disabled) goal=1.02 ;;
  esac
  verdict=""
  if [[ -n $goal ]]; then
    if awk -v r="$ratio" -v g="$goal" 'BEGIN { exit !(r <= g) }'; then verdict=PASS; else
      verdict=MISS; status=1
    fi
  fi
  printf '%-10s %9.2f %9s %9s %s\n' "$v" "$(awk -v m="${T[$v]}" 'BEGIN { print m / 1000 }')" \
    "$ratio" "${goal:+<= $goal}" "$verdict"
done
printf '%-10s %9.2f %9s   (src/laptime.cpp -> laptime.o: once per program, not per rebuild)\n' \
  library "$(awk -v m="${T[library]}" 'BEGIN { print m / 1000 }')" \
  "$(awk -v a="${T[library]}" -v b="${T[plain]}" 'BEGIN { printf "%.3f", a / b }')"

if [[ $STEPS -gt 0 ]]; then
  make -s "${MAKEVARS[@]}" >/dev/null
  echo
  echo "== checks (plain build): forward against a CPU reference, backward against finite differences"
  rc=0
  "$OUT/trainer-plain" --check || rc=$?
  if [[ $rc -eq 77 ]]; then echo "no CUDA device here: the runs are skipped"; exit $status; fi
  [[ $rc -eq 0 ]] || status=1
  "$OUT/trainer-plain" --gradcheck --quiet || status=1
  for v in plain laptime single disabled; do
    echo
    echo "== $v: $STEPS steps"
    (cd "$OUT" && "./trainer-$v" --steps "$STEPS" --eval-every 0 --json "$OUT/trainer.json") ||
      status=1
  done
fi
exit $status
