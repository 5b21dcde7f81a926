from synth import generators as gen
from synth import routing
from synth.routing import Router, ring_order


def test_dgx1_ring_follows_double_nvlinks(dgx1):
    order, direct = ring_order(dgx1)
    assert direct and order == [0, 1, 3, 2, 6, 7, 5, 4]


def test_routes_through_switches(builtin):
    topo = builtin("dgx-a100x2")
    router = Router(topo)
    assert router.via_names(0, 1) == ("n0-nvswitch",)  # NVSwitch (300 GB/s) beats the NIC path
    assert router.via_names(0, 8) == ("n0-nic0", "rail0", "n1-nic0")  # same rail
    assert router.route(0, 9) is None  # other rail: no switch-only path
    assert router.relay_path(0, 9) in {(0, 1, 9), (0, 8, 9)}


def test_widest_then_fewest_hops(builtin):
    topo = builtin("pcie-2socket")
    router = Router(topo)
    near = router.route(0, 1)
    far = router.route(0, 4)
    assert near.bottleneck == 24.0 and near.hops == 2
    assert far.bottleneck == 10.0 and far.hops == 5  # gpu -> plx -> cpu0 -> cpu1 -> plx -> gpu


def test_equal_cost_paths_spread_over_spines(builtin):
    topo = builtin("fattree-4rack")
    router = Router(topo)
    spines = {router.via_names(a, 64)[2] for a in range(0, 32, 8)}
    assert spines == {"spine0", "spine1"}


def test_targeted_search_matches_full_table(monkeypatch):
    topo = gen.fattree(racks=2, servers=2, gpus=4)
    monkeypatch.setattr(routing, "PAIR_SEARCHES", topo.num_ranks)  # every lookup a stopped search
    full, targeted = Router(topo), Router(topo)
    for a in range(topo.num_ranks):
        table = full.routes_from(a)
        for b in range(topo.num_ranks):
            if a != b:
                assert targeted.route(a, b) == table.get(b)


def test_many_lookups_from_one_source_build_its_table(builtin):
    """Past PAIR_SEARCHES destinations of one source, route() answers from that source's table
    (one search instead of one per pair), with the same routes as the stopped searches."""
    topo = builtin("fattree-4rack")
    router, reference = Router(topo), Router(topo)
    searches = []
    search = router._search
    router._search = lambda a, target=None: searches.append(target) or search(a, target)
    answers = [router.route(0, b) for b in range(1, topo.num_ranks)]
    assert answers == [reference.routes_from(0).get(b) for b in range(1, topo.num_ranks)]
    assert searches == [*range(1, routing.PAIR_SEARCHES + 1), None]  # then one search for the table


def test_ring_orders_of_families():
    assert ring_order(gen.hypercube(4))[1]
    assert ring_order(gen.torus(4, 6))[1]
    order, direct = ring_order(gen.mesh(3, 3))  # odd grid: no Hamiltonian cycle exists
    assert not direct and sorted(order) == list(range(9))
    assert ring_order(gen.mesh(2, 3))[1]
