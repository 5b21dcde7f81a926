"""Physical lower bounds on the time of a collective on a topology.

`bound_model(topology, kind, root=None)` computes, once, every bound that applies as
``time(size) = us_per_byte × size + latency_us``; `BoundModel.at(size)` evaluates them and names
the binding (largest) one; `lower_bounds(topology, kind, size, root=None)` does both.

Modules: `maxflow` (Dinic), `cuts` (per-rank effective ingress, the exact allgather cut bound,
pairwise minimum cuts), `latency` (α-distances, hop counts, the α of a transfer through a link),
`alltoall` (cut family and the multicommodity-flow LP), `layered` (the time-expanded LP over the
steps), `lp` (a sparse LP solved with HiGHS and certified from its duals), `model` (which bound
applies to which collective). docs/bounds.md gives the formulas and proofs.
"""

from synth.bounds.model import (
    LP_MAX_VARIABLES,
    MODELS,
    BoundModel,
    BoundReport,
    BoundTerm,
    LazyLines,
    Line,
    NamedBound,
    bound_model,
    describe_nodes,
    lower_bounds,
)

__all__ = [
    "LP_MAX_VARIABLES",
    "MODELS",
    "BoundModel",
    "BoundReport",
    "BoundTerm",
    "LazyLines",
    "Line",
    "NamedBound",
    "bound_model",
    "describe_nodes",
    "lower_bounds",
]
