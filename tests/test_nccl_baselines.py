"""NCCL-style baselines: multi-channel rings, double binary tree, hierarchical allreduce."""

import itertools
from collections import Counter

import numpy as np
import pytest
from click.testing import CliRunner

from synth import generators as gen
from synth.algorithms.double_binary_tree import double_tree, in_order_parents, interior, rank_trees
from synth.algorithms.engines.composition import connected, induced_topology, overlap, parallel
from synth.algorithms.engines.ring_channels import ring_channels
from synth.bounds import bound_model
from synth.builtin import BUILTIN_NAMES
from synth.cli import main
from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.registry import METHODS, make_collective, synthesize
from synth.schedule import schedule_from_steps
from synth.simulate import Simulator
from synth.topology import topology_from_document
from synth.verify import verify

from .conftest import SMALL_TOPOLOGIES
from .reference import numeric_replay

NCCL_METHODS = ("multiring", "double-binary-tree", "hierarchical")
ROOTED = (Kind.BROADCAST, Kind.REDUCE)


def _cases(method):
    return sorted(METHODS[method].collectives)


def _link_loads(schedule, topology, step):
    """Transfers on each directed link (node pair) in one step."""
    index = topology.node_index
    loads = Counter()
    for t in schedule.step(step):
        nodes = [t.src, *(index[n] for n in t.via), t.dst]
        for a, b in itertools.pairwise(nodes):
            loads[(a, b)] += 1
    return loads


# ============================================================================ every topology
@pytest.mark.parametrize("topology_name", BUILTIN_NAMES)
def test_builtins_verify(builtin, topology_name):
    topo = builtin(topology_name)
    for method in NCCL_METHODS:
        for kind in _cases(method):
            try:
                schedule = synthesize(topo, kind, method, verify=False)
            except NotApplicable as exc:
                assert method == "hierarchical" and "one" in str(exc), (method, kind, exc)
                continue
            assert verify(schedule, topo).ok, (method, kind)
            if topo.num_ranks <= 32:
                assert numeric_replay(schedule), (method, kind)


@pytest.mark.slow
def test_fattree_numeric_replay(builtin):
    topo = builtin("fattree-4rack")
    for method in NCCL_METHODS:
        for kind in _cases(method):
            assert numeric_replay(synthesize(topo, kind, method)), (method, kind)


@pytest.mark.parametrize("topology_name", sorted(SMALL_TOPOLOGIES))
def test_small_topologies(small_topologies, topology_name):
    topo = small_topologies[topology_name]
    for method in NCCL_METHODS:
        for kind in _cases(method):
            for root in [0, topo.num_ranks - 1] if kind in ROOTED else [None]:
                for chunks in (None, 1, 3, 2 * topo.num_ranks):
                    try:
                        schedule = synthesize(topo, kind, method, root=root, chunks=chunks, verify=False)
                    except NotApplicable as exc:
                        assert method == "hierarchical" or "multiple of the rank count" in str(exc), (method, kind, exc)
                        continue
                    assert verify(schedule, topo).ok, (method, kind, root, chunks)
                    assert numeric_replay(schedule), (method, kind, root, chunks)


@pytest.mark.parametrize(
    "topo",
    [
        gen.dgx1(boxes=2, nic_bandwidth=12.5),
        gen.nvswitch(4, 100.0, boxes=3, nic_bandwidth=25.0, rails=2),
        gen.nvswitch(3, 100.0, boxes=3, nic_bandwidth=25.0),
        gen.fattree(racks=2, servers=1, gpus=1),
        gen.torus(4, 4),
        gen.nvswitch(1, 100.0),
    ],
    ids=["dgx1x2", "nvswitch4x3-rails", "nvswitch3x3", "fattree-1gpu-hosts", "torus4x4", "one-rank"],
)
def test_more_generated_topologies(topo):
    for method in NCCL_METHODS:
        for kind in _cases(method):
            try:
                schedule = synthesize(topo, kind, method, verify=False)
            except NotApplicable as exc:
                # hierarchical needs several hosts, and for allgather / reduce-scatter several ranks per host
                assert method == "hierarchical" and (len(topo.host_groups) < 2 or "several ranks per host" in str(exc))
                continue
            assert verify(schedule, topo).ok, (method, kind)
            assert numeric_replay(schedule), (method, kind)


