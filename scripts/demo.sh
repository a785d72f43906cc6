#!/usr/bin/env bash
# Builds laptime's examples and runs the demo (examples/basic_loop), installing what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
laptime_install_debs "${LAPTIME_BUILD_DEBS[@]}"
cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAPTIME_BUILD_TESTS=OFF \
  -DLAPTIME_BUILD_BENCH=OFF -DLAPTIME_BUILD_EXAMPLES=ON >/dev/null
cmake --build build/demo --target basic_loop -j2
./build/demo/examples/basic_loop/basic_loop "$@"
