#!/usr/bin/env bash
# Sourced by scripts/gpu-check.sh, scripts/nsys-counters.sh and examples/nuscenes/profile.sh: where
# Nsight Systems and Nsight Compute are, on PATH or where the CUDA toolkit and the H200 machine keep
# them (../shared/GPU.md).
# Sets NSYS and NCU (empty when not found) unless the caller set them.

find_tool() {  # find_tool NAME GLOB...: first executable among NAME on PATH and the globs
  local name=$1 g f
  shift
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return; fi
  for g in "$@"; do
    for f in $g; do
      if [ -x "$f" ]; then echo "$f"; return; fi
    done
  done
}
NSYS=${NSYS:-$(find_tool nsys '/opt/nvidia/nsight-systems*/*/bin/nsys' \
  '/opt/nvidia/nsight-systems/*/target-linux-x64/nsys' \
  '/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys' '/usr/local/cuda/bin/nsys')}
NCU=${NCU:-$(find_tool ncu '/usr/local/cuda/bin/ncu' '/opt/nvidia/nsight-compute/*/ncu')}
