"""Checks that run on every rank of a torch.distributed job (started by tests/torch_job.py).

Every rank makes every rank's input itself (it depends only on the rank and the case), so each
computes the reference result without communication; synth's collective and torch's own run on
the same inputs, and both are compared with the reference: integers, bool and data movement bit
for bit; floating point exactly where the inputs are small whole numbers (every order of summation
gives the same), within a tolerance where they are not (``random`` float cases: a schedule sums
in another order than gloo, so the last bits may differ).
"""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist

import synth.torch as st
from synth.collective import Kind
from synth.errors import InputError
from synth.exec import data
from synth.exec.torch_backend.executor import NUMPY_TYPES, check_op, native_supports
from synth.schedule import load_schedule

TORCH_OPS = {
    "sum": dist.ReduceOp.SUM,
    "prod": dist.ReduceOp.PRODUCT,
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
    "avg": dist.ReduceOp.AVG,
    "band": dist.ReduceOp.BAND,
    "bor": dist.ReduceOp.BOR,
    "bxor": dist.ReduceOp.BXOR,
}


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def make_input(rank: int, n: int, dtype: torch.dtype, op: str | None, seed: int, random: bool = False) -> torch.Tensor:
    """Rank ``rank``'s input of ``n`` elements: small whole numbers (exact in every type and every
    order of reduction), bits for bool, normal floats when ``random``."""
    g = torch.Generator().manual_seed(seed * 1009 + rank * 7919 + n)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if random and dtype.is_floating_point:
        return torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
    if op == "prod":
        values = torch.randint(0, 3, (n,), generator=g) - 1  # -1, 0, 1 ...
        values[values == 0] = 2 if rank % 2 == 0 else 1
        if dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
            values = values.abs()
        return values.to(dtype)
    lo = 0 if not (dtype.is_floating_point or dtype.is_signed) else -4
    hi = 5 if op in ("sum", "avg") else 100
    return torch.randint(lo, hi, (n,), generator=g).to(dtype)


def reference(inputs: list[torch.Tensor], op: str) -> torch.Tensor:
    """The reduction of ``inputs`` over ranks, in rank order (numpy, or float32 for bfloat16)."""
    dtype = inputs[0].dtype
    if dtype == torch.bfloat16:
        return reference([x.float() for x in inputs], op).to(torch.bfloat16)
    arrays = [x.numpy().copy() for x in inputs]
    acc = arrays[0].copy()
    ufunc = data.OPS[op].ufunc
    for x in arrays[1:]:
        ufunc(acc, x, out=acc)
    if op == "avg":
        acc = (acc / len(arrays)).astype(acc.dtype)
    return torch.from_numpy(acc)


def _differs(got: torch.Tensor, want: torch.Tensor, tol: float) -> int:
    """Elements that differ (beyond ``tol`` relative for floating point); -1 if the shapes differ."""
    if got.shape != want.shape:
        return -1
    if got.dtype.is_floating_point and tol:
        g, w = got.double(), want.double()
        return int((~((g - w).abs() <= tol * w.abs().clamp(min=1.0))).sum())
    return int((got != want).sum())


def _tol(dtype: torch.dtype, op: str | None, random: bool, r: int) -> float:
    if not dtype.is_floating_point:
        return 0.0
    if random or op == "avg":
        return float(torch.finfo(dtype).eps) * 4 * r
    return 0.0


def collectives(schedules: list[list[str]], counts: list[int], dtypes: list[str], ops: list[str], seed: int = 0) -> dict:
    """Every schedule at every count, data type and operator (reductions) through synth.torch,
    against the reference and against torch's own collective. ``schedules``: [file, topology file]."""
    rank, r = dist.get_rank(), dist.get_world_size()
    cases, bad = 0, []
    for path, topology in schedules:
        schedule = load_schedule(path)
        kind = schedule.collective.kind
        for count in counts:
            for dname in dtypes:
                dtype = _dtype(dname)
                for op in ops if schedule.collective.is_reduction else [None]:
                    if op is not None:
                        try:
                            check_op(op, dtype)
                        except ValueError:
                            continue
                    for random in (False, True) if dtype.is_floating_point and op in ("sum", "avg") else (False,):
                        cases += 1
                        for what, n in _one_case(schedule, topology, kind, count, dtype, op, seed, random, rank, r):
                            bad.append(f"{path.rsplit('/', 1)[-1]} count {count} {dname} {op} random={random}: {what} {n}")
    return {"cases": cases, "bad": bad}


