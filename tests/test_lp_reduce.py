"""`SparseLP.solve(reduce=True)`: the LP solved on its symmetry quotient (colour refinement,
`synth.bounds.symmetry`) has the full LP's optimum, and its value is still a lower bound
certified on the full LP.

- random LPs with planted symmetry (a random block repeated with its rows and columns shuffled,
  plus rows coupling the copies): the partition is equitable, the quotient is smaller, and the
  optima agree within 1e-7 relative, the certificate never above the optimum;
- a partition that is deliberately wrong (not equitable) still gives a valid, if loose, bound;
- the time-expanded LP of `layered.layered_bound` on a 3 hosts × 4 GPUs PCIe machine and an
  NVSwitch box: β_T equal with and without the reduction;
- the same with a cut (the crossing-steps LP, some columns fixed to 0);
- an LP without symmetry: the reduction changes nothing, to the bit; degenerate LPs (no columns,
  no rows, empty rows).
"""

from __future__ import annotations

import numpy as np
import pytest

from synth import generators as gen
from synth.bounds import layered, symmetry
from synth.bounds.latency import latency_facts
from synth.bounds.lp import LPResult, SparseLP
from synth.collective import Collective, Kind

REL = 1e-7


def planted_lp(seed: int, copies: int, cols: int = 6, rows: int = 5) -> SparseLP:
    """``copies`` copies of one random block (columns in [0, hi], rows with a finite side or two
    around a point every copy shares, so the LP is feasible), then coupling rows over the copies'
    columns, everything in a shuffled order so the symmetry is not visible in the layout."""
    rng = np.random.default_rng(seed)
    block = np.where(rng.random((rows, cols)) < 0.5, rng.choice([-2.0, -1.0, 0.5, 1.0, 3.0], (rows, cols)), 0.0)
    cost = rng.choice([-1.0, 0.5, 1.0, 2.0], cols)
    hi = rng.choice([1.0, 2.0, 4.0], cols)
    point = hi * rng.random(cols)
    at_point = block @ point
    slack_lo = np.where(rng.random(rows) < 0.3, np.inf, rng.random(rows))
    slack_hi = np.where(np.isinf(slack_lo), rng.random(rows), np.where(rng.random(rows) < 0.5, np.inf, rng.random(rows)))
    couple = rng.random(cols) < 0.5  # columns summed over the copies by the coupling rows
    col_perm = rng.permutation(copies * cols)  # the LP's column of (copy, j) is col_perm[copy·cols + j]
    row_perm = rng.permutation(copies * rows + 2)
    lp = SparseLP()
    ordered = np.empty(copies * cols, dtype=np.int64)
    for position in np.argsort(col_perm):  # add columns in LP order
        j = position % cols
        ordered[position] = lp.add_cols(1, cost=float(cost[j]), hi=float(hi[j]))[0]
    rlo = np.empty(copies * rows + 2)
    rhi = np.empty(copies * rows + 2)
    for copy in range(copies):
        for i in range(rows):
            rlo[row_perm[copy * rows + i]] = at_point[i] - slack_lo[i]
            rhi[row_perm[copy * rows + i]] = at_point[i] + slack_hi[i]
    total = copies * float(point[couple].sum())
    rlo[row_perm[-2]], rhi[row_perm[-2]] = total - 0.5, np.inf
    rlo[row_perm[-1]], rhi[row_perm[-1]] = -np.inf, total + 0.25
    lp.add_rows(len(rlo), rlo, rhi)
    for copy in range(copies):
        i, j = np.nonzero(block)
        lp.add_entries(row_perm[copy * rows + i], ordered[copy * cols + j], block[i, j])
        coupled = ordered[copy * cols + np.flatnonzero(couple)]
        lp.add_entries(np.full(len(coupled), row_perm[-2]), coupled, 1.0)
        lp.add_entries(np.full(len(coupled), row_perm[-1]), coupled, 1.0)
    return lp


