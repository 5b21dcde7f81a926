"""Ramped slices for a pipeline whose stages run at different speeds.

A pipelined schedule cuts its data into S slices that follow one pattern, slice s passing
stage d in step s + d. With equal slices the fill and drain cost about (stages − 1) slice times
(a step lasts as long as its busiest link), so the whole takes ≈ S·α + X/B + (h − 1)·X/(S·B).
But the slice a fast stage carries in a step is not the slice the slow stage carries then: a
rails broadcast over two NVSwitch boxes deals a slice inside the root's box at 300 GB/s per GPU
while the previous one crosses a 25 GB/s NIC. So the slices need not be equal: ramped up (each
slice a little larger than the one before, as long as the fast stage's new slice takes no longer
than the slow stage's previous one) and down at the end, the fill is paid at the speed of the
fast stages, in a few short steps, instead of in whole slice times of the slowest one.

The sizes come from a small LP over the step-synchronous model (docs/formats.md,
'Step-synchronous cost'): with the one-slice pattern's steps (the template) fixed, a step t's
time is the largest over its transfers of Σα(path) + max over the path's links of bytes/bandwidth,
and the bytes of a link in step t are Σ_s k_s · (chunk bytes) · n_ℓ(t − s), with k_s the chunks of
slice s and n_ℓ(d) the template's transfers over link ℓ in its step d. That is linear in the k_s:
minimise Σ_t z_t with z_t at least every link's α + load in step t, Σ_s k_s = the chunks per part
and every k_s ≥ 1 chunk. The LP's optimum is the step model's time of the continuous sizes; the
sizes are rounded to whole chunks (the format wants equal chunks, so a slice is k chunks on the
same edge in one step) and the method times the rounded schedule like any other candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth.algorithms.engines.builders import largest_remainder
from synth.schedule import Schedule
from synth.simulate.paths import transfer_paths
from synth.simulate.sync import BYTES_PER_US_PER_GBPS
from synth.solver_output import native_stdout_to_stderr, seeded_highs_with_columns
from synth.topology import Topology

#: slice counts tried by `ramps` (at most the chunks per part)
SLICE_COUNTS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
#: stop trying more slices after this many LP optima in a row each above the one before
PATIENCE = 2
#: branch-and-bound nodes of the whole-chunk MIP (`ramp_lp` with ``whole``): a cap in work, not
#: in seconds, so the sizes found are the same on every machine
MIP_NODES = 50
#: the MIP only up to this many slices (beyond, a MIP's root alone took seconds on a 9-host
#: machine's 128 slices: those are rounded)
MIP_SLICES = 64


@dataclass(frozen=True)
class StageLoads:
    """A template's load per (step, link): what one chunk of every part puts on each link in each
    of the pattern's steps. ``step``/``link`` name the pair, ``us_per_byte`` is n_ℓ(d)/bw_ℓ (µs per
    byte of a chunk) and ``latency`` the largest Σα of the paths over ℓ in that step (µs)."""

    num_steps: int
    step: np.ndarray
    link: np.ndarray
    us_per_byte: np.ndarray
    latency: np.ndarray


def stage_loads(template: Schedule, topology: Topology, per: int = 1) -> StageLoads:
    """The per-(step, link) loads of ``template``, a pipeline's pattern for ``per`` chunks per
    part moving together (the loads of one chunk are their average: a pattern that sends chunk
    q over one of ``per`` paths by q mod ``per`` needs ``per`` of them to show its spread)."""
    paths = transfer_paths(template, topology)
    num_links = len(topology.links)
    step_of = np.repeat(np.arange(template.num_steps, dtype=np.int64), np.diff(template.step_starts))
    entry = paths.entry_transfer()
    key = step_of[entry] * num_links + paths.links
    uniq, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    count = np.bincount(inverse, minlength=uniq.size).astype(np.float64)
    latency = np.full(uniq.size, -np.inf)
    np.maximum.at(latency, inverse, paths.latency_us[entry])
    step, link = np.divmod(uniq, num_links)
    bandwidth = topology.bandwidth_array[link] * BYTES_PER_US_PER_GBPS
    keep = np.isin(link, undominated_links(template.num_steps, step, link, count / (bandwidth * per), latency))
    return StageLoads(template.num_steps, step[keep], link[keep], (count / (bandwidth * per))[keep], latency[keep])


def undominated_links(num_steps: int, step: np.ndarray, link: np.ndarray, load: np.ndarray, latency: np.ndarray) -> np.ndarray:
    """The links whose rows the LP needs: a link whose load and latency are, in every step of the
    template, at most those of another link (eight rails with the same pattern, a GPU's link that
    carries what its NIC carries at a higher rate) never sets a step's time that the other does
    not set as well; of equal links the first is kept. Fewer rows: a 9-host machine's LPs went
    from 0.26 s each to a fraction of that."""
    links, column = np.unique(link, return_inverse=True)
    column = column.reshape(-1)
    w = np.zeros((links.size, num_steps))
    a = np.full((links.size, num_steps), -1.0)
    w[column, step] = load
    a[column, step] = latency
    # i is dominated by j if w_i ≤ w_j and a_i ≤ a_j in every step, strictly somewhere or j < i
    kept = []
    for i in range(links.size):
        covers = np.all(w >= w[i], axis=1) & np.all(a >= a[i], axis=1)
        covers[i] = False
        same = np.all(w == w[i], axis=1) & np.all(a == a[i], axis=1)
        if not np.any(covers & (~same | (np.arange(links.size) < i))):
            kept.append(links[i])
    return np.asarray(kept, dtype=np.int64)


def ramp_lp(
    loads: StageLoads, slices: int, chunks: int, chunk_bytes: float, whole: bool = False
) -> tuple[float, np.ndarray] | None:
    """(LP optimum in µs, continuous slice sizes in chunks) for ``slices`` slices of ``chunks``
    chunks in all (see the module docstring); None if HiGHS does not reach an optimum. ``whole``:
    the slice sizes integer (a small MIP, branch and bound capped at `MIP_NODES` nodes, so the
    answer does not depend on the machine's speed; its best whole sizes found, or None)."""
    import highspy

    if slices > chunks:
        return None
    steps = slices + loads.num_steps - 1
    num_links_used = int(loads.link.max()) + 1
    # every (template entry, slice): row (t = s + d, link), column k_s, coefficient −u·n/bw
    entries = loads.step.size
    s = np.tile(np.arange(slices, dtype=np.int64), entries)
    e = np.repeat(np.arange(entries, dtype=np.int64), slices)
    t = s + loads.step[e]
    row_key = t * num_links_used + loads.link[e]
    rows, row_of = np.unique(row_key, return_inverse=True)
    row_of = row_of.reshape(-1)
    num_rows = rows.size
    rhs = np.full(num_rows, -np.inf)
    np.maximum.at(rhs, row_of, loads.latency[e])
    z_col = slices + rows // num_links_used
    # columns: k_0 … k_{S−1}, z_0 … z_{T−1}; rows: the (step, link) rows, then Σ k = chunks
    col = np.concatenate([s, z_col, np.arange(slices)])
    row = np.concatenate([row_of, np.arange(num_rows), np.full(slices, num_rows)])
    val = np.concatenate([-chunk_bytes * loads.us_per_byte[e], np.ones(num_rows), np.ones(slices)])
    # (one slice's entries for a link may repeat nowhere: (t, ℓ, s) fixes d, and (d, ℓ) is unique)
    order = np.lexsort((row, col))
    row, col, val = row[order], col[order], val[order]
    num_cols = slices + steps
    starts = np.searchsorted(col, np.arange(num_cols + 1))
    lp = highspy.HighsLp()
    lp.num_col_ = num_cols
    lp.num_row_ = num_rows + 1
    lp.col_cost_ = np.r_[np.zeros(slices), np.ones(steps)]
    lp.col_lower_ = np.r_[np.ones(slices), np.zeros(steps)]
    lp.col_upper_ = np.full(num_cols, highspy.kHighsInf)
    lp.row_lower_ = np.r_[rhs, float(chunks)]
    lp.row_upper_ = np.r_[np.full(num_rows, highspy.kHighsInf), float(chunks)]
    if whole:
        lp.integrality_ = [highspy.HighsVarType.kInteger] * slices + [highspy.HighsVarType.kContinuous] * steps
    h = seeded_highs_with_columns(lp, starts, row, val)
    if whole:
        h.setOptionValue("mip_max_nodes", MIP_NODES)
        h.setOptionValue("mip_rel_gap", 1e-6)
        h.setOptionValue("threads", 1)
    with native_stdout_to_stderr():
        h.passModel(lp)
        h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal and not (whole and h.getInfo().primal_solution_status == 2):
        return None  # (2: a feasible solution, where the MIP stopped at its node cap)
    values = np.array(h.getSolution().col_value, dtype=np.float64)
    if whole:
        values[:slices] = np.round(values[:slices])
    return float(h.getInfo().objective_function_value), values[:slices]


def lower_bound_us(loads: StageLoads, slices: tuple[int, ...], chunk_bytes: float) -> float:
    """The LP's objective (`ramp_lp`) at these whole slice sizes: a lower bound of the
    step-synchronous time of the schedule that follows the template with them. Why: in step t the
    link ℓ carries Σ_s k_s · n_ℓ(t − s) chunks, and every transfer over ℓ in step t takes at least
    Σα(its path) + (bytes on ℓ)/bw_ℓ (docs/formats.md, 'Step-synchronous cost'), so the step
    takes at least the largest latency of a path over ℓ plus ℓ's bytes over its bandwidth, for
    every ℓ the template has a row for (`stage_loads` keeps fewer links, which only lowers the
    bound); the schedule takes the sum of its steps. No solver: the sum is evaluated directly."""
    if loads.step.size == 0 or not slices:
        return 0.0
    sizes = np.asarray(slices, dtype=np.float64)
    count = sizes.size
    num_links = int(loads.link.max()) + 1
    s = np.tile(np.arange(count, dtype=np.int64), loads.step.size)
    e = np.repeat(np.arange(loads.step.size, dtype=np.int64), count)
    rows, row_of = np.unique((s + loads.step[e]) * num_links + loads.link[e], return_inverse=True)
    row_of = row_of.reshape(-1)
    latency = np.full(rows.size, -np.inf)
    np.maximum.at(latency, row_of, loads.latency[e])
    load = np.bincount(row_of, weights=sizes[s] * chunk_bytes * loads.us_per_byte[e], minlength=rows.size)
    step_time = np.full(count + loads.num_steps, -np.inf)
    np.maximum.at(step_time, rows // num_links, latency + load)
    return float(step_time[np.isfinite(step_time)].sum())


def whole_slices(sizes: np.ndarray, chunks: int) -> tuple[int, ...]:
    """Continuous slice sizes (each ≥ 1, summing to ``chunks``) as whole chunks: rounded by
    largest remainders, each at least one chunk."""
    exact = np.maximum(np.asarray(sizes, dtype=np.float64), 1.0)
    exact = exact * (chunks / exact.sum())
    counts = largest_remainder(exact, chunks)
    # a slice rounded to 0 (only where the scaling pushed it below 1) takes one from the largest
    while (counts < 1).any():
        counts[int(np.argmax(counts))] -= 1
        counts[int(np.argmin(counts))] += 1
    return tuple(int(c) for c in counts.tolist())


def ramps(loads: StageLoads, chunks: int, chunk_bytes: float, keep: int = 2) -> list[tuple[int, ...]]:
    """The ``keep`` best ramps by LP optimum over `SLICE_COUNTS` (increasing slice counts until
    `PATIENCE` optima in a row each rose), as whole-chunk slice sizes, best first: the best one's
    sizes from the whole-chunk MIP (up to `MIP_SLICES` slices) (rounding a ramp's first slices of one or two chunks by half a
    chunk each costs half a chunk of the slowest stage each: ndv2x2 1 GiB, 16 slices, LP 86,068 µs,
    rounded 86,272, MIP 86,068), the others rounded (`whole_slices`). Ramps that come out as equal
    slices are left out (the uniform candidates already cover them)."""
    solved: list[tuple[float, int, np.ndarray]] = []
    previous, worse = None, 0
    for slices in SLICE_COUNTS:
        if slices > chunks:
            break
        result = ramp_lp(loads, slices, chunks, chunk_bytes)
        if result is None:
            continue
        solved.append((result[0], slices, result[1]))
        worse = worse + 1 if previous is not None and result[0] > previous else 0
        previous = result[0]
        if worse >= PATIENCE:
            break
    solved.sort(key=lambda f: (f[0], f[1]))
    out: list[tuple[int, ...]] = []
    for rank, (_, slices, sizes) in enumerate(solved[:keep]):
        exact = ramp_lp(loads, slices, chunks, chunk_bytes, whole=True) if rank == 0 and slices <= MIP_SLICES else None
        counts = exact[1].astype(np.int64) if exact is not None else None
        if counts is None or int(counts.sum()) != chunks or counts.min() < 1:
            sized = whole_slices(sizes, chunks)
        else:
            sized = tuple(int(c) for c in counts.tolist())
        if len(set(sized)) > 1 and sized not in out:
            out.append(sized)
    return out
