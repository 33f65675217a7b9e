#!/usr/bin/env bash
# Configures and builds fabricsim into ./build (Release) — or ./build-asan with FABRICSIM_ASAN=1.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${FABRICSIM_ASAN:-0}" = 1 ]; then
  dir=build-asan
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFABRICSIM_SANITIZE=ON >&2
else
  dir=build
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$dir" -j "$(nproc)" >&2
