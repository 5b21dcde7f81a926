"""The latency-aware methods for small and mid sizes: one-shot allreduce and the pipelined trees
(k-nomial and pipelined k-ary, on hosts or ranks), on every collective they serve, verified and
replayed with real numbers."""

import math

import pytest

from synth import generators as gen
from synth.algorithms import one_shot, pipelined_tree
from synth.collective import Kind
from synth.errors import NotApplicable
from synth.interop.msccl_export import export_msccl
from synth.registry import METHODS, synthesize
from synth.routing import router_for
from synth.simulate import simulate
from synth.verify import verify

from .reference import numeric_replay, reference_check

MACHINES = {
    "nvswitch6": lambda: gen.nvswitch(6, 100.0),
    "ring5": lambda: gen.ring(5),
    "mesh2x3": lambda: gen.mesh(2, 3),
    "fattree2x2x2": lambda: gen.fattree(racks=2, servers=2, gpus=2),
    "multihost3x4": lambda: gen.multihost(hosts=3, gpus=4),
    "multihost-pcie-nic-per-host": lambda: gen.multihost(hosts=3, gpus=3, fabric="pcie", nic="host"),
    "mi250x2": lambda: gen.mi250(packages=2, nodes=2),
}


def _time(schedule, topology, size):
    return simulate(schedule, topology, [size], "sync", timeline=False)[0].time_us


def _check(schedule, topology):
    assert verify(schedule, topology).ok
    assert reference_check(schedule, topology) is None
    assert numeric_replay(schedule)


# ----------------------------------------------------------------------------- one-shot
@pytest.mark.parametrize("ranks", [2, 3, 8])
@pytest.mark.parametrize("chunks", [None, 3])
def test_one_shot_allreduce_is_one_step_and_sums(ranks, chunks):
    topo = gen.nvswitch(ranks, 300.0)
    schedule = synthesize(topo, Kind.ALLREDUCE, one_shot.NAME, chunks=chunks)
    _check(schedule, topo)
    assert schedule.num_steps == 1
    g = schedule.collective.num_chunks
    assert schedule.num_transfers == ranks * (ranks - 1) * g
    assert set(schedule.op.tolist()) == {1}  # every transfer a reduce


def test_one_shot_on_a_multihost_machine_with_a_nic_per_gpu():
    """Every pair has a switch route (through the hosts' NVSwitch or the network), so it applies."""
    topo = gen.fattree(racks=2, servers=2, gpus=2)
    _check(synthesize(topo, Kind.ALLREDUCE, one_shot.NAME), topo)


def test_one_shot_halves_the_latency_of_a_small_allreduce():
    """One α instead of the two-shot's two: at 1 KiB on an 8-GPU NVSwitch box it takes about half
    the time of direct (reduce-scatter + allgather); at 1 MiB the (R−1)·size per rank loses."""
    topo = gen.nvswitch(8, 300.0)
    one = synthesize(topo, Kind.ALLREDUCE, one_shot.NAME)
    two = synthesize(topo, Kind.ALLREDUCE, "direct")
    assert _time(one, topo, 1024) < 0.6 * _time(two, topo, 1024)
    assert _time(one, topo, 1 << 20) > _time(two, topo, 1 << 20)


def test_one_shot_by_hosts_then_rails_serves_a_rail_only_machine(builtin):
    """dgx-a100x2: GPUs of different hosts and rails have no route (NVSwitch inside, a network per
    rail), so the flat exchange does not apply; inside hosts then along rails does, in two steps."""
    topo = builtin("dgx-a100x2")
    with pytest.raises(NotApplicable, match="only through other ranks"):
        one_shot.flat(topo, METHODS[one_shot.NAME].collective(topo, Kind.ALLREDUCE), router_for(topo))
    for options in (None, {"size": 1024}):
        schedule = synthesize(topo, Kind.ALLREDUCE, one_shot.NAME, options=options)
        _check(schedule, topo)
        assert schedule.params["variant"] == "hosts" and schedule.num_steps == 2


