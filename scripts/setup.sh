#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the flagship simulation on a built-in default.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/register-python.sh   # `import fabricsim` in python3 (docs/python.md)
build/apps/fabricsim run