def _one_case(schedule, topology, kind: Kind, count: int, dtype, op, seed, random, rank, r):
    """Run one case both ways; yields (what differs, how many elements)."""
    root = schedule.collective.root if schedule.collective.root is not None else 0
    tol = _tol(dtype, op, random, r)
    torch_op = TORCH_OPS.get(op) if op else None
    our_op = torch_op if torch_op is not None else op
    native = native_supports(op, dtype) and dtype not in (torch.int16, torch.uint16, torch.uint32, torch.uint64)
    kw = {"schedule": schedule, "topology": topology, "timeout": 120}
    if kind in (Kind.ALLREDUCE, Kind.REDUCE, Kind.BROADCAST):
        inputs = [make_input(x, count, dtype, op, seed, random) for x in range(r)]
        want = reference(inputs, op) if op else inputs[root]
        ours = inputs[rank].clone()
        if kind is Kind.BROADCAST and rank != root:
            ours.zero_()
        call = {
            Kind.ALLREDUCE: lambda t: st.all_reduce(t, our_op, **kw),
            Kind.REDUCE: lambda t: st.reduce(t, root, our_op, **kw),
            Kind.BROADCAST: lambda t: st.broadcast(t, root, **kw),
        }[kind]
        call(ours)
        has_result = kind is not Kind.REDUCE or rank == root
        if has_result and (n := _differs(ours, want, tol)):
            yield "ours vs reference", n
        if kind is Kind.REDUCE and rank != root and not torch.equal(ours, inputs[rank]):
            yield "reduce changed a non-root's tensor", -1
        if native:
            theirs = inputs[rank].clone()
            if kind is Kind.BROADCAST and rank != root:
                theirs.zero_()
            {
                Kind.ALLREDUCE: lambda t: dist.all_reduce(t, torch_op),
                Kind.REDUCE: lambda t: dist.reduce(t, root, torch_op),
                Kind.BROADCAST: lambda t: dist.broadcast(t, root),
            }[kind](theirs)
            if has_result and (n := _differs(ours, theirs, tol)):
                yield "ours vs torch's", n
        return
    if kind in (Kind.ALLGATHER, Kind.GATHER):
        inputs = [make_input(x, count, dtype, op, seed) for x in range(r)]
        want = torch.cat(inputs)
        if kind is Kind.ALLGATHER:
            out = torch.zeros(r * count, dtype=dtype)
            st.all_gather_into_tensor(out, inputs[rank], **kw)
            if n := _differs(out, want, 0):
                yield "allgather vs reference", n
            inplace = torch.zeros(r, count, dtype=dtype)  # stacked, the rank's part in place
            inplace[rank] = inputs[rank]
            st.all_gather_into_tensor(inplace, inplace[rank], **kw)
            if n := _differs(inplace.view(-1), want, 0):
                yield "in-place allgather vs reference", n
            if native:
                theirs = torch.zeros(r * count, dtype=dtype)
                (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(theirs, inputs[rank])
                if n := _differs(out, theirs, 0):
                    yield "ours vs torch's", n
            return
        for separate in (False, True):
            whole = torch.zeros(r, count, dtype=dtype)
            parts = [torch.zeros(count, dtype=dtype) for _ in range(r)] if separate else list(whole.unbind(0))
            st.gather(inputs[rank], parts if rank == root else None, root, **kw)
            if rank == root and (n := _differs(torch.cat(parts), want, 0)):
                yield f"gather (separate list {separate}) vs reference", n
        if native:
            theirs = [torch.zeros(count, dtype=dtype) for _ in range(r)]
            dist.gather(inputs[rank], theirs if rank == root else None, root)
            if rank == root and (n := _differs(torch.cat(theirs), want, 0)):
                yield "torch's gather vs reference", n
        return
    if kind in (Kind.REDUCE_SCATTER, Kind.SCATTER):
        inputs = [make_input(x, r * count, dtype, op, seed, random) for x in range(r)]
        want = (reference(inputs, op) if op else inputs[root]).narrow(0, rank * count, count)
        out = torch.zeros(count, dtype=dtype)
        if kind is Kind.REDUCE_SCATTER:
            st.reduce_scatter_tensor(out, inputs[rank], our_op, **kw)
        else:
            scatter_list = list(inputs[root].view(r, count).unbind(0)) if count else [torch.zeros(0, dtype=dtype)] * r
            st.scatter(out, [t.clone() for t in scatter_list] if rank == root else None, root, **kw)
        if n := _differs(out, want, tol):
            yield "ours vs reference", n
        if native:
            theirs = torch.zeros(count, dtype=dtype)
            if kind is Kind.REDUCE_SCATTER:
                (getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor)(
                    theirs, inputs[rank].clone(), torch_op
                )
            else:
                dist.scatter(theirs, list(inputs[root].view(r, count).unbind(0)) if rank == root else None, root)
            if n := _differs(out, theirs, tol):
                yield "ours vs torch's", n
        return
    inputs = [make_input(x, r * count, dtype, op, seed) for x in range(r)]  # alltoall
    want = torch.cat([inputs[x].narrow(0, rank * count, count) for x in range(r)])
    out = torch.zeros(r * count, dtype=dtype)
    st.all_to_all_single(out, inputs[rank], **kw)
    if n := _differs(out, want, 0):
        yield "ours vs reference", n
    if native:
        theirs = torch.zeros(r * count, dtype=dtype)
        dist.all_to_all_single(theirs, inputs[rank])
        if n := _differs(out, theirs, 0):
            yield "ours vs torch's", n


def refusals(schedule: str, topology: str, other_world: str, other_topology: str) -> dict:
    """What synth.torch refuses, each before any message: a schedule for another rank count or
    topology, the wrong collective, the wrong root, operators torch refuses, non-contiguous tensors,
    uneven alltoall splits. Returns the messages (rank 0's)."""
    rank = dist.get_rank()
    said: dict[str, str] = {}

    def refused(name: str, fn, exc=(ValueError, TypeError)) -> None:
        try:
            fn()
        except exc as e:
            said[name] = f"{type(e).__name__}: {e}"
        else:
            said[name] = "accepted"

    t = torch.ones(10)
    refused("other world", lambda: st.all_reduce(t, schedule=load_schedule(other_world)))
    refused("other topology", lambda: st.all_reduce(t, schedule=load_schedule(schedule), topology=other_topology), InputError)
    refused("wrong collective", lambda: st.broadcast(t, 0, schedule=load_schedule(schedule), topology=topology))
    refused(
        "avg on int",
        lambda: st.all_reduce(torch.ones(10, dtype=torch.int32), dist.ReduceOp.AVG, schedule=schedule, topology=topology),
    )
    refused("band on float", lambda: st.all_reduce(t, dist.ReduceOp.BAND, schedule=schedule, topology=topology))
    refused(
        "max on complex",
        lambda: st.all_reduce(torch.ones(4, dtype=torch.complex64), dist.ReduceOp.MAX, schedule=schedule, topology=topology),
    )
    refused(
        "premul sum",
        lambda: st.all_reduce(t, dist._make_nccl_premul_sum(2.0), schedule=schedule, topology=topology),  # type: ignore[attr-defined]
    )
    refused("not contiguous", lambda: st.all_reduce(torch.ones(4, 4).t(), schedule=schedule, topology=topology))
    dist.barrier()
    # and the calls still work afterwards
    ok = torch.full((10,), float(rank + 1))
    st.all_reduce(ok, schedule=schedule, topology=topology)
    said["after"] = str(ok[0].item())
    return said


def mismatch(schedule_a: str, schedule_b: str, topology: str) -> dict:
    """Rank 1 calls another schedule than the others: every rank gets a ValueError, no hang."""
    rank = dist.get_rank()
    path = schedule_b if rank == 1 else schedule_a
    t = torch.ones(100)
    try:
        st.all_reduce(t, schedule=load_schedule(path), topology=topology, timeout=60)
    except ValueError as exc:
        return {"error": str(exc)}
    return {"error": None}


def uneven_count(schedule: str, topology: str) -> dict:
    """Rank 1 passes one element more than the others: every rank gets a ValueError."""
    rank = dist.get_rank()
    t = torch.ones(100 + (rank == 1))
    try:
        st.all_reduce(t, schedule=schedule, topology=topology, timeout=60)
    except ValueError as exc:
        return {"error": str(exc)}
    return {"error": None}


def async_and_fallback(schedule_set: str, topology: str) -> dict:
    """async_op returns a completed handle; a size the set does not cover runs torch's own
    all_reduce, with one warning on rank 0."""
    r = dist.get_world_size()
    t = torch.ones(1000)
    work = st.all_reduce(t, schedule=schedule_set, topology=topology, async_op=True)
    done = bool(work.wait()) and work.is_completed() and torch.equal(work.get_future().value(), t)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        big = torch.ones(1 << 20)
        st.all_reduce(big, schedule=schedule_set, topology=topology)
        st.all_reduce(torch.ones(1 << 19), schedule=schedule_set, topology=topology)
    messages = [str(w.message) for w in caught if "synth" in str(w.message)]
    return {"done": done, "sum": float(t[0]), "big": float(big[0]), "r": r, "warnings": messages}


def ddp(steps: int, schedules: str, topology: str, width: int = 64, seed: int = 0) -> dict:
    """A small MLP trained for ``steps`` steps with plain DDP and with synth's hook, from the same
    start on the same data: the largest parameter difference, and what the hook did."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank = dist.get_rank()
    torch.manual_seed(seed)

    def model():
        torch.manual_seed(seed)
        return torch.nn.Sequential(
            torch.nn.Linear(32, width), torch.nn.ReLU(), torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 4)
        )

    def train(net) -> list[torch.Tensor]:
        opt = torch.optim.SGD(net.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(seed * 100 + rank)
        for _ in range(steps):
            x = torch.randn(16, 32, generator=g)
            y = torch.randn(16, 4, generator=g)
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
        return [p.detach().clone() for p in net.parameters()]

    plain = train(DDP(model(), bucket_cap_mb=0.01))
    hooked_model = DDP(model(), bucket_cap_mb=0.01)
    hook = st.allreduce_hook(schedules, topology=topology, timeout=120)
    hooked_model.register_comm_hook(None, hook)
    hooked = train(hooked_model)
    diff = max(float((a - b).abs().max()) for a, b in zip(plain, hooked))
    return {"max_diff": diff, "calls": dict(hook.calls), "fallback": sorted(hook.fallback_sizes)}


def data_types_everywhere(schedule: str, topology: str) -> dict:
    """The types PyTorch has and numpy has not (bfloat16) or gloo cannot reduce (int16, uint16 …
    uint64) through synth's allreduce, against the reference."""
    rank, r = dist.get_rank(), dist.get_world_size()
    bad = []
    for name in ("bfloat16", "int16", "uint16", "uint32", "uint64", "complex64"):
        dtype = _dtype(name)
        for op in ("sum", "max", "min", "prod", "bxor", "land"):
            try:
                check_op(op, dtype)
            except ValueError:
                continue
            inputs = [make_input(x, 37, dtype, op, 3) if not dtype.is_complex else torch.randn(37, dtype=dtype) for x in range(r)]
            if dtype.is_complex:
                g = torch.Generator().manual_seed(7)
                inputs = [torch.complex(torch.randint(-4, 5, (37,), generator=g).float(), torch.zeros(37)) for _ in range(r)]
            t = inputs[rank].clone()
            st.all_reduce(t, TORCH_OPS.get(op, op), schedule=schedule, topology=topology)
            want = reference(inputs, op) if name != "complex64" else sum(inputs[1:], inputs[0])
            if _differs(t, want, 0):
                bad.append(f"{name} {op}")
    return {"bad": bad, "numpy_types": len(NUMPY_TYPES)}


def several(checks: list[list]) -> dict:
    """Several checks in one job ([name, arguments] each; one start-up of R processes instead of
    several): each one's result by name."""
    return {name: globals()[name](**args) for name, args in checks}


def compiled_once(schedule: str, topology: str) -> dict:
    """Calls on the same and on other tensors of one shape and data type share one compiled plan;
    another data type or count compiles another."""
    loaded = load_schedule(schedule)
    r = dist.get_world_size()
    a, b = torch.ones(1000), torch.ones(1000)
    for _ in range(5):
        st.all_reduce(a, schedule=loaded, topology=topology)
    st.all_reduce(b, schedule=loaded, topology=topology)
    ex = st.executor(loaded, topology=topology)
    after_one_shape = ex.compiled
    st.all_reduce(torch.ones(1000, dtype=torch.float64), schedule=loaded, topology=topology)
    st.all_reduce(torch.ones(999), schedule=loaded, topology=topology)
    return {"one shape": after_one_shape, "three shapes": ex.compiled, "a": float(a[0]), "b": float(b[0]), "r": r}
