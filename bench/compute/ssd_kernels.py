#!/usr/bin/env python3
"""Times Mamba-2's SSD chunked scan, kernel by kernel and whole, at the shapes fabricsim prices it
(workloads/gpt_hybrid.cpp add_ssd_scan; docs/workloads.md "Hybrid Mamba models"), on one GPU. Nothing in
fabricsim is fitted to these times yet: they are what a GPU run would measure to validate that pricing.
Needs PyTorch and mamba_ssm (state-spaces/mamba; its Triton kernels: mamba_ssm/ops/triton/ssd_*.py).
Method as bench/compute/heldout_kernels.py: CUDA events, mean of ITERS calls after WARM warm-ups.
Usage: python3 bench/compute/ssd_kernels.py OUT.csv
Columns: kernel, batch, seqlen, heads, head_dim, groups, state, chunk, time_us. `kernel` is the mamba_ssm function
(forward kernels) or "scan_fwd" / "scan_bwd" (_mamba_chunk_scan_combined_fwd / _bwd, all of their kernels)."""
import csv, sys
import torch
from heldout_kernels import bench  # the same CUDA-event timing loop (20 runs after 5 warm-up)
from mamba_ssm.ops.triton import ssd_bmm, ssd_chunk_scan, ssd_chunk_state, ssd_combined, ssd_state_passing

CHUNK = 128  # MambaMixer's chunk_size default (Megatron-LM mamba_mixer.py:194 @d98e8a64)

# (batch, seqlen, heads, head_dim, groups, state): Nemotron-H 8B's mixer (128 heads of 64, 8 groups, state 128) per
# TP rank at TP 1, 2, 4, 8 and under CP 2 / 4 (heads / CP over the whole sequence); Nemotron-H 56B (256 heads,
# state 256) at TP 8; Nemotron-3 Nano (64 heads, 8 groups, state 128) at TP 1.
SHAPES = [(1, 8192, 128, 64, 8, 128), (1, 8192, 64, 64, 4, 128), (1, 8192, 32, 64, 2, 128), (1, 8192, 16, 64, 1, 128),
          (1, 16384, 32, 64, 2, 128), (1, 32768, 8, 64, 1, 128), (1, 8192, 32, 64, 1, 256), (1, 8192, 64, 64, 8, 128),
          (4, 4096, 64, 64, 4, 128)]


def times(b, L, H, P, G, N):
    dev, bf = "cuda", torch.bfloat16
    x = torch.randn(b, L, H, P, device=dev, dtype=bf)
    z = torch.randn_like(x)
    dt = torch.randn(b, L, H, device=dev, dtype=bf)
    A = -torch.rand(H, device=dev, dtype=torch.float32) - 1.0
    B = torch.randn(b, L, G, N, device=dev, dtype=bf)
    C = torch.randn_like(B)
    D = torch.randn(H, device=dev, dtype=torch.float32)
    dt_bias = torch.randn(H, device=dev, dtype=torch.float32)
    dA, dtp = ssd_chunk_state._chunk_cumsum_fwd(dt, A, CHUNK, dt_bias=dt_bias, dt_softplus=True)
    st = ssd_chunk_state._chunk_state_fwd(B, x, dtp, dA, states_in_fp32=True)
    flat = st.flatten(-2)
    passed, _ = ssd_state_passing._state_passing_fwd(flat, dA[:, :, :, -1], out_dtype=bf)
    passed = passed.unflatten(-1, (P, N))
    cb = ssd_bmm._bmm_chunk_fwd(C, B, CHUNK, output_dtype=torch.float32)
    out = {
        "_chunk_cumsum_fwd": bench(lambda: ssd_chunk_state._chunk_cumsum_fwd(dt, A, CHUNK, dt_bias=dt_bias, dt_softplus=True)),
        "_chunk_state_fwd": bench(lambda: ssd_chunk_state._chunk_state_fwd(B, x, dtp, dA, states_in_fp32=True)),
        "_state_passing_fwd": bench(lambda: ssd_state_passing._state_passing_fwd(flat, dA[:, :, :, -1], out_dtype=bf)),
        "_bmm_chunk_fwd": bench(lambda: ssd_bmm._bmm_chunk_fwd(C, B, CHUNK, output_dtype=torch.float32)),
        "_chunk_scan_fwd": bench(lambda: ssd_chunk_scan._chunk_scan_fwd(cb, x, dtp, dA, C, passed, D=D, z=z)),
    }
    y, y_x, *_ = ssd_combined._mamba_chunk_scan_combined_fwd(x, dt, A, B, C, CHUNK, D=D, z=z, dt_bias=dt_bias, dt_softplus=True)
    dy = torch.randn_like(y)
    out["scan_fwd"] = bench(lambda: ssd_combined._mamba_chunk_scan_combined_fwd(x, dt, A, B, C, CHUNK, D=D, z=z, dt_bias=dt_bias, dt_softplus=True))
    out["scan_bwd"] = bench(lambda: ssd_combined._mamba_chunk_scan_combined_bwd(dy, x, dt, A, B, C, y_x, CHUNK, D=D, z=z, dt_bias=dt_bias, dt_softplus=True))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kernel", "batch", "seqlen", "heads", "head_dim", "groups", "state", "chunk", "time_us"])
        for s in SHAPES:
            for k, t in times(*s).items():
                w.writerow([k, *s, CHUNK, round(t, 2)])


if __name__ == "__main__":
    main()
