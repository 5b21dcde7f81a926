"""``synth simulate``: the time, algbw and busbw of a verified schedule at given sizes, in the
step-synchronous and the event-driven model (library: `synth.simulate`)."""

from __future__ import annotations

import json
import math

import click

from synth.cli._util import schedule_topology_arg, verify_or_exit
from synth.errors import InputError
from synth.progress import Progress
from synth.schedule import Schedule, load_schedule
from synth.simulate import MODEL_TITLES, MODELS, ONE_PORT, SimResult, Simulator, default_models
from synth.topology import Topology
from synth.units import parse_size, parse_sizes, size_range

WHERE = "synth simulate"
MAX_SIZES = 100_000  # more sizes than this is a typo (-i 1 over gigabytes), not a request


def sizes_from_options(
    size_list: str | None, begin: str | None, end: str | None, factor: str | None, step: str | None
) -> list[int]:
    """The sizes asked for: ``--size LIST`` or nccl-tests' ``-b/-e`` with ``-f`` (default 2) or
    ``-i``. Raises InputError naming the option at fault."""
    ranged = any(x is not None for x in (begin, end, factor, step))
    if size_list is not None and ranged:
        raise InputError(WHERE, "--size", size_list, "give either --size or -b/-e/-f/-i, not both")
    if size_list is not None:
        try:
            return parse_sizes(size_list)
        except ValueError as exc:
            raise InputError(WHERE, "--size", size_list, str(exc)) from None
    if not ranged:
        raise InputError(
            WHERE, "--size", None, "give the sizes: --size 1KiB,1MiB,1GiB or -b 8 -e 1G [-f 2 | -i 1M]", show_value=False
        )
    if factor is not None and step is not None:
        raise InputError(WHERE, "-i", step, "give either -f (factor) or -i (increment), not both")
    values = {}
    for option, text in (("-b", begin), ("-e", end), ("-i", step)):
        if text is not None:
            try:
                values[option] = parse_size(text, minimum=1)
            except ValueError as exc:
                raise InputError(WHERE, option, text, str(exc)) from None
    lo = values.get("-b", values.get("-e"))
    hi = values.get("-e", values.get("-b"))
    if lo is None or hi is None:
        raise InputError(WHERE, "-b", None, "give -b and/or -e with -f or -i", show_value=False)
    if lo <= 0:
        raise InputError(WHERE, "-b", begin, "the first size must be positive")
    if hi < lo:
        raise InputError(WHERE, "-e", end, f"the last size must be at least the first ({lo} bytes)")
    if step is not None:
        if values["-i"] <= 0:
            raise InputError(WHERE, "-i", step, "the increment must be positive")
        if (hi - lo) // values["-i"] + 1 > MAX_SIZES:
            raise InputError(WHERE, "-i", step, f"gives more than {MAX_SIZES} sizes from {lo} to {hi} bytes")
        return size_range(lo, hi, step=values["-i"])
    try:
        f = float(factor) if factor is not None else 2.0
    except ValueError:
        raise InputError(WHERE, "-f", factor, "expected a number greater than 1") from None
    if not f > 1 or not math.isfinite(f):
        raise InputError(WHERE, "-f", factor, "expected a number greater than 1")
    return size_range(lo, hi, f)


def alpha_beta_options(command):
    """``--alpha`` (µs) and ``--beta`` (µs per byte) of the one-port model."""
    command = click.option(
        "--beta",
        type=float,
        default=None,
        help="One-port model: beta in us per byte for every message (1/bandwidth: 0.0001 = 10 GB/s); "
        "default: each message's path bottleneck.",
    )(command)
    return click.option(
        "--alpha",
        type=float,
        default=None,
        help="One-port model: alpha in us for every message; default: each message's path latency.",
    )(command)


def check_alpha_beta(where: str, model: str, alpha: float | None, beta: float | None) -> None:
    """--alpha/--beta only with the one-port model, and finite and non-negative."""
    for option, value in (("--alpha", alpha), ("--beta", beta)):
        if value is None:
            continue
        if model != ONE_PORT:
            raise InputError(where, option, value, "applies to --model one-port only")
        if not (math.isfinite(value) and value >= 0):
            raise InputError(where, option, value, "expected a finite number >= 0")


def _number(x: float) -> float | None:
    return x if math.isfinite(x) else None