# ============================================================================ multi-channel rings
def test_dgx1_rings_use_every_nvlink_once_per_direction(dgx1):
    plan = ring_channels(dgx1)
    assert plan.channels == 6 and plan.channel_bandwidth == 25.0 and plan.total_bandwidth == 150.0
    nvlinks = gen.DGX1_NVLINKS
    schedule = synthesize(dgx1, "allgather", "multiring")
    assert schedule.collective.chunks_per_piece == 6 and schedule.num_steps == 7
    assert schedule.params["rings"] == [list(r) for r in plan.rings]
    for step in range(schedule.num_steps):
        assert all(t.via == () for t in schedule.step(step))  # NVLink only, no switch
        loads = _link_loads(schedule, dgx1, step)
        # one chunk per ring per hop: each NVLink carries exactly one transfer in each direction
        assert loads == Counter({(a, b): nvlinks[a][b] for a in range(8) for b in range(8) if nvlinks[a][b]})


def test_multiring_allreduce_and_broadcast_on_dgx1(dgx1):
    ar = synthesize(dgx1, "allreduce", "multiring")
    assert ar.collective.chunks_per_piece == 8 * 6 and ar.num_steps == 14
    for step in range(ar.num_steps):
        loads = _link_loads(ar, dgx1, step)
        assert all(n <= gen.DGX1_NVLINKS[a][b] for (a, b), n in loads.items())
    bc = synthesize(dgx1, "broadcast", "multiring", root=3)
    assert bc.num_steps == 4 + 8 - 2  # four chunks per chain, pipelined over 7 hops
    assert numeric_replay(bc)


def test_nvswitch_box_is_one_ring(builtin):
    plan = ring_channels(builtin("dgx-a100"))
    assert plan.channels == 1 and plan.channel_bandwidth == 300.0 and plan.same_order


def test_fattree_rings_are_rail_aligned(builtin):
    topo = builtin("fattree-4rack")
    plan = ring_channels(topo)
    assert plan.channels == 8 and plan.layout == "multi-host"
    assert plan.total_bandwidth == pytest.approx(8 * 300 / 7)  # every GPU's NVSwitch link carries 7 of 8 channels
    hosts = topo.hosts
    exits, entries = set(), set()
    for ring, routes in zip(plan.rings, plan.routes):
        local = [r % 8 for r in ring]
        assert all(local[i : i + 8] == local[:8] for i in range(0, 128, 8))  # the same chain in every host
        crossings = [i for i in range(128) if hosts[ring[i]] != hosts[ring[(i + 1) % 128]]]
        assert len(crossings) == 16
        for i in crossings:
            assert any("nic" in name for name in routes[i])
        exits.add(ring[7] % 8)
        entries.add(ring[8] % 8)
    assert exits == entries == set(range(8))  # each NIC sends one channel and receives one
    ag = synthesize(topo, "allgather", "multiring")
    for step in (0, 63, 126):
        loads = _link_loads(ag, topo, step)
        for (a, b), n in loads.items():
            link = topo.links[topo.link_index[(a, b)]]
            assert n / link.bandwidth <= 7 / 300 + 1e-12, (topo.node_name(a), topo.node_name(b), n)


def test_rail_switches_force_same_parity_crossings(builtin):
    topo = builtin("dgx-a100x2")
    plan = ring_channels(topo)
    assert plan.channels == 8 and plan.total_bandwidth == 200.0
    for ring in plan.rings:
        assert ring[7] % 2 == ring[8] % 2  # rails are not connected: the crossing stays on one rail


