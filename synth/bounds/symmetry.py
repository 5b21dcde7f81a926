"""The symmetry quotient of a sparse LP, by colour refinement (Grohe, Kersting, Mladenov, Selman,
"Dimension reduction via colour refinement", ESA 2014).

The time-expanded LPs of `synth.bounds.layered` on machines of many identical GPUs have hundreds of
thousands of columns, most of them interchangeable: the same flow on the same kind of link of
another GPU of the same host. An *equitable partition* of the rows and columns captures that
without finding any automorphism: rows in one class have equal bounds, columns in one class have
equal cost and bounds, and for every row class R and column class C the sum Σ_{c ∈ C} A[r, c] is
the same for every r ∈ R (and Σ_{r ∈ R} A[r, c] the same for every c ∈ C). Averaging any feasible
point over the column classes then gives a feasible point of the same cost (the averaging matrices
X, Y of the two partitions satisfy A·X = Y·A, a *fractional automorphism*, and they keep each
class's bounds), so the LP has an optimum constant on every column class, and the LP in one
variable per class (`quotient`) has the same optimum.

`equitable_partition` is colour refinement: a row's colour becomes (its colour, the multiset of
(column colour, coefficient) over its nonzeros), a column's likewise from its rows, until no class
splits. Comparing multisets rather than the sums per colour is a little stricter than equitability
needs (two rows with coefficients 1 + 1 and 2 on one class stay apart) but exact in floating point,
and a partition stable for multisets is equitable. Multisets are compared by hashing: each
(colour, coefficient) pair gets a pseudo-random 64-bit code (splitmix64 of the pair and a fixed
seed, so the partition is deterministic), summed per row or column with wrap-around. Two different
multisets collide with probability about 2⁻⁶³; `synth.bounds.lp` still certifies the bound on the
full LP, so even a wrong partition cannot make the reported bound invalid, only looser.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the refinement's seed (any fixed value: it only names the colours)
SEED = 0x5EED_C0DE_1234_ABCD

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _mix(key: np.ndarray, salt: int) -> np.ndarray:
    """splitmix64 of ``key`` (uint64) with ``salt``: a well-spread 64-bit code per distinct key,
    computed elementwise (no table), with uint64 wrap-around."""
    z = key * _GOLDEN + np.uint64(salt & 0xFFFF_FFFF_FFFF_FFFF)
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def _classes(*columns: np.ndarray) -> np.ndarray:
    """Class ids (0..k−1) of the tuples (columns[0][i], columns[1][i], …): equal tuples, equal
    class. Each column is numbered on its own (few distinct values, a fast 1-d unique) and the
    numbers combined exactly; ``+ 0.0`` maps −0.0 to 0.0 so they share a class."""
    combined = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        distinct, ids = np.unique(np.asarray(column, dtype=np.float64) + 0.0, return_inverse=True)
        combined = combined * len(distinct) + ids.reshape(-1)
        combined = np.unique(combined, return_inverse=True)[1].reshape(-1)  # keep the ids small
    return combined


class _Side:
    """One side of the refinement (the rows, or the columns): its entries grouped by their own
    index once, each with a fixed code for its coefficient, so every round is a gather, a hash
    and a segmented sum."""

    def __init__(self, count: int, own: np.ndarray, other: np.ndarray, value_code: np.ndarray) -> None:
        order = np.argsort(own, kind="stable")
        self.count = count
        self.other = other[order]
        self.value_code = value_code[order]
        sizes = np.bincount(own, minlength=count)
        self.nonempty = np.flatnonzero(sizes)
        starts = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        self.starts = starts[self.nonempty]

    def refine(self, colour: np.ndarray, other_colour: np.ndarray, seed: int) -> np.ndarray:
        """The new colours (64-bit signatures): equal iff equal old colour and equal multiset of
        (other colour, coefficient), up to hash collisions. Signatures are used as colours as they
        are, without renumbering them, which would cost a sort per round."""
        code = _mix(other_colour[self.other] + self.value_code, seed)
        summed = np.zeros(self.count, dtype=np.uint64)
        if len(code):
            summed[self.nonempty] = np.add.reduceat(code, self.starts)
        return _mix(colour, seed ^ 1) + summed


def equitable_partition(
    num_rows: int,
    num_cols: int,
    rows: np.ndarray,
    cols: np.ndarray,
    vals: np.ndarray,
    row_colour: np.ndarray,
    col_colour: np.ndarray,
    seed: int = SEED,
) -> tuple[np.ndarray, np.ndarray]:
    """The coarsest partition finer than the initial colours (class ids per row and per column) that
    is stable under colour refinement (module docstring): (row class, column class), ids 0..k−1."""
    _, value_id = np.unique(np.asarray(vals, dtype=np.float64) + 0.0, return_inverse=True)
    value_code = _mix(value_id.reshape(-1).astype(np.uint64), seed ^ 3)
    row_side = _Side(num_rows, rows, cols, value_code)
    col_side = _Side(num_cols, cols, rows, value_code)
    row_colour = np.asarray(row_colour).astype(np.uint64)
    col_colour = np.asarray(col_colour).astype(np.uint64)
    counts = (_distinct(row_colour), _distinct(col_colour))
    while True:
        row_colour = row_side.refine(row_colour, col_colour, seed)
        col_colour = col_side.refine(col_colour, row_colour, seed ^ 2)
        new_counts = (_distinct(row_colour), _distinct(col_colour))
        if new_counts == counts:  # neither side split: the partition is stable
            return _dense(row_colour), _dense(col_colour)
        counts = new_counts


def _distinct(colour: np.ndarray) -> int:
    """How many classes ``colour`` has (a sort, without the inverse that numbering needs)."""
    return len(np.unique(colour))


def _dense(colour: np.ndarray) -> np.ndarray:
    """Colours renumbered 0..k−1 (in sorted order of the signature, so deterministic)."""
    return np.unique(colour, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _count(colour: np.ndarray) -> int:
    """Classes in ``colour`` (ids 0..k−1)."""
    return int(colour.max()) + 1 if len(colour) else 0


@dataclass(frozen=True)
class Quotient:
    """The LP in one variable per column class and one row per row class. ``row_class`` and
    ``col_class`` map the full LP's rows and columns to them; ``row_size``: members per row class
    (the duals lift as y_r = y_R / |R|)."""

    row_class: np.ndarray
    col_class: np.ndarray
    row_size: np.ndarray
    cost: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    rlo: np.ndarray
    rhi: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray

    @property
    def num_rows(self) -> int:
        return len(self.rlo)

    @property
    def num_cols(self) -> int:
        return len(self.cost)

    def lift_duals(self, y: np.ndarray) -> np.ndarray:
        """Row multipliers of the full LP from the quotient's: y_r = y_R / |R|. With them the full
        LP's Lagrangian bound equals the quotient's: Σ_{r ∈ R} y_r·bound_r = y_R·bound_R, and for a
        column c of class C, (Aᵀy)_c = Σ_R y_R·(Σ_{r ∈ R} A[r, c])/|R| = Σ_R y_R·a_RC/|C| (the
        column sums of an equitable partition), so its reduced cost is d_C/|C| and the |C|
        columns of C together contribute d_C times the class's bound."""
        return y[self.row_class] / self.row_size[self.row_class]


