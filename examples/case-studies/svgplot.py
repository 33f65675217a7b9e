"""SVG drawing shared by the case-study plots (cluster_4096/plot.py, deepseek_v3_ep/plot.py): horizontal bars
with hover titles, labels and a legend, written without matplotlib so the plots need only python3."""
import csv
import html


def ok_rows(path):
    """The sweep CSV's rows whose status is ok (a CSV without a status column: all rows)."""
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r.get("status", "ok") == "ok"]


class Svg:
    def __init__(self, width, height, label):
        self.width, self.height = width, height
        self.parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
                      'role="img" aria-label="%s">' % (width, height, html.escape(label))]

    def text(self, x, y, s, size=12, anchor=None):
        a = ' text-anchor="%s"' % anchor if anchor else ""
        self.parts.append('<text x="%s" y="%d" font-size="%d"%s>%s</text>'
                          % (_num(x), y, size, a, html.escape(s, quote=False)))

    def bar(self, x, y, w, h, fill, title):
        """A rectangle of width w (fractional) whose hover text is title."""
        self.parts.append('<rect x="%s" y="%d" width="%.2f" height="%d" fill="%s"><title>%s</title></rect>'
                          % (_num(x), y, w, h, fill, html.escape(title, quote=False)))

    def line(self, x1, y1, x2, y2, stroke="#000", width=1, dash=None):
        d = ' stroke-dasharray="%s"' % dash if dash else ""
        self.parts.append('<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="%s" stroke-width="%s"%s/>'
                          % (x1, y1, x2, y2, stroke, width, d))

    def legend(self, x, y, items, size=11, swatch=10, spacing=14):
        """items: (color, label) in a row starting at (x, y); returns the x after the last item."""
        for color, label in items:
            self.parts.append('<rect x="%s" y="%d" width="%d" height="%d" fill="%s"/>'
                              % (_num(x), y - swatch + 1, swatch, swatch, color))
            self.text(x + swatch + 4, y, label, size)
            x += swatch + 4 + int(0.6 * size * len(label)) + spacing
        return x

    def axis(self, x0, y, scale, vmax, step, unit="s", size=10):
        """A value axis along y: a tick and label every step from 0 to vmax, x = x0 + scale * value."""
        self.line(x0, y, x0 + scale * vmax, y, "#888")
        v = 0.0
        while v <= vmax + 1e-9:
            x = x0 + scale * v
            self.line(x, y, x, y + 4, "#888")
            self.text(x, y + 15, "%g %s" % (v, unit) if v == 0 else "%g" % v, size, "middle")
            v += step

    def write(self, path):
        with open(path, "w") as f:
            f.write("\n".join(self.parts + ["</svg>"]) + "\n")


def nice_step(vmax, ticks=8):
    """A round tick spacing (1, 2 or 5 times a power of ten) giving about `ticks` ticks up to vmax."""
    raw, p = vmax / ticks, 1.0
    while p * 10 <= raw:
        p *= 10
    while p > raw:
        p /= 10
    for m in (1, 2, 5, 10):
        if m * p >= raw:
            return m * p
    return 10 * p


def _num(x):
    return "%d" % x if isinstance(x, int) else "%.2f" % x