def test_default_file_name_uses_the_machine_dependent_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, ["synthesize", "dgx1", "-c", "allgather", "-m", "multiring"]).exit_code == 0
    assert runner.invoke(main, ["synthesize", "dgx1", "-c", "allgather", "-m", "multiring", "-k", "12"]).exit_code == 0
    names = sorted(p.name for p in (tmp_path / "generated" / "dgx1").iterdir())
    assert names == ["allgather-multiring-k12.json", "allgather-multiring.json"]  # default k = 6 channels, unmarked


def test_multiring_default_chunks_follow_channels(dgx1):
    assert make_collective(dgx1, Kind.ALLGATHER, "multiring").chunks_per_piece == 6
    assert make_collective(dgx1, Kind.ALLREDUCE, "multiring").chunks_per_piece == 48
    assert make_collective(dgx1, Kind.BROADCAST, "multiring").chunks_per_piece == 24
    with pytest.raises(NotApplicable, match="multiple of the rank count 8"):
        synthesize(dgx1, "allreduce", "multiring", chunks=12)


# ============================================================================ double binary tree
@pytest.mark.parametrize("n", range(1, 70))
def test_in_order_trees(n):
    parents = in_order_parents(n)
    assert parents.count(-1) == 1
    children = Counter(p for p in parents if p >= 0)
    assert max(children.values(), default=0) <= 2
    assert set(children) == {i for i in range(n) if i % 2 == 1}  # interior = odd positions (0-based)
    for i in range(n):  # every position reaches the root
        seen = 0
        while parents[i] >= 0:
            i = parents[i]
            seen += 1
            assert seen <= n
    first, second = double_tree(list(range(n)))
    assert not interior(first) & interior(second)  # no rank is interior in both trees


def test_dgx1_double_tree_on_nvlinks(dgx1):
    trees, params = rank_trees(dgx1)
    assert len(trees) == 2 and params["relayed"] is False
    assert not interior(trees[0]) & interior(trees[1])
    for tree in trees:
        for child, parent in tree.items():
            if parent is not None:
                assert gen.DGX1_NVLINKS[child][parent] > 0
    schedule = synthesize(dgx1, "allreduce", "double-binary-tree")
    assert schedule.collective.num_chunks == 8
    assert schedule.num_steps == 4 + 2 * 3 - 1  # 4 chunks per tree, depth 3, up and down overlapped
    assert schedule.num_steps < synthesize(dgx1, "allreduce", "ring").num_steps
    assert all(t.via == () for step in schedule.steps for t in step)


def test_multi_host_trees_cross_hosts_between_heads(builtin):
    topo = builtin("fattree-4rack")
    trees, params = rank_trees(topo)
    assert params["channels"] == 4 and len(trees) == 8
    host_trees = params["host_trees"]
    assert not interior(host_trees[0]) & interior(host_trees[1])
    hosts = topo.hosts
    heads_of_host0 = set()
    for tree in trees:
        for child, parent in tree.items():
            if parent is not None and hosts[child] != hosts[parent]:
                assert child % 8 == parent % 8  # heads of one tree share a local index (a rail)
        heads_of_host0 |= {c for c, p in tree.items() if c < 8 and (p is None or hosts[p] != hosts[c])}
    assert heads_of_host0 == set(range(8))  # the 8 trees hang from 8 different GPUs (and NICs)
    schedule = synthesize(topo, "allreduce", "double-binary-tree")
    assert verify(schedule, topo).ok
    assert schedule.num_steps < synthesize(topo, "allreduce", "multiring").num_steps / 5


