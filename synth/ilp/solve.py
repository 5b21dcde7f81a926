"""A solver-independent mixed-integer model and the two open solvers that solve it.

`LinearModel` holds a MIP as arrays (columns with cost, bounds and integrality; rows as sparse
vectors with lower and upper bounds), so the formulation is built once with numpy and handed to
either solver unchanged:

- **HiGHS** (default) through highspy, in-process: the model is passed as arrays (no per-variable
  Python objects), progress comes from HiGHS's MIP callbacks (improving solution, logging), and a
  stop request (Ctrl-C, or a progress callback returning True) sets HiGHS's user interrupt, after
  which the best schedule found so far is kept.
- **CBC** (fallback, ``solver="cbc"``): the model is written as MPS by pulp and solved by the CBC
  binary pulp bundles; progress is read from CBC's log as it runs; a stop request sends CBC SIGINT,
  which makes it end its search and write its best solution.

Both run single-threaded with a fixed random seed, so a solve that finishes (proven optimal, or
infeasible) gives the same answer every time. A solve may be cut two ways, and both keep the best
solution found:

- by a **work limit** (``work_limit``): a count of the search's own work, in units of
  `work_weight` (one per `NONZEROS_PER_UNIT` nonzeros of the model, at least one) for each step
  of the search. HiGHS checks its limits at fixed points of its MIP search (every
  branch-and-bound node, every round of root cuts and root heuristics) and calls the MIP interrupt
  callback there: each call is a step, so the limit bounds the root node's work too, which a node
  limit does not. A step costs more on a larger model (its LPs are larger), hence the weight: the
  direct allreduce model on pcie-2socket (71,000 nonzeros) spends about 0.1 s per step in its
  tree (more in its root), the pipelined broadcast on the DGX-1 (2,700) about 0.01 s. CBC's steps are its branch-and-bound
  nodes (``-maxNodes``). The search runs in one thread with a fixed seed, so the same model is
  cut at the same point, and keeps the same solution, however fast or loaded the machine is;
- by a **time limit** (``time_limit``, wall seconds) or a stop request: a safety net, whose cut
  depends on timing.


Optimality is read from the solver's own solution status (pulp's ``LpStatus`` can read
"Optimal" after a time limit; CBC's ``sol_status`` and HiGHS's model status say what was proven).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from synth.solver_output import native_stdout_to_stderr, new_highs

SOLVERS = ("highs", "cbc")

#: Relative gap at which both solvers call a solution optimal (their default, 10⁻⁴).
MIP_REL_GAP = 1e-4

#: What a work limit counts, per solver (module docstring): steps of the search, each weighted by
#: the model's size (`work_weight`).
WORK_UNITS = {
    "highs": "MIP limit checks (about one per branch-and-bound node) times the model's weight",
    "cbc": "branch-and-bound nodes times the model's weight",
}

#: A step of the search counts one unit of work per this many nonzeros of the model (at least one).
NONZEROS_PER_UNIT = 5_000


def work_weight(model: LinearModel) -> int:
    """The work one step of the search on ``model`` counts: its nonzeros over `NONZEROS_PER_UNIT`,
    rounded up, at least 1. A fixed function of the model, so the count stays deterministic."""
    return max(1, math.ceil(model.num_nonzeros / NONZEROS_PER_UNIT))


class LinearModel:
    """A minimisation MIP: columns (cost, bounds, integrality) and rows ``lo ≤ a·x ≤ hi``."""

    def __init__(self) -> None:
        self._cost: list[float] = []
        self._lo: list[float] = []
        self._hi: list[float] = []
        self._int: list[bool] = []
        self._row_idx: list[np.ndarray] = []
        self._row_val: list[np.ndarray] = []
        self._row_lo: list[float] = []
        self._row_hi: list[float] = []

    # ------------------------------------------------------------------------------ building
    @property
    def num_cols(self) -> int:
        return len(self._cost)

    @property
    def num_rows(self) -> int:
        return len(self._row_lo)

    @property
    def num_nonzeros(self) -> int:
        return sum(len(i) for i in self._row_idx)

    def add_cols(self, count: int, *, cost: float = 0.0, lo: float = 0.0, hi: float = 1.0, integer: bool = True) -> np.ndarray:
        """Add ``count`` columns alike; returns their indices."""
        start = len(self._cost)
        self._cost.extend([cost] * count)
        self._lo.extend([lo] * count)
        self._hi.extend([hi] * count)
        self._int.extend([integer] * count)
        return np.arange(start, start + count, dtype=np.int64)

    def set_upper(self, cols: np.ndarray, hi: np.ndarray | float) -> None:
        his = np.broadcast_to(np.asarray(hi, dtype=float), np.shape(cols))
        for c, h in zip(np.asarray(cols).tolist(), his.tolist()):
            self._hi[c] = h

    def add_row(self, idx, val, lo: float = -math.inf, hi: float = math.inf) -> None:
        idx = np.asarray(idx, dtype=np.int64)
        val = np.broadcast_to(np.asarray(val, dtype=float), idx.shape)
        if idx.size:
            # merge repeated columns so every solver sees one coefficient per column
            order = np.argsort(idx, kind="stable")
            idx, val = idx[order], val[order]
            uniq, start = np.unique(idx, return_index=True)
            val = np.add.reduceat(val, start)
            keep = val != 0
            idx, val = uniq[keep], val[keep]
        self._row_idx.append(idx)
        self._row_val.append(np.asarray(val, dtype=float))
        self._row_lo.append(lo)
        self._row_hi.append(hi)

    # ------------------------------------------------------------------------------ views
    def arrays(self):
        """(cost, col_lo, col_hi, integer mask, row_lo, row_hi, row starts, indices, values)."""
        starts = np.zeros(self.num_rows + 1, dtype=np.int64)
        if self.num_rows:
            starts[1:] = np.cumsum([len(i) for i in self._row_idx])
        idx = np.concatenate(self._row_idx) if self._row_idx else np.zeros(0, dtype=np.int64)
        val = np.concatenate(self._row_val) if self._row_val else np.zeros(0)
        return (
            np.asarray(self._cost, dtype=float),
            np.asarray(self._lo, dtype=float),
            np.asarray(self._hi, dtype=float),
            np.asarray(self._int, dtype=bool),
            np.asarray(self._row_lo, dtype=float),
            np.asarray(self._row_hi, dtype=float),
            starts,
            idx,
            val,
        )

    def objective(self, x: np.ndarray) -> float:
        return float(np.dot(self._cost, x))

    def violation(self, x: np.ndarray, tol: float = 1e-6) -> str | None:
        """The first violated bound or row of ``x``, or None (used to check warm starts)."""
        _cost, lo, hi, integer, rlo, rhi, starts, idx, val = self.arrays()
        if np.any(x < lo - tol) or np.any(x > hi + tol):
            return "column bound"
        if np.any(np.abs(x[integer] - np.round(x[integer])) > tol):
            return "integrality"
        row_of = np.repeat(np.arange(self.num_rows), np.diff(starts))
        act = np.bincount(row_of, weights=val * x[idx], minlength=self.num_rows)
        bad = np.flatnonzero((act < rlo - tol) | (act > rhi + tol))
        return f"row {int(bad[0])}" if bad.size else None


@dataclass(frozen=True)
class Progress:
    """A progress report: time since the solve started (s), best objective found (None before
    the first solution), the solver's proven lower bound, and the relative gap."""

    elapsed: float
    incumbent: float | None
    bound: float | None
    gap: float | None
    event: str  # "solution" (a better solution was found), "log" (periodic), "done"


