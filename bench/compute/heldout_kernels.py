#!/usr/bin/env python3
"""Times kernels the shipped compute calibrations were NOT fitted on (new GEMM shapes, attention head dims 64
and 256) and writes them as fabricsim.kernel_measurements/1 JSON (docs/calibration.md). Same method as
tests/data/hardware/h200-kernels/kernels.py: PyTorch, CUDA events, mean of ITERS calls after warm-ups.
Usage: python3 bench/compute/heldout_kernels.py OUT.json
       python3 bench/compute/heldout_kernels.py --short-attention OUT.json
--short-attention times only fused attention at 256-1,024 keys (causal and not, 1-64 heads, batch 1-8), the
region the attention fit extrapolates to (docs/validation.md "Compute kernels": short kernels)."""
import json, sys
import torch
import torch.nn.functional as F

ITERS, WARM = 20, 5


def bench(fn):
    for _ in range(WARM):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(ITERS):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1000.0 / ITERS  # us


def gemm_rows():
    rows = []
    # Linear-layer shapes of models outside the fit set (Qwen2.5-72B: hidden 8192, ffn 29568; Mixtral-8x22B:
    # hidden 6144, ffn 16384; Llama-3.2-3B: hidden 3072, ffn 8192; DeepSeek-V3 dense MLP: 7168 x 18432),
    # 8192 tokens, TP 1 and 4.
    shapes = [(8192, 2 * 29568 // 4, 8192), (8192, 8192, 29568 // 4), (8192, 2 * 16384, 6144), (8192, 6144, 16384),
              (8192, 2 * 8192, 3072), (8192, 3072, 8192), (8192, 2 * 18432 // 8, 7168), (8192, 7168, 18432 // 8),
              (2048, 5120, 5120), (32768, 3072, 3072)]
    for (m, n, k) in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        t = bench(lambda: torch.mm(a, w.t()))
        rows.append({"kind": "gemm", "precision": "bf16", "m": m, "n": n, "k": k, "time_us": round(t, 2),
                     "label": "torch.mm"})
        a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda", dtype=torch.float32)
        t = bench(lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        rows.append({"kind": "gemm", "precision": "fp8", "m": m, "n": n, "k": k, "time_us": round(t, 2),
                     "label": "torch._scaled_mm"})
        del a, w, a8, w8
    return rows


HELDOUT_SHAPES = [(2, 32, 8, 8192, 64, True), (2, 16, 4, 8192, 256, True), (1, 64, 8, 16384, 64, True),
                  (4, 32, 8, 4096, 128, True)]
# (batch, heads, kv_heads, seq, head_dim, causal): ring-attention steps and short sequences, head dim 128.
SHORT_SHAPES = [(b, h, max(1, h // 4), s, 128, c) for s in (256, 512, 1024) for (b, h) in ((1, 4), (1, 16), (1, 64),
                                                                                        (8, 8), (8, 32))
                for c in (True, False)]


def attention_rows(shapes):
    from torch.nn.attention import sdpa_kernel, SDPBackend
    rows = []
    for backend, impl in ((SDPBackend.CUDNN_ATTENTION, "cudnn"), (SDPBackend.FLASH_ATTENTION, "flash")):
        for (b, h, kv, s, d, causal) in shapes:
            q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            k_ = torch.randn(b, kv, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            v = torch.randn(b, kv, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            try:
                with sdpa_kernel([backend]):
                    fwd = lambda: F.scaled_dot_product_attention(q, k_, v, is_causal=causal, enable_gqa=True)
                    tf = bench(fwd)
                    o = fwd()
                    g = torch.randn_like(o)
                    tfb = bench(lambda: torch.autograd.grad(fwd(), (q, k_, v), g))
            except Exception as e:  # a backend without this head dim
                print("skip", impl, b, h, kv, s, d, repr(e)[:200], file=sys.stderr)
                continue
            for pas, t in (("fwd", tf), ("bwd", tfb - tf)):
                rows.append({"kind": "attention", "impl": impl, "precision": "bf16", "batch": b, "heads": h,
                             "kv_heads": kv, "seq": s, "head_dim": d, "causal": causal, "pass": pas,
                             "time_us": round(t, 2), "label": "sdpa" + (" (fwd+bwd minus fwd)" if pas == "bwd" else "")})
    return rows


def main():
    p = torch.cuda.get_device_properties(0)
    short = sys.argv[1] == "--short-attention"
    rows = attention_rows(SHORT_SHAPES) if short else gemm_rows() + attention_rows(HELDOUT_SHAPES)
    doc = {"schema": "fabricsim.kernel_measurements/1",
           "gpu": {"name": p.name, "sm_count": p.multi_processor_count, "memory_bytes": p.total_memory},
           "source": "bench/compute/heldout_kernels.py, torch %s, CUDA %s, cuDNN %s" % (
               torch.__version__, torch.version.cuda, torch.backends.cudnn.version()),
           "kernels": rows}
    with open(sys.argv[-1], "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(len(rows), "kernels")


if __name__ == "__main__":
    main()
