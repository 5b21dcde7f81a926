"""Inputs, reference results and checking (synth.exec.data): wrong results must show."""

import numpy as np
import pytest

from synth.collective import Collective, Kind
from synth.exec import data
from synth.exec.layout import Layout


def test_names():
    assert data.parse_dtype("float") == np.float32 and data.parse_dtype("half") == np.float16
    assert data.parse_dtype(np.dtype("int64")) == np.int64
    with pytest.raises(ValueError, match="bfloat16"):
        data.parse_dtype("bfloat16")
    assert data.parse_op("MAX").ufunc is np.maximum
    assert data.parse_op("PRODUCT").name == "prod" and data.parse_op("MPI_LAND").name == "land"
    with pytest.raises(ValueError, match="unknown reduction operator"):
        data.parse_op("premul_sum")


def test_operators_apply_where_pytorch_applies_them():
    """avg only on floating point, the bitwise and logical operators only on integers and bool (as
    torch.distributed.all_reduce accepts them); the rest on everything."""
    floats, ints, bools = np.dtype(np.float32), np.dtype(np.int8), np.dtype(np.bool_)
    assert [data.OPS["avg"].takes(d) for d in (floats, ints, bools)] == [True, False, False]
    for name in ("band", "bor", "bxor", "land", "lor"):
        assert [data.OPS[name].takes(d) for d in (floats, ints, bools)] == [False, True, True]
    with pytest.raises(ValueError, match="floating-point"):
        data.OPS["avg"].check(ints)
    out = np.array([3, 0, 5], np.int32)
    data.OPS["land"](out, np.array([2, 2, 0], np.int32), out=out)
    assert out.tolist() == [1, 0, 0]  # MPI's LAND: 1 or 0
    avg = np.array([3.0, 6.0], np.float32)
    data.OPS["avg"].finish(avg, 3)
    assert avg.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("dtype", list(data.DTYPES))
@pytest.mark.parametrize("op", list(data.OPS))
@pytest.mark.parametrize("r", [5, 16])
def test_reference_is_exact_and_sensitive(dtype, op, r):
    """The reference equals a plain reduction of every rank's inputs; dropping a rank's contribution
    changes it (for band/bor where the type has a bit per rank); doubling one changes it for the
    operators that are not idempotent (sum, prod, bxor, except OR and AND on bool)."""
    reduce = data.OPS[op]
    if not reduce.takes(np.dtype(dtype)):
        pytest.skip(f"{op} does not apply to {dtype}")
    layout = Layout(Collective(Kind.ALLREDUCE, r, 1), data.DTYPES[dtype], 4096)
    inputs = np.stack([data.send_data(layout, rank, reduce) for rank in range(r)])
    want = data.expected_output(layout, 0, reduce, block=1000)
    combined = reduce.ufunc.reduce(inputs, axis=0).astype(layout.dtype)
    reduce.finish(combined, r)
    assert data.count_wrong(combined, want, r) == 0
    assert not np.any(want == data.poison_value(layout.dtype)) or layout.dtype.kind == "b"
    exact = inputs.astype(np.float64)
    if op in ("sum", "prod", "avg") and layout.dtype.kind != "b":
        total = np.sum(exact, axis=0) if op != "prod" else np.prod(exact, axis=0)
        assert np.all(np.abs(total) <= data.exact_limit(layout.dtype))  # no overflow, exact
    missing = reduce.ufunc.reduce(inputs[1:], axis=0).astype(layout.dtype)
    reduce.finish(missing, r)
    bits_per_rank = op not in ("band", "bor") or layout.dtype.kind == "b" or layout.dtype.itemsize * 8 - 2 >= r
    if bits_per_rank:
        assert data.count_wrong(missing, want, r) > 0
    if op in ("sum", "prod", "avg", "bxor") and layout.dtype.kind != "b":
        doubled = reduce(reduce.ufunc.reduce(inputs, axis=0), inputs[3]).astype(layout.dtype)
        reduce.finish(doubled, r)
        assert data.count_wrong(doubled, want, r) > 0


@pytest.mark.parametrize("kind", [Kind.ALLGATHER, Kind.ALLTOALL, Kind.SCATTER, Kind.BROADCAST, Kind.GATHER])
def test_reference_of_data_movement(kind):
    r, m = 4, 5
    c = Collective(kind, r, 1, 0 if kind in (Kind.SCATTER, Kind.BROADCAST, Kind.GATHER) else None)
    layout = Layout(c, np.int32, m)
    sends = [data.send_data(layout, rank, None) for rank in range(r)]
    for rank in range(r):
        want = data.expected_output(layout, rank, None)
        if kind in (Kind.ALLGATHER, Kind.GATHER):
            assert np.array_equal(want, np.concatenate(sends)) if rank == 0 or kind is Kind.ALLGATHER else want is None
        elif kind is Kind.ALLTOALL:
            assert np.array_equal(want, np.concatenate([s[rank * m : (rank + 1) * m] for s in sends]))
        elif kind is Kind.SCATTER:
            assert np.array_equal(want, sends[0][rank * m : (rank + 1) * m])
        else:
            assert np.array_equal(want, sends[0])
    values = np.concatenate([s for s in sends if s is not None])
    assert len(np.unique(values)) > values.size // 2  # values differ, so a chunk in the wrong place shows


def test_count_wrong():
    want = np.arange(10, dtype=np.float32)
    got = want.copy()
    assert data.count_wrong(got, want, 4) == 0
    got[3] = np.nan
    got[5] += 1
    assert data.count_wrong(got, want, 4) == 2
    assert data.count_wrong(np.array([1, 2], np.int8), np.array([1, 3], np.int8), 4) == 1
    assert data.tolerance(np.int32, 8) == 0.0 and data.tolerance(np.float32, 8) > 0


@pytest.mark.parametrize("kind", list(Kind))
def test_inputs_and_checks_do_not_depend_on_the_block_size(kind):
    """Inputs are generated and results checked a block at a time (bounded memory at any size):
    the values and the wrong counts are the same whatever the block."""
    r, m = 4, 37
    c = Collective(kind, r, 2, 1 if kind in (Kind.SCATTER, Kind.BROADCAST, Kind.GATHER, Kind.REDUCE) else None)
    layout = Layout(c, np.int32, m)
    op = data.OPS["max"] if c.is_reduction else None
    ticks = []
    for rank in range(r):
        whole = data.send_data(layout, rank, op, 5)
        blocked = data.send_data(layout, rank, op, 5, block=7, tick=lambda: ticks.append(1))
        assert (whole is None and blocked is None) or np.array_equal(whole, blocked)
        want = data.expected_output(layout, rank, op, 5)
        if want is None:
            continue
        assert np.array_equal(want, data.expected_output(layout, rank, op, 5, block=7))
        got = want.copy()
        got[::5] = data.poison_value(layout.dtype)
        assert data.check_rank(layout, rank, got, op, 5, block=7) == data.check_rank(layout, rank, got, op, 5) > 0
    assert ticks  # a sign of life per block