def quotient(cost, lo, hi, rlo, rhi, rows, cols, vals, seed: int = SEED) -> Quotient:
    """The quotient LP of the equitable partition seeded by (cost, lo, hi) per column and (rlo, rhi)
    per row: cost_C = Σ_{c ∈ C} cost_c, the class's bounds, a_RC = Σ_{r ∈ R, c ∈ C} A[r, c] / |R|
    (the sum over C of any one row of R). Entries that cancel to (nearly) nothing are dropped so
    the solver does not see round-off as coefficients."""
    num_rows, num_cols = len(rlo), len(cost)
    row_class, col_class = equitable_partition(
        num_rows, num_cols, rows, cols, vals, _classes(rlo, rhi), _classes(cost, lo, hi), seed
    )
    num_r = _count(row_class)
    num_c = _count(col_class)
    row_size = np.bincount(row_class, minlength=num_r).astype(np.float64)
    row_rep = np.zeros(num_r, dtype=np.int64)
    row_rep[row_class] = np.arange(num_rows)
    col_rep = np.zeros(num_c, dtype=np.int64)
    col_rep[col_class] = np.arange(num_cols)
    key = row_class[rows] * np.int64(max(num_c, 1)) + col_class[cols]
    pairs, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    total = np.bincount(inverse, weights=vals, minlength=len(pairs))
    magnitude = np.bincount(inverse, weights=np.abs(vals), minlength=len(pairs))
    keep = np.abs(total) > 1e-12 * magnitude
    q_rows = pairs[keep] // max(num_c, 1)
    q_cols = pairs[keep] % max(num_c, 1)
    return Quotient(
        row_class=row_class,
        col_class=col_class,
        row_size=row_size,
        cost=np.bincount(col_class, weights=cost, minlength=num_c),
        lo=lo[col_rep].copy(),
        hi=hi[col_rep].copy(),
        rlo=rlo[row_rep].copy(),
        rhi=rhi[row_rep].copy(),
        rows=q_rows,
        cols=q_cols,
        vals=total[keep] / row_size[q_rows],
    )
