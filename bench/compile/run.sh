#!/usr/bin/env bash
# What including laptime adds to a file's compile time (goals: docs/build.md), next to what one
# nvtx3::scoped_range adds. Compiles bench/compile/tu.cpp in each variant with `-O3 -c`, best of N
# runs (default 3) of the compiler's CPU time, and prints per row: the time, what it adds to the
# plain file, that addition against nvtx3's, the goal, and PASS/MISS. Exits 1 when a goal is missed.
#
#   bench/compile/run.sh          best of 3
#   bench/compile/run.sh 5        best of 5
#
# The rows a file of a multi-file program compiles (<laptime/stopwatch.hpp>: the API and the
# inline hot path) with the flags of each recipe: the CMake target's (its compile definitions and
# include directories) and the plain compiler line of docs/build.md. The implementation part
# (src/laptime.cpp) is compiled once per program, not per file; it and the single-include way
# (<laptime/laptime.hpp>, the implementation in the file) have goals of their own: the
# implementation's compile ≤ 4 s on the 2-core build machine, the single include's addition ≤ 4×
# nvtx3's. Both are missed (docs/build.md says by how much and why).
#
# CXX picks the compiler; CUDA_INCLUDE the directory with nvtx3/ (default: the toolkit's, found
# as /usr/local/cuda/include); LAPTIME_INCLUDE the laptime headers (default: include/, this
# checkout); EXTRA_FLAGS more flags for every row. The machine is shared: best-of-N keeps the
# noise down, rerun when in doubt.
#
# To add a row: a line in ROWS below (name, what, goal, "add" or "x"), and its command in
# compile_row (another file, compiler or flags; nvcc for a CUDA file).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-3}
CXX=${CXX:-g++}
CUDA_INCLUDE=${CUDA_INCLUDE:-/usr/local/cuda/include}
LAPTIME_INCLUDE=${LAPTIME_INCLUDE:-include}
if [[ ! -f $CUDA_INCLUDE/nvtx3/nvtx3.hpp ]]; then
  echo "bench/compile: no nvtx3/nvtx3.hpp under $CUDA_INCLUDE (set CUDA_INCLUDE)" >&2
  exit 2
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# shellcheck disable=SC2206
BASE=(-std=c++17 -O3 ${EXTRA_FLAGS:-})
# The CMake target laptime::laptime gives its users these (CMakeLists.txt); the plain recipe of
# docs/build.md only -I. Both rows compile the same file: the recipe must not change the cost.
CMAKE_FLAGS=("-I$LAPTIME_INCLUDE" -isystem "$CUDA_INCLUDE" -DLAPTIME_HAVE_CUDA_HEADERS=1)
PLAIN_FLAGS=("-I$LAPTIME_INCLUDE")

# name|what|goal|kind: kind "add" compares the row's addition to the plain file with nvtx3's
# addition ("+/+nvtx3", goal a maximum); "x" is the row's time against the plain file; "ms" the
# row's own time in ms (a goal of this machine's, docs/build.md); an empty goal is for reference
# only.
ROWS=(
  "plain|plain file (<string> <vector> <chrono> <cstdio>)||"
  "nvtx3|+ nvtx3::scoped_range, five names||add"
  "cmake|+ Stopwatch: five names, finish_iter, print_eval_times, write_json; CMake target|1.5|add"
  "recipe|+ the same; plain compiler recipe (-I only, src/laptime.cpp once)|1.5|add"
  "disabled|+ the same, LAPTIME_DISABLE|0.2|add"
  "single|+ the same, single include <laptime/laptime.hpp> (header-only)|4|add"
  "single-disabled|+ the same, single include, LAPTIME_DISABLE|0.2|add"
  "impl|src/laptime.cpp alone, once per program (ms)|4000|ms"
  "wrapper|+ laptime NVTX wrapper alone (LAPTIME_RANGE)|1.2|add"
)

