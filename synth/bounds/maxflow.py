"""Maximum flow and minimum cut on a small directed network with float capacities (Dinic).

The bounds solve many max-flow problems on the same graph with different capacities (a binary
search, or one problem per rank), so the graph's structure is built once as a `FlowNetwork` and each
call passes a capacity per arc. Graphs are topology-sized (hundreds of nodes, a few thousand arcs),
where a plain-Python Dinic with early stopping is faster than building a networkx graph per call.

Capacities are floats. Residual capacities below ``tolerance`` (relative to the largest capacity)
count as zero, so a float round-off never makes an arc look usable.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FlowResult:
    """A maximum flow's value and the source side of a minimum cut (nodes reachable from the
    source in the residual network). When the call stopped early at its ``limit`` the value is at
    least the limit and ``source_side`` is None."""

    value: float
    source_side: frozenset[int] | None


class FlowNetwork:
    """A directed graph on nodes ``0 … num_nodes−1`` with arcs ``arcs[i] = (u, v)``.

    Every arc gets a paired reverse residual arc internally; parallel arcs are allowed.
    """

    def __init__(self, num_nodes: int, arcs: Sequence[tuple[int, int]]):
        self.num_nodes = num_nodes
        self.arcs = tuple((int(u), int(v)) for u, v in arcs)
        # residual arc 2i is arc i, 2i+1 its reverse
        self._head: list[int] = []
        self._adj: list[list[int]] = [[] for _ in range(num_nodes)]
        for i, (u, v) in enumerate(self.arcs):
            if not (0 <= u < num_nodes and 0 <= v < num_nodes):
                raise ValueError(f"arc {i} ({u}, {v}) has a node outside 0..{num_nodes - 1}")
            self._head.append(v)
            self._head.append(u)
            self._adj[u].append(2 * i)
            self._adj[v].append(2 * i + 1)

    def max_flow(
        self,
        capacity: Sequence[float],
        source: int,
        sink: int,
        *,
        limit: float | None = None,
        tolerance: float = 1e-12,
    ) -> FlowResult:
        """Maximum flow from ``source`` to ``sink`` with ``capacity[i]`` on arc i.

        With ``limit``, stop as soon as the flow reaches it (the caller only needs to know whether
        the flow is at least that much); the result then has no cut.
        """
        if source == sink:
            raise ValueError("source and sink must differ")
        if len(capacity) != len(self.arcs):
            raise ValueError(f"expected {len(self.arcs)} capacities, got {len(capacity)}")
        scale = max((c for c in capacity if c != float("inf")), default=0.0)
        eps = tolerance * max(scale, 1.0)
        residual: list[float] = [0.0] * (2 * len(capacity))
        for i, c in enumerate(capacity):
            if c < 0:
                raise ValueError(f"arc {i} has negative capacity {c}")
            residual[2 * i] = c
        head, adj, n = self._head, self._adj, self.num_nodes
        flow = 0.0
        while True:
            level = self._levels(residual, source, sink, eps)
            if level[sink] < 0:
                break
            pointer = [0] * n
            while True:
                pushed = self._augment(residual, level, pointer, source, sink, eps, head, adj)
                if pushed <= 0.0:
                    break
                flow += pushed
                if limit is not None and flow >= limit:
                    return FlowResult(flow, None)
        level = self._levels(residual, source, -1, eps)
        side = frozenset(v for v in range(n) if level[v] >= 0)
        return FlowResult(flow, side)

    def _levels(self, residual: list[float], source: int, sink: int, eps: float) -> list[int]:
        """BFS distances from the source over arcs with residual capacity (−1: unreachable)."""
        level = [-1] * self.num_nodes
        level[source] = 0
        queue = deque([source])
        head, adj = self._head, self._adj
        while queue:
            u = queue.popleft()
            if u == sink:
                continue
            nxt = level[u] + 1
            for e in adj[u]:
                v = head[e]
                if level[v] < 0 and residual[e] > eps:
                    level[v] = nxt
                    queue.append(v)
        return level

    @staticmethod
    def _augment(
        residual: list[float],
        level: list[int],
        pointer: list[int],
        source: int,
        sink: int,
        eps: float,
        head: list[int],
        adj: list[list[int]],
    ) -> float:
        """One augmenting path in the level graph (iterative DFS with current-arc pointers); the
        amount pushed, 0 when the level graph is blocked."""
        path: list[int] = []  # residual arc ids from the source
        u = source
        while True:
            if u == sink:
                amount = min(residual[e] for e in path)
                for e in path:
                    residual[e] -= amount
                    residual[e ^ 1] += amount
                return amount
            arcs = adj[u]
            i = pointer[u]
            want = level[u] + 1
            while i < len(arcs):
                e = arcs[i]
                if residual[e] > eps and level[head[e]] == want:
                    break
                i += 1
            pointer[u] = i
            if i < len(arcs):
                e = arcs[i]
                path.append(e)
                u = head[e]
                continue
            # dead end: no augmenting path through u in this phase; retreat past the arc into u
            level[u] = -1
            if not path:
                return 0.0
            e = path.pop()
            u = head[e ^ 1]
            pointer[u] += 1
