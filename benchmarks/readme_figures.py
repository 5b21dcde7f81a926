"""README figures from recorded results: write them, or check that the READMEs agree with them.

Every measured figure in README.md (and those that docs/ pages quote), and every benchmark output
quoted in benchmarks/README.md, sits in a marked block that this script writes from
``benchmarks/results/`` (what the benchmarks and ``benchmarks/readme_examples.py`` record):

    <!-- figures: NAME -->text<!-- /figures -->      FIGURES[NAME] rendered (README.md, benchmarks/README.md, docs/)
    <!-- output: RECORD -->                           the recorded command and output of
    ```...```                                         results/RECORD.json, in a code block
    <!-- /output -->
    <!-- suite:begin -->...<!-- suite:end -->         results/suite.md (written by suite.py --readme)

    python benchmarks/readme_figures.py --check   # exit 1, naming every block that disagrees
    python benchmarks/readme_figures.py --write   # rewrite the blocks from the results

``--check`` only compares text (tests/test_readme.py runs it in the default suite); to refresh a
figure, rerun its benchmark, then ``--write``.

Adding a figure is one line in FIGURES below, e.g.

    "my-figure": fig("my_bench", "{cases[torus 8x8][ratio]:.2f} of the bound"),

where ``my_bench`` names ``results/my_bench.json`` (written by ``_results.record`` in the benchmark)
and the template is ``str.format`` over its ``figures`` object; then put
``<!-- figures: my-figure --><!-- /figures -->`` where the figure goes and run ``--write``.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
FILES = (REPO / "README.md", HERE / "README.md", *sorted((REPO / "docs").glob("*.md")))

FIGURE_BLOCK = re.compile(r"(?<!`)<!-- figures: (?P<name>[\w.-]+) -->(?P<body>.*?)<!-- /figures -->", re.S)
OUTPUT_BLOCK = re.compile(r"(?<!`)<!-- output: (?P<name>[\w.-]+) -->\n(?P<body>.*?)<!-- /output -->", re.S)
# (a marker quoted in backticks, as in the instructions of benchmarks/README.md, is not a block)
SUITE_BLOCK = re.compile(r"<!-- suite:begin -->\n(?P<body>.*?)<!-- suite:end -->", re.S)


class Results:
    """The recorded results, loaded on first use: ``results[name]`` is the ``figures`` object of
    ``results/NAME.json``; ``results.suite`` the rows of ``results/suite.csv``."""

    def __init__(self, folder: Path = RESULTS):
        self.folder = folder
        self._docs: dict[str, dict] = {}
        self._suite: list[dict] | None = None

    def doc(self, name: str) -> dict:
        if name not in self._docs:
            path = self.folder / f"{name}.json"
            if not path.is_file():
                raise LookupError(f"{path.relative_to(REPO)} does not exist (run the benchmark that records it)")
            self._docs[name] = json.loads(path.read_text(encoding="utf-8"))
        return self._docs[name]

    def __getitem__(self, name: str) -> dict:
        return self.doc(name)["figures"]

    def names(self) -> list[str]:
        """The records of `_results.record` (a benchmark's own data files, such as midsize.py's
        per-case results, have no ``figures`` and are not READMEs' business)."""
        return sorted(p.stem for p in self.folder.glob("*.json") if "figures" in self.doc(p.stem))

    @property
    def suite(self) -> list[dict]:
        if self._suite is None:
            with (self.folder / "suite.csv").open(encoding="utf-8") as fh:
                self._suite = list(csv.DictReader(fh))
        return self._suite

    def suite_row(self, topology: str, collective: str, size: int, method: str) -> dict:
        for row in self.suite:
            if (row["topology"], row["collective"], int(row["size"]), row["method"]) == (topology, collective, size, method):
                return row
        raise LookupError(f"results/suite.csv has no row {topology} {collective} {size} {method}")


@dataclass(frozen=True)
class Figure:
    sources: tuple[str, ...]  # results names ("suite" for suite.csv)
    render: Callable[[Results], str]


def fig(source: str, template: str) -> Figure:
    """A figure that is ``template`` formatted with the ``figures`` of ``results/SOURCE.json``."""
    return Figure((source,), lambda r: template.format(**r[source]))


def derived(*sources: str) -> Callable[[Callable[[Results], str]], Figure]:
    """A figure computed from several records (a decorator: the function returns the text)."""
    return lambda render: Figure(sources, render)


# ============================================================================ derived figures
MIB, GIB = 1 << 20, 1 << 30
MULTI_HOST = ("ndv2x2", "dgx-a100x2", "dgx-a100x4", "fattree-4rack")


@derived("suite")
def _hierarchical_broadcast(r: Results) -> str:
    speedups = [
        float(r.suite_row(t, "broadcast", MIB, "binomial")["time_us"])
        / float(r.suite_row(t, "broadcast", MIB, "hierarchical")["time_us"])
        for t in MULTI_HOST
    ]
    return f"{min(speedups):.1f}–{max(speedups):.1f} ×"


@derived("suite")
def _multiring_dgx1(r: Results) -> str:
    return f"{float(r.suite_row('dgx1', 'allgather', GIB, 'multiring')['algbw']):.2f} GB/s"


@derived("suite")
def _scatter_allgather_dgx2(r: Results) -> str:
    ours = float(r.suite_row("dgx2", "broadcast", MIB, "scatter-allgather")["time_us"])
    tree = float(r.suite_row("dgx2", "broadcast", MIB, "binomial")["time_us"])
    return f"{ours:.1f} µs against {tree:.1f} µs"


@derived("readme-compare")
def _compare_prose(r: Results) -> str:
    big, mid = r["readme-compare"]["at_1GiB"], r["readme-compare"]["at_1MiB"]
    faster = mid["double-binary-tree"]["time_us"] / mid["greedy"]["time_us"]
    return (
        f"eight rail-aligned rings reach {big['multiring']['x_bound']:.2f} × the bound at 1 GiB, the greedy "
        f"synthesizer {big['greedy']['x_bound']:.2f} in {big['greedy']['steps']} steps instead of "
        f"{big['multiring']['steps']}; at 1 MiB greedy is {faster:.1f} times as fast as NCCL's double binary tree"
    )


@derived("readme-curves")
def _curves_prose(r: Results) -> str:
    c = r["readme-curves"]
    spans = []
    for s in c["ranges"]:
        tuned = f" (tuned for {', '.join(c['greedy_tuned_for'])})" if s["method"] == "greedy" else ""
        spans.append(f"`{s['method']}`{tuned}{' is fastest' if not spans else ''} from {s['low']} to {s['high']}")
    return (
        f"{', then '.join(spans)}; within 1% of the bound from {c['within_1_percent_from']} on, where "
        f"NCCL's six concurrent rings (`multiring`) reach {c['multiring_x_bound_1GiB']:.3f} × the bound at 1 GiB. "
        f"The timeline shows why one ring takes {c['ring_over_multiring_1GiB']:.1f} times as long there"
    )


@derived("quality-auto")
def _auto(r: Results) -> str:
    a = r["quality-auto"]["at_1GiB"]
    worst = a["largest_auto_over_classic"]
    never = (
        "never slower than the best classic algorithm"
        if worst <= 1.0005
        else f"at most {worst:.3f} × the time of the best classic algorithm"
    )
    return f"{a['geomean']:.2f} × the lower bound in geometric mean over every built-in and collective, {never}"


def _hierarchical_case(r: Results, case: str) -> str:
    row = r["quality-auto"]["at_1GiB"]["cases"][case]
    if not row["chose"].startswith("hierarchical"):
        raise LookupError(f"auto chose {row['chose']} for {case}, not hierarchical: reword README.md")
    collective = case.split()[1]
    return (
        f"{row['auto']:.2f} × the bound on 2 × DGX A100 at 1 GiB where a {row['best_classic']} {collective} "
        f"takes {row['classic']:.1f} ×"
    )


@derived("quality-auto")
def _hierarchical_scatter(r: Results) -> str:
    return _hierarchical_case(r, "dgx-a100x2 scatter")


@derived("quality-auto")
def _hierarchical_alltoall(r: Results) -> str:
    row = r["quality-auto"]["at_1GiB"]["cases"]["dgx-a100x2 alltoall"]
    if not row["chose"].startswith("hierarchical"):
        raise LookupError(f"auto chose {row['chose']} for dgx-a100x2 alltoall, not hierarchical: reword README.md")
    return f"{row['auto']:.2f} × against {row['classic']:.1f} ×"


@derived("quality-packing")
def _packing(r: Results) -> str:
    p = r["quality-packing"]
    trees = p["rows"]["dgx-a100x2"]["allgather"]["trees_per_root"]
    within = math.ceil((1 - p["lowest_rate"]) * 1000) / 10
    return f"within {within:.1f}% of the optimum on every built-in, {trees} trees per root on 2 × DGX A100"


def _under_load(load: float) -> str:
    """Said beside a timing measured while other jobs shared the machine's 2 cores."""
    return f", measured at load {load:.0f} on 2 cores" if load >= 1.5 else ""


@derived("greedy_scale")
def _greedy_4096(r: Results) -> str:
    g = r["greedy_scale"]
    load = max(max(case["load"]) for case in g.values())
    return (
        f"{g['torus64']['cpu_s']:.1f} s of CPU (64 × 64 torus) and {g['fattree4k']['cpu_s']:.1f} s (512 eight-GPU "
        f"servers){_under_load(load)}"
    )


@derived("exec_vs_mpi")
def _exec_vs_mpi(r: Results) -> str:
    e = r["exec_vs_mpi"]
    return (
        f"at 64 MiB our MPI backend reaches {e['mpi_algbw_over_native_64mib']:.2f} × MPI_Allreduce's algbw, the "
        f"shared-memory backend {e['mp_algbw_over_native_64mib']:.2f} ×; at 8 B our MPI backend takes "
        f"{e['mpi_latency_over_native_8b']:.2f} × MPI_Allreduce's latency{_under_load(e['load_before'])}"
    )


@derived("torch_vs_native")
def _torch_vs_native(r: Results) -> str:
    t = r["torch_vs_native"]
    return (
        f"our ring allreduce reaches {t['algbw_over_native_64mib']:.2f} × `dist.all_reduce`'s algbw at 64 MiB of float32 and "
        f"takes {t['latency_over_native_8b']:.2f} × its latency at 8 B; DDP with the hook takes "
        f"{t['ddp_step_over_plain']:.2f} × plain DDP's time per step, with "
        + (
            "the same parameters as plain DDP"
            if t["ddp_max_param_diff"] == 0
            else f"parameters within {t['ddp_max_param_diff']:.1e} of plain DDP's"
        )
        + _under_load(t["load_before"])
    )


@derived("ilp")
def _ilp_ndv2x2(r: Results) -> str:
    n = r["ilp"]["ndv2x2"]["2x32"]
    return (
        f"{n['algbw']:.2f} GB/s ({n['percent_of_bound']:.1f}% of the bound) in {n['cpu_s']:.1f} s of CPU"
        f"{_under_load(r['ilp']['load_at_start'])}"
    )


@derived("auto_speed")
def _auto_speed(r: Results) -> str:
    """auto_speed's before and after runs, one table row per case."""
    runs = r["auto_speed"]["runs"]
    before = {run["case"]: run for run in runs.get("before", [])}
    rows = [
        "| case | ranks | CPU s before | CPU s after | wall s before | wall s after | peak MiB before | after "
        "| chosen time after / before |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs.get("after", []):
        b = before.get(run["case"])
        if b is None:
            continue
        rows.append(
            f"| {run['case']} | {run['ranks']} | {b['cpu_s']:.1f} | {run['cpu_s']:.1f} | {b['wall_s']:.0f} | {run['wall_s']:.0f} "
            f"| {b['peak_rss_mib']:.0f} | {run['peak_rss_mib']:.0f} | {run['time_us'] / b['time_us']:.3f} |"
        )
    return "\n\n" + "\n".join(rows) + "\n"


def _seconds(case: dict) -> str:
    """Wall and CPU time of a greedy_scale case; one figure when the machine was idle enough."""
    wall, cpu = case["wall_s"], case["cpu_s"]
    return f"{wall:.1f} s" if abs(wall - cpu) <= 0.05 * cpu else f"{wall:.1f} s wall, {cpu:.1f} s CPU"


@derived("greedy_scale")
def _bench_greedy_1024(r: Results) -> str:
    g = r["greedy_scale"]
    load = max(*g["torus32"]["load"], *g["fattree1k"]["load"])
    return f"{_seconds(g['torus32'])} (32 × 32 torus), {_seconds(g['fattree1k'])} (fat-tree 4 × 32 × 8){_under_load(load)}"


@derived("greedy_scale")
def _bench_greedy_4096(r: Results) -> str:
    g = r["greedy_scale"]
    load = max(*g["torus64"]["load"], *g["fattree4k"]["load"])
    return (
        f"{_seconds(g['torus64'])} (64 × 64 torus), {_seconds(g['fattree4k'])} (fat-tree of 512 eight-GPU servers)"
        f"{_under_load(load)}"
    )


def _stage(case: dict, stage: str) -> str:
    """``12.3 s wall (10.1 s CPU), 2.1 GB`` of one stage of a scale.py case."""
    st = case["stages"][stage]
    if st["exit"] != 0:
        return f"exit {st['exit']}"
    return f"{st['wall_s']:.1f} s wall ({st['cpu_s']:.1f} s CPU), {st['peak_mb'] / 1e3:.2f} GB"


def _scale_row(record: str, case_key: str, stage: str) -> Figure:
    return Figure((record,), lambda r: _stage(r[record][case_key], stage))


def _scale_load(record: str) -> Figure:
    def render(r: Results) -> str:
        loads = [x for case in r[record].values() for x in case["load"]]
        return f"{min(loads):.0f}–{max(loads):.0f}"

    return Figure((record,), render)


@derived("quality-packing")
def _bench_packing_rate(r: Results) -> str:
    p = r["quality-packing"]
    topology, collective = p["lowest_at"].split()
    lowest_k = p["rows"][topology][collective]["trees_per_root"]
    a100 = p["rows"]["dgx-a100x2"]["allgather"]
    return (
        f"lowest {p['lowest_rate']:.4f} ({topology}, {lowest_k} trees per root); 2 × DGX A100 {a100['rate']:.4f} "
        f"with {a100['trees_per_root']} trees per root (ForestColl: 13)"
    )


@derived("ilp")
def _bench_ilp_pareto(r: Results) -> str:
    points = r["ilp"]["pareto"]["points"]
    return " and ".join(f"({p['steps']} steps, {p['rounds']} rounds / {p['chunks']} chunks)" for p in points)


@derived("ilp")
def _bench_ilp_dgx2_time(r: Results) -> str:
    d = r["ilp"]["dgx2"]
    cpu = [d["pareto"]["cpu_s"], *(d[s]["cpu_s"] for s in ("1KiB", "1MiB", "1GiB"))]
    return f"{min(cpu):.2f}–{max(cpu):.2f} s"


@derived("ilp")
def _bench_ilp_ndv2x2(r: Results) -> str:
    n = r["ilp"]["ndv2x2"]

    def status(case: str) -> str:
        return "" if n[case]["status"] == "optimal" else f", {n[case]['status']} at the time limit"

    return (
        f"{n['2x32']['algbw']:.2f} GB/s ({n['2x32']['percent_of_bound']:.1f}% of 25) with 32 waves of a 2-stage "
        f"template{status('2x32')}, {n['2x48']['algbw']:.2f} ({n['2x48']['percent_of_bound']:.1f}%) with 48"
        f"{status('2x48')}; {n['3x32']['algbw']:.2f} ({n['3x32']['percent_of_bound']:.1f}%) with 3 stages{status('3x32')}"
    )


@derived("ilp")
def _bench_ilp_symmetry(r: Results) -> str:
    gains = [case["off"]["cpu_s"] / max(case["on"]["cpu_s"], 0.01) for case in r["ilp"]["symmetry"].values()]
    return f"{min(gains):.0f}–{max(gains):.0f}"


@derived("ilp")
def _bench_ilp_solvers(r: Results) -> str:
    s = r["ilp"]["solvers"]
    parts = []
    for case, label in (
        ("dgx1 allgather k=6", "DGX-1 allgather, 6 chunks, rounds"),
        ("dgx1 alltoall k=3", "DGX-1 alltoall, 3 chunks, rounds"),
        ("dgx1 allgather k=4", "DGX-1 allgather, 4 chunks, 3 steps, time at 1 MiB"),
        ("ndv2x2 allgather k=32", "the pipelined ndv2x2 model"),
    ):
        highs, cbc = s[case]["highs"]["cpu_s"], s[case]["cbc"]["cpu_s"]
        gain = max(highs, cbc) / max(min(highs, cbc), 0.01)
        verdict = "about the same" if gain < 1.2 else f"{'HiGHS' if highs < cbc else 'CBC'} {gain:.1f} × faster"
        parts.append(f"{label}: HiGHS {highs:.2f} s, CBC {cbc:.2f} s ({verdict})")
    return "; ".join(parts)


#: Every figure, by the name its block carries. Keep them in the order they appear.
# ============================================================================ bounds (issue 17)
@derived("bounds_speed")
def _bounds_speed_64(r: Results) -> str:
    cases = [c for c in r["bounds_speed"]["cases"].values() if c["ranks"] == 64]
    low, high = (f(c["model_cpu_s"] for c in cases) * 1e3 for f in (min, max))
    return f"{low:.0f}–{high:.0f} ms of CPU"


@derived("bounds_speed")
def _bounds_speed_lp(r: Results) -> str:
    cases = {name: c for name, c in r["bounds_speed"]["cases"].items() if c["ranks"] <= 16}
    name = max(cases, key=lambda n: (cases[n]["slowest_cpu_s"], n))
    worst = cases[name]
    every = [c["all_cpu_s"] for c in cases.values()]
    return (
        f"up to {worst['slowest_cpu_s']:.1f} s of CPU for one collective ({name} {worst['slowest_collective']}), "
        f"{min(every):.1f}–{max(every):.1f} s for all eight at five sizes"
    )


#: the cells over 1.3 on the built-ins of up to 8 ranks that docs/bounds.md ("How tight") explains
#: case by case: a new one must be explained there before its figures can be written
TIGHTNESS_EXPLAINED = frozenset(
    {
        "dgx1 allreduce 1KiB",
        "dgx1 gather 1MiB",
        "dgx1 scatter 1MiB",
        "dgx1 alltoall 64KiB",
        "dgx1 alltoall 1MiB",
        "dgx1 alltoall 16MiB",
        "dgx1 alltoall 1GiB",
        "dgx-a100 allreduce 1KiB",
        "dgx-h100 allreduce 1KiB",
        "pcie-2socket broadcast 64KiB",
        "pcie-2socket reduce 64KiB",
        "pcie-2socket broadcast 1MiB",
        "pcie-2socket reduce 1MiB",
        "pcie-2socket allreduce 64KiB",
    }
)


@derived("bound_tightness")
def _bound_tightness_target(r: Results) -> str:
    t = r["bound_tightness"]
    over = t["builtins_up_to_8_over_target"]
    unexplained = sorted(set(over) - TIGHTNESS_EXPLAINED)
    if unexplained:
        raise LookupError(f"cells over {t['target']} that docs/bounds.md does not explain: {', '.join(unexplained)}")
    worst = max(over, key=lambda k: (over[k]["ratio"], k)) if over else None
    text = f"{len(over)} of the {t['builtins_up_to_8_cells']} cells over {t['target']}"
    return text + (f" (the worst: {worst}, {over[worst]['ratio']:.2f})" if worst else "")


def _tight(machine: str, *cells: str) -> Figure:
    """The best / bound ratios of some cells of one machine ("1.94" or "1.34–1.55")."""

    def render(r: Results) -> str:
        ratios = [r["bound_tightness"]["machines"][machine]["cells"][c]["ratio"] for c in cells]
        low, high = min(ratios), max(ratios)
        return f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}–{high:.2f}"

    return Figure(("bound_tightness",), render)


FIGURES: dict[str, Figure] = {
    # README.md
    "compare-fattree": _compare_prose,
    "multiring-dgx1": _multiring_dgx1,
    "hierarchical-scatter": _hierarchical_scatter,
    "hierarchical-alltoall": _hierarchical_alltoall,
    "hierarchical-broadcast": _hierarchical_broadcast,
    "scatter-allgather-dgx2": _scatter_allgather_dgx2,
    "ilp-ndv2x2": _ilp_ndv2x2,
    "greedy-4096": _greedy_4096,
    "hierarchical-4096": fig(
        "hierarchical_scale",
        "{fattree4k[ratio]:.2f} × the per-rank ingress bound in {fattree4k[steps]} steps ({fattree4k[cpu_s]:.1f} s of CPU)",
    ),
    "greedy-quality": fig("quality-greedy", "{worst_chosen:.2f}"),
    "packing-quality": _packing,
    "auto-quality": _auto,
    "exec-vs-mpi": _exec_vs_mpi,
    "torch-vs-native": _torch_vs_native,
    "run-load": fig("readme-run", "{load:.0f}"),
    "curves-dgx1": _curves_prose,
    # docs/bounds.md
    "tight-a100-allreduce": _tight("dgx-a100", "allreduce 1KiB"),
    "tight-h100-allreduce": _tight("dgx-h100", "allreduce 1KiB"),
    "tight-dgx1-allreduce": _tight("dgx1", "allreduce 1KiB"),
    "tight-dgx1-gather": _tight("dgx1", "gather 1MiB", "scatter 1MiB"),
    "tight-pcie-broadcast": _tight("pcie-2socket", "broadcast 64KiB", "broadcast 1MiB", "reduce 64KiB", "reduce 1MiB"),
    "tight-dgx1-alltoall": _tight("dgx1", "alltoall 64KiB", "alltoall 1MiB", "alltoall 16MiB", "alltoall 1GiB"),
    "tight-dgx1-broadcast": _tight("dgx1", "broadcast 16MiB", "reduce 16MiB"),
    "tight-pcie-allreduce": _tight("pcie-2socket", "allreduce 64KiB"),
    "tight-random1-gather": _tight("random1", "gather 1GiB"),
    "tight-random3-gather": _tight("random3", "gather 1GiB"),
    # benchmarks/README.md
    "bounds-speed-64": _bounds_speed_64,
    "bounds-speed-lp": _bounds_speed_lp,
    "bound-tightness-target": _bound_tightness_target,
    "bench-ilp-pareto": _bench_ilp_pareto,
    "bench-ilp-pareto-time": fig("ilp", "{pareto[cpu_s]:.2f} s for the whole walk ({pareto[solves]} solves)"),
    "bench-ilp-alltoall": fig(
        "ilp", "{alltoall[k=3][rounds]} rounds over 3 chunks per pair = {alltoall[k=3][rounds]}/3 in {alltoall[k=3][steps]} steps"
    ),
    "bench-ilp-alltoall-time": fig("ilp", "{alltoall[k=3][cpu_s]:.2f} s"),
    "bench-ilp-dgx2-time": _bench_ilp_dgx2_time,
    "bench-ilp-ndv2x2": _bench_ilp_ndv2x2,
    "bench-ilp-ndv2x2-time": fig("ilp", "{ndv2x2[2x32][cpu_s]:.1f} s, {ndv2x2[2x48][cpu_s]:.1f} s; {ndv2x2[3x32][cpu_s]:.1f} s"),
    "bench-ilp-symmetry": _bench_ilp_symmetry,
    "bench-ilp-solvers": _bench_ilp_solvers,
    "ilp-symmetry-dgx1": fig(
        "ilp", "{symmetry[dgx1 allgather k=6][on][cpu_s]:.1f} s of CPU against {symmetry[dgx1 allgather k=6][off][cpu_s]:.1f} s"
    ),
    "bench-greedy-1024": _bench_greedy_1024,
    "bench-greedy-4096": _bench_greedy_4096,
    "bench-greedy-quality": fig(
        "quality-greedy", "{cases[torus 8x8][chosen]:.3f}, {cases[torus 16x16][chosen]:.3f}, {cases[dgx1][chosen]:.3f}"
    ),
    "bench-packing-rate": _bench_packing_rate,
    "bench-packing-time": fig(
        "quality-packing", "≤ {max_synth_cpu_s[torus 8x8]:.2f} s of CPU (8 × 8 torus), ≤ {max_synth_cpu_s[fattree-4rack]:.2f} s"
    ),
    "bench-auto-speed": _auto_speed,
    "bench-auto-1gib": fig("quality-auto", "{at_1GiB[geomean]:.3f} ({at_1GiB[count]} cases)"),
    "bench-auto-1kib": fig("quality-auto", "{at_1KiB[geomean]:.3f}"),
    "bench-auto-classic": fig(
        "quality-auto",
        "largest auto / classic {at_1GiB[largest_auto_over_classic]:.3f} at 1 GiB, "
        "{at_1KiB[largest_auto_over_classic]:.3f} at 1 KiB",
    ),
    "bench-exec-mpi-64mib": fig("exec_vs_mpi", "{mpi_algbw_over_native_64mib:.2f} ×"),
    "bench-exec-mpi-8b": fig(
        "exec_vs_mpi",
        "{mpi_latency_over_native_8b:.2f} × (round by round: median {mpi_latency_over_native_8b_paired[median]:.2f}, "
        "quartiles {mpi_latency_over_native_8b_paired[q1]:.2f}–{mpi_latency_over_native_8b_paired[q3]:.2f})",
    ),
    "bench-exec-mp-64mib": fig("exec_vs_mpi", "{mp_algbw_over_native_64mib:.2f} ×"),
    # benchmarks/README.md and docs/scalable.md: issue 16's whole-process figures (benchmarks/scale.py:
    # results/scale.json for 256 and 4,096 ranks, one record per 16,384-rank case)
    **{
        f"scale-{case}-{short}": _scale_row("scale", case, stage)
        for case in ("torus64", "fattree4k")
        for short, stage in (
            ("synth-npz", "synthesize -> .npz"),
            ("to-json", "convert .npz -> .json"),
            ("to-npz", "convert .json -> .npz"),
            ("verify-npz", "verify .npz"),
            ("verify-json", "verify .json"),
            ("simulate", "simulate .npz (sync, 3 sizes)"),
        )
    },
    **{
        f"scale-{case}-{short}": _scale_row(record, case, stage)
        for record, case in (("scale-torus128", "torus128"), ("scale-fattree16k", "fattree16k"))
        for short, stage in (
            ("synth-npz", "synthesize -> .npz"),
            ("verify-npz", "verify .npz"),
            ("simulate", "simulate .npz (sync, 3 sizes)"),
        )
    },
    "scale-fattree4k-greedy-synth-npz": _scale_row("scale", "fattree4k-greedy", "synthesize -> .npz"),
    "scale-load": _scale_load("scale"),
    "scale-torus128-load": _scale_load("scale-torus128"),
    "scale-fattree16k-load": _scale_load("scale-fattree16k"),
    "scale-fattree4k-ratio": fig("scale", "{fattree4k[ratio_1gib]:.2f}"),
    "scale-fattree4k-greedy-ratio": fig("scale", "{fattree4k-greedy[ratio_1gib]:.2f}"),
    "scale-torus64-ratio": fig("scale", "{torus64[ratio_1gib]:.2f}"),
    "scale-torus128-ratio": fig("scale-torus128", "{torus128[ratio_1gib]:.2f}"),
    "scale-fattree16k-ratio": fig("scale-fattree16k", "{fattree16k[ratio_1gib]:.2f}"),
    "bench-torch-64mib": fig("torch_vs_native", "{algbw_over_native_64mib:.2f} ×"),
    "bench-torch-8b": fig("torch_vs_native", "{latency_over_native_8b:.2f} ×"),
    "bench-torch-ddp": fig(
        "torch_vs_native",
        "{ddp_step_over_plain:.2f} × ({ddp_step_ms[hook]:.1f} ms against {ddp_step_ms[plain]:.1f} ms); "
        "largest parameter difference {ddp_max_param_diff:.1e}",
    ),
}


# ============================================================================ blocks
def _midsize_summary(cases: list[dict]) -> str:
    """benchmarks/midsize.py's summary of its recorded cases (its results file keeps one case per
    line instead of the printed output, which it reprints with ``--summary FILE``)."""
    midsize = sys.modules.get("benchmarks_midsize")
    if midsize is None:
        spec = importlib.util.spec_from_file_location("benchmarks_midsize", HERE / "midsize.py")
        midsize = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = midsize  # (its dataclasses look their module up while it loads)
        spec.loader.exec_module(midsize)
    return "\n".join(midsize.summary(cases))


def _render_output(results: Results, name: str) -> str:
    doc = results.doc(name)
    if "output" not in doc and doc.get("benchmark") == "midsize":
        shown = f"$ {doc['command']}\n...  ({len(doc['cases'])} cases, one per line)\n\n{_midsize_summary(doc['cases'])}"
    else:
        shown = doc.get("shown") or f"$ {doc['command']}\n{doc['output']}"
    return "```\n" + shown.rstrip("\n") + "\n```\n"


def _expected(results: Results, kind: str, name: str) -> str:
    if kind == "figures":
        if name not in FIGURES:
            raise LookupError(f"no figure named {name!r} in benchmarks/readme_figures.py FIGURES")
        return FIGURES[name].render(results)
    return _render_output(results, name)


def _blocks(text: str):
    for kind, pattern in (("figures", FIGURE_BLOCK), ("output", OUTPUT_BLOCK)):
        for m in pattern.finditer(text):
            yield kind, m


def check(results: Results | None = None) -> list[str]:
    """Every disagreement between the READMEs and the recorded results, one line each."""
    results = results or Results()
    problems, used = [], set()
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(REPO)
        for kind, m in _blocks(text):
            name = m.group("name")
            try:
                expected = _expected(results, kind, name)
            except (LookupError, KeyError, ValueError) as exc:
                problems.append(f"{where}: {kind} {name!r}: cannot render it: {exc}")
                continue
            used.update(FIGURES[name].sources if kind == "figures" else (name,))
            if kind == "figures" and (m.start() == 0 or text[m.start() - 1] == "\n"):
                problems.append(f"{where}: figures {name!r} starts a line, which markdown would show as raw HTML")
            if m.group("body") != expected:
                problems.append(
                    f"{where}: {kind} {name!r} reads {_short(m.group('body'))} but the results give {_short(expected)}"
                )
    suite = SUITE_BLOCK.search((HERE / "README.md").read_text(encoding="utf-8"))
    recorded = (RESULTS / "suite.md").read_text(encoding="utf-8")
    if suite is None or suite.group("body") != recorded:
        problems.append("benchmarks/README.md: the suite section is not results/suite.md (python benchmarks/suite.py --readme)")
    used.add("suite")
    for name in sorted(set(FIGURES) - {m.group("name") for p in FILES for _, m in _blocks(p.read_text(encoding="utf-8"))}):
        problems.append(f"figure {name!r} is defined in FIGURES but no README shows it")
    for name in sorted(set(results.names()) - used):
        problems.append(f"benchmarks/results/{name}.json is recorded but no README block shows it")
    return problems


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def write(results: Results | None = None) -> list[str]:
    """Rewrite every block from the results; the blocks that changed."""
    results = results or Results()
    changed = []
    for path in FILES:
        text = path.read_text(encoding="utf-8")

        def replace(m: re.Match, kind: str, path=path) -> str:
            name = m.group("name")
            try:
                body = _expected(results, kind, name)
            except (LookupError, KeyError, ValueError):
                return m.group(0)  # left as it is; check() reports why
            if body != m.group("body"):
                changed.append(f"{path.relative_to(REPO)}: {kind} {name}")
            opening = m.group(0)[: m.start("body") - m.start()]
            closing = m.group(0)[m.end("body") - m.start() :]
            return opening + body + closing

        new = FIGURE_BLOCK.sub(lambda m: replace(m, "figures"), text)
        new = OUTPUT_BLOCK.sub(lambda m: replace(m, "output"), new)
        if new != text:
            path.write_text(new, encoding="utf-8")
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if a README disagrees with the results")
    mode.add_argument("--write", action="store_true", help="rewrite the READMEs' blocks from the results")
    args = parser.parse_args()
    if args.write:
        for line in write():
            print(f"updated {line}")
    problems = check()
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        sys.exit(1)
    if args.check:
        print("README.md, benchmarks/README.md and docs/ agree with benchmarks/results/")


if __name__ == "__main__":
    main()