#: A progress callback; returning True asks the solver to stop (keeping its best solution).
ProgressCallback = Callable[[Progress], "bool | None"]


@dataclass
class SolveResult:
    """What a solve found. ``status``: "optimal" (proven, within the relative gap), "feasible"
    (a solution, optimality not proven), "infeasible" (proven: no solution exists), "unknown"
    (stopped before any solution). ``stopped_by``: None, "work limit", "time limit" or "interrupt".
    ``work``: the work the solve did, in its solver's `WORK_UNITS` (what a shared work budget
    subtracts; deterministic like the work limit itself)."""

    status: str
    values: np.ndarray | None
    objective: float | None
    bound: float | None
    elapsed: float
    solver: str
    stopped_by: str | None = None
    log: list[str] = field(default_factory=list)
    work: int = 0
    #: the solver reported an error (not a limit or an interrupt); `solve` then tries CBC
    failed: bool = False

    @property
    def gap(self) -> float | None:
        if self.objective is None or self.bound is None:
            return None
        return relative_gap(self.objective, self.bound)

    @property
    def has_solution(self) -> bool:
        return self.values is not None


def relative_gap(incumbent: float, bound: float) -> float:
    return max(0.0, incumbent - bound) / max(abs(incumbent), 1e-12)


def solve(
    model: LinearModel,
    *,
    solver: str = "highs",
    time_limit: float | None = None,
    work_limit: int | None = None,
    warm_start: np.ndarray | None = None,
    progress: ProgressCallback | None = None,
    stop: threading.Event | None = None,
) -> SolveResult:
    """Solve ``model`` with ``solver`` ("highs" or "cbc"). ``work_limit`` (`WORK_UNITS`) cuts the
    search at the same point on any machine; ``time_limit`` (wall seconds) is the safety net.
    ``stop`` (or a progress callback returning True, or Ctrl-C) ends the search early. A cut
    search keeps the best solution found."""
    if work_limit is not None and work_limit < 0:
        raise ValueError(f"work limit must be at least 0, got {work_limit}")
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r} (expected one of {', '.join(SOLVERS)})")
    stop = stop or threading.Event()
    # whatever a solver library prints is a diagnostic, never part of our stdout (--json, -q)
    with native_stdout_to_stderr():
        if solver == "cbc":
            return _solve_cbc(model, time_limit, work_limit, warm_start, progress, stop)
        start = time.perf_counter()
        try:
            result = _solve_highs(model, time_limit, work_limit, warm_start, progress, stop)
        except ImportError:
            result = None  # highspy missing: CBC is the fallback
        if result is not None and not result.failed:
            return result
        # HiGHS could not load or solve the model (an error status, not a limit): fall back to CBC
        # with what is left of the time limit, and the whole work limit (HiGHS did no search)
        left = None if time_limit is None else max(0.01, time_limit - (time.perf_counter() - start))
        return _solve_cbc(model, left, work_limit, warm_start, progress, stop)


