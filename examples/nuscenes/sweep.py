"""The training sweep: backbone x loader, one ``train.py`` run per cell, one table.

Each cell trains for a fixed time after warm-up (``train.py --max-seconds``) with laptime on
(``LAPTIME_PROFILE=evaluation``; on CUDA also ``LAPTIME_GPU_TIMING`` for "Training step" and
"Optimizer step": CUDA events around them) and keeps its JSON (``CELL/rank0.json``), its summary
and its log with laptime's report. From laptime's own figures the sweep reads, per cell:

- ms/iter of "training loop": the mean per iteration, the median and p90 of the iterations;
- GPU busy % of the iteration: the GPU time (CUDA events) of "Training step" + "Optimizer step"
  per iteration over the loop's mean (the stream's span from the forward's start to the
  optimizer's end, so the step's GPU time as the stream saw it);
- data wait: "data fetch" per iteration (``next(loader)`` and the copy to the device);
- CPU, both metrics: core-ms per iteration (process tree, workers included: cores x ms/iter,
  which does not depend on how long a step is) and % of the machine (the seed's metric);
- laptime's verdict (its kind: data-bound, gpu-bound or compute-bound).

Cells run one at a time, the lightest checks first; a cell whose JSON is already in ``--out`` is
not run again, so a sweep cut by ``--deadline`` goes on where it stopped when run again. Then it
prints, per backbone, ``laptime compare`` of the loaders against the 8-worker DataLoader, and last
one table of every cell; it writes ``sweep.csv``, ``sweep.md`` (tables, the max(data, compute)
model of each backbone, a text chart) and ``sweep.svg`` (ms/iter per loader, one line per
backbone).

    # the GPU sweep (examples/nuscenes/gpu-sweep.sh sweep runs it after building laptime)
    python3 examples/nuscenes/sweep.py --dataroot /tmp/nuscenes-synth --out /tmp/laptime-sweep
    # a few seconds on the CPU: one tiny backbone, DataLoader cells only (the tests run this)
    python3 examples/nuscenes/sweep.py --tiny --out build/sweep-tiny
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import svg_axes  # noqa: E402

TRAIN = os.path.join(HERE, "train.py")

# Loader cells: name -> (train.py --loader, --workers). dlN: the PyTorch DataLoader with N workers
# (Pillow decode in the workers); dali: DALI's mixed (GPU) decode; gpu: nvJPEG in the main process.
LOADERS = {"dl1": ("reference", 1), "dl2": ("reference", 2), "dl4": ("reference", 4),
           "dl8": ("reference", 8), "dl16": ("reference", 16), "dali": ("dali", 8),
           "gpu": ("gpu", 8)}
LABELS = {"dali": "DALI GPU decode", "gpu": "nvJPEG (torchvision)"}
FULL = dict(backbones="resnet18@0.5,resnet50@1.0,resnet101@1.0", loaders="dl4,dl8,dl16,gpu,dali",
            repeat="dl8,dali", runs=2, reference="dl8")
TINY = dict(backbones="resnet18@0.125", loaders="dl1,dl2", repeat="dl1", runs=2, reference="dl1")
FIELDS = ["backbone", "image_scale", "loader", "runs", "ms_mean", "ms_mean_min", "ms_mean_max",
          "ms_median", "ms_p90", "gpu_busy_pct", "data_wait_ms", "cpu_core_ms", "cpu_pct",
          "verdict", "iters"]


# The order the cells other than the reference's and DALI's run in (the cheaper answers first).
PRIORITY = ["gpu", "dl16", "dl4", "dl2", "dl1"]


def loader_label(name):
    if name.startswith("dl"):
        return f"DataLoader {name[2:]} worker{'' if name == 'dl1' else 's'}"
    return LABELS.get(name, name)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true",
                   help="CPU, resnet18 at 1/8 scale, DataLoader cells of 1 and 2 workers, batch "
                        "1, a few iterations (what the tests run)")
    p.add_argument("--out", default="build/sweep", help="results: one folder per cell, tables")
    p.add_argument("--dataroot", default=None,
                   help="NuScenes-layout data (default: OUT/data, generated when missing)")
    p.add_argument("--generate-samples", type=int, default=None,
                   help="samples to generate when the data is missing (324; --tiny: 4)")
    p.add_argument("--backbones", help="BACKBONE@SCALE,... (default " + FULL["backbones"] + ")")
    p.add_argument("--loaders", help="of " + ",".join(LOADERS) + " (default " + FULL["loaders"]
                   + ")")
    p.add_argument("--repeat", help="loaders run --runs times (default " + FULL["repeat"] + ")")
    p.add_argument("--runs", type=int, help="runs of the --repeat loaders (default 2)")
    p.add_argument("--reference", help="the loader `laptime compare` compares with (default dl8)")
    p.add_argument("--seconds", type=float, default=15.0,
                   help="measured seconds per cell after warm-up (default 15)")
    p.add_argument("--warmup", type=int, default=10, help="warm-up iterations (default 10)")
    p.add_argument("--iters", type=int, default=5000, help="at most this many iterations a cell")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--amp", default="bf16")
    p.add_argument("--device", default="cuda")
    p.add_argument("--deadline", type=float, default=None,
                   help="start no cell after this many seconds (what is left runs next time)")
    p.add_argument("--table-only", action="store_true", help="run nothing; tables from --out")
    p.add_argument("--dry-run", action="store_true",
                   help="run nothing; list the cells a run would start (those without their "
                        "rank0.json in --out), one per line, in the order they would run")
    args = p.parse_args(argv)
    base = TINY if args.tiny else FULL
    for key, value in base.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.tiny:
        args.device, args.amp, args.batch_size, args.warmup = "cpu", "off", 1, 1
        args.iters, args.seconds = 4, None
    if args.generate_samples is None:
        args.generate_samples = 4 if args.tiny else 324
    args.dataroot = args.dataroot or os.path.join(args.out, "data")
    return args


def plan(args):
    """[(backbone, scale, loader, run)] in the order they run: every backbone with the reference
    and DALI first (where the verdict turns), then the other loaders, then the repeats."""
    backbones = []
    for item in args.backbones.split(","):
        name, _, scale = item.partition("@")
        backbones.append((name, float(scale or 1.0)))
    loaders = args.loaders.split(",")
    for name in loaders:
        if name not in LOADERS:
            raise SystemExit(f"sweep.py: unknown loader {name!r} (known: {', '.join(LOADERS)})")
    first = [x for x in (args.reference, "dali") if x in loaders]
    cells = [(b, s, ld, 1) for b, s in backbones for ld in first]
    rest = sorted((x for x in loaders if x not in first),
                  key=lambda x: PRIORITY.index(x) if x in PRIORITY else -1)
    cells += [(b, s, ld, 1) for b, s in backbones for ld in rest]
    repeat = [x for x in args.repeat.split(",") if x in loaders]
    for run in range(2, args.runs + 1):
        cells += [(b, s, ld, run) for b, s in backbones for ld in repeat]
    return cells


def cell_dir(out, backbone, scale, loader, run):
    return os.path.join(out, "cells", f"{backbone}-x{scale:g}-{loader}-run{run}")


def run_cell(args, cell, timeout):
    """Runs one cell's train.py; returns its exit status (the log is in the cell's folder)."""
    backbone, scale, loader, run = cell
    kind, workers = LOADERS[loader]
    d = cell_dir(args.out, *cell)
    os.makedirs(d, exist_ok=True)
    cmd = [sys.executable, TRAIN, "--loader", kind, "--workers", str(workers),
           "--backbone", backbone, "--image-scale", f"{scale:g}", "--amp", args.amp,
           "--device", args.device, "--batch-size", str(args.batch_size),
           "--iters", str(args.iters), "--warmup", str(args.warmup),
           "--dataroot", args.dataroot, "--generate-samples", str(args.generate_samples),
           "--replicate-dataset-per-gpu", "--seed", "0", "--no-step-stats", "--results-dir", d,
           "--summary", os.path.join(d, "summary.json")]
    if args.seconds:
        cmd += ["--max-seconds", f"{args.seconds:g}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAPTIME_")}
    env["LAPTIME_PROFILE"] = "evaluation"
    if args.device != "cpu":
        # CUDA events around the step's two names only: the loader's names run in DataLoader
        # workers too, forked processes where no CUDA call belongs.
        env["LAPTIME_GPU_TIMING"] = "Training step,Optimizer step"
    with open(os.path.join(d, "command.txt"), "w", encoding="utf-8") as f:
        f.write(" ".join(cmd) + "\n")
    with open(os.path.join(d, "train.log"), "w", encoding="utf-8") as log:
        try:
            return subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            log.write(f"\nsweep.py: killed after {timeout:.0f} s\n")
            return 124


def pending(args):
    """The cells of the plan not done yet: a cell is done when its folder under --out holds its
    laptime JSON (rank0.json), whoever wrote it (a copied cells/ folder counts)."""
    return [c for c in plan(args)
            if not os.path.exists(os.path.join(cell_dir(args.out, *c), "rank0.json"))]


def run_all(args):
    """Runs the cells not yet in --out, until the deadline; returns the cells that failed."""
    start = time.monotonic()
    failed = []
    # a cell's budget: start-up and warm-up, the measured time, the report
    per_cell = (args.seconds or 0) + 60
    for cell in pending(args):
        left = None if args.deadline is None else args.deadline - (time.monotonic() - start)
        if left is not None and left < (args.seconds or 0) + 30:
            print(f"sweep.py: deadline: {cell[0]} x{cell[1]:g} {cell[2]} run {cell[3]} and "
                  "later cells not started (run again to go on)", flush=True)
            break
        t0 = time.monotonic()
        timeout = per_cell * 3 if left is None else min(per_cell * 3, left)
        rc = run_cell(args, cell, timeout)
        print(f"sweep.py: {cell[0]} x{cell[1]:g} {cell[2]} run {cell[3]}: exit {rc}, "
              f"{time.monotonic() - t0:.0f} s", flush=True)
        if rc != 0:
            failed.append(cell)
    return failed


# ===== Figures ===================================================================================


def figures(path):
    """One cell's figures from its laptime JSON (rank0.json), as the module docstring says."""
    with open(path, encoding="utf-8") as f:
        r = json.load(f)
    by_name = {m["name"]: m for m in r["measurements"]}
    loop = by_name["training loop"]
    ms = loop["mean_per_iter_s"] * 1e3

    def per_iter_ms(name, gpu=False):
        m = by_name.get(name) or {}
        m = (m.get("gpu") or {}) if gpu else m
        t = m.get("mean_per_iter_s")
        return None if t is None else t * 1e3

    gpu = [per_iter_ms(n, gpu=True) for n in ("Training step", "Optimizer step")]
    cpu = loop.get("cpu") or {}
    verdict = r.get("verdict") or {}
    return {
        "ms_mean": ms,
        "ms_median": loop["median_s"] * 1e3,
        "ms_p90": loop["p90_s"] * 1e3,
        "gpu_busy_pct": None if None in gpu else 100.0 * sum(gpu) / ms,
        "data_wait_ms": per_iter_ms("data fetch"),
        "cpu_core_ms": (None if cpu.get("process_cores") is None
                        else cpu["process_cores"] * ms),
        "cpu_pct": cpu.get("process_percent"),
        "verdict": verdict.get("kind", "n/a"),
        "verdict_text": verdict.get("text", ""),
        "iters": r["iterations_measured"],
    }


