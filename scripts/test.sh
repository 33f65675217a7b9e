#!/usr/bin/env bash
# README command 2: build (if needed) and run the full test suite with ctest: every module's doctest
# executable, and apps_doc_long, the documentation's longer commands (case-study sweeps on a subset of their
# points, the shipped calibrations refitted; tests/apps/doc_commands.txt). Extra arguments go to ctest
# (`scripts/test.sh -LE long` leaves the long tier out for a quicker local run; CI runs everything).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
