#!/usr/bin/env python3
"""Plots the cluster case study (docs/case-studies.md): reads the sweep CSV (cluster_4096.csv) and writes an
SVG with, per configuration, each job's step time alone and together. Usage: plot.py CSV SVG"""
import csv
import sys


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    rows = [r for r in rows if r.get("status", "ok") == "ok"]
    jobs = [("llama70b", "Llama-3-70B (x3 steps)"), ("moe", "DeepSeek-V3-class MoE")]
    mx = max(float(r["job.%s.iteration_s" % j]) for r in rows for j, _ in jobs)
    mx = max(mx, max(float(r["job.%s.iteration_s_alone" % j]) for r in rows for j, _ in jobs))
    label_w, width, bar, gap = 190, 520, 13, 14
    h = 40 + len(rows) * (4 * bar + gap) + 20
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'role="img" aria-label="step time per job and configuration, alone and together">' % (label_w + width + 170, h)]
    out.append('<text x="10" y="18" font-size="13">Step time per job: alone (light) and sharing the fabric (dark), '
               'seconds</text>')
    colors = {"llama70b": ("#9ecae1", "#3182bd"), "moe": ("#fdae6b", "#e6550d")}
    y = 32
    for r in rows:
        out.append('<text x="%d" y="%d" font-size="12" text-anchor="end">%s</text>' % (label_w - 8, y + 2 * bar + 4, r["label"]))
        for j, name in jobs:
            for k, key in enumerate(("iteration_s_alone", "iteration_s")):
                v = float(r["job.%s.%s" % (j, key)])
                w = width * v / mx
                out.append('<rect x="%d" y="%d" width="%.2f" height="%d" fill="%s"><title>%s %s %.4f s</title></rect>'
                           % (label_w, y, w, bar - 1, colors[j][k], name, key, v))
                if k == 1:
                    out.append('<text x="%.2f" y="%d" font-size="10">%s %.3f s (x%.3f)</text>'
                               % (label_w + w + 4, y + bar - 3, name.split(" ")[0], v,
                                  float(r["job.%s.slowdown" % j])))
                y += bar
        y += gap
    out.append("</svg>")
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
