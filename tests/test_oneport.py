"""The textbook one-port model (synth.simulate.oneport, docs/simulator.md) and its bounds: the
classic formulas, exactly, on uniform fully connected machines built here; the mapping of a
schedule to messages by hand; and no schedule faster than a one-port bound."""

from __future__ import annotations

import math
import random

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth import generators as gen
from synth.bounds import bound_model
from synth.cli import main
from synth.collective import ROOTED, Collective, Kind
from synth.errors import NotApplicable
from synth.registry import METHODS, synthesize
from synth.schedule import Transfer, save_schedule, schedule_from_steps
from synth.simulate import Simulator, simulate
from synth.topology import topology_from_document, topology_to_json
from synth.verify import check

from .random_machines import machines
from .test_bounds_sound import random_schedule

ALPHA = 2.5  # µs
BETA = 0.0004  # µs per byte (2.5 GB/s)


def machine(p: int):
    """p ranks, every pair joined by a link (10 GB/s, 1 µs): its own figures do not matter when
    α and β are given."""
    return gen.fully_connected(p, bandwidth=10.0, latency=1.0)


def one_port(schedule, topo, n: int, alpha=ALPHA, beta=BETA) -> float:
    return simulate(schedule, topo, n, "one-port", alpha=alpha, beta=beta)[0].time_us


def log2(p: int) -> int:
    return math.ceil(math.log2(p))


# ============================================================================ the classic algorithms
@pytest.mark.parametrize("p", [2, 3, 4, 5, 8, 16])
def test_ring_allreduce(p):
    """2(p − 1) steps, each rank sends n/p to its neighbour: 2(p − 1)(α + β·n/p)."""
    topo, n = machine(p), 48_000 * p
    schedule = synthesize(topo, Kind.ALLREDUCE, "ring")
    assert one_port(schedule, topo, n) == pytest.approx(2 * (p - 1) * (ALPHA + BETA * n / p), rel=1e-12)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8, 16])
def test_ring_allgather(p):
    topo, n = machine(p), 48_000 * p
    schedule = synthesize(topo, Kind.ALLGATHER, "ring")
    assert one_port(schedule, topo, n) == pytest.approx((p - 1) * (ALPHA + BETA * n / p), rel=1e-12)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_recursive_doubling_allgather(p):
    """log₂p steps; in step k a rank sends the 2^k pieces it holds in one message:
    ⌈log₂p⌉·α + (p − 1)/p·n·β."""
    topo, n = machine(p), 48_000 * p
    schedule = synthesize(topo, Kind.ALLGATHER, "recursive-doubling")
    assert one_port(schedule, topo, n) == pytest.approx(log2(p) * ALPHA + (p - 1) / p * n * BETA, rel=1e-12)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 6, 8, 16])
def test_binomial_broadcast(p):
    """⌈log₂p⌉ rounds, each a whole-buffer message: ⌈log₂p⌉(α + n·β)."""
    topo, n = machine(p), 96_000
    schedule = synthesize(topo, Kind.BROADCAST, "binomial", root=0)
    assert one_port(schedule, topo, n) == pytest.approx(log2(p) * (ALPHA + n * BETA), rel=1e-12)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_recursive_halving_reduce_scatter(p):
    """log₂p steps sending n/2, n/4, …, n/p: log₂p·α + (p − 1)/p·n·β."""
    topo, n = machine(p), 48_000 * p
    schedule = synthesize(topo, Kind.REDUCE_SCATTER, "recursive-halving")
    assert one_port(schedule, topo, n) == pytest.approx(log2(p) * ALPHA + (p - 1) / p * n * BETA, rel=1e-12)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_rabenseifner_allreduce(p):
    """Recursive halving then doubling: 2·log₂p·α + 2(p − 1)/p·n·β."""
    topo, n = machine(p), 48_000 * p
    schedule = synthesize(topo, Kind.ALLREDUCE, "recursive-halving")
    assert one_port(schedule, topo, n) == pytest.approx(2 * log2(p) * ALPHA + 2 * (p - 1) / p * n * BETA, rel=1e-12)


