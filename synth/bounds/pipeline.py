"""The `exit-pipeline` bound's lines (docs/bounds.md, `exit-pipeline`).

A broadcast's data leaves a node set U that holds the root (exit bandwidth C_U; every transfer
that crosses U's exit lasts at least α_U on top of its bytes) in N crossing steps, and the m groups
of ranks outside U (their regions' total ingress K) must each take in every byte, a byte that
crossed in a step only in the steps after it, except for the copies that crossed straight to them.
For a weight θ_l ∈ [0, 1] per crossing step, non-increasing, the block of steps up to the l-th
crossing step lasts at least θ_l·(α_U + its crossing bytes/C_U) + (1 − θ_l)·(α_min + the bytes the
groups take in then/K); summed and telescoped over the groups' backlog, every schedule of N
crossing steps lasts at least

    Σ_l (θ_l·α_U + (1 − θ_l)·α_min) + κ(θ)·n,
    κ(θ) = min_l [min(c·θ_l + (m − 1)·φ_l/K, m·c·θ_l) + m·(1 − θ_l)/K],

with c = 1/C_U, φ_l = θ_l − θ_(l+1) and θ_(N+1) = 0. `lines` gives, for each N, the two weights
that are best at some size (θ ≡ 1: N·α_U + n/C_U; and the geometric θ of the docs) as one group:
the bound is the smallest over N of each group's largest line, and a last group covers every N
beyond the largest solved."""

from __future__ import annotations

import numpy as np

#: crossing-step counts solved one by one; more crossing steps get the line (N_MAX + 1)·α_U + n/C_U.
#: Where the groups outside take in no faster than U's exit feeds them (r ≤ 1: chains of equally
#: slow network hops), the best count at 1 GiB is in the hundreds.
N_MAX = 1024


def _geometric_lines(alpha_u: float, alpha_min: float, c: float, k: float, m: int, ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """(latency µs, µs per byte) of the geometric weights' line for every N = 1..`N_MAX` at once.
    The weights θ = 1 − s with s_1 = 0, s_(l+1) = (g + (cK − 1)·s_l)/(m − 1) and s_(N+1) = 1
    (docs/bounds.md) are, in closed form, s_l = G_(l−1)/G_N with G_j = Σ_(i<j) r^i and
    r = ``ratio`` = (cK − 1)/(m − 1), computed without overflow for any r > 0; row N − 1 of a
    triangular array holds s_1..s_N, in blocks of rows. For each row, the latency is
    Σ_l (θ_l·α_U + (1 − θ_l)·α_min) and the µs per byte κ = min_l [min(c·θ_l + (m − 1)·φ_l·k,
    m·c·θ_l) + m·(1 − θ_l)·k] with φ_l = θ_l − θ_(l+1), θ_(N+1) = 0."""
    latency = np.empty(N_MAX, dtype=np.float64)
    kappa = np.empty(N_MAX, dtype=np.float64)
    block = 128
    for first in range(1, N_MAX + 1, block):
        counts = np.arange(first, min(first + block, N_MAX + 1), dtype=np.float64)[:, None]  # N
        j = np.arange(int(counts[-1, 0]) + 1, dtype=np.float64)[None, :]  # l − 1, one column past the last N
        inside = j < counts
        if abs(ratio - 1.0) < 1e-12:
            shares = j / counts
        elif ratio < 1.0:
            shares = (1.0 - ratio**j) / (1.0 - ratio**counts)
        else:
            inverse = 1.0 / ratio
            with np.errstate(over="ignore"):
                shares = (inverse ** np.maximum(counts - j, 0.0) - inverse**counts) / (1.0 - inverse**counts)
        theta = np.where(inside, 1.0 - shares, 0.0)  # θ_(N+1) = 0 and beyond
        phi = theta - np.concatenate([theta[:, 1:], np.zeros((theta.shape[0], 1))], axis=1)
        coef = np.minimum(c * theta + (m - 1) * phi * k, m * c * theta) + m * (1 - theta) * k
        rows = slice(first - 1, first - 1 + counts.shape[0])
        latency[rows] = np.sum(np.where(inside, theta * alpha_u + (1 - theta) * alpha_min, 0.0), axis=1)
        kappa[rows] = np.min(np.where(inside, coef, np.inf), axis=1)
    return latency, kappa


def lines(alpha_u: float, alpha_min: float, c: float, k: float, m: int) -> list[tuple[int, float, float, str]]:
    """[(N, latency µs, µs per byte, note)]: per crossing-step count N = 1..`N_MAX` its lines, and
    N = `N_MAX` + 1 for every larger count. c = 1/C_U, k = 1/K (µs per byte), m ≥ 1 groups."""
    out: list[tuple[int, float, float, str]] = []
    ck = k and c / k  # c·K
    geometric = _geometric_lines(alpha_u, alpha_min, c, k, m, (ck - 1) / (m - 1)) if m >= 2 and ck > 1 else None
    for n_steps in range(1, N_MAX + 1):
        out.append((n_steps, n_steps * alpha_u, c, f"{n_steps} crossing step(s), each >= {alpha_u:g} us"))
        if geometric is None:
            continue
        latency, kappa = float(geometric[0][n_steps - 1]), float(geometric[1][n_steps - 1])
        if kappa > c:
            out.append((n_steps, latency, kappa, f"{n_steps} crossing step(s), the last bytes to cross still to spread"))
    out.append((N_MAX + 1, (N_MAX + 1) * alpha_u, c, f"more than {N_MAX} crossing steps"))
    return out