def test_one_shot_keeps_the_faster_variant_for_the_size():
    """On a fat-tree of NVSwitch servers both variants apply; each size keeps the faster one."""
    topo = gen.fattree(racks=2, servers=2, gpus=4)
    router = router_for(topo)
    collective = METHODS[one_shot.NAME].collective(topo, Kind.ALLREDUCE)
    variants = {"flat": one_shot.flat(topo, collective, router), "hosts": one_shot.by_hosts(topo, collective, router)}
    for size in (1 << 10, 1 << 16, 1 << 20):
        chosen = synthesize(topo, Kind.ALLREDUCE, one_shot.NAME, options={"size": size})
        _check(chosen, topo)
        assert chosen.params["chosen_at_size"] == size
        best = min(_time(s, topo, size) for s in variants.values())
        assert _time(chosen, topo, size) == pytest.approx(best)
        assert _time(variants[chosen.params["variant"]], topo, size) == pytest.approx(best)


def test_one_shot_needs_a_route_between_every_pair(small_topologies):
    with pytest.raises(NotApplicable, match="only through other ranks"):
        synthesize(small_topologies["ring5"], Kind.ALLREDUCE, one_shot.NAME)
    with pytest.raises(NotApplicable, match="does not serve"):
        synthesize(small_topologies["nvswitch6"], Kind.BROADCAST, one_shot.NAME)


# ----------------------------------------------------------------------------- pipelined trees
#: At 64 MiB the multi-host machines tune ramped slices (an LP per slice series): 5-15 s each on
#: 2 cores, run by `make test-all`; tests/test_slice_ramp.py verifies the ramps in the default run.
RAMPED_SLOW = {"fattree2x2x2", "multihost3x4", "multihost-pcie-nic-per-host"}


@pytest.mark.parametrize(
    "size,kind,name",
    [
        pytest.param(size, kind, name, marks=pytest.mark.slow) if size == 64 << 20 and name in RAMPED_SLOW else (size, kind, name)
        for size in (1 << 10, 1 << 20, 64 << 20)
        for kind in sorted(pipelined_tree.COLLECTIVES, key=lambda k: k.value)
        for name in sorted(MACHINES)
    ],
)
def test_pipelined_tree_every_collective_verifies_and_replays(name, kind, size):
    topo = MACHINES[name]()
    roots = [0, topo.num_ranks - 1] if kind is not Kind.ALLREDUCE else [None]
    for root in roots:
        schedule = synthesize(topo, kind, pipelined_tree.NAME, root=root, options={"size": size})
        _check(schedule, topo)
        assert schedule.params["chosen_at_size"] == size
        if kind is not Kind.ALLREDUCE:
            p = schedule.params
            assert p["parts"] * p["chunks_per_part"] == schedule.collective.num_chunks


@pytest.mark.parametrize("kind", [Kind.BROADCAST, Kind.REDUCE, Kind.ALLREDUCE])
def test_pipelined_tree_keeps_a_requested_chunk_count(kind):
    topo = gen.multihost(hosts=3, gpus=4)
    schedule = synthesize(topo, kind, pipelined_tree.NAME, chunks=8, options={"size": 1 << 20})
    assert schedule.collective.chunks_per_piece == 8
    _check(schedule, topo)


def test_pipelined_tree_picks_few_steps_small_and_pipelines_large():
    """The α-β trade: at 1 KiB the fewest steps (a k-nomial tree, each part moving whole), at
    256 MiB a pipeline of many chunks (the chain, or scatter-allgather in waves)."""
    topo = gen.multihost(hosts=8, gpus=4)
    small = synthesize(topo, Kind.BROADCAST, pipelined_tree.NAME, options={"size": 1 << 10})
    large = synthesize(topo, Kind.BROADCAST, pipelined_tree.NAME, options={"size": 256 << 20})
    assert small.params["shape"] == "knomial" and small.num_steps <= 5
    assert large.params["shape"] in ("kary", "scatter-allgather") and large.params["chunks_per_part"] >= 8
    assert large.num_steps > small.num_steps
    # each is the faster of the two at its own size
    assert _time(small, topo, 1 << 10) < _time(large, topo, 1 << 10)
    assert _time(large, topo, 256 << 20) < _time(small, topo, 256 << 20)


def test_pipelined_tree_uses_every_nic_of_the_root_host():
    """With a NIC per GPU the data is dealt to the root host's GPUs and crosses the network on
    every rail; with one NIC per host (no GPU reaches another host without it) one part does."""
    rails = synthesize(gen.multihost(hosts=4, gpus=4), Kind.BROADCAST, pipelined_tree.NAME, options={"size": 16 << 20})
    assert rails.params["layout"] == "hosts" and rails.params["parts"] == 4
    topo = gen.multihost(hosts=4, gpus=4, fabric="pcie", nic="host")
    single = synthesize(topo, Kind.BROADCAST, pipelined_tree.NAME, options={"size": 16 << 20})
    assert single.params["layout"] in ("hosts", "hosts-off-root-rail")
    _check(single, topo)