# ============================================================================ hierarchical
def test_hierarchical_phases_on_fattree(builtin):
    topo = builtin("fattree-4rack")
    schedule = synthesize(topo, "allreduce", "hierarchical")
    params = schedule.params
    assert (params["hosts"], params["ranks_per_host"], params["intra"], params["inter"]) == (16, 8, "direct", "ring")
    hosts = topo.hosts
    kinds = []
    for step in schedule.steps:
        cross = {hosts[t.src] != hosts[t.dst] for t in step}
        kinds.append("inter" if cross == {True} else "intra" if cross == {False} else "mixed")
        for t in step:
            if hosts[t.src] != hosts[t.dst]:
                assert t.src % 8 == t.dst % 8  # across hosts only between equal local indices
    assert kinds == ["intra"] + ["inter"] * 30 + ["intra"]
    assert schedule.step(0)[0].op == "reduce" and schedule.step(31)[0].op == "copy"
    # the 8 rails were routed separately; spread_routes balances their rack crossings over the
    # 2 spines: 8 transfers leave each rack per step, 4 on each uplink
    for step in range(1, 31):
        loads = _link_loads(schedule, topo, step)
        uplinks = [n for (a, b), n in loads.items() if topo.node_name(b).startswith("spine")]
        assert max(uplinks) == 4


def test_hierarchical_on_dgx1_boxes_uses_their_rings(builtin):
    topo = builtin("ndv2x2")
    schedule = synthesize(topo, "allreduce", "hierarchical")
    assert schedule.params["intra"] == "ring" and schedule.params["inter"] == "direct"
    for step in schedule.steps:
        for t in step:
            if topo.hosts[t.src] == topo.hosts[t.dst]:
                assert t.via == ()  # inside a box: NVLinks only
    assert numeric_replay(schedule)


def test_hierarchical_not_applicable(dgx1):
    with pytest.raises(NotApplicable, match="at least two hosts"):
        synthesize(dgx1, "allreduce", "hierarchical")
    unequal = topology_from_document(
        {
            "format": "synth-topology",
            "version": 1,
            "name": "unequal",
            "ranks": [{"name": f"g{i}", "host": "a" if i < 3 else "b"} for i in range(5)],
            "switches": ["sw"],
            "links": [{"a": f"g{i}", "b": "sw", "bandwidth": 10} for i in range(5)],
        }
    )
    with pytest.raises(NotApplicable, match="equal size"):
        synthesize(unequal, "allreduce", "hierarchical")
    with pytest.raises(NotApplicable, match="multiple of the rank count 16"):
        synthesize(gen.dgx1(boxes=2, nic_bandwidth=12.5), "allreduce", "hierarchical", chunks=8)


# ============================================================================ composition
def test_overlap_starts_each_chunk_after_its_first_phase():
    c = Collective(Kind.ALLGATHER, 3, 1)
    topo = gen.fully_connected(3)
    first = schedule_from_steps(c, [[(0, 1, 0)], [(1, 2, 0)], [(2, 0, 2)]], topo)
    second = schedule_from_steps(c, [[(1, 0, 1), (1, 2, 1)], [(2, 1, 2)], [(0, 2, 0)]], topo)
    merged = overlap(first, second, c, "test")
    # chunk 0 ends in step 1 of the first phase and starts in step 2 of the second: offset 0;
    # chunk 2 ends in step 2 and starts in step 1: offset 2 — the larger wins
    assert merged.num_steps == 5
    assert verify(merged, topo).ok
    side = parallel([first, second], c, "test")
    assert side.num_steps == 3 and side.num_transfers == 7


def test_induced_topology_keeps_switches_drops_other_ranks(builtin):
    topo = builtin("fattree-4rack")
    host = list(topo.host_groups.values())[3]
    sub = induced_topology(topo, host, "h3")
    assert sub.num_ranks == 8 and len(sub.switches) == len(topo.switches) and connected(sub)
    assert [n.name for n in sub.ranks] == [topo.ranks[r].name for r in host]
    rail = induced_topology(topo, [h[5] for h in topo.host_groups.values()], "rail5")
    assert connected(rail)
    assert not connected(induced_topology(gen.ring(4), [0, 2], "apart"))
    assert np.all(sub.bandwidth_array > 0)