def assert_same_optimum(full: LPResult, reduced: LPResult) -> None:
    scale = max(1.0, abs(full.optimum))
    assert reduced.optimum == pytest.approx(full.optimum, rel=REL, abs=REL * scale)
    assert reduced.value == pytest.approx(full.optimum, rel=REL, abs=REL * scale)
    assert reduced.value <= reduced.optimum + REL * scale
    assert reduced.value <= full.optimum + REL * scale  # certified: never above the true optimum
    assert reduced.variables == full.variables


@pytest.mark.parametrize("seed", range(12))
def test_planted_symmetry_same_optimum(seed):
    copies = 2 + seed % 4
    lp = planted_lp(seed, copies)
    full = lp.solve()
    reduced = lp.solve(reduce=True)
    assert full is not None and reduced is not None
    assert full.reduced_variables is None
    assert reduced.reduced_variables is not None and reduced.reduced_variables <= lp.num_cols // copies
    assert_same_optimum(full, reduced)


@pytest.mark.parametrize("seed", range(6))
def test_partition_is_equitable(seed):
    """For every row class R and column class C, Σ_{c ∈ C} A[r, c] is the same for every r ∈ R and
    Σ_{r ∈ R} A[r, c] the same for every c ∈ C; classes keep bounds and costs."""
    lp = planted_lp(seed, 3 + seed % 3)
    cost, lo, hi, rlo, rhi, rows, cols, vals = lp._arrays()
    q = symmetry.quotient(cost, lo, hi, rlo, rhi, rows, cols, vals)
    dense = np.zeros((lp.num_rows, lp.num_cols))
    np.add.at(dense, (rows, cols), vals)
    row_sums = np.stack([dense[:, q.col_class == c].sum(axis=1) for c in range(q.num_cols)], axis=1)
    col_sums = np.stack([dense[q.row_class == r].sum(axis=0) for r in range(q.num_rows)], axis=0)
    for r in range(q.num_rows):
        members = q.row_class == r
        assert np.allclose(row_sums[members], row_sums[members][0], rtol=0, atol=1e-12)
        assert len(set(zip(rlo[members], rhi[members], strict=True))) == 1
    for c in range(q.num_cols):
        members = q.col_class == c
        assert np.allclose(col_sums[:, members], col_sums[:, members][:, :1], rtol=0, atol=1e-12)
        assert len(set(zip(cost[members], lo[members], hi[members], strict=True))) == 1
    assert q.num_cols < lp.num_cols


def test_refinement_is_deterministic():
    lp = planted_lp(3, 4)
    arrays = lp._arrays()
    first, second = symmetry.quotient(*arrays), symmetry.quotient(*arrays)
    assert np.array_equal(first.row_class, second.row_class)
    assert np.array_equal(first.col_class, second.col_class)


@pytest.mark.parametrize("seed", range(4))
def test_wrong_partition_still_a_valid_bound(seed, monkeypatch):
    """Merging columns by their initial colour only (no refinement: not equitable) may give a
    wrong quotient optimum, but the value is the Lagrangian bound of the lifted duals on the full
    LP, so it stays at most the full optimum."""
    lp = planted_lp(seed, 3)
    full = lp.solve()

    def initial_colours_only(num_rows, num_cols, rows, cols, vals, row_colour, col_colour, seed=0):
        return row_colour, col_colour

    monkeypatch.setattr(symmetry, "equitable_partition", initial_colours_only)
    coarse = lp.solve(reduce=True)
    assert full is not None and coarse is not None
    assert coarse.value <= full.optimum + REL * max(1.0, abs(full.optimum))


def test_no_symmetry_changes_nothing():
    """Every column its own class (distinct costs): the LP is solved as built, to the bit."""
    rng = np.random.default_rng(7)
    lp = SparseLP()
    for j in range(8):
        lp.add_cols(1, cost=1.0 + j / 8, hi=1.0 + j)
    lp.add_rows(5, rng.random(5), np.inf)
    r, c = np.nonzero(rng.random((5, 8)) < 0.6)
    lp.add_entries(r, c, rng.random(len(r)) + 0.1)
    arrays = lp._arrays()
    assert symmetry.quotient(*arrays).num_cols == lp.num_cols
    full = lp.solve()
    assert full is not None
    assert lp.solve(reduce=True) == full