@pytest.mark.parametrize("p", [3, 5, 8])
def test_direct_allgather_serialises_the_sends(p):
    """One step, but each rank's p − 1 messages go out one after another: (p − 1)(α + β·n/p)."""
    topo, n = machine(p), 48_000 * p
    schedule = synthesize(topo, Kind.ALLGATHER, "direct")
    assert schedule.num_steps == 1
    assert one_port(schedule, topo, n) == pytest.approx((p - 1) * (ALPHA + BETA * n / p), rel=1e-12)


def test_default_alpha_and_beta_come_from_the_path():
    """Without --alpha/--beta a message over one link costs its latency + bytes / its bandwidth."""
    p, n = 8, 80_000
    topo = gen.fully_connected(p, bandwidth=10.0, latency=1.0)
    schedule = synthesize(topo, Kind.ALLREDUCE, "ring")
    expected = 2 * (p - 1) * (1.0 + n / p / 10e3)
    assert simulate(schedule, topo, n, "one-port")[0].time_us == pytest.approx(expected, rel=1e-12)


# ============================================================================ the mapping, by hand
def star():
    """Ranks a, b, c on one switch: a's link 10 GB/s and 1 µs, b's 20 GB/s and 2 µs, c's 40 GB/s
    and 0.5 µs."""
    return topology_from_document(
        {
            "format": "synth-topology",
            "version": 1,
            "name": "star3",
            "ranks": ["a", "b", "c"],
            "switches": ["s"],
            "links": [
                {"a": "a", "b": "s", "bandwidth": 10.0, "latency": 1.0},
                {"a": "b", "b": "s", "bandwidth": 20.0, "latency": 2.0},
                {"a": "c", "b": "s", "bandwidth": 40.0, "latency": 0.5},
            ],
        },
        "<star3>",
    )


def test_messages_ports_and_steps_by_hand():
    """Broadcast from a in 2 chunks. Step 1: a sends chunks 0 and 1 to b (one message of 2
    chunks) and chunk 0 to c: a's send port takes them one after the other. Step 2: b sends chunk 1
    to c. A message's α is its path's (a→s→b: 1 + 2 µs), β the path's bottleneck."""
    topo = star()
    via = ("s",)
    steps = [
        [Transfer(0, 1, 0, "copy", via), Transfer(0, 1, 1, "copy", via), Transfer(0, 2, 0, "copy", via)],
        [Transfer(1, 2, 1, "copy", via)],
    ]
    schedule = schedule_from_steps(Collective(Kind.BROADCAST, 3, 2, 0), steps, topology=topo)
    check(schedule, topo)
    size = 2_000_000  # chunk 1e6 bytes
    # step 1, a's send port: a→b 3 + 2e6 B / 10 GB/s = 203, a→c 1.5 + 1e6 / 10 GB/s = 101.5
    # step 2: b→c 2.5 + 1e6 / 20 GB/s = 52.5
    assert simulate(schedule, topo, size, "one-port")[0].time_us == pytest.approx(203.0 + 101.5 + 52.5)
    # with a given α and β: step 1 a sends 2 messages (3 chunks), step 2 one message
    got = Simulator(schedule, topo).one_port([size], alpha=1.0, beta=1e-4)[0].time_us
    assert got == pytest.approx((2 * 1.0 + 3e6 * 1e-4) + (1.0 + 1e6 * 1e-4))


def test_receive_port_serialises_a_gather():
    """Gather to a in one step: b→a (3 µs, 10 GB/s bottleneck) and c→a (1.5 µs) queue at a's
    receive port; the step-synchronous model would take the longer of the two only."""
    topo = star()
    steps = [[Transfer(1, 0, 1, "copy", ("s",)), Transfer(2, 0, 2, "copy", ("s",))]]
    schedule = schedule_from_steps(Collective(Kind.GATHER, 3, 1, 0), steps, topology=topo)
    check(schedule, topo)
    size = 3_000_000  # chunk 1e6 bytes
    assert simulate(schedule, topo, size, "one-port")[0].time_us == pytest.approx(103.0 + 101.5)
    # the step-synchronous model: a's link carries both chunks, 2e6 B / 10 GB/s, + the larger α
    assert simulate(schedule, topo, size, "sync")[0].time_us == pytest.approx(3.0 + 200.0)


