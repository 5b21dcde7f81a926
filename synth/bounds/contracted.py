"""The machine with each part of a partition of the ranks contracted to one rank, for the
`steps-volume` bound's time-expanded LP (docs/bounds.md, `steps-volume`).

Contracting is a relaxation in the step-synchronous model, counting only the bytes that move
between parts: map every transfer between two parts to one between their part nodes over the
same switches (a transfer inside a part is dropped), and merge links:

- the ranks of a part become one rank node; their links to the same switch become one link whose
  bandwidth is the sum (a merged link's load over its bandwidth is at most the largest of its
  members' load over bandwidth);
- a switch joined to one node only (an NVSwitch seen from its own part) is removed: a path
  through it turns back, and cutting that loop off a path only lowers loads;
- a switch joined to exactly two nodes a and b (a NIC between its part and a network switch) is
  replaced by a link a → b (and b → a) of the smaller bandwidth: every path through it goes
  a → x → b or back, so both links carry the same bytes;

repeated until nothing changes. Every link of the result stands for original links that carry
at least its bytes, so its load over its bandwidth is at most the largest of theirs.
Latencies are not kept: the bound charges each step's α from the original machine.
"""

from __future__ import annotations

from collections.abc import Sequence

from synth.bounds.layered import Commodity, FlowSpec
from synth.topology import Link, Node, Topology


def contract(topology: Topology, labels: Sequence[int]) -> Topology:
    """The contracted machine: rank q is part q (``labels[v]`` is rank v's part, 0 … p − 1),
    then the switches that remain, merged as the module docstring says."""
    r = topology.num_ranks
    p = max(labels) + 1
    node_of = [int(labels[v]) for v in range(r)] + [p + i for i in range(topology.num_nodes - r)]
    edges: dict[tuple[int, int], float] = {}
    for link in topology.links:
        a, b = node_of[link.src], node_of[link.dst]
        if a != b:
            edges[(a, b)] = edges.get((a, b), 0.0) + link.bandwidth
    switches = set(range(p, p + topology.num_nodes - r))
    changed = True
    while changed:
        changed = False
        for x in sorted(switches):
            near = {b for (a, b) in edges if a == x} | {a for (a, b) in edges if b == x}
            if len(near) > 2:
                continue
            links_in = {a: bw for (a, b), bw in edges.items() if b == x}
            links_out = {b: bw for (a, b), bw in edges.items() if a == x}
            for key in [k for k in edges if x in k]:
                del edges[key]
            switches.discard(x)
            changed = True
            if len(near) == 2:
                a, b = sorted(near)
                for u, v in ((a, b), (b, a)):
                    if u in links_in and v in links_out:
                        edges[(u, v)] = edges.get((u, v), 0.0) + min(links_in[u], links_out[v])
    kept = sorted(switches)
    index = {old: p + i for i, old in enumerate(kept)}
    index.update({q: q for q in range(p)})
    links = tuple(sorted((Link(index[a], index[b], bw, 0.0) for (a, b), bw in edges.items()), key=lambda lk: (lk.src, lk.dst)))
    return Topology(
        name=f"{topology.name} contracted to {p} parts",
        ranks=tuple(Node(f"part{q}") for q in range(p)),
        switches=tuple(Node(topology.node_name(r + old - p)) for old in kept),
        links=links,
        sha256="contracted",
        document_sha256="contracted",
    )


def contract_spec(spec: FlowSpec, labels: Sequence[int]) -> FlowSpec:
    """The commodities of ``spec`` between parts: each supply and demand moves to its rank's part,
    what a part supplies to itself is dropped, and commodities that become equal are kept once
    where each commodity shares a pair's bytes alone (``f ≤ G``), but all kept where a group's
    commodities must share them by their sum (their chunks are different). Volumes: 2(p − 1)
    transfers between parts per byte where ``spec`` has the allreduce volume rows."""
    p = max(labels) + 1
    out: list[Commodity] = []
    index_of: dict[int, int] = {}
    seen: dict[Commodity, int] = {}
    summed = {i for g in spec.groups if len(g) > 1 for i in g}
    for i, k in enumerate(spec.commodities):
        supply: dict[int, float] = {}
        demand: dict[int, float] = {}
        for s, a in k.supply:
            supply[labels[s]] = supply.get(labels[s], 0.0) + a
        for d, a in k.demand:
            demand[labels[d]] = demand.get(labels[d], 0.0) + a
        if len(k.demand) == 1:  # one destination: what is already in its part needs no transfer
            ((d, _),) = demand.items()
            supply.pop(d, None)
            demand = {d: sum(supply.values())}
        elif len(k.supply) == 1:  # one source: its own part needs no transfer
            ((s, _),) = supply.items()
            demand.pop(s, None)
            supply = {s: sum(demand.values())}
        else:  # not produced by flow_spec
            raise ValueError("a commodity with several sources and several destinations")
        total = sum(supply.values())
        if total <= 0:
            continue
        c = Commodity(tuple(sorted(supply.items())), tuple(sorted(demand.items())))
        if i not in summed and c in seen:
            index_of[i] = seen[c]
            continue
        seen.setdefault(c, len(out))
        index_of[i] = len(out)
        out.append(c)
    groups: list[tuple[int, ...]] = []
    placed: set[int] = set()
    for g in spec.groups:
        members = tuple(sorted({index_of[i] for i in g if i in index_of}))
        if members and not (len(members) == 1 and members[0] in placed):
            groups.append(members)
            placed.update(members)
    volumes = ((tuple(range(p)), 2.0 * (p - 1)),) if spec.volumes else ()
    return FlowSpec(tuple(out), tuple(groups), volumes)