@pytest.mark.parametrize("hosts", [1, 2, 3, 5, 8, 16, 17])
@pytest.mark.parametrize("fanout", [1, 2, 3, 7])
def test_split_trees_reach_every_host_in_the_promised_levels(hosts, fanout):
    for shape in ("knomial", "kary"):
        parent, level = pipelined_tree.split_tree(hosts, fanout, shape)
        assert parent[0] == -1 and level[0] == 0
        for h in range(1, hosts):
            assert 0 <= parent[h] < h  # parents come first: subtrees are ranges after their root
            assert level[h] == level[parent[h]] + 1 if shape == "kary" else level[h] > level[parent[h]]
        if shape == "knomial":
            rounds = max(level)
            assert rounds == (0 if hosts == 1 else math.ceil(math.log(hosts) / math.log(fanout + 1) - 1e-9))
        else:
            children = [sum(1 for p in parent if p == h) for h in range(hosts)]
            assert max(children) <= fanout


def test_knomial_fanouts_are_the_smallest_for_each_round_count():
    assert pipelined_tree.knomial_fanouts(16) == [15, 3, 2, 1]
    assert pipelined_tree.knomial_fanouts(2) == [1]
    for hosts in (3, 9, 17, 100):
        for k in pipelined_tree.knomial_fanouts(hosts):
            rounds = math.ceil(math.log(hosts) / math.log(k + 1) - 1e-9)
            assert k == 1 or k**rounds < hosts  # one less would need another round


def test_near_hosts_are_contiguous_in_the_layout():
    """On a fat-tree the hosts of the root's rack come first and every rack's hosts are together,
    so the range-shaped subtrees enter each rack once."""
    topo = gen.fattree(racks=3, servers=3, gpus=2)
    root = 9  # a GPU of the second rack
    layout = pipelined_tree.layouts(topo, root, router_for(topo))[0]
    racks = [topo.node_name(g[0]).split("s")[0] for g in layout.groups]
    assert root in layout.groups[0] and layout.carriers[0][0] == root
    assert racks[:3] == [racks[0]] * 3
    assert len({tuple(racks[i : i + 3]) for i in (0, 3, 6)}) == 3 and all(len(set(racks[i : i + 3])) == 1 for i in (0, 3, 6))


def test_registered_and_tuned_for_size():
    method = METHODS[pipelined_tree.NAME]
    assert method.tunes_for_size and method.family == "scalable"
    assert {k for k in Kind if method.serves(k)} == {Kind.BROADCAST, Kind.REDUCE, Kind.ALLREDUCE}
    assert METHODS[one_shot.NAME].family == "scalable" and METHODS[one_shot.NAME].tunes_for_size


def test_tuned_schedules_export_to_msccl_with_their_size_range():
    """The size each was tuned for becomes MSCCL's minBytes/maxBytes (synth.interop.msccl_sizes);
    the export replays the layout against the schedule (self_check)."""
    topo = gen.nvswitch(4, 300.0)
    cases = ((Kind.ALLREDUCE, one_shot.NAME), (Kind.BROADCAST, pipelined_tree.NAME), (Kind.REDUCE, pipelined_tree.NAME))
    for kind, method in cases:
        schedule = synthesize(topo, kind, method, options={"size": 1024})
        result = export_msccl(schedule)
        assert result.algo.min_bytes <= 1024 <= result.algo.max_bytes < 1 << 20


def _network_vias(schedule, topo, switch_prefix):
    """(src, dst) → set of switch paths that the schedule's transfers between hosts take."""
    hosts = topo.hosts
    out: dict = {}
    for src, dst, route in zip(schedule.src.tolist(), schedule.dst.tolist(), schedule.route.tolist()):
        if hosts[src] != hosts[dst]:
            via = schedule.routes[route]
            out.setdefault((src, dst), set()).add(tuple(v for v in via if v.startswith(switch_prefix)))
    return out


