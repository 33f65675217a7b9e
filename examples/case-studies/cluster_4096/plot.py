#!/usr/bin/env python3
"""Plots the cluster case study (docs/case-studies.md): reads the sweep CSV (cluster_4096.csv) and writes an
SVG with, per configuration, each job's step time alone and together. Usage: plot.py CSV SVG"""
import os
import sys

import importlib.util

# The SVG helpers shared by the case-study plots, loaded by path (examples/ is not a package).
_spec = importlib.util.spec_from_file_location(
    "svgplot", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../svgplot.py"))
svgplot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(svgplot)


def main():
    rows = svgplot.ok_rows(sys.argv[1])
    jobs = [("llama70b", "Llama-3-70B (x3 steps)"), ("moe", "DeepSeek-V3-class MoE")]
    mx = max(float(r["job.%s.iteration_s" % j]) for r in rows for j, _ in jobs)
    mx = max(mx, max(float(r["job.%s.iteration_s_alone" % j]) for r in rows for j, _ in jobs))
    label_w, width, bar, gap = 190, 520, 13, 14
    h = 40 + len(rows) * (4 * bar + gap) + 20
    svg = svgplot.Svg(label_w + width + 170, h, "step time per job and configuration, alone and together")
    svg.text(10, 18, "Step time per job: alone (light) and sharing the fabric (dark), seconds", 13)
    colors = {"llama70b": ("#9ecae1", "#3182bd"), "moe": ("#fdae6b", "#e6550d")}
    y = 32
    for r in rows:
        svg.text(label_w - 8, y + 2 * bar + 4, r["label"], 12, "end")
        for j, name in jobs:
            for k, key in enumerate(("iteration_s_alone", "iteration_s")):
                v = float(r["job.%s.%s" % (j, key)])
                w = width * v / mx
                svg.bar(label_w, y, w, bar - 1, colors[j][k], "%s %s %.4f s" % (name, key, v))
                if k == 1:
                    svg.text(label_w + w + 4, y + bar - 3, "%s %.3f s (x%.3f)"
                             % (name.split(" ")[0], v, float(r["job.%s.slowdown" % j])), 10)
                y += bar
        y += gap
    svg.write(sys.argv[2])


if __name__ == "__main__":
    main()