# ============================================================================ the one-port bounds
@pytest.mark.parametrize("p", [2, 3, 4, 8, 16])
@pytest.mark.parametrize(
    ("kind", "term", "factor"),
    [
        (Kind.ALLGATHER, "ingress", lambda p: (p - 1) / p),
        (Kind.BROADCAST, "ingress", lambda p: 1.0),
        (Kind.REDUCE_SCATTER, "egress", lambda p: (p - 1) / p),
        (Kind.REDUCE, "egress", lambda p: 1.0),
        (Kind.ALLREDUCE, "total-ingress", lambda p: 2 * (p - 1) / p),
        (Kind.ALLTOALL, "ingress", lambda p: (p - 1) / p),
        (Kind.GATHER, "ingress", lambda p: (p - 1) / p),
        (Kind.SCATTER, "egress", lambda p: (p - 1) / p),
    ],
)
def test_one_port_bounds_are_the_textbook_formulas(p, kind, term, factor):
    """⌈log₂p⌉·α (latency) and the bandwidth term (p − 1)/p·n·β, n·β, 2(p − 1)/p·n·β, each plus
    the one step every schedule on a fully connected machine needs."""
    topo, n = machine(p), 1 << 20
    model = bound_model(topo, kind, model="one-port", alpha=ALPHA, beta=BETA)
    assert model.term("latency").time_us(n) == pytest.approx(log2(p) * ALPHA, rel=1e-12)
    bandwidth = model.term(term)
    assert bandwidth.us_per_byte * n == pytest.approx(factor(p) * n * BETA, rel=1e-12)
    assert bandwidth.latency_us == pytest.approx(ALPHA)  # one step: α
    assert model.time_us(n) == max(model.term("latency").time_us(n), bandwidth.time_us(n), *(t.time_us(n) for t in model.terms))


@pytest.mark.parametrize(
    ("kind", "method", "meets_latency", "meets_bandwidth"),
    [
        (Kind.ALLGATHER, "recursive-doubling", True, True),
        (Kind.REDUCE_SCATTER, "recursive-halving", True, True),
        (Kind.BROADCAST, "binomial", True, False),  # log₂p whole buffers: 3 x the bandwidth bound
        (Kind.ALLREDUCE, "recursive-doubling", True, False),
        (Kind.ALLREDUCE, "recursive-halving", False, True),  # 2 log₂p α: twice the latency bound
        (Kind.ALLGATHER, "ring", False, True),
        (Kind.ALLREDUCE, "ring", False, True),
    ],
)
def test_classic_algorithms_meet_a_one_port_bound(kind, method, meets_latency, meets_bandwidth):
    """No classic algorithm beats the one-port bound; those that are optimal in one regime meet it
    there: within 0.5% at 8 B (latency), within 0.01% at 1 GiB (bandwidth)."""
    p = 8
    topo = machine(p)
    schedule = synthesize(topo, kind, method, root=0 if kind in ROOTED else None)
    model = bound_model(topo, kind, model="one-port", alpha=ALPHA, beta=BETA)
    for n, meets, rel in ((8, meets_latency, 0.005), (1 << 30, meets_bandwidth, 1e-4)):
        t = one_port(schedule, topo, n)
        assert model.time_us(n) <= t * (1 + 1e-12)
        assert (t <= model.time_us(n) * (1 + rel)) == meets


def test_one_port_default_alpha_beta_are_the_smallest_possible():
    topo = star()
    model = bound_model(topo, Kind.ALLGATHER, model="one-port")
    # the smallest α of a message: b's and c's links, 2 + 0.5 µs vs a–c 1.5 µs
    assert model.term("latency").latency_us >= 2 * 1.5 - 1e-12
    # a receives through 10 GB/s at best: 2/3 of size
    assert model.term("ingress").us_per_byte == pytest.approx(2 / 3 / 10e3)
    with pytest.raises(ValueError, match="alpha"):
        bound_model(topo, Kind.ALLGATHER, model="one-port", alpha=-1.0)


