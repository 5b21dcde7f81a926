"""``synth ilp``: exact synthesis with the ILP (one schedule, or the Pareto frontier)."""

from __future__ import annotations

import sys
import threading
import time
from fractions import Fraction

import click

from synth.bounds import bound_model
from synth.cli._util import COLLECTIVE_CHOICE, load_located_topology
from synth.collective import Kind, parse_kind
from synth.errors import InputError
from synth.fileio import prepare_output_dir
from synth.ilp import DEFAULT_SIZE, DEFAULT_TIME_LIMIT, Outcome, describe, sync_time_us
from synth.ilp.formulation import OBJECTIVES
from synth.ilp.pareto import DEFAULT_SIZES, Attempt, pareto_frontier
from synth.ilp.search import ALLREDUCE_MODES
from synth.ilp.solve import SOLVERS, Progress
from synth.ilp.symmetry import find_symmetry
from synth.limits import check_collective_size
from synth.registry import make_collective, synthesize
from synth.schedule import save_schedule
from synth.units import bandwidth_gbps, format_size, parse_size, parse_sizes

_CMD = "synth ilp"


def _progress_printer(quiet: bool):
    """Progress lines on stderr: every better schedule, and the bound about once a second."""
    if quiet:
        return None

    def show(p: Progress) -> None:
        if p.event == "done":
            return
        best = "-" if p.incumbent is None else f"{p.incumbent:.6g}"
        bound = "-" if p.bound is None else f"{p.bound:.6g}"
        gap = "" if p.gap is None else f"  gap {100 * p.gap:.2f}%"
        mark = "*" if p.event == "solution" else " "
        click.echo(f"  {mark} {p.elapsed:7.1f} s  best {best}  bound {bound}{gap}", err=True)

    return show


def _size(text: str) -> int:
    try:
        return parse_size(text, minimum=1)
    except ValueError as exc:
        raise InputError(_CMD, "--size", text, str(exc)) from None


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(parse_sizes(text))
    except ValueError as exc:
        raise InputError(_CMD, "--sizes", text, str(exc)) from None
    if not sizes:
        raise InputError(_CMD, "--sizes", text, "give at least one size")
    return sizes