def test_pipelined_tree_spreads_a_part_over_every_scale_out_port():
    """A Gaudi-style accelerator reaches its peer in another box over one leaf switch per port:
    the parts it carries take every leaf, so its three ports carry the broadcast, not one."""
    topo = gen.gaudi(boxes=2, gpus=4)
    schedule = synthesize(topo, Kind.BROADCAST, pipelined_tree.NAME, options={"size": 1 << 30})
    assert schedule.params["parts"] % 3 == 0 and schedule.params["parts"] >= 9
    leaves = {frozenset(vias) for vias in _network_vias(schedule, topo, "leaf").values()}
    assert leaves == {frozenset({("leaf0",), ("leaf1",), ("leaf2",)})}
    _check(schedule, topo)
    reduce = synthesize(topo, Kind.REDUCE, pipelined_tree.NAME, options={"size": 1 << 30})
    _check(reduce, topo)


def test_rail_routes_balance_parallel_transfers_over_spines():
    """Eight transfers between two racks of a two-spine fat-tree: four over each spine."""
    from synth.algorithms.engines.rail_routes import RouteBalancer, switch_paths

    topo = gen.fattree(racks=2, servers=1, gpus=8)
    a, b = 0, 8  # GPU 0 of rack 0, GPU 0 of rack 1
    paths = switch_paths(topo, a, b)
    assert len(paths) == 2  # one per spine, both of the least latency
    balancer = RouteBalancer(topo)
    chosen = [balancer.vias[balancer.choose(a + j, b + j)] for j in range(8)]
    spines = [next(v for v in via if "spine" in v) for via in chosen]
    assert sorted(spines.count(s) for s in set(spines)) == [4, 4]
    assert balancer.ports(a, b) == 1
    assert RouteBalancer(gen.gaudi(boxes=2, gpus=2)).ports(0, 2) == 3


@pytest.mark.parametrize("root", [0, 5])
def test_scatter_allgather_shape_on_every_rail(root):
    """Van de Geijn's broadcast on every rail: two network steps after the deal, verified for
    both the broadcast and its dual reduce; on a rail-only machine at 1 MiB it beats the trees."""
    topo = gen.rail_only(hosts=6, gpus=4)
    router = router_for(topo)
    spreads = pipelined_tree.Spreads(router)
    layout = pipelined_tree.layouts(topo, root, router, spreads.finder)[0]
    shape = pipelined_tree.Shape("scatter-allgather", 5, 4, 6)
    schedule = pipelined_tree.build_broadcast(topo, layout, root, shape, 1 << 20, spreads)
    _check(schedule, topo)
    network = [s for s in range(schedule.num_steps) if any(topo.hosts[a] != topo.hosts[b] for a, b in _pairs(schedule, s))]
    assert len(network) == 2
    chosen = synthesize(topo, Kind.BROADCAST, pipelined_tree.NAME, root=root, options={"size": 1 << 20})
    assert chosen.params["shape"] == "scatter-allgather"
    _check(synthesize(topo, Kind.REDUCE, pipelined_tree.NAME, root=root, options={"size": 1 << 20}), topo)
    allreduce = synthesize(topo, Kind.ALLREDUCE, pipelined_tree.NAME, options={"size": 1 << 20})
    assert allreduce.params["broadcast"]["shape"] == "scatter-allgather"
    _check(allreduce, topo)


def _pairs(schedule, step):
    lo, hi = schedule.step_starts[step], schedule.step_starts[step + 1]
    return zip(schedule.src[lo:hi].tolist(), schedule.dst[lo:hi].tolist())


@pytest.mark.slow  # 27 s on 2 cores; tests/test_slice_ramp.py verifies the split returns in the default run
def test_bounce_brings_the_roots_part_back_over_idle_nics():
    """At 1 GiB on a fat-tree with a NIC per GPU the root's own part goes out over its NIC and
    comes back to its host from the last host of the chain, so the root's switch link carries
    each other part once and nothing twice; the schedule verifies, and so does its dual reduce."""
    topo = gen.fattree(racks=2, servers=2, gpus=8)
    schedule = synthesize(topo, Kind.BROADCAST, pipelined_tree.NAME, options={"size": 1 << 30})
    assert schedule.params.get("bounce") is True and schedule.params["parts"] == 8
    _check(schedule, topo)
    plain = synthesize(
        topo, Kind.BROADCAST, pipelined_tree.NAME, chunks=schedule.collective.num_chunks, options={"size": 1 << 30}
    )
    assert _time(schedule, topo, 1 << 30) <= _time(plain, topo, 1 << 30)
    hosts = topo.hosts
    root_host = hosts[0]
    back = {
        int(d) for s, d in zip(schedule.src.tolist(), schedule.dst.tolist()) if hosts[s] != root_host and hosts[d] == root_host
    }
    assert back == set(range(1, 8))  # every other GPU of the root's host gets the root's part over its NIC
    _check(synthesize(topo, Kind.REDUCE, pipelined_tree.NAME, options={"size": 1 << 30}), topo)