@pytest.mark.parametrize("kind", ["scatter", "gather"])
@pytest.mark.parametrize("name", ["dgx-a100x2", "ndv2x2", "fattree-4rack"])
def test_hierarchical_scatter_and_gather_go_over_the_rails(builtin, name, kind):
    """Across hosts only rank g to rank g (one NIC each, all busy); every result checked on real
    numbers; with many chunks the root's bandwidth limit is nearly reached."""
    topo = builtin(name)
    root = 3
    schedule = synthesize(topo, kind, "hierarchical", root=root, chunks=4)
    assert schedule.num_steps == 5  # k + 1: the second stage runs one chunk behind
    local = {r: topo.host_groups[topo.hosts[r]].index(r) for r in range(topo.num_ranks)}
    for step in schedule.steps:
        for t in step:
            if topo.hosts[t.src] != topo.hosts[t.dst]:
                assert local[t.src] == local[t.dst]
            else:
                assert root in (t.src, t.dst)
    assert numeric_replay(schedule)
    tuned = synthesize(topo, kind, "hierarchical", root=root, options={"size": 1 << 30})
    direct = synthesize(topo, kind, "direct", root=root)
    bound = bound_model(topo, kind, root).time_us(1 << 30)
    t_tuned, t_direct = (Simulator(s, topo).run([1 << 30], "sync", timeline=False)[0].time_us for s in (tuned, direct))
    assert tuned.collective.chunks_per_piece > 4 and t_tuned < t_direct and t_tuned <= 1.1 * bound
    small = synthesize(topo, kind, "hierarchical", root=root, options={"size": 1 << 10})
    assert small.collective.chunks_per_piece == 1 and small.num_steps == 2


def test_hierarchical_size_option_checked(builtin):
    topo = builtin("dgx-a100x2")
    with pytest.raises(ValueError, match="positive integer"):
        synthesize(topo, "scatter", "hierarchical", options={"size": 0})
    fixed = synthesize(topo, "scatter", "hierarchical", chunks=3, options={"size": 1 << 30})
    assert fixed.collective.chunks_per_piece == 3  # the caller's chunk count is kept


@pytest.mark.parametrize(("name", "versus_direct"), [("dgx-a100x2", 0.5), ("ndv2x2", 1.01)])
def test_hierarchical_alltoall_crosses_hosts_only_along_rails(builtin, name, versus_direct):
    """Rails: 4.5x faster than direct on 2 x DGX A100 (two rail switches); on ndv2x2 (one NIC per
    box) both are at the bound."""
    topo = builtin(name)
    schedule = synthesize(topo, "alltoall", "hierarchical", chunks=3)
    assert schedule.num_steps == 4
    assert _rail_moves(schedule, topo)[1]  # between hosts only from a rank to the same local rank
    assert numeric_replay(schedule)
    tuned = synthesize(topo, "alltoall", "hierarchical", options={"size": 1 << 30})
    direct = synthesize(topo, "alltoall", "direct")
    t_tuned, t_direct = (Simulator(s, topo).run([1 << 30], "sync", timeline=False)[0].time_us for s in (tuned, direct))
    assert t_tuned <= versus_direct * t_direct and t_tuned <= 1.05 * bound_model(topo, "alltoall").time_us(1 << 30)


def _rail_moves(schedule, topo):
    """(src, dst) of every transfer between hosts, and whether all of them stay on one rail."""
    local = {r: topo.host_groups[topo.hosts[r]].index(r) for r in range(topo.num_ranks)}
    across = [(t.src, t.dst) for step in schedule.steps for t in step if topo.hosts[t.src] != topo.hosts[t.dst]]
    return across, all(local[a] == local[b] for a, b in across), local


