#!/usr/bin/env python3
"""Notebook-style sweep with the fabricsim Python module: which tensor x pipeline split trains a GPT-3 13B
fastest on 64 A100 GPUs (8 DGX A100 on HDR InfiniBand)? Runs one simulated step per (TP, PP) point, prints a
table, writes it as CSV and, where matplotlib is installed, plots achieved TFLOP/s per GPU as a heatmap.

    PYTHONPATH=build/python python3 examples/python/tp_pp_sweep.py --out sweep   # sweep.csv, sweep.png
"""
import argparse
import csv
import sys

import fabricsim


def scenario(tp, pp):
    """A GPT-3 13B step (Brown et al. 2020, Table 2.1: 40 layers, d_model 5120, 40 heads) on 64 GPUs."""
    return {
        "topology": {"preset": "superpod", "params": {"nodes": 8, "node": "dgx-a100"}},
        "workload": {
            "generator": "gpt",
            "params": {
                "num_layers": 40, "hidden_size": 5120, "num_attention_heads": 40, "seq_length": 2048,
                "padded_vocab_size": 51200, "micro_batch_size": 1, "global_batch_size": 512,
                "tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp,
                "recompute_granularity": "full",
            },
        },
        "compute": {"preset": "megatron-sc21"},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tp_pp_sweep", help="output prefix: PREFIX.csv and PREFIX.png")
    ap.add_argument("--tp", default="1,2,4,8")
    ap.add_argument("--pp", default="1,2,4")
    args = ap.parse_args()
    tps = [int(x) for x in args.tp.split(",")]
    pps = [int(x) for x in args.pp.split(",")]
    rows = []
    for tp in tps:
        for pp in pps:
            try:
                r = fabricsim.run(scenario(tp, pp))
            except fabricsim.InputError as e:  # a layout that does not divide or does not fit
                print(f"TP {tp} PP {pp}: {e}", file=sys.stderr)
                continue
            rows.append({"tp": tp, "pp": pp, "dp": 64 // (tp * pp), "iteration_s": r["iteration_s"],
                         "tflops_per_gpu": r["tflops_per_gpu"]})
    print(f"{'TP':>3} {'PP':>3} {'DP':>3} {'step (s)':>9} {'TFLOP/s/GPU':>12}")
    for r in rows:
        print(f"{r['tp']:>3} {r['pp']:>3} {r['dp']:>3} {r['iteration_s']:>9.3f} {r['tflops_per_gpu']:>12.1f}")
    best = max(rows, key=lambda r: r["tflops_per_gpu"])
    print(f"fastest: TP {best['tp']} PP {best['pp']} DP {best['dp']}, {best['iteration_s']:.3f} s per step")
    with open(args.out + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: wrote " + args.out + ".csv only")
        return
    grid = [[float("nan")] * len(tps) for _ in pps]
    for r in rows:
        grid[pps.index(r["pp"])][tps.index(r["tp"])] = r["tflops_per_gpu"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    im = ax.imshow(grid, origin="lower", cmap="viridis")
    ax.set_xticks(range(len(tps)), [str(t) for t in tps])
    ax.set_yticks(range(len(pps)), [str(p) for p in pps])
    ax.set_xlabel("tensor parallel size")
    ax.set_ylabel("pipeline parallel size")
    ax.set_title("GPT-3 13B on 64 A100: TFLOP/s per GPU")
    for r in rows:
        ax.text(tps.index(r["tp"]), pps.index(r["pp"]), f"{r['tflops_per_gpu']:.0f}", ha="center", va="center",
                color="white")
    fig.colorbar(im, ax=ax, label="TFLOP/s per GPU")
    fig.tight_layout()
    fig.savefig(args.out + ".png", dpi=100)
    print("wrote " + args.out + ".csv and " + args.out + ".png")


if __name__ == "__main__":
    main()
