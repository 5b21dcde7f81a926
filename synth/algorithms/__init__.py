"""Synthesizers, one per module, and the registry that the CLI and library calls go through.

Every method is a function ``synthesize(topology, collective, router=None) -> Schedule`` in its own
module, raising `synth.errors.NotApplicable` with the reason when it cannot serve a case. A method
may accept keyword options (``Method.options`` names them, e.g. the ILP's steps and time limit).
`synthesize` here looks the method up, picks the default chunk count, and verifies the result before
returning it: no schedule leaves this function unverified.

A method with ``chooses_chunks`` (greedy, packing, auto) also gets ``requested_chunks``: the
caller's chunks per piece, or None when the caller left it to the method, which may then return a
schedule with another chunk count than ``collective``'s default (the best one for its ``size``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from synth import ilp
from synth.algorithms import (
    auto,
    binomial,
    direct,
    double_binary_tree,
    greedy,
    hierarchical,
    multiring,
    packing,
    recursive_doubling,
    recursive_halving,
    ring,
    scatter_allgather,
)
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.routing import Router
from synth.schedule import Schedule
from synth.topology import Topology
from synth.verify import check


@dataclass(frozen=True)
class Method:
    """A registered synthesizer."""

    name: str
    summary: str
    collectives: frozenset[Kind]
    build: Callable[..., Schedule]
    default_chunks: Callable[[Kind, int], int]
    #: for methods whose natural chunk count depends on the machine (e.g. one chunk per ring
    #: channel); when set it is used instead of ``default_chunks``
    topology_chunks: Callable[[Kind, Topology], int] | None = None
    #: Keyword options ``build`` accepts beyond (topology, collective, router).
    options: frozenset[str] = frozenset()
    #: with no chunk count from the caller, the method may choose one (e.g. for its ``size``
    #: option): its ``build`` also gets ``requested_chunks``, the caller's chunks per piece or None
    chooses_chunks: bool = False

    def serves(self, kind: Kind) -> bool:
        return kind in self.collectives


def _one(kind: Kind, ranks: int) -> int:
    return 1


def _ranks_for_allreduce(kind: Kind, ranks: int) -> int:
    return ranks if kind is Kind.ALLREDUCE else 1


METHODS: dict[str, Method] = {
    "ring": Method(
        "ring",
        "ring over the fastest links (allreduce = reduce-scatter + allgather, NCCL's ring)",
        ring.COLLECTIVES,
        ring.synthesize,
        _ranks_for_allreduce,
    ),
    "direct": Method(
        "direct",
        "all-pairs: every piece straight to where it is needed (relayed where no switch path exists)",
        direct.COLLECTIVES,
        direct.synthesize,
        _ranks_for_allreduce,
    ),
    "binomial": Method(
        "binomial",
        "binomial tree for rooted collectives; allreduce = reduce + broadcast",
        binomial.COLLECTIVES,
        binomial.synthesize,
        _one,
    ),
    "recursive-doubling": Method(
        "recursive-doubling",
        "recursive doubling, any rank count (allgather; allreduce by whole-buffer exchange)",
        recursive_doubling.COLLECTIVES,
        recursive_doubling.synthesize,
        _one,
    ),
    "recursive-halving": Method(
        "recursive-halving",
        "recursive halving reduce-scatter; allreduce = halving + doubling (Rabenseifner)",
        recursive_halving.COLLECTIVES,
        recursive_halving.synthesize,
        _ranks_for_allreduce,
    ),
    "scatter-allgather": Method(
        "scatter-allgather",
        "broadcast = scatter + allgather (van de Geijn, MPICH's long messages), pipelined; reduce = its dual",
        scatter_allgather.COLLECTIVES,
        scatter_allgather.synthesize,
        _one,
        scatter_allgather.default_chunks,
        options=scatter_allgather.OPTIONS,
        chooses_chunks=True,
    ),
    "multiring": Method(
        "multiring",
        "NCCL's multi-channel rings: several rings over disjoint link capacity, each a share of the data",
        multiring.COLLECTIVES,
        multiring.synthesize,
        _one,
        multiring.default_chunks,
    ),
    "double-binary-tree": Method(
        "double-binary-tree",
        "NCCL's double binary tree allreduce: two complementary trees, half the data each, pipelined",
        double_binary_tree.COLLECTIVES,
        double_binary_tree.synthesize,
        _one,
        double_binary_tree.default_chunks,
    ),
    "hierarchical": Method(
        "hierarchical",
        "multi-host: allreduce = reduce-scatter in hosts, allreduce across, allgather in hosts; others over the rails",
        hierarchical.COLLECTIVES,
        hierarchical.synthesize,
        _ranks_for_allreduce,
        hierarchical.default_chunks,
        options=hierarchical.OPTIONS,
        chooses_chunks=True,
    ),
    "ilp": Method(
        "ilp",
        "exact ILP (HiGHS/CBC): optimal time, rounds or steps for given steps and chunks (synth ilp for options)",
        ilp.COLLECTIVES,
        ilp.synthesize,
        _ranks_for_allreduce,
        options=ilp.OPTION_NAMES,
    ),
    "greedy": Method(
        "greedy",
        "event-driven link-chunk matching over the real links, rarest chunk first (scales to thousands of ranks)",
        greedy.COLLECTIVES,
        greedy.synthesize,
        _ranks_for_allreduce,
        options=greedy.OPTIONS,
        chooses_chunks=True,
    ),
    "packing": Method(
        "packing",
        "spanning trees at the optimal allgather/broadcast throughput (exact max-flow bound), pipelined for the size",
        packing.COLLECTIVES,
        packing.synthesize,
        _ranks_for_allreduce,
        options=packing.OPTIONS,
        chooses_chunks=True,
    ),
    "auto": Method(
        "auto",
        "every applicable method, verified; keeps the best predicted time at the size(s) and says why",
        auto.COLLECTIVES,
        auto.synthesize,
        _ranks_for_allreduce,
        options=auto.OPTIONS,
        chooses_chunks=True,
    ),
}

CLASSIC_METHODS: tuple[str, ...] = ("ring", "direct", "binomial", "recursive-doubling", "recursive-halving", "scatter-allgather")
#: NCCL's own algorithms, rebuilt as verified schedules (docs/baselines.md)
NCCL_METHODS: tuple[str, ...] = ("multiring", "double-binary-tree", "hierarchical")


def get_method(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise NotApplicable(f"unknown method {name!r} (known: {', '.join(METHODS)})") from None


def methods_for(kind: Kind) -> list[str]:
    return [name for name, m in METHODS.items() if m.serves(kind)]


def make_collective(
    topology: Topology, kind: Kind | str, method: str, root: int | None = None, chunks: int | None = None
) -> Collective:
    """The collective a method will be asked for: default chunks per piece and root filled in."""
    kind = Kind(kind)
    m = get_method(method)
    if chunks is not None:
        k = chunks
    elif m.topology_chunks is not None:
        k = m.topology_chunks(kind, topology)
    else:
        k = m.default_chunks(kind, topology.num_ranks)
    return Collective(kind, topology.num_ranks, k, root)


def synthesize(
    topology: Topology,
    kind: Kind | str,
    method: str = "ring",
    *,
    root: int | None = None,
    chunks: int | None = None,
    router: Router | None = None,
    verify: bool = True,
    options: Mapping[str, Any] | None = None,
) -> Schedule:
    """Synthesize and verify a schedule of ``kind`` on ``topology`` with ``method``.

    ``chunks`` is k, the chunks per piece (default: what the method needs, e.g. R for a ring
    allreduce, or what a method with ``chooses_chunks`` picks). ``options`` are the method's own
    keyword options (`Method.options`). Raises `NotApplicable` if the method cannot serve the case or
    does not know an option, and `synth.verify.VerificationError` if the result fails the verifier (a
    bug, never silent).
    """
    kind = Kind(kind)
    m = get_method(method)
    if not m.serves(kind):
        raise NotApplicable(
            f"method {method} does not serve {kind.value} (it serves {', '.join(sorted(k.value for k in m.collectives))})"
        )
    unknown = sorted(set(options or {}) - m.options)
    if unknown:
        takes = ", ".join(sorted(m.options)) or "none"
        raise NotApplicable(f"method {method} takes no option(s) {', '.join(unknown)} (it takes: {takes})")
    collective = make_collective(topology, kind, method, root, chunks)
    kwargs = dict(options or {})
    if m.chooses_chunks:
        kwargs["requested_chunks"] = chunks
    schedule = m.build(topology, collective, router, **kwargs)
    produced = schedule.collective
    if produced.kind is not kind or produced.root != collective.root or produced.num_ranks != collective.num_ranks:
        raise RuntimeError(f"method {method} returned {produced.describe()} for {collective.describe()}")
    if (chunks is not None or not m.chooses_chunks) and produced != collective:
        raise RuntimeError(f"method {method} returned {produced.describe()} for {collective.describe()}")
    if verify:
        check(schedule, topology)
    return schedule