@pytest.mark.parametrize(("fanout", "steps"), [(1, 5), (2, 4), (3, 3)])
def test_hierarchical_broadcast_trees_along_the_rails(fanout, steps):
    """2 racks x 2 servers x 4 GPUs, root 1: one chunk per carrier (the 3 other GPUs of the root's
    server): hand-out, then a tree of depth 3 (chain), 2 (binary) or 1 (direct) along each rail,
    then one step sharing inside every server. Only the carriers' rails cross servers, each
    carries its own chunk once per host it reaches, and the root's links carry one copy."""
    from synth.algorithms import hierarchical
    from synth.routing import router_for

    topo = gen.fattree(racks=2, servers=2, gpus=4)
    root, hosts = 1, 4
    collective = Collective(Kind.BROADCAST, topo.num_ranks, 3, root)
    schedule = hierarchical.broadcast(topo, collective, router_for(topo), hierarchical.TreeShape(fanout))
    assert verify(schedule, topo).ok and numeric_replay(schedule)
    assert schedule.num_steps == steps
    across, on_rails, local = _rail_moves(schedule, topo)
    assert on_rails
    assert sorted({local[a] for a, _ in across}) == [0, 2, 3]  # not the root's own rail (local index 1)
    assert len(across) == 3 * (hosts - 1)  # every other host receives each chunk once, over its rail
    assert sum(1 for step in schedule.steps for t in step if t.src == root) == 3  # the hand-out only
    fanouts = Counter(a for a, _ in across)
    assert max(fanouts.values()) == min(fanout, hosts - 1)


def test_hierarchical_broadcast_root_may_carry_and_reduce_is_the_dual(builtin):
    from synth.algorithms import hierarchical
    from synth.routing import router_for

    topo = gen.fattree(racks=2, servers=2, gpus=4)
    collective = Collective(Kind.BROADCAST, topo.num_ranks, 4, 0)
    schedule = hierarchical.broadcast(topo, collective, router_for(topo), hierarchical.TreeShape(1, root_carries=True))
    across, on_rails, local = _rail_moves(schedule, topo)
    assert on_rails and sorted({local[a] for a, _ in across}) == [0, 1, 2, 3]
    reduce = synthesize(topo, "reduce", "hierarchical", root=5, chunks=6)
    assert reduce.collective.kind is Kind.REDUCE and numeric_replay(reduce)
    assert _rail_moves(reduce, topo)[1]
    assert synthesize(topo, "broadcast", "hierarchical").collective.chunks_per_piece == 3  # one per carrier


@pytest.mark.parametrize("name", ["dgx-a100x2", "dgx-a100x4", "fattree-4rack"])
def test_hierarchical_broadcast_tuned_for_the_size(builtin, name):
    """Tuned for 1 MiB it beats NCCL's tree and the binomial tree (one NIC at a time) several times
    over on these NVSwitch clusters; tuned for 1 GiB it pipelines many waves and beats them by far
    more; the reduce is tuned the same way."""
    topo = builtin(name)

    def at(schedule, size):
        return Simulator(schedule, topo).run([size], "sync", timeline=False)[0].time_us

    for size, versus_binomial in ((1 << 20, 0.55), (1 << 30, 0.15)):
        tuned = synthesize(topo, "broadcast", "hierarchical", options={"size": size})
        binomial = synthesize(topo, "broadcast", "binomial")
        assert at(tuned, size) <= versus_binomial * at(binomial, size), size
        assert at(tuned, size) <= at(synthesize(topo, "broadcast", "hierarchical"), size)
        if "allgather" in tuned.params:  # scatter + level allgather: k chunks of every rank's piece
            assert tuned.collective.chunks_per_piece % topo.num_ranks == 0
        else:
            carriers = 8 if tuned.params["root_carries"] else 7
            assert tuned.collective.chunks_per_piece % carriers == 0  # whole waves, one chunk per carrier
    big = synthesize(topo, "reduce", "hierarchical", options={"size": 1 << 30})
    small = synthesize(topo, "reduce", "hierarchical", options={"size": 1 << 10})
    assert big.collective.chunks_per_piece >= 4 * small.collective.chunks_per_piece