def collect(args):
    """{(backbone, scale, loader): [figures of each run, in run order]} of the cells in --out,
    backbone by backbone, the loaders in --loaders order."""
    table = {}
    loaders = args.loaders.split(",")
    cells = sorted(plan(args), key=lambda c: (c[3], loaders.index(c[2])))
    backbones = list(dict.fromkeys((c[0], c[1]) for c in cells))
    for backbone, scale, loader, run in sorted(cells, key=lambda c: backbones.index(c[:2])):
        path = os.path.join(cell_dir(args.out, backbone, scale, loader, run), "rank0.json")
        if os.path.exists(path):
            table.setdefault((backbone, scale, loader), []).append(figures(path))
    return table


def _median(runs, key):
    values = [r[key] for r in runs if r[key] is not None]
    return statistics.median(values) if values else None


def rows(table):
    """One row per (backbone, loader): medians over the runs, the mean's min-max, the verdicts."""
    out = []
    for (backbone, scale, loader), runs in table.items():
        row = {"backbone": backbone, "image_scale": scale, "loader": loader, "runs": len(runs)}
        for key in ("ms_mean", "ms_median", "ms_p90", "gpu_busy_pct", "data_wait_ms",
                    "cpu_core_ms", "cpu_pct", "iters"):
            row[key] = _median(runs, key)
        row["ms_mean_min"] = min(r["ms_mean"] for r in runs)
        row["ms_mean_max"] = max(r["ms_mean"] for r in runs)
        row["verdict"] = "/".join(dict.fromkeys(r["verdict"] for r in runs))
        out.append(row)
    return out


