#!/usr/bin/env python3
"""Residual structure of the llm-foundry MPT validation rows (docs/validation.md,
"Where the training residuals come from").

Usage: build/tests/test_replay -tc='validation: modern dense training (llm-foundry*' -s > out.txt
       scripts/training_residuals.py out.txt

Joins the test's printed table (rows in CSV order) with the features of
tests/data/training-modern/llmfoundry_mpt.csv and prints the signed error by feature group and the
rank correlation (Spearman) of the signed error with each numeric feature, per GPU; then, per GPU,
splits the time per token (published and simulated alike) into a dense part and an attention part by a
least-squares fit of  time/token = dense FLOPs/token / R_dense + attention FLOPs/token / R_attention
(relative residuals; dense = 6N, attention = 6 L d s causal, both x 4/3 with activation checkpointing) and
prints the two effective rates: which term the simulation gets wrong. The fit is a diagnostic only;
nothing from it enters the model.
"""
import csv
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CSV = os.path.join(HERE, "..", "tests", "data", "training-modern", "llmfoundry_mpt.csv")


def printed_rows(path):
    out, on = [], False
    for line in open(path):
        if "MESSAGE: row | GPU | published TPS/GPU" in line:
            on = True
            continue
        if on:
            if not line.strip():
                break
            f = [x.strip() for x in line.split("|")]
            if len(f) < 5:
                sys.exit(f"{path}: unexpected table line: {line.strip()!r}")
            out.append((f[0], float(f[2]), float(f[3])))
    if not out:
        sys.exit(f"{path}: no llm-foundry table found (run the test with -s)")
    return out


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(x, y):
    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return sxy / (sx * sy) if sx and sy else float("nan")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    printed = printed_rows(sys.argv[1])
    data = list(csv.DictReader(open(CSV)))
    if len(data) != len(printed):
        sys.exit(f"{sys.argv[1]}: {len(printed)} printed rows, {CSV} has {len(data)}")
    rows = []
    for d, (label, pub, sim) in zip(data, printed):
        if d["row_label"] != label:
            sys.exit(f"{sys.argv[1]}: row {label!r} does not match CSV row {d['row_label']!r}")
        accum = int(d["other_settings"].split(";")[0].split()[-1])
        rows.append({
            "gpu": d["gpu"] + ("/fp8" if d["precision"] == "amp_fp8" else ""),
            "err": (sim - pub) / pub,
            "hidden": int(d["hidden"]), "layers": int(d["layers"]), "seq": int(d["seq_len"]),
            "gpus": int(d["num_gpus"]), "micro_batch": int(d["micro_batch"]), "accum": accum,
            "tokens_per_micro": int(d["micro_batch"]) * int(d["seq_len"]),
            "recompute": "full" if "checkpointing" in d["recompute"] else "none",
            "fsdp": d["fsdp_zero"].replace("PyTorch FSDP ", ""),
            "published_mfu": float(d["mfu_pct"]) if d["mfu_pct"] else float("nan"),
            "attn_share": 6 * int(d["seq_len"]) / (6 * int(d["seq_len"]) + 72 * int(d["hidden"])),
            "pub": pub, "sim": sim, "params": float(d["params_b"]) * 1e9,
        })

    def stats(rs):
        e = [r["err"] for r in rs]
        return (f"{len(e):4d} rows  median signed {100 * statistics.median(e):+6.1f} %  "
                f"median |err| {100 * statistics.median(abs(x) for x in e):5.1f} %")

    for gpu in sorted({r["gpu"] for r in rows}):
        rs = [r for r in rows if r["gpu"] == gpu]
        print(f"== {gpu}: {stats(rs)}")
        for key in ("recompute", "fsdp"):
            for v in sorted({r[key] for r in rs}):
                print(f"   {key:10s} {v:42s} {stats([r for r in rs if r[key] == v])}")
        for key in ("seq", "hidden"):
            for v in sorted({r[key] for r in rs}):
                print(f"   {key:10s} {v:<42d} {stats([r for r in rs if r[key] == v])}")
        if len(rs) >= 10:
            print("   Spearman rank correlation of the signed error with:")
            for key in ("hidden", "seq", "attn_share", "gpus", "micro_batch", "tokens_per_micro", "accum",
                        "published_mfu"):
                xs = [r[key] for r in rs]
                print(f"     {key:18s} {spearman(xs, [r['err'] for r in rs]):+.2f}")

    print("== effective rates, time/token = dense/R_dense + attention/R_attention (TFLOP/s per GPU)")
    for gpu in sorted({r["gpu"] for r in rows}):
        rs = [r for r in rows if r["gpu"] == gpu]
        if len(rs) < 10:
            continue
        x = []
        for r in rs:
            rc = 4 / 3 if r["recompute"] == "full" else 1.0
            x.append((6 * r["params"] * rc, 6 * r["layers"] * r["hidden"] * r["seq"] * rc))
        line = f"   {gpu:10s}"
        for name in ("pub", "sim"):
            y = [1 / r[name] for r in rs]
            a = [(d / t, at / t) for (d, at), t in zip(x, y)]  # relative residuals: each row scaled by 1/y
            s11 = sum(u * u for u, _ in a)
            s12 = sum(u * v for u, v in a)
            s22 = sum(v * v for _, v in a)
            t1 = sum(u for u, _ in a)
            t2 = sum(v for _, v in a)
            det = s11 * s22 - s12 * s12
            c1, c2 = (s22 * t1 - s12 * t2) / det, (s11 * t2 - s12 * t1) / det
            res = statistics.median(abs(c1 * d + c2 * at - t) / t for (d, at), t in zip(x, y))
            label = "published" if name == "pub" else "simulated"
            line += (f"  {label}: dense {1 / c1 / 1e12:4.0f}, attention {1 / c2 / 1e12:4.0f}"
                     f" (median |residual| {100 * res:4.1f} %)")
        print(line)


if __name__ == "__main__":
    main()
