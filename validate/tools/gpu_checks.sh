#!/usr/bin/env bash
# One GPU machine's worth of harness checks: the NCCL harness's self-test, the sweep that failed on the first
# H200 run (all ops, 8 B-1 GiB, with result checks), its multi-process mode with one rank, and the compute
# harness over its built-in Llama-3 kernel set. Usage: validate/tools/gpu_checks.sh OUTDIR [BINDIR]
# (BINDIR defaults to build/validate). Writes env.txt, selftest.txt, selftest_legacy.txt (the self-test with
# the pre-fix legacy-stream zeroing: it must FAIL), allops.txt, allops_json.tar, mp.txt, kernels.json and
# kernels.log into OUTDIR; the exit codes are appended to OUTDIR/env.txt. The CUDA and NCCL libraries
# are looked up beside CUDA, in the system library path and in Python's nvidia-* packages.
set -u
out=${1:?usage: gpu_checks.sh OUTDIR [BINDIR]}
bin=${2:-build/validate}
mkdir -p "$out"
nccl=$bin/nccl_bench/fabricsim-nccl-bench
kb=$bin/kernel_bench/fabricsim-kernel-bench
libdirs=""
for lib in libnccl.so.2 libcublasLt.so.13; do
  if ! ldconfig -p 2>/dev/null | grep -q "$lib"; then
    d=$(find /usr/local/cuda* /usr/lib /opt /usr/local/lib -name "$lib" 2>/dev/null | head -1)
    [ -n "$d" ] && libdirs="$libdirs:$(dirname "$d")"
  fi
done
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}$libdirs"
{
  date -u; uname -a; nvidia-smi; nvidia-smi -q | grep -iE 'product name|driver version|cuda version|clocks|power limit' | head -20
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ldd "$nccl" "$kb"
} > "$out/env.txt" 2>&1
status() { echo "$1 exit $2" | tee -a "$out/env.txt"; }

"$nccl" --self-test > "$out/selftest.txt" 2>&1; status selftest $?
"$nccl" --self-test --self-test-legacy-zero > "$out/selftest_legacy.txt" 2>&1; status "selftest-legacy-zero (must be 4)" $?
"$nccl" -g 1 -b 8 -e 1G -f 4 -n 10 --json-dir "$out/allops_json" > "$out/allops.txt" 2>&1; status allops $?
(cd "$out" && tar cf allops_json.tar allops_json && rm -rf allops_json)
{
  echo "== multi-process mode, one rank, the sizes of the first run's failure"
  "$nccl" --uid-file /tmp/fabricsim-uid.$$ --rank 0 --nranks 1 --local-gpu 0 --op all_reduce,all_gather,reduce_scatter,broadcast,reduce -b 256K -e 16M -f 2
} > "$out/mp.txt" 2>&1; status multiprocess $?
"$kb" -o "$out/kernels.json" > "$out/kernels.log" 2>&1; rc=$?
if { [ $rc -eq 126 ] || [ $rc -eq 127 ]; } && command -v nvcc >/dev/null; then  # the carried binary cannot load here: build it here
  echo "== carried binary exit $rc; rebuilding with nvcc" >> "$out/kernels.log"
  nvcc -O3 -std=c++17 -arch=sm_90a validate/kernel_bench/kernel_bench.cu -lcublasLt -o /tmp/kb >> "$out/kernels.log" 2>&1 &&
    /tmp/kb -o "$out/kernels.json" >> "$out/kernels.log" 2>&1; rc=$?
fi
status kernels $rc