def _f(x, digits=1):
    return "n/a" if x is None else f"{x:.{digits}f}"


def _ms(x):
    return "n/a" if x is None else f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def markdown_table(rows_):
    lines = ["| backbone | loader | runs | ms/iter mean (min–max) | median | p90 | GPU busy % "
             "| data wait ms | CPU core-ms/iter | CPU % machine | verdict |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows_:
        spread = (f" ({_ms(r['ms_mean_min'])}–{_ms(r['ms_mean_max'])})" if r["runs"] > 1 else "")
        lines.append(
            f"| {r['backbone']} ×{r['image_scale']:g} | {loader_label(r['loader'])} | {r['runs']} "
            f"| {_ms(r['ms_mean'])}{spread} | {_ms(r['ms_median'])} | {_ms(r['ms_p90'])} "
            f"| {_f(r['gpu_busy_pct'], 0)} | {_ms(r['data_wait_ms'])} | {_f(r['cpu_core_ms'], 0)} "
            f"| {_f(r['cpu_pct'])} | {r['verdict']} |")
    return "\n".join(lines)


def model_table(rows_, reference):
    """Per backbone: DALI's speedup over the reference loader, measured and as max(data, compute)
    predicts it. Compute C: the GPU busy time per iteration of the backbone's DALI cell (the step
    with the least loader interference); the loaders' own period P: their ms/iter on the first
    (lightest) backbone, an upper bound where that cell is data-bound. Predicted ms/iter of a cell:
    max(P of its loader, C of its backbone)."""
    by = {(r["backbone"], r["loader"]): r for r in rows_}
    backbones = list(dict.fromkeys(r["backbone"] for r in rows_))
    if not backbones or (backbones[0], reference) not in by or (backbones[0], "dali") not in by:
        return ""
    p_ref = by[(backbones[0], reference)]["ms_mean"]
    p_dali = by[(backbones[0], "dali")]["ms_mean"]
    lines = [f"| backbone | C: GPU busy ms/iter (DALI cell) | {loader_label(reference)} measured "
             "| predicted max(P, C) | DALI measured | predicted | speedup measured | predicted |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for b in backbones:
        ref, dali = by.get((b, reference)), by.get((b, "dali"))
        if not ref or not dali or dali["gpu_busy_pct"] is None:
            continue
        c = dali["gpu_busy_pct"] / 100.0 * dali["ms_mean"]
        pred_ref, pred_dali = max(p_ref, c), max(p_dali, c)
        lines.append(f"| {b} | {_ms(c)} | {_ms(ref['ms_mean'])} | {_ms(pred_ref)} "
                     f"| {_ms(dali['ms_mean'])} | {_ms(pred_dali)} "
                     f"| ×{ref['ms_mean'] / dali['ms_mean']:.2f} | ×{pred_ref / pred_dali:.2f} |")
    lines.append("")
    lines.append(f"P ({loader_label(reference)}) = {_ms(p_ref)} ms, P (DALI) = {_ms(p_dali)} ms: "
                 f"their ms/iter with {backbones[0]}.")
    return "\n".join(lines)


# ===== Drawings ==================================================================================

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def svg_chart(rows_, loaders, title):
    """ms/iter (mean; the bar: min–max over the runs) per loader, one line per backbone, on a
    log scale: an SVG document as text."""
    backbones = list(dict.fromkeys((r["backbone"], r["image_scale"]) for r in rows_))
    by = {(r["backbone"], r["image_scale"], r["loader"]): r for r in rows_}
    values = [v for r in rows_ for v in (r["ms_mean_min"], r["ms_mean_max"]) if v]
    if not values:
        return ""
    lo, hi = svg_axes.decades(values)
    w, h, left, right, top, bottom = 720, 420, 70, 190, 40, 60
    pw, ph = w - left - right, h - top - bottom
    y = svg_axes.log_scale(lo, hi, top, ph)

    def x(i):
        return left + pw * (i + 0.5) / len(loaders)

    out = svg_axes.head(w, h, w / 2 - right / 2, title, "ms per iteration (log scale)", top, ph)
    out += svg_axes.log_grid(lo, hi, left, pw, y)
    for i, ld in enumerate(loaders):
        out.append(f'<text x="{x(i):.1f}" y="{top + ph + 18}" text-anchor="middle">'
                   f'{ld}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" '
               'stroke="#444"/>')
    for j, (b, s) in enumerate(backbones):
        color = COLORS[j % len(COLORS)]
        pts = [(x(i), by[(b, s, ld)]) for i, ld in enumerate(loaders) if (b, s, ld) in by]
        out.append('<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>'.format(
            color, " ".join(f"{px:.1f},{y(r['ms_mean']):.1f}" for px, r in pts)))
        for px, r in pts:
            out.append(f'<circle cx="{px:.1f}" cy="{y(r["ms_mean"]):.1f}" r="4" fill="{color}">'
                       f'<title>{b} {r["loader"]}: {r["ms_mean"]:.1f} ms/iter, '
                       f'{r["verdict"]}</title></circle>')
            if r["runs"] > 1:
                out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y(r["ms_mean_min"]):.1f}" '
                           f'y2="{y(r["ms_mean_max"]):.1f}" stroke="{color}" stroke-width="1"/>')
        ly = top + 20 + 22 * j
        out.append(f'<line x1="{left + pw + 16}" x2="{left + pw + 40}" y1="{ly}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="2"/><text x="{left + pw + 46}" '
                   f'y="{ly + 4}">{b} ×{s:g}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def text_chart(rows_, loaders, width=48):
    """The same as lines of text: one bar per cell, its length on a log scale."""
    import math

    values = [r["ms_mean"] for r in rows_ if r["ms_mean"]]
    if not values:
        return ""
    lo, hi = math.log10(min(values) / 1.5), math.log10(max(values))
    by = {(r["backbone"], r["image_scale"], r["loader"]): r for r in rows_}
    lines = [f"ms/iter (mean), bar length on a log scale from {10 ** lo:.0f} to "
             f"{10 ** hi:.0f} ms"]
    for b, s in dict.fromkeys((r["backbone"], r["image_scale"]) for r in rows_):
        lines.append(f"{b} ×{s:g}")
        for ld in loaders:
            r = by.get((b, s, ld))
            if r:
                n = max(1, round(width * (math.log10(r["ms_mean"]) - lo) / (hi - lo)))
                lines.append(f"  {ld:<5} {'#' * n:<{width}} {_ms(r['ms_mean']):>5}  "
                             f"{r['verdict']}")
    return "\n".join(lines)


# ===== Reports ===================================================================================


def compare_sides(args, table, backbone, scale):
    """(files per side, labels) for `laptime compare` of one backbone: the reference loader's runs
    first, then each other loader's."""
    sides, labels = [], []
    order = [args.reference] + [x for x in args.loaders.split(",") if x != args.reference]
    for ld in order:
        runs = table.get((backbone, scale, ld))
        if not runs:
            continue
        files = [os.path.join(cell_dir(args.out, backbone, scale, ld, run), "rank0.json")
                 for run in range(1, args.runs + 1)]
        sides.append([f for f in files if os.path.exists(f)])
        labels.append(loader_label(ld))
    return sides, labels


def compare_command(sides, labels):
    cmd = [sys.executable, "-m", "laptime", "compare", "--ref", *sides[0]]
    for files in sides[1:]:
        cmd += ["--test", *files]
    return cmd + ["--labels", ",".join(labels), "--name", "training loop", "--unit", "iter"]


def report(args, failed):
    table = collect(args)
    rows_ = rows(table)
    loaders = args.loaders.split(",")
    md = [f"# Training sweep: {args.backbones} x {args.loaders}", "",
          f"batch {args.batch_size}, {args.amp}, device {args.device}, warm-up {args.warmup} "
          f"iterations, then {args.seconds if args.seconds else '-'} s or {args.iters} "
          "iterations per cell", ""]
    for b, s in dict.fromkeys((r["backbone"], r["image_scale"]) for r in rows_):
        sides, labels = compare_sides(args, table, b, s)
        if len(sides) < 2:
            continue
        cmd = compare_command(sides, labels)
        print(f"=== laptime compare, {b} ×{s:g} (ms per iteration of 'training loop')")
        done = subprocess.run(cmd, capture_output=True, text=True)
        print(done.stdout + done.stderr, end="", flush=True)
        done_md = subprocess.run(cmd + ["--markdown"], capture_output=True, text=True)
        md += [f"## laptime compare, {b} ×{s:g}", "", done_md.stdout.strip() or done_md.stderr,
               ""]
    md += ["## All cells", "", markdown_table(rows_), ""]
    model = model_table(rows_, args.reference)
    if model:
        md += ["## max(data, compute) per step", "", model, ""]
    chart = text_chart(rows_, loaders)
    md += ["## Chart", "", "```", chart, "```", ""]
    if failed:
        md += ["Failed cells: " + ", ".join(f"{c[0]} {c[2]} run {c[3]}" for c in failed), ""]
    with open(os.path.join(args.out, "sweep.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md))
    with open(os.path.join(args.out, "sweep.csv"), "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows_:
            w.writerow({k: (f"{v:.3f}" if isinstance(v, float) else v)
                        for k, v in r.items() if k in FIELDS})
    with open(os.path.join(args.out, "sweep.svg"), "w", encoding="utf-8") as f:
        f.write(svg_chart(rows_, loaders, "Training sweep: ms/iter per loader"))
    if model:
        print("=== max(data, compute) per step\n" + model)
    print(chart)
    print(markdown_table(rows_), flush=True)
    return rows_


def main(argv=None):
    args = parse_args(argv)
    if args.dry_run:
        for c in pending(args):
            print(os.path.basename(cell_dir(args.out, *c)))
        return 0
    os.makedirs(args.out, exist_ok=True)
    failed = [] if args.table_only else run_all(args)
    for c in failed:
        log = os.path.join(cell_dir(args.out, *c), "train.log")
        with open(log, encoding="utf-8", errors="replace") as f:
            print(f"=== {c[0]} {c[2]} run {c[3]} FAILED; the end of {log}:\n{f.read()[-2000:]}")
    report(args, failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
