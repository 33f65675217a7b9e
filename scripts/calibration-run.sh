#!/usr/bin/env bash
# A calibration run on real GPUs, from the harness's self-test to a calibration file and an error report
# (docs/validation.md, "Calibrating on your cluster"). One process per GPU on every node, the NCCL unique id
# exchanged through a file on a filesystem all nodes share, then `fabricsim calibrate` and
# `fabricsim validate --loo` on what was measured.
#
#   scripts/calibration-run.sh --launcher slurm|mpirun|local --nodes N --gpus-per-node G --out DIR [options]
#
# Steps (each prints the command it runs; --dry-run prints them without running anything):
#  1. self-test: fabricsim-nccl-bench --self-test, one process per node (stops here if any node fails);
#  2. measure:   every collective, 8 B to --max-bytes, one process per GPU -> DIR/<op>.txt and DIR/<op>.json
#                (with --tuning, NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING so the text keeps NCCL's per-call
#                algorithm, protocol and channels, which validate and calibrate then simulate);
#  3. fit:       fabricsim calibrate DIR/*.json -> DIR/calibration.json;
#  4. report:    fabricsim validate --loo on the same runs, and validate with the new calibration
#                -> DIR/report.txt, DIR/validate.json, DIR/validate.svg.
# --analyse-only runs steps 3 and 4 on a DIR that already holds measurements (*.json or nccl-tests *.txt).
set -euo pipefail

launcher=local nodes=1 gpn=8 out="" topology="" bin=build max_bytes=8G iters=20 tuning=0 dry=0 analyse_only=0
ops="all_reduce all_gather reduce_scatter broadcast reduce all_to_all sendrecv"
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
die() { echo "calibration-run.sh: error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --launcher) launcher=${2:?}; shift ;;
    --nodes) nodes=${2:?}; shift ;;
    --gpus-per-node) gpn=${2:?}; shift ;;
    --out) out=${2:?}; shift ;;
    --topology) topology=${2:?}; shift ;;
    --bin) bin=${2:?}; shift ;;
    --max-bytes) max_bytes=${2:?}; shift ;;
    --iters) iters=${2:?}; shift ;;
    --ops) ops=${2:?}; shift ;;
    --tuning) tuning=1 ;;
    --dry-run) dry=1 ;;
    --analyse-only) analyse_only=1 ;;
    -h|--help) usage 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
  shift
done
[ -n "$out" ] || die "--out DIR is required"
case "$launcher" in slurm|mpirun|local) ;; *) die "--launcher: expected slurm, mpirun or local, found '$launcher'" ;; esac
[[ "$nodes" =~ ^[1-9][0-9]*$ ]] || die "--nodes: expected a positive integer, found '$nodes'"
[[ "$gpn" =~ ^[1-9][0-9]*$ ]] || die "--gpus-per-node: expected a positive integer, found '$gpn'"
[ "$launcher" != local ] || [ "$nodes" = 1 ] || die "--launcher local runs on one node; use slurm or mpirun for --nodes $nodes"
bench=$bin/validate/nccl_bench/fabricsim-nccl-bench
fabricsim=$bin/apps/fabricsim
ranks=$((nodes * gpn))

run() {  # prints the command, then runs it unless --dry-run
  echo "+ $*" >&2
  [ "$dry" = 1 ] || "$@"
}

# Launch $@ with one process per GPU (per_node=G) or one per node (per_node=1).
launch() {
  local per_node=$1; shift
  case "$launcher" in
    slurm) run srun -N "$nodes" --ntasks-per-node="$per_node" --gpus-per-node="$gpn" --cpu-bind=none "$@" ;;
    mpirun) run mpirun -np $((nodes * per_node)) --map-by ppr:"$per_node":node --bind-to none \
                -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS -x LD_LIBRARY_PATH "$@" ;;
    local) run "$@" ;;
  esac
}

mkdir -p "$out"
if [ "$analyse_only" = 0 ]; then
  [ "$dry" = 1 ] || [ -x "$bench" ] || die "$bench not found: build with CUDA and NCCL first (docs/validation.md)"
  # 1. Self-test on every node (single process per node, its local GPUs).
  launch 1 "$bench" --self-test -g "$gpn" > >(tee "$out/selftest.txt")
  # 2. Measure, one process per GPU (local: one process driving all GPUs).
  if [ "$tuning" = 1 ]; then export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING; fi
  for op in $ops; do
    if [ "$launcher" = local ]; then
      launch 1 "$bench" -g "$gpn" --op "$op" -b 8 -e "$max_bytes" -f 2 -n "$iters" --json "$out/$op.json" > "$out/$op.txt"
    else
      # A fresh unique-id path per job on the shared filesystem (the bench's rank 0 removes it at the end).
      launch "$gpn" "$bench" --uid-file "$out/.uid.$op.$$" --op "$op" -b 8 -e "$max_bytes" -f 2 -n "$iters" \
        --json "$out/$op.json" > "$out/$op.txt"
    fi
  done
fi

# 3. Fit, 4. report. Measurements: the bench's JSON files, else nccl-tests text files.
shopt -s nullglob
logs=("$out"/*.json)
filtered=()
for f in "${logs[@]}"; do case "$(basename "$f")" in calibration.json|validate.json|calibrate.json) ;; *) filtered+=("$f") ;; esac; done
logs=("${filtered[@]}")
if [ ${#logs[@]} -eq 0 ]; then logs=("$out"/*.txt); fi
[ "$dry" = 1 ] || [ ${#logs[@]} -gt 0 ] || die "$out holds no measurements (*.json or nccl-tests *.txt)"
topo=()
[ -z "$topology" ] || topo=(--topology "$topology")
run "$fabricsim" calibrate "${topo[@]}" "${logs[@]}" -o "$out/calibration.json" --json "$out/calibrate.json"
{
  echo "== leave-one-out: each run predicted by a calibration fitted on the others"
  run "$fabricsim" validate --loo "${topo[@]}" "${logs[@]}"
  echo "== in sample: every run with the calibration fitted on all of them ($out/calibration.json)"
  run "$fabricsim" validate "${topo[@]}" --calibration "$out/calibration.json" "${logs[@]}" --json "$out/validate.json" --svg "$out/validate.svg"
} > "$out/report.txt"
echo "calibration: $out/calibration.json; report: $out/report.txt" >&2
