"""The standard benchmark suite: every built-in topology × every collective × sizes 1 KiB, 1 MiB,
256 MiB, 1 GiB × every method (as `synth compare` runs them, but the exact ILP and without a time
budget: time-limited solves and budgets would make the figures depend on the machine's load;
`benchmarks/ilp.py` measures the ILP), against the lower bound.

Writes ``benchmarks/results/suite.csv`` (every method × case) and ``benchmarks/results/suite.md``
(per case: the best method, its ratio to the bound, the runner-up, and how long synthesis took),
and with ``--readme`` replaces the suite section of ``benchmarks/README.md``.

    .venv/bin/python benchmarks/suite.py [--readme] [--topologies dgx1,...] [--collectives ...] [--methods ...] [-q]

On a terminal a progress bar shows the case being run (per-case timings print above it); off a
terminal only the per-case lines go to stderr; ``-q`` silences both.
    make bench
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import platform
import sys
import time
from pathlib import Path

from synth.builtin import BUILTIN_NAMES, get_topology
from synth.collective import ALL_KINDS, parse_kind
from synth.compare import compare, default_methods
from synth.progress import Progress
from synth.units import format_size

HERE = Path(__file__).resolve().parent
SIZES = (1 << 10, 1 << 20, 256 << 20, 1 << 30)
BEGIN, END = "<!-- suite:begin -->", "<!-- suite:end -->"
COLUMNS = (
    "topology",
    "collective",
    "size",
    "method",
    "time_us",
    "algbw",
    "busbw",
    "ratio_to_bound",
    "bound_us",
    "binding",
    "steps",
    "transfers",
    "chunks",
    "synth_seconds",
)


def run(topologies, kinds, methods, progress: Progress) -> tuple[list[dict], list[dict]]:
    rows, cases = [], []
    for topo_name in topologies:
        topology = get_topology(topo_name)
        for kind in kinds:
            names = [m for m in methods if m in default_methods(kind)] if methods else None
            started = time.perf_counter()
            progress.note(f"{topo_name} {kind.value}")
            c = compare(topology, kind, SIZES, methods=names, budget=math.inf, exact=False)
            progress.advance()
            progress.log(f"{topo_name:14s} {kind.value:15s} {time.perf_counter() - started:6.1f} s")
            synth_s = {o.method: o.synth_seconds for o in c.outcomes if o.ok}
            shape = {o.method: o for o in c.outcomes if o.ok}
            for i, size in enumerate(c.sizes):
                bound = c.bounds[i]
                ranked = c.rows(i)
                for r in ranked:
                    o = shape[r.method]
                    rows.append(
                        {
                            "topology": topo_name,
                            "collective": kind.value,
                            "size": size,
                            "method": r.method,
                            "time_us": f"{r.time_us:.4f}",
                            "algbw": f"{r.algbw:.4f}",
                            "busbw": f"{r.busbw:.4f}",
                            "ratio_to_bound": f"{r.ratio:.4f}",
                            "bound_us": f"{bound.time_us:.4f}",
                            "binding": bound.binding,
                            "steps": o.steps,
                            "transfers": o.transfers,
                            "chunks": o.chunks,
                            "synth_seconds": f"{synth_s[r.method]:.3f}",
                        }
                    )
                if ranked:
                    best = ranked[0]
                    cases.append(
                        {
                            "topology": topo_name,
                            "collective": kind.value,
                            "size": size,
                            "best": best.method,
                            "ratio": best.ratio,
                            "busbw": best.busbw,
                            "binding": bound.binding,
                            "runner_up": f"{ranked[1].method} ({ranked[1].ratio:.2f})" if len(ranked) > 1 else "-",
                            "synth_seconds": synth_s[best.method],
                            "methods": len(ranked),
                        }
                    )
    return rows, cases


def markdown(cases: list[dict], elapsed: float, argv: list[str]) -> str:
    lines = [
        f"Standard suite: {len({c['topology'] for c in cases})} topologies x {len({c['collective'] for c in cases})} "
        f"collectives x sizes {', '.join(format_size(s) for s in SIZES)}; every applicable method but the exact ILP, "
        f"step-synchronous model; ratio = predicted time / lower bound (1.00 is optimal). Ran in {elapsed:.0f} s on "
        f"{platform.machine()} with Python {platform.python_version()} "
        f"(`{' '.join(['python benchmarks/suite.py', *argv])}`).",
        "",
    ]
    by_size = {}
    for c in cases:
        by_size.setdefault(c["size"], []).append(c["ratio"])
    lines.append("| size | geometric mean of best ratio | worst best ratio |")
    lines.append("|---|---:|---:|")
    for size, ratios in sorted(by_size.items()):
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        lines.append(f"| {format_size(size)} | {geo:.3f} | {max(ratios):.2f} |")
    lines += [
        "",
        "| topology | collective | size | best method | x bound | busbw GB/s | bound binds | runner-up (x bound) | synth s |",
        "|---|---|---|---|---:|---:|---|---|---:|",
    ]
    for c in cases:
        lines.append(
            f"| {c['topology']} | {c['collective']} | {format_size(c['size'])} | {c['best']} | {c['ratio']:.2f} | "
            f"{c['busbw']:.2f} | {c['binding']} | {c['runner_up']} | {c['synth_seconds']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topologies", default=",".join(BUILTIN_NAMES))
    parser.add_argument("--collectives", default=",".join(k.value for k in ALL_KINDS))
    parser.add_argument("--methods", default="", help="comma-separated (default: every applicable method)")
    parser.add_argument("--out", default=str(HERE / "results"))
    parser.add_argument("--readme", action="store_true", help="write the table into benchmarks/README.md")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar or per-case lines on stderr")
    args = parser.parse_args()
    topologies = [t for t in args.topologies.split(",") if t]
    kinds = [parse_kind(k) for k in args.collectives.split(",") if k]
    methods = [m for m in args.methods.split(",") if m]
    started = time.perf_counter()
    with Progress(len(topologies) * len(kinds), "suite", quiet=args.quiet, unit="case") as progress:
        rows, cases = run(topologies, kinds, methods, progress)
    elapsed = time.perf_counter() - started
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (out / "suite.csv").write_text(buf.getvalue())
    argv = [a for a in sys.argv[1:]]
    table = markdown(cases, elapsed, argv)
    (out / "suite.md").write_text(table)
    print(table)
    if args.readme:
        readme = HERE / "README.md"
        text = readme.read_text() if readme.exists() else "# Benchmarks\n"
        section = f"{BEGIN}\n{table}{END}"
        if BEGIN in text and END in text:
            text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END) :]
        else:
            text = text.rstrip("\n") + "\n\n## Standard suite (`make bench`, benchmarks/suite.py)\n\n" + section + "\n"
        readme.write_text(text)
        print(f"updated {readme}", file=sys.stderr)


if __name__ == "__main__":
    main()
