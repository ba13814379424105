#!/usr/bin/env python3
"""Draws a chart for every benchmark table that has a `ratio` column.

    scripts/bench_charts.py TABLES.md OUT_DIR

TABLES.md is Markdown holding the tables `scripts/bench.sh` prints (BENCHMARKS.md, or a run's
output); each table with a `ratio` column (ckport's time over the reference tool's, in the same
run) becomes OUT_DIR/<n>-<first operation>.svg: one bar per operation, the reference's time at
1.0×, shorter is faster. Plain SVG, no script, no external font: it shows on a forge as it is.
Prints each chart's path and the table's first line number.
"""
import html
import os
import re
import sys


def tables(text):
    """(line number, header cells, rows) of each Markdown table."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-:| ]+\|$", lines[i + 1].strip()):
            start = i
            header = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            yield start + 1, header, rows
        else:
            i += 1


def chart(rows, reference):
    """An SVG of horizontal bars: (label, ratio) pairs."""
    width, label_width, bar_width, row_height = 760, 330, 360, 22
    top = 30
    height = top + row_height * len(rows) + 30
    largest = max([r for _, r in rows] + [1.0])
    scale = bar_width / (largest * 1.1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{label_width}" y="18" fill="#333">time / {html.escape(reference)} in the same run (1.0× = as fast; shorter is faster)</text>']
    for index, (label, ratio) in enumerate(rows):
        y = top + index * row_height
        colour = "#2e7d32" if ratio <= 1.0 else "#c62828"
        out.append(f'<text x="{label_width - 8}" y="{y + 15}" text-anchor="end" fill="#222">{html.escape(label)}</text>')
        out.append(f'<rect x="{label_width}" y="{y + 4}" width="{max(1.0, ratio * scale):.1f}" height="{row_height - 8}" fill="{colour}"/>')
        out.append(f'<text x="{label_width + ratio * scale + 6:.1f}" y="{y + 15}" fill="#222">{ratio:.2f}×</text>')
    one = label_width + scale
    out.append(f'<line x1="{one:.1f}" y1="{top - 4}" x2="{one:.1f}" y2="{height - 24}" stroke="#555" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{one:.1f}" y="{height - 10}" text-anchor="middle" fill="#555">1.0×</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 1
    source, folder = argv[1], argv[2]
    text = open(source, encoding="utf-8").read()
    os.makedirs(folder, exist_ok=True)
    written = 0
    for number, header, rows in tables(text):
        if "ratio" not in header:
            continue
        column = header.index("ratio")
        reference = header[column - 1] if column > 0 else "the reference"
        bars = []
        for row in rows:
            if len(row) <= column:
                continue
            match = re.match(r"^([0-9.]+)×$", row[column])
            if match:
                bars.append((row[0], float(match.group(1))))
        if not bars:
            continue
        written += 1
        slug = re.sub(r"[^a-z0-9]+", "-", bars[0][0].lower()).strip("-")[:40]
        path = os.path.join(folder, f"{written:02d}-{slug}.svg")
        with open(path, "w", encoding="utf-8") as out:
            out.write(chart(bars, reference))
        print(f"{path}\t{number}")
    if written == 0:
        sys.stderr.write(f"{source}: no table with a ratio column\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
