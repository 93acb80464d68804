#!/usr/bin/env python3
"""Figures from tessera-bench's --json output: `scripts/plot.py RESULTS.json --out DIR`.

Reads the JSON lines any `tessera-bench <subcommand> --json FILE` appends (one object per
measured row) and writes SVG and PNG figures into DIR, one set per benchmark in the file:

  <bench>-throughput    operations per second against workers, one line per implementation,
                        one panel per configuration (the row's extra columns)
  <bench>-ratio         the same as ratios against the benchmark's reference implementation
                        (rows that carry "ratio")
  prefetch-distance     the prefetch benchmark: operations per second against the distance
  sync-heatmap          the sync benchmark: implementation x mix, operations per second
  <bench>-granularity   rows with records_per_task (the join): against records per task

Rows that are not benchmark rows (no benchmark, implementation, workers or ops_per_second) are
skipped with a note on stderr; a file that is not JSON lines is an error (exit status 2).
Runs with the project's virtual environment: .venv/bin/python scripts/plot.py … (matplotlib,
requirements.txt). Prints the files it wrote, one per line.
"""
import argparse
import collections
import json
import math
import os
import sys

STANDARD = {"benchmark", "implementation", "workers", "ops", "seconds", "ops_per_second",
            "ns_per_op", "statistic", "repeat", "runs", "seconds_min", "seconds_max",
            "remark", "reference", "ratio"}
# Extra columns that vary along a figure's x axis or are results, not configurations.
NOT_CONFIGURATION = {"prefetch_distance", "records_per_task", "vs_distance_0", "memory_mb",
                     "edges", "in_flight", "verified", "producers", "consumers"}
MAX_PANELS = 12


def fail(message):
    print(f"plot.py: {message}", file=sys.stderr)
    sys.exit(2)


def read_rows(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    stripped = text.lstrip()
    if stripped.startswith("["):  # also a JSON array of rows
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            fail(f"{path}: not JSON: {e}")
        return [(i + 1, r) for i, r in enumerate(data)]
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError as e:
            fail(f"{path}:{number}: not a JSON object per line ({e.msg}); expected the output of "
                 "tessera-bench --json")
    if not rows:
        fail(f"{path}: no rows")
    return rows


def usable(rows):
    kept = []
    for number, r in rows:
        missing = [k for k in ("benchmark", "implementation", "workers", "ops_per_second")
                   if not isinstance(r, dict) or k not in r]
        if missing:
            print(f"plot.py: note: row {number} skipped (no {', '.join(missing)})",
                  file=sys.stderr)
            continue
        kept.append(r)
    return kept


def configuration(r, leave_out=()):
    return tuple(sorted((k, str(v)) for k, v in r.items()
                        if k not in STANDARD and k not in NOT_CONFIGURATION and k not in leave_out))


def label(config):
    return ", ".join(f"{k}={v}" for k, v in config) or "all rows"


class Figures:
    def __init__(self, out):
        import matplotlib
        matplotlib.use("Agg")
        matplotlib.rcParams["svg.hashsalt"] = "tessera"  # the same SVG from the same rows
        import matplotlib.pyplot as plt
        self.plt = plt
        self.out = out
        self.written = []

    def panels(self, count, title):
        columns = min(3, count)
        lines = math.ceil(count / columns)
        fig, axes = self.plt.subplots(lines, columns, figsize=(5 * columns, 3.6 * lines),
                                      squeeze=False)
        fig.suptitle(title)
        for ax in axes.flat[count:]:
            ax.set_visible(False)
        return fig, list(axes.flat)

    def save(self, fig, name):
        fig.tight_layout()
        for ext in ("svg", "png"):
            path = os.path.join(self.out, f"{name}.{ext}")
            fig.savefig(path, dpi=110, metadata={"Date": None} if ext == "svg" else None)
            self.written.append(path)
        self.plt.close(fig)


def by_configuration(rows, leave_out=()):
    groups = collections.OrderedDict()
    for r in rows:
        groups.setdefault(configuration(r, leave_out), []).append(r)
    if len(groups) > MAX_PANELS:
        print(f"plot.py: note: {rows[0]['benchmark']}: {len(groups)} configurations, the first "
              f"{MAX_PANELS} drawn", file=sys.stderr)
    return list(groups.items())[:MAX_PANELS]


def lines_against(ax, rows, x_key, y_key, series_key="implementation", log_x=False):
    series = collections.OrderedDict()
    for r in rows:
        if r.get(x_key) is None or not isinstance(r.get(y_key), (int, float)):
            continue
        series.setdefault(str(r[series_key]), {})[r[x_key]] = r[y_key]
    for name, points in series.items():
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker="o", label=name)
    if log_x:
        ax.set_xscale("log", base=2)
    ax.grid(True, alpha=0.3)
    return len(series)