@pytest.mark.parametrize(
    "kind",
    [Kind.BROADCAST, pytest.param(Kind.REDUCE, marks=pytest.mark.slow), pytest.param(Kind.ALLREDUCE, marks=pytest.mark.slow)],
)
def test_scatter_allgather_in_waves_without_the_root_hosts_piece(kind):
    """Hosts sharing one NIC (PCIe at 12 GB/s everywhere, as random-multihost-1): the root's host
    sends every byte across once (its piece left out of the allgather) and the waves overlap the
    scatter, the allgather and the sharing inside the hosts, which one wave (two network steps
    of the whole data) cannot; the shape built directly verifies on every collective it serves
    (reduce and allreduce through the dual)."""
    topo = gen.multihost(
        hosts=4, gpus=4, fabric="pcie", fabric_bandwidth=12.0, nic="host", nic_bandwidth=50.0, pcie_bandwidth=12.0
    )
    size = 1 << 20
    chosen = synthesize(topo, Kind.BROADCAST, pipelined_tree.NAME, options={"size": size})
    assert chosen.params["shape"] == "scatter-allgather" and chosen.params.get("root_piece") is False
    assert chosen.params["chunks_per_part"] > 3  # several waves of 3 pieces
    router = router_for(topo)
    spreads = pipelined_tree.Spreads(router)
    layout = pipelined_tree.layouts(topo, 0, router, spreads.finder)[0]
    one_wave = pipelined_tree.build_broadcast(topo, layout, 0, pipelined_tree.Shape("scatter-allgather", 3, 4, 4), size, spreads)
    assert _time(chosen, topo, size) < 0.9 * _time(one_wave, topo, size)
    schedule = synthesize(topo, kind, pipelined_tree.NAME, chunks=chosen.collective.num_chunks, options={"size": size})
    _check(schedule, topo)


def test_a_slow_link_inside_a_host_is_detoured_by_split_parts():
    """Two MI300X-like nodes of 4 GPUs (one network switch per rail) with the xGMI link between GPUs 1 and 3 of node 1 at a
    tenth of its rate: with one part per carrier, carrier 1's part reaches GPU 3 over that link
    and sets the pace of every step; cut into `SPLIT_PARTS` parts per carrier, part v > 0 goes
    round it through another GPU (`detour_slow`), so the pipeline runs at the NICs' pace. Every
    collective served verifies with the split."""
    topo = gen.degrade(gen.mi300x(nodes=2, gpus=4, rails=4), "n1-gpu1", "n1-gpu3", 0.1)
    router = router_for(topo)
    assert pipelined_tree.slow_inside([4, 5, 6, 7], router) and not pipelined_tree.slow_inside([0, 1, 2, 3], router)
    spreads = pipelined_tree.Spreads(router)
    plain, detoured = spreads.tree((4, 5, 6, 7), 5), spreads.tree((4, 5, 6, 7), 5, 1)
    assert (1, 5, 7) in plain and (1, 5, 7) not in detoured and any(d == 2 and b == 7 for d, _, b in detoured)
    size = 1 << 30
    chosen = synthesize(topo, Kind.BROADCAST, pipelined_tree.NAME, options={"size": size})
    assert chosen.params["parts"] == 4 * pipelined_tree.SPLIT_PARTS
    layout = pipelined_tree.layouts(topo, 0, router, spreads.finder)[0]
    unsplit = pipelined_tree.build_broadcast(topo, layout, 0, pipelined_tree.Shape("kary", 1, 4, 64, bounce=True), size, spreads)
    assert _time(chosen, topo, size) < 0.8 * _time(unsplit, topo, size)
    for kind in (Kind.BROADCAST, Kind.REDUCE, Kind.ALLREDUCE):
        _check(synthesize(topo, kind, pipelined_tree.NAME, chunks=32, options={"size": size}), topo)