@click.command("ilp", short_help="Exact ILP synthesis: optimal schedules, Pareto frontiers (HiGHS/CBC).")
@click.argument("topology")
@click.option("-c", "--collective", required=True, type=COLLECTIVE_CHOICE, help="Collective primitive.")
@click.option("--root", type=int, default=None, help="Root rank of a rooted collective (default 0).")
@click.option("-k", "--chunks", type=int, default=None, help="Chunks per piece (default 1; allreduce: the rank count).")
@click.option("--steps", type=int, default=None, help="Steps (default: searched from the latency bound).")
@click.option(
    "--pipeline",
    type=int,
    default=None,
    metavar="STAGES",
    help="Pipelined schedule: each of the k chunks of a piece is a wave following one template of STAGES steps.",
)
@click.option(
    "--wave-chunks", type=int, default=1, show_default=True, help="With --pipeline: chunks per piece in each wave (divides -k)."
)
@click.option(
    "--allreduce",
    "allreduce_mode",
    type=click.Choice(ALLREDUCE_MODES),
    default="auto",
    show_default=True,
    help="Allreduce as reduce-scatter + allgather (composed), as reduce and broadcast trees (direct), or both.",
)
@click.option("--objective", type=click.Choice(OBJECTIVES), default="time", show_default=True, help="What to minimise.")
@click.option("-s", "--size", default=None, help=f"Message size for the time objective (default {format_size(DEFAULT_SIZE)}).")
@click.option("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, show_default=True, help="Seconds for the whole search.")
@click.option(
    "--work-limit",
    type=int,
    default=None,
    help="Solver work for the whole search (HiGHS: MIP limit checks, about one per node; CBC: nodes): "
    "a cut that is the same on any machine (default: none).",
)
@click.option("--solver", type=click.Choice(SOLVERS), default="highs", show_default=True, help="MIP solver.")
@click.option("--no-symmetry", is_flag=True, help="Do not restrict the search to symmetric schedules.")
@click.option("--max-steps", type=int, default=None, help="Largest step count a search tries.")
@click.option("--pareto", is_flag=True, help="Walk steps and chunks and print the Pareto frontier.")
@click.option("--max-chunks", type=int, default=8, show_default=True, help="Largest chunks per piece the Pareto walk tries.")
@click.option(
    "--sizes",
    default=",".join(format_size(s) for s in DEFAULT_SIZES),
    show_default=True,
    help="Sizes at which the Pareto walk compares and reports times.",
)
@click.option("-o", "--output", default=None, help="Schedule file to write (with --pareto: a folder for every point).")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
def ilp_cmd(
    topology,
    collective,
    root,
    chunks,
    steps,
    pipeline,
    wave_chunks,
    allreduce_mode,
    objective,
    size,
    time_limit,
    work_limit,
    solver,
    no_symmetry,
    max_steps,
    pareto,
    max_chunks,
    sizes,
    output,
    quiet,
):
    """Synthesize a schedule for a collective on TOPOLOGY with the ILP: optimal for its steps and
    chunks in real units (time at --size), SCCL's rounds, or the fewest steps. The search always
    ends (--steps, --chunks, --work-limit, --time-limit); Ctrl-C stops it and keeps the best schedule found.
    Every schedule is verified before it is written."""
    topo, location = load_located_topology(topology)
    source = str(location.path)
    kind = parse_kind(collective)
    for name, value in (
        ("--steps", steps),
        ("--pipeline", pipeline),
        ("--max-steps", max_steps),
        ("--chunks", chunks),
        ("--wave-chunks", wave_chunks),
    ):
        if value is not None and value < 1:
            raise InputError(_CMD, name, value, "must be at least 1")
    if time_limit is not None and time_limit <= 0:
        raise InputError(_CMD, "--time-limit", time_limit, "must be positive")
    if work_limit is not None and work_limit < 1:
        raise InputError(_CMD, "--work-limit", work_limit, "must be at least 1")
    if work_limit is not None and pareto:
        raise InputError(_CMD, "--work-limit", work_limit, "the Pareto walk takes --time-limit only")
    if steps is not None and pipeline is not None:
        raise InputError(_CMD, "--pipeline", pipeline, "give either --steps or --pipeline")
    stop = threading.Event()
    progress = _progress_printer(quiet)
    group = find_symmetry(topo if kind not in (Kind.REDUCE, Kind.REDUCE_SCATTER) else topo.reversed())
    symmetry = "off" if no_symmetry else group.describe(topo)
    if pareto:
        _pareto(topo, location, kind, root, max_chunks, max_steps, time_limit, solver, no_symmetry, sizes, output, progress, stop)
        return
    size_bytes = _size(size) if size is not None else DEFAULT_SIZE
    try:
        coll = make_collective(topo, kind, "ilp", root, chunks)
    except ValueError as exc:
        field = "--root" if "root" in str(exc) else "--chunks"
        raise InputError(_CMD, field, root if field == "--root" else chunks, str(exc)) from None
    check_collective_size(coll, _CMD, "--chunks", chunks)
    what = f"objective {objective}" + (f" at {format_size(size_bytes)}" if objective != "rounds" else "")
    click.echo(f"ilp: {coll.describe()} on {topo.name}, {what}, solver {solver}, symmetry {symmetry}")
    outcomes: list[Outcome] = []
    options = dict(
        steps=steps,
        pipeline=pipeline,
        wave_chunks=wave_chunks,
        allreduce=allreduce_mode,
        objective=objective,
        size=size_bytes,
        time_limit=time_limit,
        work_limit=work_limit,
        solver=solver,
        symmetry=not no_symmetry,
        max_steps=max_steps,
        progress=progress,
        stop=stop,
        on_outcome=outcomes.append,
    )
    t0 = time.perf_counter()
    schedule = synthesize(topo, kind, "ilp", root=coll.root, chunks=coll.chunks_per_piece, options=options)
    elapsed = time.perf_counter() - t0
    outcome = outcomes[-1]
    if output is not None:
        written = save_schedule(schedule, output, protect=[source], topology_source=location.recorded_for(output))
        click.echo(f"{written.verb} {output}")
    click.echo(f"verified: {schedule.summary()}")
    lower = bound_model(topo, kind, coll.root).time_us(size_bytes)
    t = sync_time_us(schedule, topo, size_bytes)
    click.echo(f"{describe(outcome)}; solved in {elapsed:.1f} s")
    if len(outcome.tried) > 1:
        for attempt in outcome.tried:
            time_text = f", {attempt.time_us:.3f} us" if attempt.time_us is not None else ""
            click.echo(f"  {attempt.steps} steps: {attempt.status}{time_text}")
    click.echo(
        f"predicted {t:.3f} us at {format_size(size_bytes)} (algbw {bandwidth_gbps(size_bytes, t):.2f} GB/s); "
        f"lower bound {lower:.3f} us ({100 * lower / t:.1f}% of it)"
    )


def _pareto(topo, location, kind, root, max_chunks, max_steps, time_limit, solver, no_symmetry, sizes, output, progress, stop):
    source = str(location.path)
    size_list = _sizes(sizes)
    if max_chunks < 1:
        raise InputError(_CMD, "--max-chunks", max_chunks, "must be at least 1")
    if kind is Kind.ALLREDUCE:
        raise InputError(_CMD, "--collective", kind.value, "the Pareto walk serves every collective but allreduce")
    click.echo(f"pareto: {kind.value} on {topo.name} ({topo.num_ranks} ranks), chunks up to {max_chunks}, solver {solver}")

    def attempt(a: Attempt) -> None:
        if progress is None:
            return
        if a.rounds is None:
            text = a.status
        else:
            text = f"{a.rounds} rounds ({Fraction(a.rounds, a.chunks)} per chunk), {a.status}"
            if a.status != "optimal" and a.gap is not None:
                text += f", gap {100 * a.gap:.2f}%"
        click.echo(f"  tried {a.steps} steps, {a.chunks} chunk(s): {text} [{a.elapsed:.1f} s]", err=True)

    result = pareto_frontier(
        topo,
        kind,
        root,
        max_chunks=max_chunks,
        max_steps=max_steps,
        time_limit=time_limit,
        solver=solver,
        symmetry=not no_symmetry,
        sizes=size_list,
        progress=None if progress is None else (lambda p: None),
        on_attempt=attempt,
        stop=stop,
    )
    lb = result.lower_bound
    click.echo(f"bandwidth lower bound: {lb} rounds per chunk (1 round = one chunk over {result.unit_gbps:g} GB/s)")
    header = (
        "  steps  chunks  rounds  rounds/chunk  " + "  ".join(f"{'t@' + format_size(s):>14}" for s in result.sizes) + "  proof"
    )
    click.echo(header)
    for p in result.points:
        o = p.outcome
        if o.status == "optimal":
            proof = (
                "optimal, meets the bound"
                if o.meets_lower_bound
                else "optimal" + (f" (among schedules {' and '.join(o.restrictions)})" if o.restrictions else "")
            )
        else:
            gap = f", gap {100 * o.gap:.2f}%" if o.gap is not None else ""
            proof = f"not proven ({o.stopped_by or 'stopped'}{gap})"
        times = "  ".join(f"{p.times_us[s]:>11.3f} us" for s in result.sizes)
        click.echo(f"  {p.steps:>5}  {p.chunks:>6}  {p.rounds:>6}  {p.rounds_per_chunk!s:>12}  {times}  {proof}")
    if result.baseline:
        click.echo(
            "best classic schedule: "
            + ", ".join(f"{format_size(s)} {m} {t:.3f} us" for s, (m, t) in sorted(result.baseline.items()))
        )
    click.echo(f"stopped: {result.stopped} ({result.elapsed:.1f} s, {len(result.attempts)} solves)")
    click.echo(f"proof: {result.proof}")
    if output is not None:
        folder = prepare_output_dir(output)
        for p in result.points:
            path = folder / f"{kind.value}-ilp-s{p.steps}-k{p.chunks}.json"
            written = save_schedule(p.schedule, path, protect=[source], topology_source=location.recorded_for(path))
            click.echo(f"{written.verb} {path}")
    if not result.points:
        sys.exit(1)


COMMANDS = [ilp_cmd]
