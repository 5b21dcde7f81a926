"""A small sparse LP for the bounds, solved with HiGHS, whose optimum is certified from its duals.

The bounds only ever report a value that is a lower bound by construction. A solver's float
optimum may lie above the true optimum by its tolerances, so `SparseLP.solve` returns the
*Lagrangian bound* of the dual values the solver found: for a minimisation over
``lo ≤ x ≤ hi`` (finite ``hi``) with rows ``rlo ≤ A·x ≤ rhi`` and any row multipliers y,

    c·x = y·(A·x) + (c − Aᵀy)·x ≥ Σ_i y_i·(rlo_i if y_i > 0 else rhi_i) + Σ_j min over [lo_j, hi_j] of d_j·x_j,

with d = c − Aᵀy (a multiplier whose side has no finite bound is set to 0). It holds for every
feasible x, whatever y is, so it is a lower bound on the optimum however inexact y is, and it
equals the optimum up to the solver's tolerances.

``solve(reduce=True)`` solves the LP's symmetry quotient instead (`synth.bounds.symmetry`, after
Grohe, Kersting, Mladenov and Selman, "Dimension reduction via colour refinement", 2014): the same
optimum in far fewer columns when many columns are interchangeable, and the reported value is still
the Lagrangian bound above, on the full LP, of the quotient's duals lifted to it.

The solver is made by `synth.solver_output.new_highs` (no banner, no output) and run under
`synth.solver_output.native_stdout_to_stderr`, so ``--json`` output stays parseable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from synth.bounds.symmetry import quotient
from synth.solver_output import native_stdout_to_stderr, seeded_highs_with_columns


@dataclass
class SparseLP:
    """Minimise ``cost·x`` subject to ``lo ≤ x ≤ hi`` and ``rlo ≤ A·x ≤ rhi``, built column block by
    column block and row by row (coordinates), then solved once."""

    num_cols: int = 0
    num_rows: int = 0
    cost: list[np.ndarray] = field(default_factory=list)
    lo: list[np.ndarray] = field(default_factory=list)
    hi: list[np.ndarray] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)
    cols: list[np.ndarray] = field(default_factory=list)
    vals: list[np.ndarray] = field(default_factory=list)
    rlo: list[np.ndarray] = field(default_factory=list)
    rhi: list[np.ndarray] = field(default_factory=list)
    #: HiGHS options for the solve (e.g. ``{"solver": "ipm"}``)
    options: dict = field(default_factory=dict)
    fixed: list[np.ndarray] = field(default_factory=list)

    def add_cols(self, count: int, *, cost: float = 0.0, hi: float | np.ndarray) -> np.ndarray:
        """``count`` new columns in [0, hi]; returns their indices."""
        first = self.num_cols
        self.num_cols += count
        self.cost.append(np.full(count, cost, dtype=np.float64))
        self.lo.append(np.zeros(count))
        self.hi.append(np.broadcast_to(np.asarray(hi, dtype=np.float64), (count,)).copy())
        return np.arange(first, first + count, dtype=np.int64)

    def fix_zero(self, cols: np.ndarray) -> None:
        """Force these columns to 0."""
        self.fixed.append(np.asarray(cols, dtype=np.int64).ravel())

    def add_rows(self, count: int, lo: float | np.ndarray, hi: float | np.ndarray) -> np.ndarray:
        """``count`` new rows with bounds (±inf for none); returns their indices."""
        first = self.num_rows
        self.num_rows += count
        self.rlo.append(np.broadcast_to(np.asarray(lo, dtype=np.float64), (count,)).copy())
        self.rhi.append(np.broadcast_to(np.asarray(hi, dtype=np.float64), (count,)).copy())
        return np.arange(first, first + count, dtype=np.int64)

    def add_entries(self, rows, cols, vals) -> None:
        rows = np.asarray(rows, dtype=np.int64).ravel()
        cols = np.asarray(cols, dtype=np.int64).ravel()
        vals = np.broadcast_to(np.asarray(vals, dtype=np.float64), rows.shape).ravel()
        self.rows.append(rows)
        self.cols.append(cols)
        self.vals.append(vals.copy())

    def _arrays(self):
        cost = np.concatenate(self.cost) if self.cost else np.zeros(0)
        lo = np.concatenate(self.lo) if self.lo else np.zeros(0)
        hi = np.concatenate(self.hi) if self.hi else np.zeros(0)
        for cols in self.fixed:
            hi[cols] = 0.0
        rlo = np.concatenate(self.rlo) if self.rlo else np.zeros(0)
        rhi = np.concatenate(self.rhi) if self.rhi else np.zeros(0)
        rows = np.concatenate(self.rows) if self.rows else np.zeros(0, dtype=np.int64)
        cols = np.concatenate(self.cols) if self.cols else np.zeros(0, dtype=np.int64)
        vals = np.concatenate(self.vals) if self.vals else np.zeros(0)
        return cost, lo, hi, rlo, rhi, rows, cols, vals

    def solve(self, *, reduce: bool = False) -> LPResult | None:
        """Solve with HiGHS; None unless it proves an optimum (or finds the LP infeasible, which
        is reported as an infinite bound).

        With ``reduce``, solve the LP's symmetry quotient instead (`synth.bounds.symmetry`: one
        variable per class of an equitable partition, same optimum), lift its duals to the full
        LP and certify them there, so the value is a lower bound on the full LP's optimum whatever
        the partition; if the quotient gives no optimum with duals, solve the full LP."""
        arrays = self._arrays()
        if reduce:
            reduced = _solve_quotient(*arrays, self.options)
            if reduced is not None:
                return reduced
        cost, lo, hi, rlo, rhi, rows, cols, vals = arrays
        outcome = _run_highs(cost, lo, hi, rlo, rhi, rows, cols, vals, self.options)
        if outcome is None:
            return None
        if outcome is _INFEASIBLE:
            return LPResult(math.inf, math.inf, self.num_cols)
        optimum, y = outcome
        certified = _lagrangian_bound(cost, lo, hi, rlo, rhi, rows, cols, vals, y)
        return LPResult(min(certified, optimum), optimum, self.num_cols)


#: `_run_highs`'s answer for an LP that HiGHS finds infeasible
_INFEASIBLE = (math.inf, np.zeros(0))


def _run_highs(cost, lo, hi, rlo, rhi, rows, cols, vals, options: dict) -> tuple[float, np.ndarray] | None:
    """HiGHS's optimum and row duals for the LP in coordinate form (columns sorted for its
    column-wise matrix); `_INFEASIBLE` if it proves the LP infeasible, None if it proves nothing
    or gives no valid duals."""
    import highspy

    num_cols, num_rows = len(cost), len(rlo)
    order = np.lexsort((rows, cols))
    rows, cols, vals = rows[order], cols[order], vals[order]
    starts = np.zeros(num_cols + 1, dtype=np.int64)
    np.cumsum(np.bincount(cols, minlength=num_cols), out=starts[1:])
    lp = highspy.HighsLp()
    lp.num_col_ = num_cols
    lp.num_row_ = num_rows
    lp.col_cost_ = cost
    lp.col_lower_ = lo
    lp.col_upper_ = np.where(np.isinf(hi), highspy.kHighsInf, hi)
    lp.row_lower_ = np.where(np.isinf(rlo), -highspy.kHighsInf, rlo)
    lp.row_upper_ = np.where(np.isinf(rhi), highspy.kHighsInf, rhi)
    h = seeded_highs_with_columns(lp, starts, rows, vals)
    for option, value in options.items():
        h.setOptionValue(option, value)
    h.passModel(lp)
    with native_stdout_to_stderr():
        h.run()
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        return _INFEASIBLE
    if status != highspy.HighsModelStatus.kOptimal:
        return None
    solution = h.getSolution()
    if not solution.dual_valid:
        return None
    return float(h.getInfo().objective_function_value), np.array(solution.row_dual, dtype=np.float64)


def _solve_quotient(cost, lo, hi, rlo, rhi, rows, cols, vals, options: dict) -> LPResult | None:
    """Solve the symmetry quotient and certify its lifted duals on the full LP (`SparseLP.solve`
    with ``reduce``); None if the quotient gives no optimum with duals. An infeasible quotient is
    None too: the full solve then decides, so an infinite bound never rests on the partition.
    None also when no two columns are alike: the quotient would be the LP itself, reordered, and
    solving the LP as built keeps the answer exactly that of a solve without ``reduce``."""
    q = quotient(cost, lo, hi, rlo, rhi, rows, cols, vals)
    if q.num_cols == len(cost):
        return None
    outcome = _run_highs(q.cost, q.lo, q.hi, q.rlo, q.rhi, q.rows, q.cols, q.vals, options)
    if outcome is None or outcome is _INFEASIBLE:
        return None
    optimum, y = outcome
    certified = _lagrangian_bound(cost, lo, hi, rlo, rhi, rows, cols, vals, q.lift_duals(y))
    return LPResult(min(certified, optimum), optimum, len(cost), q.num_cols)


@dataclass(frozen=True)
class LPResult:
    """``value``: the certified lower bound on the optimum (inf if the LP is infeasible);
    ``optimum``: the solver's own figure; ``variables``: columns; ``reduced_variables``: the
    columns of the symmetry quotient that was solved instead (None when the full LP was)."""

    value: float
    optimum: float
    variables: int
    reduced_variables: int | None = None


def _lagrangian_bound(cost, lo, hi, rlo, rhi, rows, cols, vals, y) -> float:
    """Σ_i y_i·(bound of row i on y_i's side) + Σ_j min_{x_j ∈ [lo_j, hi_j]} (c − Aᵀy)_j·x_j."""
    y = y.copy()
    y[(y > 0) & np.isinf(rlo)] = 0.0
    y[(y < 0) & np.isinf(rhi)] = 0.0
    row_part = float(np.sum(np.where(y > 0, y * np.where(np.isinf(rlo), 0.0, rlo), 0.0)))
    row_part += float(np.sum(np.where(y < 0, y * np.where(np.isinf(rhi), 0.0, rhi), 0.0)))
    reduced = cost - np.bincount(cols, weights=vals * y[rows], minlength=len(cost))
    if np.any((reduced < 0) & np.isinf(hi)) or np.any((reduced > 0) & np.isinf(lo)):
        return -math.inf
    finite_hi = np.where(np.isinf(hi), 0.0, hi)
    finite_lo = np.where(np.isinf(lo), 0.0, lo)
    col_part = float(np.sum(np.where(reduced < 0, reduced * finite_hi, reduced * finite_lo)))
    return row_part + col_part
