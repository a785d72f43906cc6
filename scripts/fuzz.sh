#!/usr/bin/env bash
# Builds the API fuzzer (libFuzzer with AddressSanitizer and UndefinedBehaviorSanitizer, clang)
# in build/fuzz and runs it for a bounded time.
#
#   scripts/fuzz.sh [SECONDS]     default 60: seconds of fuzzing, spread over LAPTIME_JOBS (2)
#                                 processes (libFuzzer's -fork mode), so SECONDS/2 of wall time
#
# Seeds come from fuzz/corpus (read only); inputs found meanwhile go to build/fuzz/corpus. Exits
# non-zero on a finding (a failed check, a crash, a leak, a hang), whose reproducer is left in
# build/fuzz/findings/ (replay: build/fuzz/fuzz/api_fuzzer build/fuzz/findings/<file>).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
JOBS=${LAPTIME_JOBS:-2}

source scripts/deps.sh
laptime_install_debs "${LAPTIME_BUILD_DEBS[@]}" clang libclang-rt-14-dev

BUILD=build/fuzz
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="${LAPTIME_FUZZ_CXX:-clang++}" -DLAPTIME_BUILD_FUZZ=ON \
  -DLAPTIME_BUILD_TESTS=OFF -DLAPTIME_BUILD_EXAMPLES=OFF -DLAPTIME_BUILD_BENCH=OFF \
  -DLAPTIME_INSTALL=OFF -DLAPTIME_WERROR=ON >/dev/null
cmake --build "$BUILD" --target api_fuzzer -j "$JOBS"

mkdir -p "$BUILD/corpus" "$BUILD/findings"
# -timeout: one input taking longer is a hang; -rss_limit_mb: memory growing without bound is a
# finding too. The sanitizers' options make every report fatal.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "laptime: fuzzing the API for ${SECONDS_TO_RUN}s in $JOBS processes"
# -fork: JOBS processes fuzz at once and share what they find; the first finding stops them all
# with a non-zero exit.
"$BUILD/fuzz/api_fuzzer" -fork="$JOBS" -max_total_time=$(((SECONDS_TO_RUN + JOBS - 1) / JOBS)) \
  -timeout=20 -rss_limit_mb=2048 \
  -max_len=2048 -print_final_stats=1 -artifact_prefix="$BUILD/findings/" \
  "$BUILD/corpus" fuzz/corpus