def bars(fig_maker, bench, groups, key, title, name):
    """One panel of grouped bars: a group per configuration, a bar per implementation."""
    impls = list(dict.fromkeys(r["implementation"] for _, members in groups for r in members))
    fig, axes = fig_maker.panels(1, title)
    ax = axes[0]
    fig.set_size_inches(max(6, 1.6 * len(groups) + 2), 4.2)
    width = 0.8 / max(1, len(impls))
    for k, impl in enumerate(impls):
        xs, ys = [], []
        for g, (_, members) in enumerate(groups):
            for r in members:
                if r["implementation"] == impl and isinstance(r.get(key), (int, float)):
                    xs.append(g + k * width - 0.4 + width / 2)
                    ys.append(r[key])
        ax.bar(xs, ys, width, label=impl)
    ax.set_xticks(range(len(groups)),
                  [f"{label(c)}\n{members[0]['workers']} threads" for c, members in groups],
                  fontsize=7)
    ax.set_ylabel("ratio" if key == "ratio" else "operations per second")
    if key == "ratio":
        ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    fig_maker.save(fig, name)


def throughput(fig_maker, bench, rows, ratio=False):
    if ratio:
        rows = [r for r in rows if isinstance(r.get("ratio"), (int, float))]
        if not rows:
            return
    groups = by_configuration(rows)
    reference = rows[0].get("reference", "the reference")
    title = (f"{bench}: ops/s relative to {reference}" if ratio
             else f"{bench}: throughput against workers")
    if all(len({r["workers"] for r in members}) == 1 for _, members in groups):
        # one worker count per configuration (a queue pattern fixes its threads): bars
        bars(fig_maker, bench, groups, "ratio" if ratio else "ops_per_second",
             title.replace(" against workers", ""), f"{bench}-{'ratio' if ratio else 'throughput'}")
        return
    fig, axes = fig_maker.panels(len(groups), title)
    for ax, (config, members) in zip(axes, groups):
        lines_against(ax, members, "workers", "ratio" if ratio else "ops_per_second")
        ax.set_title(label(config), fontsize=8)
        ax.set_xlabel("workers")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_ylabel("ratio" if ratio else "operations per second")
        if ratio:
            ax.axhline(1.0, color="grey", linewidth=0.8)
        else:
            ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig_maker.save(fig, f"{bench}-{'ratio' if ratio else 'throughput'}")


def curve(fig_maker, bench, rows, x_key, name, log_x=False):
    rows = [r for r in rows if isinstance(r.get(x_key), (int, float))]
    if not rows:
        return
    groups = by_configuration(rows, leave_out=("implementation",))
    fig, axes = fig_maker.panels(len(groups), f"{bench}: throughput against {x_key}")
    for ax, (config, members) in zip(axes, groups):
        for r in members:
            r["_series"] = f"{r['implementation']}, {r['workers']} workers"
        lines_against(ax, members, x_key, "ops_per_second", "_series", log_x=log_x)
        ax.set_title(label(config), fontsize=8)
        ax.set_xlabel(x_key.replace("_", " "))
        ax.set_ylabel("operations per second")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig_maker.save(fig, name)


def heat_map(fig_maker, rows):
    rows = [r for r in rows if "mix" in r]
    if not rows:
        return
    groups = by_configuration(rows, leave_out=("mix",))
    panels = []
    for config, members in groups:
        most = max(r["workers"] for r in members)
        panels.append((config + (("workers", str(most)),),
                       [r for r in members if r["workers"] == most]))
    fig, axes = fig_maker.panels(len(panels), "sync: operations per second by mix (heat map)")
    for ax, (config, members) in zip(axes, panels):
        impls = sorted({r["implementation"] for r in members})
        mixes = list(dict.fromkeys(str(r["mix"]) for r in members))
        grid = [[math.nan] * len(mixes) for _ in impls]
        for r in members:
            grid[impls.index(r["implementation"])][mixes.index(str(r["mix"]))] = \
                r["ops_per_second"]
        image = ax.imshow(grid, aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(mixes)), mixes, rotation=30, ha="right", fontsize=7)
        ax.set_yticks(range(len(impls)), impls, fontsize=7)
        for i, line in enumerate(grid):
            for j, v in enumerate(line):
                if not math.isnan(v):
                    ax.text(j, i, f"{v / 1e6:.1f}M", ha="center", va="center", fontsize=6,
                            color="white")
        ax.set_title(label(config), fontsize=8)
        fig.colorbar(image, ax=ax, label="ops/s")
    fig_maker.save(fig, "sync-heatmap")


def main():
    parser = argparse.ArgumentParser(
        description="Figures (SVG and PNG) from tessera-bench --json output.")
    parser.add_argument("results", help="a file tessera-bench --json wrote (JSON lines)")
    parser.add_argument("--out", required=True, help="folder for the figures (made if missing)")
    args = parser.parse_args()
    rows = usable(read_rows(args.results))
    if not rows:
        fail(f"{args.results}: no benchmark rows (benchmark, implementation, workers, "
             "ops_per_second)")
    os.makedirs(args.out, exist_ok=True)
    figures = Figures(args.out)
    benches = collections.OrderedDict()
    for r in rows:
        benches.setdefault(r["benchmark"], []).append(r)
    for bench, members in benches.items():
        plain = [r for r in members
                 if "prefetch_distance" not in r and "records_per_task" not in r]
        if plain:
            throughput(figures, bench, plain)
            throughput(figures, bench, plain, ratio=True)
        curve(figures, bench, members, "prefetch_distance", "prefetch-distance")
        curve(figures, bench, members, "records_per_task", f"{bench}-granularity", log_x=True)
        if bench == "sync":
            heat_map(figures, members)
    for path in figures.written:
        print(path)


if __name__ == "__main__":
    main()
