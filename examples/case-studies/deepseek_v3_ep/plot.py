#!/usr/bin/env python3
"""Plots the DeepSeek-V3 case study (docs/case-studies.md section 4): reads the sweep CSV (deepseek_v3_ep.csv)
and writes an SVG with, per point, the step time split into compute, exposed EP all-to-all, pipeline bubble,
exposed PP and DP communication (per-rank averages, as the CSV's breakdown columns), and for each skewed-router
point the imbalance cost: its step minus the uniform-router step of the same system and schedule (a dashed
mark on the bar). Usage: plot.py CSV SVG"""
import os
import sys

import importlib.util

# The SVG helpers shared by the case-study plots, loaded by path (examples/ is not a package).
_spec = importlib.util.spec_from_file_location(
    "svgplot", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../svgplot.py"))
svgplot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(svgplot)

# The step's parts, in drawing order: (CSV column, legend, colour). compute + exposed communication + bubble +
# idle is the step (docs/outputs.md); communication not in these columns is drawn as "other".
PARTS = [("compute_s", "compute", "#4c78a8"),
         ("exposed_ep_s", "exposed EP all-to-all", "#e45756"),
         ("bubble_s", "pipeline bubble", "#bab0ac"),
         ("exposed_pp_s", "exposed PP", "#f58518"),
         ("exposed_dp_s", "exposed DP", "#54a24b")]
OTHER = ("other", "#b279a2")
LOAD_AXIS, BASELINE = "load", "uniform"  # the sweep axis of the router's load and its balanced value


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py CSV SVG")
    rows = svgplot.ok_rows(sys.argv[1])
    if not rows:
        sys.exit("%s: no row with status ok" % sys.argv[1])
    cols = list(rows[0].keys())
    axes = cols[1:cols.index("status")]  # the sweep's axes: between "point" and "status"
    key = lambda r, skip=None: tuple(r[a] for a in axes if a != skip)  # noqa: E731
    by_key = {key(r): r for r in rows}

    mx = max(float(r["iteration_s"]) for r in rows)
    step = svgplot.nice_step(mx)
    label_w, width, bar, gap, group_gap = 250, 560, 18, 5, 12
    scale = width / (step * -(-mx // step))
    groups = [r[axes[0]] for r in rows]
    n_groups = len(set(groups))
    h = 62 + len(rows) * (bar + gap) + n_groups * group_gap + 40
    svg = svgplot.Svg(label_w + width + 360, h, "step time per point split into compute, exposed communication and "
                      "bubble, with the router imbalance cost")
    svg.text(10, 18, "Step time per point (per-rank average, seconds) and the cost of a skewed router "
                     "(dashed: the %s step of the same system and schedule)" % BASELINE, 13)
    has_other = any(float(r["iteration_s"]) - sum(float(r.get(c) or 0) for c, _, _ in PARTS)
                    > 1e-3 * float(r["iteration_s"]) for r in rows)
    svg.legend(10, 40, [(c, n) for _, n, c in PARTS] + ([(OTHER[1], OTHER[0])] if has_other else []))
    y, prev = 54, None
    for r in rows:
        if r[axes[0]] != prev:
            y += group_gap if prev is not None else 0
            prev = r[axes[0]]
        svg.text(label_w - 8, y + bar - 5, " ".join(r[a] for a in axes), 12, "end")
        step_s = float(r["iteration_s"])
        x = float(label_w)
        drawn = 0.0
        for col, name, color in PARTS:
            v = float(r.get(col) or 0)
            svg.bar(x, y, scale * v, bar - 1, color, "%s %.3f s (%.1f %% of the step)" % (name, v, 100 * v / step_s))
            x += scale * v
            drawn += v
        rest = step_s - drawn
        if rest > 1e-3 * step_s:
            svg.bar(x, y, scale * rest, bar - 1, OTHER[1], "%s %.3f s" % (OTHER[0], rest))
        ep = float(r.get("exposed_ep_s") or 0)
        note = "%.2f s, EP all-to-all %.0f %%" % (step_s, 100 * ep / step_s)
        if LOAD_AXIS in axes and r[LOAD_AXIS] != BASELINE:
            base = by_key.get(tuple(BASELINE if a == LOAD_AXIS else r[a] for a in axes))
            if base is not None:
                b = float(base["iteration_s"])
                xb = label_w + scale * b
                svg.line(xb, y - 2, xb, y + bar + 1, "#000", 1.5, "3,2")
                note += ", imbalance +%.2f s (+%.0f %%)" % (step_s - b, 100 * (step_s - b) / b)
        svg.text(label_w + scale * step_s + 5, y + bar - 5, note, 11)
        y += bar + gap
    svg.axis(label_w, y + 4, scale, step * -(-mx // step), step)
    svg.write(sys.argv[2])


if __name__ == "__main__":
    main()
