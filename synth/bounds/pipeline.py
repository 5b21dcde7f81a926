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

import math

#: crossing-step counts solved one by one; more crossing steps get the line (N_MAX + 1)·α_U + n/C_U
N_MAX = 48


def _geometric_theta(n_steps: int, ck: float, m: int) -> list[float] | None:
    """θ_1..θ_(N+1) (index 0 unused) with s = 1 − θ: s_1 = 0, s_(l+1) = (g + (cK − 1)·s_l)/(m − 1),
    s_(N+1) = 1, where g is the largest value that keeps s_(N+1) ≤ 1 (docs/bounds.md). None when the
    recursion does not apply (cK ≤ 1 or m < 2)."""
    if m < 2 or ck <= 1:
        return None
    ratio = (ck - 1) / (m - 1)
    grow = 0.0  # G_l = Σ_(i<l) ratio^i
    for _ in range(n_steps):
        grow = grow * ratio + 1.0
    g = (m - 1) / grow
    s = [0.0] * (n_steps + 2)
    for step in range(1, n_steps):
        s[step + 1] = min(1.0, (g + (ck - 1) * s[step]) / (m - 1))
    s[n_steps + 1] = 1.0
    theta = [1.0 - x for x in s]
    theta[n_steps + 1] = 0.0
    return theta


def theta_line(theta: list[float], alpha_u: float, alpha_min: float, c: float, k: float, m: int) -> tuple[float, float]:
    """(latency µs, µs per byte) of the line of weights θ_1..θ_N (``theta[1..N]``, ``theta[N+1]``
    = 0), valid for every θ in [0, 1] that does not grow with l; c = 1/C_U and k = 1/K in µs per byte."""
    n_steps = len(theta) - 2
    weights = [1.0] * (n_steps + 2)  # θ clipped to [0, 1] and made non-increasing (a prefix minimum)
    for step in range(1, n_steps + 1):
        weights[step] = min(weights[step - 1], 1.0, max(0.0, theta[step]))
    weights[n_steps + 1] = 0.0
    latency = 0.0
    kappa = math.inf
    for step in range(1, n_steps + 1):
        t = weights[step]
        phi = t - weights[step + 1]
        latency += t * alpha_u + (1 - t) * alpha_min
        coef = min(c * t + (m - 1) * phi * k, m * c * t) + m * (1 - t) * k
        kappa = min(kappa, coef)
    return latency, kappa


def lines(alpha_u: float, alpha_min: float, c: float, k: float, m: int) -> list[tuple[int, float, float, str]]:
    """[(N, latency µs, µs per byte, note)]: per crossing-step count N = 1..`N_MAX` its lines, and
    N = `N_MAX` + 1 for every larger count. c = 1/C_U, k = 1/K (µs per byte), m ≥ 1 groups."""
    out: list[tuple[int, float, float, str]] = []
    ck = k and c / k  # c·K
    for n_steps in range(1, N_MAX + 1):
        out.append((n_steps, n_steps * alpha_u, c, f"{n_steps} crossing step(s), each >= {alpha_u:g} us"))
        theta = _geometric_theta(n_steps, ck, m)
        if theta is None:
            continue
        latency, kappa = theta_line(theta, alpha_u, alpha_min, c, k, m)
        if kappa > c:
            out.append((n_steps, latency, kappa, f"{n_steps} crossing step(s), the last bytes to cross still to spread"))
    out.append((N_MAX + 1, (N_MAX + 1) * alpha_u, c, f"more than {N_MAX} crossing steps"))
    return out
