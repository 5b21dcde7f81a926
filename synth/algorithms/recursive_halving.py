"""Recursive halving: reduce-scatter as the dual of recursive-doubling allgather, for any number
of ranks (the extra ranks first reduce everything but their own piece into their partner, the core
halves the data at distances P/2, P/4, …, 1, and partners finally reduce the extras' pieces into
them). allreduce: recursive-halving reduce-scatter then recursive-doubling allgather (Rabenseifner's
algorithm, bandwidth-optimal on a switch for large messages).
"""

from __future__ import annotations

from synth.algorithms import recursive_doubling
from synth.algorithms.engines.builders import allreduce_rs_ag, by_duality, dispatcher
from synth.collective import Collective, Kind
from synth.method import Method, ranks_for_allreduce
from synth.routing import Router
from synth.schedule import Schedule
from synth.topology import Topology

NAME = "recursive-halving"


def reduce_scatter(topology: Topology, collective: Collective, router: Router) -> Schedule:
    return by_duality(recursive_doubling.allgather, topology, collective, NAME)


def allreduce(topology: Topology, collective: Collective, router: Router) -> Schedule:
    return allreduce_rs_ag(reduce_scatter, recursive_doubling.allgather, topology, collective, router, NAME)


BUILDERS = {Kind.REDUCE_SCATTER: reduce_scatter, Kind.ALLREDUCE: allreduce}


COLLECTIVES = frozenset(BUILDERS)
synthesize = dispatcher(NAME, BUILDERS)


METHOD = Method(
    name=NAME,
    summary="recursive halving reduce-scatter; allreduce = halving + doubling (Rabenseifner)",
    family="classic",
    collectives=COLLECTIVES,
    build=synthesize,
    default_chunks=ranks_for_allreduce,
)
