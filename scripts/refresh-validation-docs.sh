#!/usr/bin/env bash
# Rewrites every generated per-row table of docs/validation.md (the blocks between `<!-- generated: NAME -->`
# and `<!-- /generated -->`) from the validation tests that compute them: each test renders its rows and, with
# FABRICSIM_UPDATE_DOCS=1, replaces its block instead of failing on a difference (tests/doc_table_util.hpp).
# Usage: scripts/refresh-validation-docs.sh [BUILD_DIR]   (default build; build the test executables first)
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
export FABRICSIM_UPDATE_DOCS=1
status=0
"$dir"/tests/test_replay -tc='validation:*' || status=1
"$dir"/tests/test_workloads -tc='validation: whole layers*' || status=1
if [ "$status" != 0 ]; then
  echo "refresh-validation-docs: some validation test failed (a bound, not the tables); the tables were rewritten" >&2
fi
git --no-pager diff --stat -- docs/validation.md
exit "$status"
