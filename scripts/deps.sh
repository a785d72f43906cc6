#!/usr/bin/env bash
# Installs what building and testing laptime needs, only where it is missing (Debian 12).
# Sourced by scripts/demo.sh and scripts/test.sh (it sets no shell options: test.sh runs every
# stage even when one fails); safe to run again.

laptime_missing_debs() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  echo "${missing[@]:-}"
}

laptime_install_debs() {
  local missing
  missing=$(laptime_missing_debs "$@")
  [ -z "$missing" ] && return 0
  echo "laptime: installing Debian packages: $missing"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# Build tools and the test and benchmark dependencies (doctest, Google Benchmark); the library
# itself needs nothing beyond the C++17 standard library.
LAPTIME_BUILD_DEBS=(g++ cmake ninja-build pkg-config doctest-dev libbenchmark-dev ccache)
# The test command also needs Python (venv) and clang (libFuzzer, ThreadSanitizer).
# chromium: python/tests/test_reports.py opens `laptime html`'s page headless (about 510 MiB and
# 25 s to install on Debian 12; the test skips without it).
# locales: locale-test generates de_DE and tr_TR from its definitions where the machine lacks them.
LAPTIME_TEST_DEBS=(python3 python3-venv python3-dev clang libclang-rt-14-dev chromium locales)
