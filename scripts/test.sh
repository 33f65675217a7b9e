#!/usr/bin/env bash
# README command 2: build (if needed) and run the full test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
