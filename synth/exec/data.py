"""Data types, reduction operators, test inputs and the numpy reference result.

Inputs are chosen so that a wrong result shows: every value is a small whole number that the
data type holds exactly, values differ from element to element and from rank to rank, and

- ``sum`` (and ``avg``, the sum divided by the rank count): every contribution is at least 1 and
  the total fits the type's exact range, so a contribution missed or counted twice changes the
  result;
- ``prod``: one rank contributes 2 or 3 to each element, the next −1 (1 for unsigned types), every
  other rank 1, so the product is exact and a missed or doubled factor changes its size or sign;
- ``max``/``min``: values spread over the element and the rank;
- ``band``/``bor``: every rank clears (``band``) or sets (``bor``) its own bit of each element (the
  bit moves with the element; never one of the top two, so no result is the poison below), so a
  contribution missed shows as long as the type has a bit per rank;
- ``bxor``: well-spread values (the top two bits 0 again), so a contribution missed or counted
  twice flips bits;
- ``land``/``lor``: every value is non-zero (``land``) or zero (``lor``) except one rank's at most
  elements, so a missed contribution flips the result between 0 and 1.

``bool`` data: ``sum`` and ``max`` are a logical OR and ``prod`` and ``min`` a logical AND (as in
numpy and PyTorch), with inputs chosen as for ``bor`` and ``band``.

The reference is computed with numpy from the very same inputs (each rank's contribution is
regenerated and combined with the operator). Integers are compared exactly; floating-point
results with a relative tolerance, as nccl-tests does (with these inputs every correct schedule
gives the exact result in any order of reduction, so the tolerance only matters for sums beyond
the exact range).

Inputs are written and results checked ``BLOCK`` elements at a time, so that besides the buffers
themselves a rank needs at most `WORKING_BYTES` of memory, whatever the size of the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from synth.collective import Kind
from synth.exec.layout import Layout

#: Names accepted for each data type (numpy's name first; nccl-tests' names too).
DTYPES: dict[str, np.dtype] = {
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32),
    "int64": np.dtype(np.int64),
    "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}
DTYPE_ALIASES = {"char": "int8", "int": "int32", "half": "float16", "float": "float32", "double": "float64"}


@dataclass(frozen=True)
class ReduceOp:
    """A reduction operator: its name, the numpy ufunc that combines two contributions elementwise,
    the data it applies to, and whether the result is divided by the rank count at the end (``avg``:
    the sum, then one division, as PyTorch's gloo backend does).

    ``kinds`` are the numpy dtype kinds it takes: ``f`` floating point, ``i``/``u`` signed and
    unsigned integers, ``b`` bool. They follow what ``torch.distributed.all_reduce`` accepts: AVG
    only on floating point (PyTorch refuses it on integers and bool), the bitwise operators only on
    integers and bool; MPI's logical AND/OR (``land``/``lor``, which PyTorch lacks) on integers and
    bool, each result 0 or 1."""

    name: str
    ufunc: np.ufunc
    kinds: str = "fiub"
    divides: bool = False

    def __call__(self, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        return self.ufunc(a, b, out=out)

    def takes(self, dtype: np.dtype) -> bool:
        """Whether the operator applies to data of type ``dtype``."""
        return np.dtype(dtype).kind in self.kinds

    def check(self, dtype: np.dtype) -> None:
        """ValueError, saying why, if the operator does not apply to ``dtype``."""
        if not self.takes(dtype):
            raise ValueError(f"{self.name} does not apply to {np.dtype(dtype).name} data ({_KIND_WORDS[self.kinds]})")

    def finish(self, out: np.ndarray, num_ranks: int) -> None:
        """What is left once every contribution is combined: ``avg`` divides by the rank count."""
        if self.divides and out.size:
            np.divide(out, num_ranks, out=out)


_KIND_WORDS = {
    "fiub": "any type",
    "f": "it needs floating-point data; PyTorch refuses AVG on integers and bool",
    "iub": "it needs integer or bool data",
}

OPS: dict[str, ReduceOp] = {
    "sum": ReduceOp("sum", np.add),
    "prod": ReduceOp("prod", np.multiply),
    "max": ReduceOp("max", np.maximum),
    "min": ReduceOp("min", np.minimum),
    "avg": ReduceOp("avg", np.add, "f", divides=True),
    "band": ReduceOp("band", np.bitwise_and, "iub"),
    "bor": ReduceOp("bor", np.bitwise_or, "iub"),
    "bxor": ReduceOp("bxor", np.bitwise_xor, "iub"),
    "land": ReduceOp("land", np.logical_and, "iub"),
    "lor": ReduceOp("lor", np.logical_or, "iub"),
}
#: other names for the operators: nccl-tests' and PyTorch's (``ReduceOp.PRODUCT``), MPI's
OP_ALIASES = {"product": "prod", "mean": "avg", "and": "band", "or": "bor", "xor": "bxor"}


def parse_dtype(name: str | np.dtype) -> np.dtype:
    """A supported numpy dtype by name (``float32``, ``float``, ``half``, …); ValueError otherwise."""
    if isinstance(name, np.dtype) or not isinstance(name, str):
        dtype = np.dtype(name)
        if dtype.name not in DTYPES:
            raise ValueError(f"data type {dtype.name} is not supported (supported: {', '.join(DTYPES)})")
        return dtype
    key = DTYPE_ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in DTYPES:
        raise ValueError(f"unknown data type {name!r} (supported: {', '.join(DTYPES)}; also {', '.join(DTYPE_ALIASES)})")
    return DTYPES[key]


def parse_op(name: str) -> ReduceOp:
    """A reduction operator by name (``sum``, ``prod``/``product``, ``band``, ``land``, …, case
    ignored; MPI's ``MPI_SUM`` spelling too); ValueError otherwise."""
    key = name.strip().lower().removeprefix("mpi_")
    key = OP_ALIASES.get(key, key)
    if key not in OPS:
        raise ValueError(f"unknown reduction operator {name!r} (supported: {', '.join(OPS)})")
    return OPS[key]


def exact_limit(dtype: np.dtype) -> int:
    """Largest whole number the type holds exactly, with every smaller one (capped at 2^31)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return 1
    if dtype.kind == "f":
        return min(2 ** (np.finfo(dtype).nmant + 1), 2**31)
    return min(int(np.iinfo(dtype).max), 2**31)


#: elements generated or checked at a time
BLOCK = 1 << 20
#: the most temporary memory a rank needs to generate or check one block (index, hashes, the
#: reference, float64 copies for the comparison): a bound, for the memory check before a run
WORKING_BYTES = 64 * BLOCK


def _hash(index: np.ndarray, salt: int) -> np.ndarray:
    """A well-spread uint64 per element index (Knuth's multiplicative hash, salted)."""
    with np.errstate(over="ignore"):
        x = index.astype(np.uint64) * np.uint64(2654435761) + np.uint64((salt * 40503 + 12345) & 0xFFFFFFFF)
        x ^= x >> np.uint64(13)
        x *= np.uint64(0x9E3779B1)
        return x >> np.uint64(16)


# ================================================================================= inputs
def payload(dtype: np.dtype, start: int, stop: int, seed: int = 0) -> np.ndarray:
    """The data of a non-reduction collective: element g of the logical whole (see `send_data`)."""
    return _payload_at(dtype, np.arange(start, stop, dtype=np.int64), seed)


def _payload_at(dtype: np.dtype, index: np.ndarray, seed: int) -> np.ndarray:
    limit = min(exact_limit(dtype), 2**20) + (1 if dtype.kind == "b" else 0)  # bool: 0 and 1
    values = _hash(index, seed) % np.uint64(limit)
    return values.astype(dtype)


def contribution(layout: Layout, op: ReduceOp, rank: int, start: int, stop: int, seed: int = 0) -> np.ndarray:
    """Rank ``rank``'s contribution to elements ``start … stop−1`` of a reduction's input buffer."""
    dtype, r = layout.dtype, layout.num_ranks
    index = np.arange(start, stop, dtype=np.int64)
    h = _hash(index, seed)
    name = op.name
    if dtype.kind == "b":  # sum and max are OR, prod and min AND
        name = {"sum": "bor", "max": "bor", "prod": "band", "min": "band"}.get(name, name)
    if name in ("band", "bor"):
        return _one_bit_each(dtype, h, rank, r, set_bit=name == "bor")
    if name in ("land", "lor"):  # one rank at most elements is the odd one out: 0 for land, non-zero for lor
        odd = (h % np.uint64(r + 1)).astype(np.int64) == rank
        if dtype.kind == "b":
            return odd if name == "lor" else ~odd
        values = (1 + (h + np.uint64(rank)) % np.uint64(min(100, exact_limit(dtype)))).astype(dtype)
        return np.where(odd, values, 0).astype(dtype) if name == "lor" else np.where(odd, 0, values).astype(dtype)
    if name == "bxor":  # the top two bits 0, as in band/bor: no result is the poison
        mixed = _hash(index * np.int64(r + 1) + rank, seed + 1)
        if dtype.kind == "b":
            return (mixed & np.uint64(1)).astype(bool)
        return (mixed & np.uint64((1 << (dtype.itemsize * 8 - 2)) - 1)).astype(dtype)
    if name in ("sum", "avg"):
        spread = max(1, min(1024, exact_limit(dtype) // r))
        values = np.uint64(1) + (h + np.uint64(rank * 7919)) % np.uint64(spread)
        return values.astype(dtype)
    if op.name == "prod":
        values = np.ones(stop - start, dtype=dtype)
        big = (h % np.uint64(r)).astype(np.int64)
        values[big == rank] = (2 + (index[big == rank] & 1)).astype(dtype)
        if r > 1 and dtype.kind != "u":
            values[(big + 1) % r == rank] = -1
        return values
    spread = max(2, min(2**16, exact_limit(dtype)))
    values = (h + np.uint64(rank) * np.uint64(104729)) % np.uint64(spread)
    if dtype.kind != "u":
        return (values.astype(np.int64) - spread // 2).astype(dtype)
    return values.astype(dtype)


def _one_bit_each(dtype: np.dtype, h: np.ndarray, rank: int, num_ranks: int, *, set_bit: bool) -> np.ndarray:
    """``bor``: each rank sets one bit of each element (its own, shifted by the element's hash) and
    leaves the rest 0; ``band``: each rank clears that bit and leaves the rest 1. bool has one bit:
    at most elements one rank is the odd one out (True for ``bor``, False for ``band``)."""
    if dtype.kind == "b":
        odd = (h % np.uint64(num_ranks + 1)).astype(np.int64) == rank
        return odd if set_bit else ~odd
    bits = dtype.itemsize * 8 - 2  # never the top two: a result never equals the poison (the type's maximum)
    shift = ((h + np.uint64(rank)) % np.uint64(bits)).astype(np.uint64)
    one = np.left_shift(np.uint64(1), shift)
    values = one if set_bit else ~one
    return values.astype(dtype) if dtype.kind == "u" else values.view(np.int64).astype(dtype)


Values = Callable[[int, int], np.ndarray]


def _send_values(layout: Layout, rank: int, op: ReduceOp | None, seed: int) -> Values:
    """Elements ``lo … hi−1`` of ``rank``'s send buffer (see `send_data`)."""
    m, r, kind = layout.count, layout.num_ranks, layout.kind
    if layout.collective.is_reduction:
        assert op is not None
        return lambda lo, hi: contribution(layout, op, rank, lo, hi, seed)
    if kind in (Kind.ALLGATHER, Kind.GATHER):
        base = rank * m
    elif kind is Kind.ALLTOALL:
        base = rank * r * m
    else:
        base = 0  # broadcast, scatter (root)
    return lambda lo, hi: payload(layout.dtype, base + lo, base + hi, seed)


def send_data(
    layout: Layout,
    rank: int,
    op: ReduceOp | None,
    seed: int = 0,
    *,
    out: np.ndarray | None = None,
    block: int = BLOCK,
    tick: Callable[[], None] | None = None,
) -> np.ndarray | None:
    """The contents of ``rank``'s send buffer (None where it is not read: non-roots of broadcast
    and scatter), written into ``out`` if given, ``block`` elements at a time (calling ``tick``
    after each, a sign of life for a watchdog).

    Non-reductions send slices of one logical whole of payload values: element j of part p is
    payload ``p·m + j`` where p is the piece's owner (allgather, gather), the part (scatter,
    broadcast), or ``s·R + d`` for alltoall's block from s to d. Reductions send each rank's own
    contribution to every element."""
    if not layout.sends_data(rank):
        return None
    n = layout.send_count
    values = _send_values(layout, rank, op, seed)
    if out is None:
        out = np.empty(n, dtype=layout.dtype)
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        out[lo:hi] = values(lo, hi)
        if tick is not None:
            tick()
    return out


def _expected_values(layout: Layout, rank: int, op: ReduceOp | None, seed: int, tick: Callable[[], None] | None) -> Values:
    """Elements ``lo … hi−1`` of what ``rank``'s receive buffer must hold (see `expected_output`)."""
    m, r, kind, dtype = layout.count, layout.num_ranks, layout.kind, layout.dtype
    if layout.collective.is_reduction:
        assert op is not None
        base = rank * m if kind is Kind.REDUCE_SCATTER else 0

        def reduced(lo: int, hi: int) -> np.ndarray:
            acc = contribution(layout, op, 0, base + lo, base + hi, seed)
            for other in range(1, r):
                op(acc, contribution(layout, op, other, base + lo, base + hi, seed), out=acc)
                if tick is not None:
                    tick()
            op.finish(acc, r)
            return acc

        return reduced
    if kind is Kind.ALLTOALL:  # part s came from rank s: its block for this rank

        def exchanged(lo: int, hi: int) -> np.ndarray:
            index = np.arange(lo, hi, dtype=np.int64)
            source, offset = np.divmod(index, max(1, m))
            return _payload_at(dtype, (source * r + rank) * m + offset, seed)

        return exchanged
    base = rank * m if kind is Kind.SCATTER else 0  # allgather, gather, broadcast: from 0
    return lambda lo, hi: payload(dtype, base + lo, base + hi, seed)


def expected_output(
    layout: Layout,
    rank: int,
    op: ReduceOp | None,
    seed: int = 0,
    *,
    block: int = BLOCK,
    tick: Callable[[], None] | None = None,
) -> np.ndarray | None:
    """The numpy reference: what ``rank``'s receive buffer must hold (None where it holds no
    result). Reductions regenerate every rank's contribution and combine them, ``block`` elements
    at a time."""
    if not layout.has_output(rank):
        return None
    n = layout.recv_count
    values = _expected_values(layout, rank, op, seed, tick)
    out = np.empty(n, dtype=layout.dtype)
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        out[lo:hi] = values(lo, hi)
    return out


def tolerance(dtype: np.dtype, num_ranks: int) -> float:
    """Relative tolerance for floating-point results (0 for integers)."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        return 0.0
    return float(np.finfo(dtype).eps) * max(2, num_ranks)


def count_wrong(got: np.ndarray, want: np.ndarray, num_ranks: int) -> int:
    """Elements of ``got`` that differ from ``want`` (beyond the tolerance for floats; NaN is wrong)."""
    if got.shape != want.shape:
        raise ValueError(f"result has {got.size} elements, expected {want.size}")
    tol = tolerance(got.dtype, num_ranks)
    if tol == 0.0:
        return int(np.count_nonzero(got != want))
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    ok = np.abs(g - w) <= tol * np.maximum(np.abs(w), 1.0)
    return int(got.size - np.count_nonzero(ok))


def poison_value(dtype: np.dtype) -> float | int:
    """What receive and work buffers are filled with before a checked run, so that a value the
    schedule never wrote cannot pass for a result: NaN for floats, the type's maximum for integers
    (never produced by these inputs, except by integer wrap-around and by the bitwise operators).
    bool has no value to spare: True, so an unwritten element shows where the result is False."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return True
    return float("nan") if dtype.kind == "f" else int(np.iinfo(dtype).max)


def check_rank(
    layout: Layout,
    rank: int,
    recv: np.ndarray,
    op: ReduceOp | None,
    seed: int = 0,
    *,
    tick: Callable[[], None] | None = None,
    block: int = BLOCK,
) -> int:
    """Wrong elements in ``rank``'s receive buffer (0 where the rank holds no result), checked
    ``block`` elements at a time against the reference."""
    if not layout.has_output(rank):
        return 0
    n = layout.recv_count
    if recv.size < n:
        raise ValueError(f"result has {recv.size} elements, expected {n}")
    values = _expected_values(layout, rank, op, seed, tick)
    wrong = 0
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        wrong += count_wrong(recv[lo:hi], values(lo, hi), layout.num_ranks)
    return wrong