compile_row() {  # compile_row NAME: compiles the row's file once
  local src=bench/compile/tu.cpp
  case $1 in
    plain) "$CXX" "${BASE[@]}" "${PLAIN_FLAGS[@]}" -DVARIANT=0 -c $src -o "$OUT/o" ;;
    nvtx3) "$CXX" "${BASE[@]}" -isystem "$CUDA_INCLUDE" -DVARIANT=1 -c $src -o "$OUT/o" ;;
    cmake) "$CXX" "${BASE[@]}" "${CMAKE_FLAGS[@]}" -DVARIANT=2 -c $src -o "$OUT/o" ;;
    recipe) "$CXX" "${BASE[@]}" "${PLAIN_FLAGS[@]}" -DVARIANT=2 -c $src -o "$OUT/o" ;;
    disabled) "$CXX" "${BASE[@]}" "${PLAIN_FLAGS[@]}" -DLAPTIME_DISABLE -DVARIANT=2 -c $src -o "$OUT/o" ;;
    single) "$CXX" "${BASE[@]}" "${CMAKE_FLAGS[@]}" -DVARIANT=3 -c $src -o "$OUT/o" ;;
    single-disabled) "$CXX" "${BASE[@]}" "${CMAKE_FLAGS[@]}" -DLAPTIME_DISABLE -DVARIANT=3 -c $src -o "$OUT/o" ;;
    impl) "$CXX" "${BASE[@]}" "${CMAKE_FLAGS[@]}" -c src/laptime.cpp -o "$OUT/o" ;;
    wrapper) "$CXX" "${BASE[@]}" "${CMAKE_FLAGS[@]}" -DVARIANT=4 -c $src -o "$OUT/o" ;;
    *) echo "bench/compile: no command for row $1" >&2 && return 2 ;;
  esac
}

# The compiler's CPU time (user + system), not wall time: on a shared machine a compile often
# waits for a core, which says nothing about the code it compiles.
best_of() {  # best_of NAME: prints the fastest of RUNS compiles, in milliseconds
  local best="" ms out
  for ((i = 0; i < RUNS; i++)); do
    # A row whose compile fails must not print a time (its errors would go unseen).
    out=$( { TIMEFORMAT='%3U %3S'; time { compile_row "$1" >/dev/null 2>&1 || echo COMPILE-FAILED; }; } 2>&1)
    ms=$(awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { printf "%d", ($1 + $2) * 1000 }' <<<"$out")
    if [[ -z $ms || $out == *COMPILE-FAILED* ]]; then
      echo "bench/compile: row $1 did not compile:" >&2
      compile_row "$1" >&2 || true
      exit 2
    fi
    if [[ -z $best || $ms -lt $best ]]; then best=$ms; fi
  done
  echo "$best"
}

declare -A T
for row in "${ROWS[@]}"; do
  IFS='|' read -r name _ _ _ <<<"$row"
  T[$name]=$(best_of "$name")
done

echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $($CXX --version | head -1), best of $RUNS, ${BASE[*]} -c"
nvtx_add=$((T[nvtx3] - T[plain]))
printf '%-78s %7s %7s %9s %6s %s\n' row ms "+ms" "+/+nvtx3" goal ""
missed=0
for row in "${ROWS[@]}"; do
  IFS='|' read -r name what goal kind <<<"$row"
  add=$((T[$name] - T[plain]))
  ratio=$(awk -v a="$add" -v b="$nvtx_add" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
  [[ $kind == x ]] && ratio=$(awk -v a="${T[$name]}" -v b="${T[plain]}" 'BEGIN { printf "%.2f", a / b }')
  [[ $kind == ms ]] && ratio=${T[$name]}
  verdict=""
  if [[ -n $goal ]]; then
    if awk -v r="$ratio" -v g="$goal" 'BEGIN { exit !(r != "n/a" && r <= g) }'; then
      verdict=PASS
    else
      verdict=MISS
      missed=$((missed + 1))
    fi
    goal="≤ $goal"
  fi
  [[ $name == plain ]] && ratio=""
  printf '%-78s %7d %7d %9s %6s %s\n' "$what" "${T[$name]}" "$add" "$ratio" "$goal" "$verdict"
done
echo "bench/compile: $missed goal(s) missed"
[[ $missed -eq 0 ]]