def results_document(
    schedule: Schedule, schedule_path: str, topology: Topology, models: list[str], rows: dict[str, list[SimResult]]
) -> dict:
    """The ``--json`` output: one entry per size with each model's time (µs), algbw and busbw
    (GB/s); a bandwidth that is infinite (a schedule that takes no time) is null."""
    c = schedule.collective
    sizes = [r.size for r in rows[models[0]]]
    return {
        "collective": {"name": c.kind.value, "num_chunks": c.num_chunks, "num_ranks": c.num_ranks, "root": c.root},
        "models": models,
        "results": [
            {
                "size": size,
                **{
                    m: {
                        "algbw": _number(rows[m][k].algbw),
                        "busbw": _number(rows[m][k].busbw),
                        "time_us": rows[m][k].time_us,
                    }
                    for m in models
                },
            }
            for k, size in enumerate(sizes)
        ],
        "schedule": schedule_path,
        "steps": schedule.num_steps,
        "topology": topology.name,
        "transfers": schedule.num_transfers,
    }


def results_table(schedule: Schedule, models: list[str], rows: dict[str, list[SimResult]]) -> str:
    """nccl-tests-style table: size (B), then time (us), algbw and busbw (GB/s) per model."""
    group = 32
    lines = [f"# {schedule.summary()}"]
    lines.append("#" + " " * 12 + "".join(f"{MODEL_TITLES[m]:>{group}}" for m in models))
    lines.append("#" + f"{'size':>12}" + f"{'time':>14}{'algbw':>9}{'busbw':>9}" * len(models))
    lines.append("#" + f"{'(B)':>12}" + f"{'(us)':>14}{'(GB/s)':>9}{'(GB/s)':>9}" * len(models))
    sizes = [r.size for r in rows[models[0]]]
    for k, size in enumerate(sizes):
        cells = "".join(f"{rows[m][k].time_us:>14.2f}{rows[m][k].algbw:>9.2f}{rows[m][k].busbw:>9.2f}" for m in models)
        lines.append(f" {size:>12}{cells}")
    return "\n".join(lines)


@click.command("simulate", short_help="Time a schedule at given sizes (step-synchronous and event-driven models).")
@click.argument("schedule")
@click.option("-t", "--topology", default=None, help="Topology file or built-in name (default: the built-in the schedule names).")
@click.option(
    "-s", "--size", "size_list", default=None, help="Sizes, comma-separated: 1KiB,1MiB,1GiB (a..b doubles from a to b)."
)
@click.option("-b", "--minbytes", default=None, help="First size, as nccl-tests' -b (8, 1K, 1M, 1G).")
@click.option("-e", "--maxbytes", default=None, help="Last size, as nccl-tests' -e.")
@click.option("-f", "--stepfactor", default=None, help="Factor between sizes (default 2).")
@click.option("-i", "--stepbytes", default=None, help="Increment between sizes (instead of -f).")
@click.option(
    "-m",
    "--model",
    type=click.Choice([*MODELS, ONE_PORT, "both"]),
    default="both",
    show_default=True,
    help="Cost model(s) to run: both = sync and event (event only up to 2,000,000 transfers unless asked "
    "for with -m event); one-port = the textbook model.",
)
@alpha_beta_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of the table.")
def simulate_cmd(schedule, topology, size_list, minbytes, maxbytes, stepfactor, stepbytes, model, alpha, beta, as_json):
    """Time SCHEDULE on its topology at each size: time (us), algbw and busbw (GB/s, nccl-tests
    definitions) in the step-synchronous model of the schedule format and in the event-driven model,
    or in the textbook one-port model (--model one-port, with --alpha/--beta; see
    docs/simulator.md). The schedule is verified first; an invalid one is refused (exit 1)."""
    sizes = sizes_from_options(size_list, minbytes, maxbytes, stepfactor, stepbytes)
    check_alpha_beta(WHERE, model, alpha, beta)
    sched = load_schedule(schedule)
    topo, _ = schedule_topology_arg(sched, schedule, topology)
    verify_or_exit(sched, topo, schedule)
    models, left_out = default_models(sched) if model == "both" else ([model], None)
    if left_out is not None:
        click.echo(f"synth: note: {left_out}", err=True)
    simulator = Simulator(sched, topo)
    rows = {}
    for m in models:
        if m == "event":
            with Progress(sched.num_transfers * len(sizes), "event-driven model", unit="transfer") as bar:
                rows[m] = simulator.run(sizes, m, timeline=False, on_finished=bar.advance)
        else:
            rows[m] = simulator.run(sizes, m, timeline=False, alpha=alpha, beta=beta)
    if as_json:
        click.echo(json.dumps(results_document(sched, schedule, topo, models, rows), indent=2, sort_keys=True))
    else:
        click.echo(results_table(sched, models, rows))


COMMANDS = [simulate_cmd]
