#!/usr/bin/env bash
# CPU and I/O on the Nsight Systems timeline (laptime/counters.hpp, docs/resources.md), proven with nsys:
# builds a small program with the counters on, runs it under `nsys profile -t nvtx`, exports the
# report to SQLite and reads the counters back. Prints a short table last.
#
#   scripts/nsys-counters.sh [--iters 20] [--hz 20]
#
# The program tracks three names (Stopwatch::track_cpu_usage) in each iteration: "busy" spins for
# 50 ms, "idle" sleeps 50 ms, "write" writes 16 MiB to a file on disk and fsyncs it; and
# enable_nvtx_counters(hz) adds the background sampler's four process-tree counters. Each tracked
# name gets four counters ("<name>: process tree CPU" and "<name>: system CPU" in %, "<name>: read"
# and "<name>: write" in MB/s), published at the end of each of its intervals.
#
# The program is scripts/nsys-counters/counters_app.cpp; scripts/nsys-counters/read_counters.py
# reads its counters and ranges back from the SQLite export, wherever this nsys keeps them.
#
# Checks: the Stopwatch's intervals are NVTX ranges of their names (set_nvtx_ranges), "spin"
# nested in "busy"; the 16 counters are there; busy/idle/write have one sample per iteration; "busy"'s
# process-tree CPU is more than 3x "idle"'s; "write: write" is above 0 MB/s; the sampler published.
# nsys's importer needs libdw: Debian's .debs in .debs/ are unpacked as scripts/gpu-check.sh does.
# Output (report, sqlite, logs) goes to $OUT (the device tool's output folder) or
# /tmp/laptime-nsys-counters. Exit status: 0 if every check passed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HERE="$ROOT/scripts/nsys-counters"  # the program and its reader
WORK=${OUT:-/tmp/laptime-nsys-counters}
DEPS=${DEPS:-/tmp/deps}
ITERS=20
HZ=20
while [ $# -gt 0 ]; do
  case $1 in
    --iters) ITERS=$2; shift 2 ;;
    --hz) HZ=$2; shift 2 ;;
    *) echo "usage: see the top of $0" >&2; exit 2 ;;
  esac
done
mkdir -p "$WORK" "$DEPS"
PY=${PYTHON:-python3}

# ---------------------------------------------------------------- tools
source "$ROOT/scripts/nsight-tools.sh"  # NSYS
echo "nsys: ${NSYS:-not found}"
if [ -z "${NSYS:-}" ]; then
  echo "nsys-counters.sh: nsys not found (set NSYS=/path/to/nsys)" >&2
  exit 1
fi
if compgen -G "$ROOT/.debs/*.deb" >/dev/null; then
  for f in "$ROOT"/.debs/*.deb; do dpkg -x "$f" "$DEPS"; done
fi
DEPS_LIB="$DEPS/usr/lib/x86_64-linux-gnu"
nsys_() { LD_LIBRARY_PATH="$DEPS_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$NSYS" "$@"; }
"$NSYS" --version 2>/dev/null | head -1

# ---------------------------------------------------------------- the program
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
echo "building counters_app"
if ! g++ -std=c++17 -O2 -I"$ROOT/include" -I"$CUDA_INC" "$HERE/counters_app.cpp" \
  -o "$WORK/counters_app" -pthread -ldl >"$WORK/build.log" 2>&1; then
  cat "$WORK/build.log"
  echo "nsys-counters.sh: the program did not build" >&2
  exit 1
fi

# ---------------------------------------------------------------- profile, export
REP="$WORK/counters"
rm -f "$REP.nsys-rep" "$REP.sqlite"
echo "nsys profile -t nvtx ($ITERS iterations, sampler at $HZ Hz)"
nsys_ profile -t nvtx --sample=none --cpuctxsw=none -o "$REP" --force-overwrite true \
  "$WORK/counters_app" "$ITERS" "$HZ" "$WORK/counters-app.bin" >"$WORK/profile.log" 2>&1
profiled=$?
tail -n 25 "$WORK/profile.log"
nsys_ export --type sqlite -o "$REP.sqlite" --force-overwrite true "$REP.nsys-rep" \
  >"$WORK/export.log" 2>&1
exported=$?
tail -n 3 "$WORK/export.log"

# ---------------------------------------------------------------- read the counters back
"$PY" "$HERE/read_counters.py" "$REP.sqlite" "$ITERS" "$profiled" "$exported"