def _run_in_thread(target: Callable[[], object], name: str) -> threading.Event:
    """Start ``target`` in a daemon thread; the returned event is set when it has returned."""
    done = threading.Event()

    def run() -> None:
        try:
            target()
        finally:
            done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    return done


def _wait(done: threading.Event, stop: threading.Event, on_interrupt: Callable[[], None]) -> bool:
    """Wait for ``done``; a KeyboardInterrupt (Ctrl-C) sets ``stop``, tells the solver, and keeps
    waiting for it to hand back its best solution. Returns True if Ctrl-C was pressed. (An event,
    not Thread.join: a join interrupted by Ctrl-C can leave the thread reported as finished.)"""
    interrupted = False
    while not done.is_set():
        try:
            done.wait(0.05)
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
            on_interrupt()
    return interrupted


# ===================================================================================== HiGHS
def _highs_errors() -> frozenset:
    try:
        import highspy
    except ImportError:
        return frozenset()
    ms = highspy.HighsModelStatus
    return frozenset({ms.kLoadError, ms.kModelError, ms.kPresolveError, ms.kSolveError, ms.kPostsolveError, ms.kUnknown})


_HIGHS_ERRORS = _highs_errors()


def _solve_highs(
    model: LinearModel,
    time_limit: float | None,
    work_limit: int | None,
    warm_start: np.ndarray | None,
    progress: ProgressCallback | None,
    stop: threading.Event,
) -> SolveResult:
    import highspy

    cost, lo, hi, integer, rlo, rhi, starts, idx, val = model.arrays()
    h = new_highs()
    h.setOptionValue("threads", 1)
    h.setOptionValue("random_seed", 0)
    h.setOptionValue("mip_rel_gap", MIP_REL_GAP)
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    lp = highspy.HighsLp()
    lp.num_col_ = model.num_cols
    lp.num_row_ = model.num_rows
    lp.col_cost_ = cost
    lp.col_lower_ = lo
    lp.col_upper_ = np.where(np.isinf(hi), highspy.kHighsInf, hi)
    lp.row_lower_ = np.where(np.isinf(rlo), -highspy.kHighsInf, rlo)
    lp.row_upper_ = np.where(np.isinf(rhi), highspy.kHighsInf, rhi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = model.num_cols
    lp.a_matrix_.num_row_ = model.num_rows
    lp.a_matrix_.start_ = starts.astype(np.int32)
    lp.a_matrix_.index_ = idx.astype(np.int32)
    lp.a_matrix_.value_ = val
    lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous for i in integer]
    h.passModel(lp)
    if warm_start is not None:
        h.setSolution(model.num_cols, np.arange(model.num_cols, dtype=np.int32), np.asarray(warm_start, dtype=float))

    t0 = time.perf_counter()
    state: dict = {"incumbent": None, "bound": None, "last_log": 0.0, "solution": None, "work": 0, "work_cut": False}
    weight = work_weight(model)

    def report(event: str) -> None:
        if progress is None:
            return
        inc, bd = state["incumbent"], state["bound"]
        gap = relative_gap(inc, bd) if inc is not None and bd is not None else None
        if progress(Progress(time.perf_counter() - t0, inc, bd, gap, event)):
            stop.set()

    def on_interrupt_check(e) -> None:
        # HiGHS calls this where its single-threaded search checks its limits, a fixed sequence
        # of points for a given model and options: the n-th call is the same point of the search
        # on any machine, so a cut there keeps the same solution (a time limit's cut does not)
        if not state["work_cut"]:
            state["work"] += weight
        if work_limit is not None and state["work"] >= work_limit:
            state["work_cut"] = True
            e.interrupt()
        elif stop.is_set():
            e.interrupt()

    def on_improving(e) -> None:
        # keep our own copy: after an interrupt HiGHS does not always hand its incumbent back
        solution = np.array(e.data_out.mip_solution, dtype=float)
        if solution.size == model.num_cols:
            state["solution"] = solution
        state["incumbent"] = float(e.data_out.objective_function_value)
        bd = float(e.data_out.mip_dual_bound)
        if math.isfinite(bd):
            state["bound"] = bd
        report("solution")

    def on_logging(e) -> None:
        bd = float(e.data_out.mip_dual_bound)
        if math.isfinite(bd):
            state["bound"] = bd
        now = time.perf_counter()
        if now - state["last_log"] >= 1.0:
            state["last_log"] = now
            report("log")

    h.cbMipInterrupt.subscribe(on_interrupt_check)
    h.cbMipImprovingSolution.subscribe(on_improving)
    h.cbMipLogging.subscribe(on_logging)

    interrupted = _wait(_run_in_thread(h.run, "highs"), stop, lambda: None)
    elapsed = time.perf_counter() - t0

    status = h.getModelStatus()
    info = h.getInfo()
    ms = highspy.HighsModelStatus
    has_solution = int(info.primal_solution_status) == 2  # kSolutionStatusFeasible
    values = np.asarray(h.getSolution().col_value, dtype=float) if has_solution else None
    objective = float(info.objective_function_value) if has_solution else None
    kept = state["solution"]
    if values is None and kept is not None and model.violation(kept) is None:
        values, objective = kept, model.objective(kept)
    bound = float(info.mip_dual_bound) if math.isfinite(float(info.mip_dual_bound)) else None
    stopped_by = None
    if status == ms.kOptimal and values is not None:
        result_status = "optimal"
        bound = objective if bound is None else bound
    elif status == ms.kInfeasible:
        result_status = "infeasible"
    else:
        result_status = "feasible" if values is not None else "unknown"
        if status == ms.kTimeLimit:
            stopped_by = "time limit"
        elif state["work_cut"] and not interrupted:
            stopped_by = "work limit"
        elif status in (ms.kInterrupt, ms.kHighsInterrupt) or interrupted or stop.is_set():
            stopped_by = "interrupt"
    failed = status in _HIGHS_ERRORS and values is None and not stop.is_set()
    if not failed:
        state["incumbent"], state["bound"] = objective, bound
        report("done")
    h.clear()
    return SolveResult(result_status, values, objective, bound, elapsed, "highs", stopped_by, work=state["work"], failed=failed)