def _layered(topo, collective: Collective, steps: int, reduce: bool) -> layered.LayeredBound:
    facts = latency_facts(topo)
    lay = layered.layout(topo, facts.direct, facts.hops)
    result = layered.layered_bound(topo, layered.flow_spec(collective), lay, steps, {"solver": "ipm"}, reduce=reduce)
    assert result is not None
    return result


@pytest.mark.parametrize(
    ("machine", "collective", "steps"),
    [
        ("pcie-3x4", Collective(Kind.BROADCAST, 12, 1, 0), 3),
        ("pcie-3x4", Collective(Kind.BROADCAST, 12, 1, 5), 4),
        ("pcie-3x4", Collective(Kind.ALLGATHER, 12, 1), 3),
        ("pcie-3x4", Collective(Kind.REDUCE_SCATTER, 12, 1), 4),
        ("nvswitch-8", Collective(Kind.BROADCAST, 8, 1, 0), 2),
        ("nvswitch-8", Collective(Kind.ALLGATHER, 8, 1), 3),
        ("nvswitch-8", Collective(Kind.ALLTOALL, 8, 1), 2),
    ],
)
def test_layered_bound_same_with_reduction(machine, collective, steps):
    topo = {
        "pcie-3x4": lambda: gen.multihost(hosts=3, gpus=4, fabric="pcie", nic="host"),
        "nvswitch-8": lambda: gen.nvswitch(8),
    }[machine]()
    full = _layered(topo, collective, steps, reduce=False)
    reduced = _layered(topo, collective, steps, reduce=True)
    assert reduced.us_per_byte == pytest.approx(full.us_per_byte, rel=REL)
    assert reduced.us_per_byte <= reduced.optimum * (1 + 1e-12)
    assert reduced.variables == full.variables
    assert reduced.reduced_variables is not None and reduced.reduced_variables < full.variables / 4


@pytest.mark.parametrize("crossing", [frozenset({0}), frozenset({1, 2})])
def test_layered_bound_with_a_cut_same_with_reduction(crossing):
    """The crossing-steps LP (links into host 0 cut; columns fixed to 0 in the other layers): the
    fixed columns get a colour of their own and the optimum is unchanged."""
    topo = gen.multihost(hosts=3, gpus=4, fabric="pcie", nic="host")
    inside = {i for i, node in enumerate(topo.nodes) if node.name.startswith("h0-")}
    cut = np.array([link.dst in inside and link.src not in inside for link in topo.links])
    facts = latency_facts(topo)
    lay = layered.layout(topo, facts.direct, facts.hops)
    spec = layered.flow_spec(Collective(Kind.BROADCAST, 12, 1, 5))
    results = [
        layered.layered_bound(topo, spec, lay, 3, {"solver": "ipm"}, cut, crossing, reduce=reduce) for reduce in (False, True)
    ]
    assert results[0] is not None and results[1] is not None
    assert results[1].us_per_byte == pytest.approx(results[0].us_per_byte, rel=REL)
    assert results[1].reduced_variables is not None


def test_degenerate_lps():
    """No columns, no rows, rows without entries: the reduction falls back or solves the same."""
    empty = SparseLP()
    assert empty.solve(reduce=True) == empty.solve()
    no_rows = SparseLP()
    no_rows.add_cols(4, cost=-1.0, hi=2.0)
    assert no_rows.solve(reduce=True).value == pytest.approx(-8.0)
    blank_rows = SparseLP()
    blank_rows.add_cols(3, cost=1.0, hi=1.0)
    blank_rows.add_rows(5, 0.0, 0.0)
    assert blank_rows.solve(reduce=True).value == pytest.approx(0.0)
