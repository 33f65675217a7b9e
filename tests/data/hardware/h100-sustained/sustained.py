#!/usr/bin/env python3
"""Sustained vs burst throughput of an eager Llama-3-8B-shaped decoder layer (RMSNorm, GQA attention via SDPA,
SwiGLU MLP; bf16; forward+backward) and of an 8192^3 bf16 GEMM, on the GPU at hand. Runs each workload for
argv[2] seconds back to back, timing every window of iterations with CUDA events; nvidia-smi logs clocks and power
beside it (run.sh). Writes sustained.csv into argv[1]: workload, window start (s since start of that workload),
iterations, seconds, TFLOP/s."""
import csv, os, sys, time, torch, torch.nn as nn, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
out, dur = sys.argv[1], float(sys.argv[2]); dev = 'cuda'; bf = torch.bfloat16
class Layer(nn.Module):
    def __init__(s, h=4096, heads=32, kv=8, ffn=14336, d=128):
        super().__init__(); s.h, s.heads, s.kv, s.d, s.ffn = h, heads, kv, d, ffn
        s.n1 = nn.RMSNorm(h); s.n2 = nn.RMSNorm(h)
        s.wqkv = nn.Linear(h, (heads + 2 * kv) * d, bias=False); s.wo = nn.Linear(heads * d, h, bias=False)
        s.w13 = nn.Linear(h, 2 * ffn, bias=False); s.w2 = nn.Linear(ffn, h, bias=False)
    def forward(s, x):
        B, S, _ = x.shape
        q, k, v = s.wqkv(s.n1(x)).split([s.heads * s.d, s.kv * s.d, s.kv * s.d], -1)
        q = q.view(B, S, s.heads, s.d).transpose(1, 2); k = k.view(B, S, s.kv, s.d).transpose(1, 2); v = v.view(B, S, s.kv, s.d).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + s.wo(a.transpose(1, 2).reshape(B, S, s.heads * s.d))
        g, u = s.w13(s.n2(x)).split([s.ffn, s.ffn], -1)
        return x + s.w2(F.silu(g) * u)
torch.manual_seed(0)
B, S, h = 1, 8192, 4096
L = Layer().to(dev, bf); x = torch.randn(B, S, h, device=dev, dtype=bf, requires_grad=True); gy = torch.randn(B, S, h, device=dev, dtype=bf)
T = B * S; gemm = 2 * T * (h * 48 * 128 + 32 * 128 * h + h * 2 * 14336 + 14336 * h); attn = 2 * B * 32 * S * S * 128
layer_flops = 3 * gemm + 3.5 * attn  # fwd + bwd, causal attention (fwd 2 matmuls halved; bwd 2.5x fwd)
def layer_step():
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
        torch.autograd.backward(L(x), gy)
N = 8192; a_ = torch.randn(N, N, device=dev, dtype=bf); b_ = torch.randn(N, N, device=dev, dtype=bf)
def gemm_step(): torch.mm(a_, b_)
rows = []
for name, fn, flops, per in (('llama3-8b layer fwd+bwd seq8192', layer_step, layer_flops, 4), ('gemm 8192^3 bf16 random', gemm_step, 2 * N ** 3, 50)):
    for _ in range(3): fn()
    torch.cuda.synchronize(); t0 = time.time(); wall = 0.0
    print(f'== {name} start {time.strftime("%H:%M:%S")}', flush=True)
    while wall < dur:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(per): fn()
        e.record(); e.synchronize(); sec = s.elapsed_time(e) / 1e3; wall = time.time() - t0
        rows.append(dict(workload=name, t_s=round(wall, 3), iters=per, seconds=round(sec, 6), tflops=round(flops * per / sec / 1e12, 1)))
    r = [q['tflops'] for q in rows if q['workload'] == name]
    print(f'{name}: first window {r[0]} TFLOP/s, first 2 s median {sorted(r[:max(1,len(r)//60)])[len(r[:max(1,len(r)//60)])//2]}, last quarter median {sorted(r[-len(r)//4:])[len(r[-len(r)//4:])//2]}, windows {len(r)}', flush=True)
with open(os.path.join(out, 'sustained.csv'), 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys())); w.writeheader(); w.writerows(rows)