# ===================================================================================== CBC
_CBC_PROGRESS = re.compile(r"(\d+) on tree, (\S+) best solution, best possible (\S+) \(([\d.]+) seconds\)")
_CBC_SOLUTION = re.compile(r"Integer solution of (\S+) found")


def _solve_cbc(
    model: LinearModel,
    time_limit: float | None,
    work_limit: int | None,
    warm_start: np.ndarray | None,
    progress: ProgressCallback | None,
    stop: threading.Event,
) -> SolveResult:
    import pulp

    cost, lo, hi, integer, rlo, rhi, starts, idx, val = model.arrays()
    problem = pulp.LpProblem("synth_ilp", pulp.LpMinimize)
    width = len(str(max(model.num_cols - 1, 0)))
    cols = [
        problem.add_variable(
            f"x{j:0{width}d}",
            lowBound=float(lo[j]),
            upBound=None if math.isinf(hi[j]) else float(hi[j]),
            cat=pulp.LpInteger if integer[j] else pulp.LpContinuous,
        )
        for j in range(model.num_cols)
    ]
    problem += pulp.LpAffineExpression([(cols[j], float(cost[j])) for j in np.flatnonzero(cost)]) + 0.0
    for i in range(model.num_rows):
        expr = pulp.LpAffineExpression(
            [(cols[j], float(v)) for j, v in zip(idx[starts[i] : starts[i + 1]], val[starts[i] : starts[i + 1]])]
        )
        if rlo[i] == rhi[i]:
            problem += pulp.LpConstraint(expr, pulp.LpConstraintEQ, f"r{i}", float(rlo[i]))
            continue
        if not math.isinf(rlo[i]):
            problem += pulp.LpConstraint(expr, pulp.LpConstraintGE, f"r{i}l", float(rlo[i]))
        if not math.isinf(rhi[i]):
            problem += pulp.LpConstraint(expr, pulp.LpConstraintLE, f"r{i}u", float(rhi[i]))
    with warnings.catch_warnings():
        # pulp 3.3 announces that its bundled CBC moves to an extra in pulp 4; it is still here
        warnings.simplefilter("ignore", DeprecationWarning)
        command = pulp.PULP_CBC_CMD(msg=False)
    with tempfile.TemporaryDirectory(prefix="synth-cbc-") as tmp:
        mps, sol, mst = (os.path.join(tmp, f"model.{ext}") for ext in ("mps", "sol", "mst"))
        variables, variable_names, constraint_names, _ = problem.writeMPS(mps, rename=1)
        args = [command.path, mps, "-threads", "1", "-randomSeed", "1", "-ratio", str(MIP_REL_GAP), "-timeMode", "elapsed"]
        if time_limit is not None:
            args += ["-sec", f"{float(time_limit):g}"]
        weight = work_weight(model)
        if work_limit is not None:
            args += ["-maxNodes", str(max(1, int(work_limit) // weight))]
        if warm_start is not None:
            for j, col in enumerate(cols):
                col.setInitialValue(float(round(warm_start[j])) if integer[j] else float(warm_start[j]))
            command.writesol(mst, problem, variables, variable_names, constraint_names)
            args += ["-mips", mst]
        args += ["-solve", "-printingOptions", "all", "-solution", sol]
        t0 = time.perf_counter()
        state: dict = {"incumbent": None, "bound": None, "log": []}

        def report(event: str) -> None:
            if progress is None:
                return
            inc, bd = state["incumbent"], state["bound"]
            gap = relative_gap(inc, bd) if inc is not None and bd is not None else None
            if progress(Progress(time.perf_counter() - t0, inc, bd, gap, event)):
                stop.set()
                _interrupt(child)

        child = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, bufsize=1
        )

        def read_log() -> None:
            assert child.stdout is not None
            for line in child.stdout:
                state["log"].append(line.rstrip())
                found = _CBC_SOLUTION.search(line)
                if found:
                    state["incumbent"] = _float(found.group(1))
                    report("solution")
                    continue
                found = _CBC_PROGRESS.search(line)
                if found:
                    state["incumbent"] = _float(found.group(2))
                    state["bound"] = _float(found.group(3))
                    report("log")
                if stop.is_set():
                    _interrupt(child)

        reader = _run_in_thread(read_log, "cbc-log")

        def watch() -> None:
            while child.poll() is None:
                if stop.wait(0.1):
                    _interrupt(child)
                    return

        watcher = threading.Thread(target=watch, name="cbc-stop", daemon=True)
        watcher.start()
        interrupted = _wait(reader, stop, lambda: _interrupt(child))
        child.wait()
        elapsed = time.perf_counter() - t0
        log = state["log"]
        if not Path(sol).exists():
            return SolveResult("unknown", None, None, None, elapsed, "cbc", "interrupt" if stop.is_set() else None, log)
        status, values_by_name, _, _, _, sol_status = command.readsol_MPS(
            sol, problem, variables, variable_names, constraint_names
        )
    text = "\n".join(log)
    bound = _cbc_bound(text)
    stopped_by = None
    if sol_status == pulp.LpSolutionInfeasible or status == pulp.LpStatusInfeasible:
        return SolveResult("infeasible", None, None, None, elapsed, "cbc", None, log)
    values = None
    if sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        values = np.array([values_by_name.get(c.name, 0.0) or 0.0 for c in cols], dtype=float)
    objective = model.objective(values) if values is not None else None
    node_limit = "Stopped on node limit" in text
    if sol_status == pulp.LpSolutionOptimal and "Stopped on time" not in text and not node_limit and not stop.is_set():
        result_status = "optimal"
        bound = objective
    else:
        result_status = "feasible" if values is not None else "unknown"
        if interrupted or stop.is_set():
            stopped_by = "interrupt"
        elif node_limit:
            stopped_by = "work limit"
        elif "Stopped on time" in text:
            stopped_by = "time limit"
    state["incumbent"], state["bound"] = objective, bound
    report("done")
    return SolveResult(result_status, values, objective, bound, elapsed, "cbc", stopped_by, log, work=_cbc_nodes(text) * weight)


def _interrupt(child: subprocess.Popen) -> None:
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGINT)


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and abs(value) < 1e49 else None


def _cbc_nodes(text: str) -> int:
    """The branch-and-bound nodes CBC explored (its "Enumerated nodes" line; 0 if none)."""
    found = re.findall(r"Enumerated nodes:\s*(\d+)", text)
    return int(found[-1]) if found else 0


def _cbc_bound(text: str) -> float | None:
    """CBC's last reported lower bound ("best possible" or "Lower bound")."""
    matches = re.findall(r"(?:best possible|Lower bound:)\s*(\S+)", text)
    return _float(matches[-1].rstrip(")")) if matches else None
