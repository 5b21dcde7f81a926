"""The table of methods, by name: what the command line, `synth compare`, the report and library
callers look methods up in.

Each method module describes itself (``METHOD``, a `synth.method.Method`); this module only
collects them, in the order they are listed, tried and shown, and builds ``auto`` over the others
(`synth.selection.auto_method`). It sits above `synth.algorithms`, `synth.ilp` and
`synth.selection`, and nothing below it imports it: a method that needs another method's schedules
imports that method's module and runs its ``METHOD``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from synth import ilp
from synth.algorithms import (
    binomial,
    direct,
    double_binary_tree,
    duplex_packing,
    greedy,
    hierarchical,
    host_deal,
    multipath,
    multiring,
    one_shot,
    packing,
    pipelined_tree,
    recursive_doubling,
    recursive_halving,
    ring,
    scatter_allgather,
    slow_feed,
    socket_pipeline,
    weighted_two_shot,
)
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.method import Method
from synth.routing import Router
from synth.schedule import Schedule
from synth.selection import auto_method
from synth.topology import Topology

_TABLE: tuple[Method, ...] = (
    ring.METHOD,
    direct.METHOD,
    one_shot.METHOD,
    binomial.METHOD,
    recursive_doubling.METHOD,
    recursive_halving.METHOD,
    scatter_allgather.METHOD,
    multiring.METHOD,
    double_binary_tree.METHOD,
    hierarchical.METHOD,
    multipath.METHOD,
    ilp.METHOD,
    greedy.METHOD,
    packing.METHOD,
    pipelined_tree.METHOD,
    weighted_two_shot.METHOD,
    socket_pipeline.METHOD,
    duplex_packing.METHOD,
    host_deal.METHOD,
    slow_feed.METHOD,
)

#: every method by name, ``auto`` (a method over all the others) last
METHODS: dict[str, Method] = {m.name: m for m in _TABLE}
METHODS["auto"] = auto_method(_TABLE)

#: the classic algorithms (docs/algorithms.md)
CLASSIC_METHODS: tuple[str, ...] = tuple(name for name, m in METHODS.items() if m.family == "classic")
#: NCCL's own algorithms, rebuilt as verified schedules (docs/baselines.md)
NCCL_METHODS: tuple[str, ...] = tuple(name for name, m in METHODS.items() if m.family == "nccl")


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
    return get_method(method).collective(topology, kind, root, chunks)


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
    """Synthesize and verify a schedule of ``kind`` on ``topology`` with the method named
    ``method`` (`synth.method.Method.synthesize`: ``chunks`` per piece, default what the method
    needs or chooses; ``options`` the method's own keyword options). Raises `NotApplicable` for an
    unknown method, a case it cannot serve or an option it does not take, and
    `synth.verify.VerificationError` if the result fails the verifier (a bug, never silent)."""
    kind = Kind(kind)
    return get_method(method).synthesize(topology, kind, root=root, chunks=chunks, router=router, verify=verify, options=options)
