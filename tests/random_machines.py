"""Random small machines for property tests of the synthesizers (hypothesis strategies)."""

from __future__ import annotations

from hypothesis import strategies as st

from synth import generators as gen
from synth.topology import Topology, topology_from_document

BANDWIDTHS = (5.0, 10.0, 12.5, 25.0, 50.0, 100.0)
LATENCIES = (0.0, 0.1, 0.5, 1.0, 2.0)


@st.composite
def random_graphs(draw) -> Topology:
    """A random connected machine: 2–7 ranks, 0–3 switches, random bandwidths and latencies, some
    one-way links (a bidirectional spanning tree first, so every node reaches every other)."""
    num_ranks = draw(st.integers(2, 7), label="ranks")
    num_switches = draw(st.integers(0, 3), label="switches")
    nodes = [f"r{i}" for i in range(num_ranks)] + [f"s{i}" for i in range(num_switches)]
    order = draw(st.permutations(nodes), label="tree order")
    links = []

    def link(a: str, b: str, duplex: bool) -> None:
        links.append(
            {
                "a": a,
                "b": b,
                "bandwidth": draw(st.sampled_from(BANDWIDTHS)),
                "latency": draw(st.sampled_from(LATENCIES)),
                "duplex": duplex,
            }
        )

    for i in range(1, len(order)):
        link(order[i], order[draw(st.integers(0, i - 1))], True)
    for _ in range(draw(st.integers(0, 2 * len(nodes)), label="extra links")):
        a, b = draw(st.lists(st.sampled_from(nodes), min_size=2, max_size=2, unique=True))
        link(a, b, draw(st.booleans()))
    doc = {
        "format": "synth-topology",
        "version": 1,
        "name": "random",
        "ranks": [{"name": n, "host": f"h{i % 2}"} for i, n in enumerate(nodes[:num_ranks])],
        "switches": nodes[num_ranks:],
        "links": links,
    }
    return topology_from_document(doc, "<random>")


def _boxes(gpus: int, boxes: int) -> Topology:
    return gen.nvswitch(gpus, 100.0, boxes=boxes, nic_bandwidth=25.0 if boxes > 1 else None)


def _fattree(racks: int, servers: int, oversubscription: float) -> Topology:
    return gen.fattree(racks=racks, servers=servers, gpus=2, oversubscription=oversubscription)


def family_machines():
    """Small members of every generator family."""
    return st.one_of(
        st.builds(gen.ring, st.integers(2, 6), st.sampled_from(BANDWIDTHS)),
        st.builds(gen.torus, st.integers(2, 3), st.integers(2, 3)),
        st.builds(gen.mesh, st.integers(1, 3), st.integers(2, 3)),
        st.builds(gen.hypercube, st.integers(1, 3)),
        st.builds(gen.fully_connected, st.integers(2, 5)),
        st.builds(
            lambda n, b: gen.nvswitch(n, 100.0, boxes=b, nic_bandwidth=25.0 if b > 1 else None),
            st.integers(2, 4),
            st.integers(1, 2),
        ),
        st.builds(lambda s: gen.pcie_tree(sockets=s, switches_per_socket=1, gpus_per_switch=2), st.integers(1, 2)),
        st.builds(
            lambda r, s, o: gen.fattree(racks=r, servers=s, gpus=2, oversubscription=o),
            st.integers(1, 2),
            st.integers(1, 2),
            st.sampled_from([1.0, 4.0]),
        ),
        st.just(gen.dgx1()),
    )


def machines():
    """Random graphs and small generated families."""
    return st.one_of(random_graphs(), family_machines())