SIZES = (1, 1 << 10, 1 << 20, 1 << 30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    topology=machines(),
    kind=st.sampled_from(list(Kind)),
    seed=st.integers(0, 2**16),
    given_figures=st.booleans(),
    method=st.sampled_from(["random", *sorted(m for m in METHODS if m not in ("ilp", "auto"))]),
)
def test_no_schedule_beats_a_one_port_bound(topology, kind, seed, given_figures, method):
    rng = random.Random(seed)
    if method == "random":
        schedule = random_schedule(topology, kind, rng)
    else:
        if not METHODS[method].serves(kind):
            return
        root = rng.randrange(topology.num_ranks) if kind in ROOTED else None
        try:
            schedule = synthesize(topology, kind, method, root=root)
        except NotApplicable:
            return
    alpha, beta = (rng.choice([0.0, 0.5, 3.0]), rng.choice([1e-5, 1e-3])) if given_figures else (None, None)
    c = schedule.collective
    model = bound_model(topology, c.kind, c.root, model="one-port", alpha=alpha, beta=beta)
    for result in simulate(schedule, topology, SIZES, "one-port", alpha=alpha, beta=beta):
        bound = model.time_us(result.size)
        assert bound <= result.time_us * (1 + 1e-9) + 1e-12, (
            f"{method} {kind.value} size {result.size}: bound {bound} ({model.at(result.size).binding}) > {result.time_us}"
        )


# ============================================================================ the command line
def test_cli_simulate_and_bound_one_port(tmp_path):
    topo = machine(8)
    topo_path = tmp_path / "full8.json"
    topo_path.write_text(topology_to_json(topo))
    schedule = synthesize(topo, Kind.ALLREDUCE, "ring")
    path = tmp_path / "ar.json"
    save_schedule(schedule, path)
    runner = CliRunner()
    n = 8000
    result = runner.invoke(
        main,
        [
            "simulate",
            str(path),
            "-t",
            str(topo_path),
            "-s",
            str(n),
            "-m",
            "one-port",
            "--alpha",
            "1",
            "--beta",
            "0.001",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    import json

    (row,) = json.loads(result.output)["results"]
    assert row["one-port"]["time_us"] == pytest.approx(2 * 7 * (1 + 0.001 * n / 8))
    result = runner.invoke(
        main, ["bound", str(topo_path), "-c", "allreduce", "-s", "8000", "--model", "one-port", "--alpha", "1", "--beta", "0.001"]
    )
    assert result.exit_code == 0, result.output
    assert "one-port cost model" in result.output and "ceil(log2 8) = 3" in result.output
    bad = runner.invoke(main, ["bound", str(topo_path), "-c", "allreduce", "-s", "1K", "--alpha", "1"])
    assert bad.exit_code == 2 and "--alpha" in bad.output and "one-port" in bad.output
    bad = runner.invoke(main, ["simulate", str(path), "-t", str(topo_path), "-s", "1K", "-m", "one-port", "--beta", "-1"])
    assert bad.exit_code == 2 and "--beta" in bad.output


def test_cli_compare_one_port():
    """synth compare --model one-port: the methods in the one-port model beside its bound, named."""
    result = CliRunner().invoke(
        main,
        [
            "compare",
            "dgx-a100",
            "-c",
            "allgather",
            "--sizes",
            "1KiB,1GiB",
            "--model",
            "one-port",
            "-m",
            "ring,recursive-doubling",
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "one-port model" in result.output.splitlines()[0]
    # recursive doubling meets the ceil(log2 8) x alpha bound at 1 KiB (3 x 0.7 us, and its bytes)
    small = result.output.split("size 1GiB")[0]
    assert "(latency)" in small and "recursive-doubling         2.10" in small
