"""MSCCL algorithms written here, in the dialect of MSCCLang (msccl-tools' compiler), for tests.

`Program` numbers steps and writes a thread block's extra waits the way MSCCLang does: a step waits
for at most one other thread block itself, further waits become ``type="nop"`` steps placed before
it, with ``cnt="0"``, offsets ``-1`` and buffers ``i``/``o``; every step waited for gets
``hasdep="1"``. Headers carry ``inplace`` but no ``outofplace``, ``minBytes`` or ``maxBytes``.

The algorithms: an all-pairs allreduce through scratch buffers (reductions with ``re``, several
waits per step), a recursive-doubling allgather with two-chunk steps over two channels (with the
race MSCCLang's own checker misses, or without it), and a direct allgather for any GPU count.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Step:
    type: str
    src: tuple[str, int]
    dst: tuple[str, int]
    cnt: int
    dep: tuple[int, int] = (-1, -1)
    hasdep: bool = False


@dataclass
class _Tb:
    send: int
    recv: int
    chan: int
    steps: list[_Step] = field(default_factory=list)


class Program:
    """Thread blocks per GPU; `step` appends a step (with its waits) and returns its number."""

    def __init__(self, name: str, coll: str, ngpus: int, nchunks: int, proto: str = "Simple", inplace: bool = True):
        self.name, self.coll, self.ngpus, self.nchunks, self.proto, self.inplace = name, coll, ngpus, nchunks, proto, inplace
        self.tbs: list[list[_Tb]] = [[] for _ in range(ngpus)]
        self.sizes: list[tuple[int, int, int]] = [(0, 0, 0)] * ngpus

    def tb(self, gpu: int, send: int = -1, recv: int = -1, chan: int = 0) -> int:
        self.tbs[gpu].append(_Tb(send, recv, chan))
        return len(self.tbs[gpu]) - 1

    def step(
        self,
        gpu: int,
        tb: int,
        kind: str,
        src: tuple[str, int],
        dst: tuple[str, int],
        cnt: int = 1,
        waits: tuple[tuple[int, int], ...] = (),
    ) -> int:
        steps = self.tbs[gpu][tb].steps
        waits = tuple(w for w in waits if w[0] != tb)  # own earlier steps come first anyway
        for other in waits[:-1]:
            steps.append(_Step("nop", ("i", -1), ("o", -1), 0, other))
            self._mark(gpu, other)
        dep = waits[-1] if waits else (-1, -1)
        if waits:
            self._mark(gpu, dep)
        steps.append(_Step(kind, src, dst, cnt, dep))
        return len(steps) - 1

    def _mark(self, gpu: int, target: tuple[int, int]) -> None:
        self.tbs[gpu][target[0]].steps[target[1]].hasdep = True

    def xml(self) -> str:
        head = (
            f'<algo name="{self.name}" proto="{self.proto}" nchannels="{self.nchannels}" nchunksperloop="{self.nchunks}" '
            f'ngpus="{self.ngpus}" coll="{self.coll}" inplace="{int(self.inplace)}">'
        )
        out = [head]
        for g, tbs in enumerate(self.tbs):
            i, o, s = self.sizes[g]
            out.append(f'  <gpu id="{g}" i_chunks="{i}" o_chunks="{o}" s_chunks="{s}">')
            for t, tb in enumerate(tbs):
                out.append(f'    <tb id="{t}" send="{tb.send}" recv="{tb.recv}" chan="{tb.chan}">')
                for n, st in enumerate(tb.steps):
                    out.append(
                        f'      <step s="{n}" type="{st.type}" srcbuf="{st.src[0]}" srcoff="{st.src[1]}" '
                        f'dstbuf="{st.dst[0]}" dstoff="{st.dst[1]}" cnt="{st.cnt}" depid="{st.dep[0]}" '
                        f'deps="{st.dep[1]}" hasdep="{int(st.hasdep)}"/>'
                    )
                out.append("    </tb>")
            out.append("  </gpu>")
        out.append("</algo>")
        return "\n".join(out) + "\n"

    @property
    def nchannels(self) -> int:
        return 1 + max((tb.chan for tbs in self.tbs for tb in tbs), default=0)


def allpairs_allreduce(n: int, proto: str = "LL") -> str:
    """In-place allreduce of n·n chunks: rank r owns chunks n·r … n·r + n − 1. Every rank sends
    each peer that peer's n chunks (one step of cnt n) into the peer's scratch, reduces its own
    chunks from scratch with ``re`` (chunk c of its range in thread block c, after every receive),
    then sends its reduced range to every peer (after every reduction)."""
    p = Program("allreduce_pairs", "allreduce", n, n * n, proto)
    for r in range(n):
        p.sizes[r] = (n * n, 0, (n - 1) * n)
        peers = [q for q in range(n) if q != r]
        local = p.tb(r)
        tbs = [local] + [p.tb(r, q, q) for q in peers]  # thread block c reduces own chunk c
        received = []
        for k, q in enumerate(peers):
            t = tbs[k + 1]
            slot_at_q = [x for x in range(n) if x != q].index(r)  # where q keeps what r sends
            p.step(r, t, "s", ("i", n * q), ("s", slot_at_q * n), cnt=n)
            received.append((t, p.step(r, t, "r", ("i", n * r), ("s", k * n), cnt=n)))
        reduced = []
        for c in range(n):
            t = tbs[c]
            last = None
            for k in range(n - 1):
                waits = tuple(received) if k == 0 else ()
                last = p.step(r, t, "re", ("s", k * n + c), ("i", n * r + c), waits=waits)
            reduced.append((t, last))
        for k, q in enumerate(peers):
            t = tbs[k + 1]
            p.step(r, t, "s", ("i", n * r), ("i", n * r), cnt=n, waits=tuple(reduced))
            p.step(r, t, "r", ("i", n * q), ("i", n * q), cnt=n)
    return p.xml()


def recursive_doubling_allgather(racy: bool) -> str:
    """In-place allgather on 4 GPUs, 2 chunks per rank (rank r's at o[2r], o[2r + 1]). Round 1
    exchanges with r xor 1, one chunk per channel; round 2 exchanges the pair's two pieces with
    r xor 2, one piece (``cnt="2"``) per channel. Sending the partner's piece must wait for both of
    its round-1 receives; ``racy`` waits for the first only."""
    p = Program("allgather_recursive_doubling", "allgather", 4, 8)
    for r in range(4):
        p.sizes[r] = (0, 8, 0)
        q, t = r ^ 1, r ^ 2
        round1 = []
        for c in range(2):
            tb = p.tb(r, q, q, chan=c)
            p.step(r, tb, "s", ("o", 2 * r + c), ("o", 2 * r + c))
            round1.append((tb, p.step(r, tb, "r", ("o", 2 * q + c), ("o", 2 * q + c))))
        for c, piece in enumerate(sorted((r, q))):
            tb = p.tb(r, t, t, chan=c)
            waits = () if piece == r else (tuple(round1[:1]) if racy else tuple(round1))
            p.step(r, tb, "s", ("o", 2 * piece), ("o", 2 * piece), cnt=2, waits=waits)
            p.step(r, tb, "r", ("o", 2 * (piece ^ 2)), ("o", 2 * (piece ^ 2)), cnt=2)
    return p.xml()


def direct_allgather(n: int) -> str:
    """In-place allgather, one chunk per rank: a thread block per peer (peers spread over two
    channels so that 64 GPUs stay within 32 thread blocks per channel)."""
    p = Program("allgather_direct", "allgather", n, n)
    for r in range(n):
        p.sizes[r] = (0, n, 0)
        for q in range(n):
            if q != r:
                tb = p.tb(r, q, q, chan=(r + q) % 2)
                p.step(r, tb, "s", ("o", r), ("o", r))
                p.step(r, tb, "r", ("o", q), ("o", q))
    return p.xml()
