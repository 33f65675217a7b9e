#!/usr/bin/env python3
"""Whole decoder layers (forward + backward, PyTorch eager, bf16) timed alone and beside a kernel that holds SMs
as an NCCL collective's does: the check of fabricsim's compute-beside-communication slowdown, which is fitted on
GEMMs alone (fabricsim-kernel-bench --overlap, tests/data/hardware/h100-comm-overlap).

The stand-in is the same kernel as the bench's (validate/kernel_bench/kernel_bench.cu, comm_standin), compiled
here through CuPy: `ctas` blocks of 512 threads that wait (thread 0 polls a flag in device memory, the others sit
at a barrier) or copy 8 MiB slices through HBM, for a fixed time long enough to outlast the timed layers; a row
whose stand-in ended before the layers did is marked standin_outlasted=false. With a second file, it also times
how long a stand-in (1 ms of waiting) launched while the layers run takes to start: it is launched on its own
stream at set offsets into three queued steps, and its elapsed time beyond its alone time is the start delay.
Needs PyTorch and CuPy on a GPU. Usage: layer_overlap.py OUT.csv [QUEUED.csv]"""
import csv, sys, time
import cupy as cp
import torch, torch.nn as nn, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

SRC = r'''
extern "C" __global__ void __launch_bounds__(512, 1)
standin(const float4* src, float4* dst, unsigned long long per_cta, int* lines, unsigned long long run_ns, int copy) {
  __shared__ int done;
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const unsigned long long base = (unsigned long long)blockIdx.x * per_cta;
  for (;;) {
    if (copy) {
      for (unsigned long long i = threadIdx.x; i < per_cta; i += blockDim.x) dst[base + i] = src[base + i];
    } else if (threadIdx.x == 0) {
      volatile int* line = lines + blockIdx.x * 32;
      int acc = 0;
      for (int i = 0; i < 64; ++i) acc += line[i & 3];
      if (acc == -12345) line[0] = acc;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      done = t - t0 >= run_ns;
    }
    __syncthreads();
    if (done) break;
  }
}
'''
kernel = cp.RawKernel(SRC, 'standin')
SLICE = 8 << 20
src = cp.zeros(132 * SLICE // 4, dtype=cp.float32)
dst = cp.zeros_like(src)
lines = cp.zeros(132 * 32, dtype=cp.int32)
side = torch.cuda.Stream()


def launch(ctas, copy, run_s):
    with cp.cuda.ExternalStream(side.cuda_stream):
        kernel((ctas,), (512,), (src, dst, cp.uint64(SLICE // 16), lines, cp.uint64(int(run_s * 1e9)), cp.int32(copy)))
    ev = torch.cuda.Event()
    ev.record(side)
    return ev


def timed(fn, iters, warm=2):
    for _ in range(warm): fn()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters): fn()
    e.record(); e.synchronize()
    return s.elapsed_time(e) / iters / 1e3


class Layer(nn.Module):  # Llama-3-style: RMSNorm, GQA attention (SDPA), SwiGLU MLP; one TP rank's slice
    def __init__(s, h, heads, kv, ffn, d=128):
        super().__init__(); s.heads, s.kv, s.d, s.ffn = heads, kv, d, ffn
        s.n1, s.n2 = nn.RMSNorm(h), nn.RMSNorm(h)
        s.qkv = nn.Linear(h, (heads + 2 * kv) * d, bias=False); s.proj = nn.Linear(heads * d, h, bias=False)
        s.fc1 = nn.Linear(h, 2 * ffn, bias=False); s.fc2 = nn.Linear(ffn, h, bias=False)

    def forward(s, x):
        B, S, _ = x.shape
        q, k, v = s.qkv(s.n1(x)).split([s.heads * s.d, s.kv * s.d, s.kv * s.d], -1)
        q, k, v = (t.view(B, S, -1, s.d).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=s.kv != s.heads)
        x = x + s.proj(a.transpose(1, 2).reshape(B, S, s.heads * s.d))
        g, up = s.fc1(s.n2(x)).split([s.ffn, s.ffn], -1)
        return x + s.fc2(F.silu(g) * up)


rows, queued = [], []
CASES = [('llama3-8b tp1', 4096, 32, 8, 14336), ('llama3-70b tp8 slice', 8192, 8, 1, 3584), ('gemm 8192^3', 0, 0, 0, 0)]
for name, h, heads, kv, ffn in CASES:
    torch.manual_seed(0)
    if h:
        L = Layer(h, heads, kv, ffn).cuda().to(torch.bfloat16)
        x = torch.randn(1, 8192, h, device='cuda', dtype=torch.bfloat16, requires_grad=True)
        gy = torch.randn_like(x)
        def step():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
                torch.autograd.backward(L(x), gy)
        variant = 'fwd_bwd'
    else:
        a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); b = torch.randn_like(a)
        step = lambda: torch.mm(a, b)
        variant = 'mm'
    iters = 10
    alone = [timed(step, iters)]
    for copy in (0, 1):
        for ctas in (8, 16, 32):
            torch.cuda.synchronize()
            run_s = alone[0] * (iters + 2) * 4 + 0.05
            ev = launch(ctas, copy, run_s)
            time.sleep(0.002)  # the GPU is idle: its CTAs are resident within microseconds
            t = timed(step, iters)
            outlasted = not ev.query()
            torch.cuda.synchronize()
            rows.append(dict(case=name, variant=variant, tokens=8192 if h else '', comm_kind='copy' if copy else 'wait',
                             comm_ctas=ctas, alone_us=round(alone[-1] * 1e6, 1), beside_us=round(t * 1e6, 1),
                             ratio=round(t / alone[-1], 4), standin_outlasted=str(outlasted).lower()))
            print(rows[-1], flush=True)
            alone.append(timed(step, iters))
    rows.append(dict(case=name, variant=variant, tokens=8192 if h else '', comm_kind='', comm_ctas=0,
                     alone_us=round(alone[0] * 1e6, 1), beside_us=round(alone[-1] * 1e6, 1),
                     ratio=round(alone[-1] / alone[0], 4), standin_outlasted=''))
    print(rows[-1], 'alone series', [round(v * 1e6) for v in alone], flush=True)
    if len(sys.argv) > 2:
        def standin_s():
            s0, s1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s0.record(side); launch(ctas, 0, 0.001); s1.record(side)
            return s0, s1
        for ctas in (8, 16, 32):
            torch.cuda.synchronize()
            a0, a1 = standin_s(); a1.synchronize(); base = a0.elapsed_time(a1) / 1e3
            for trial, offset in enumerate((0.003, 0.007, 0.011, 0.017, 0.023, 0.031)):
                torch.cuda.synchronize()
                for _ in range(3): step()
                t_host = time.perf_counter()
                while time.perf_counter() - t_host < offset: pass
                c0, c1 = standin_s()
                torch.cuda.synchronize()
                queued.append(dict(case=name, variant=variant, comm_ctas=ctas, offset_ms=offset * 1e3,
                                   standin_alone_us=round(base * 1e6, 1), standin_queued_us=round(c0.elapsed_time(c1) * 1e3, 1),
                                   start_delay_us=round(c0.elapsed_time(c1) * 1e3 - base * 1e6, 1), step_alone_us=round(alone[0] * 1e6, 1)))
                print(queued[-1], flush=True)
with open(sys.argv[1], 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys())); w.writeheader(); w.writerows(rows)
if len(sys.argv) > 2:
    with open(sys.argv[2], 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=list(queued[0].keys())); w.writeheader(); w.writerows(queued)
print('ok')
