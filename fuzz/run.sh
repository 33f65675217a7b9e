#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time: fuzz/run.sh BUILD_DIR TARGET SECONDS [libFuzzer flags...]
# The corpus (BUILD_DIR/fuzz-corpus/TARGET) is seeded from the repository's own files on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1 target=$2 secs=$3
shift 3
corpus=$build/fuzz-corpus/$target
if [ ! -d "$corpus" ]; then
  trap 'rm -rf "$corpus"' ERR  # no half-seeded corpus left behind
  mkdir -p "$corpus"
  case $target in
    topology) cp tests/data/topologies/*.json "$corpus"/ ;;
    scenario) cp examples/workloads/*.json "$corpus"/ ;;
    calibration) cp validate/calibrations/*.json "$corpus"/ ;;
    sweep) cp examples/sweeps/*.json "$corpus"/ ;;
    trace) fs="$build/apps/fabricsim"; [ -x "$fs" ] || fs=build/apps/fabricsim  # a Release build's CLI will do
           "$fs" gen dp --param num_parameters=1e8 --param world_size=4 \
             --param global_batch_size=16 -o "$corpus/dp.json" >/dev/null ;;
    nccl_tests) cp tests/data/nccl-tests/raw/*.txt "$corpus"/
                printf '| Message Size (Bytes) | A (GB/s) |\n| --- | --- |\n| 1K | 0.04 |\n| 132K | 4.75 |\n| 8G | 231.58 |\n' \
                  > "$corpus"/busbw-table.md ;;
    astra) cp examples/workloads/*.txt "$corpus"/; find tests/data/foreign-workloads/astra-sim-1.0-text tests/data/foreign-workloads/simai-text -type f -name '*.txt' -exec cp {} "$corpus"/ \; ;;
    chakra) cp examples/workloads/chakra/*.json "$corpus"/
            find tests/data/foreign-workloads/chakra-et tests/data/foreign-workloads/chakra-json tests/data/foreign-workloads/chakra-jsonizer -type f -size -64k -exec cp {} "$corpus"/ \; ;;
    *) echo "unknown target $target" >&2; exit 2 ;;
  esac
fi
exec "$build/fuzz/fuzz_$target" -max_total_time="$secs" -rss_limit_mb=4096 -max_len=65536 "$@" "$corpus"
