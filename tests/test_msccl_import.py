"""MSCCL XML: reading and writing the format, and importing algorithms as verified schedules.

Real files (../shared/reference/realdata/msccl-*.xml beside the checkout; the tests skip, saying so,
when it is absent) must all import and verify, or be refused for the right reason; algorithms
written here in MSCCLang's dialect (tests/msccl_fixtures.py) and small hand-written ones check each
rule of the symbolic execution."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from synth import generators as gen
from synth.builtin import get_topology
from synth.collective import Kind
from synth.errors import InputError
from synth.interop import msccl_xml
from synth.interop.msccl_import import MscclInvalid, execute, import_msccl
from synth.interop.msccl_xml import algo_to_xml, buffer_layout, parse_msccl, parse_msccl_text
from synth.verify import verify

from .conftest import REALDATA
from .msccl_fixtures import allpairs_allreduce, direct_allgather, recursive_doubling_allgather

# what each real algorithm becomes: (collective, chunks, steps, transfers, in place); None: refused
EXPECTED = {
    "msccl-allgather-ndv5-8gpu": ("allgather", 16, 1, 112, True),
    "msccl-allreduce-ring-8gpu": ("allreduce", 8, 14, 112, True),
    "msccl-allreduce-small-ll-8gpu": ("allreduce", 8, 2, 112, True),
    "msccl-alltoall-8gpu": ("alltoall", 64, 1, 56, False),
    # written by MSCCLang (nop steps with cnt="0", offsets -1, scratch buffers, several channels)
    "msccl-allreduce-allpairs-4gpu-mscclang": ("allreduce", 16, 2, 96, True),
    "msccl-allreduce-hierarchical-2x2gpu-mscclang": ("allreduce", 4, 4, 24, True),
    "msccl-alltoall-two-step-2x4gpu-mscclang": ("alltoall", 64, 2, 80, False),
    "msccl-allgather-recursive-doubling-4gpu-mscclang": None,
}
#: the race in the MSCCLang recursive-doubling allgather: rank 1 sends o[0..1] (rank 0's piece) to
#: rank 3 after waiting for the receive of o[0] only; o[1] arrives in another thread block
RD_RACE = (
    "INVALID: gpu 1 tb 2 step 0 (s): reads o[1], which gpu 1 tb 1 step 1 (r) writes, and nothing orders the two: "
    "a race between thread blocks"
)


def _real(stem: str):
    path = REALDATA / f"{stem}.xml"
    if not path.is_file():
        pytest.skip(f"needs {path} (the shared real-data folder beside the checkout)")
    return path


def _topology_for(ngpus: int):
    return get_topology("dgx-a100") if ngpus == 8 else gen.nvswitch(ngpus)


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_real_files_parse_and_write_back_identically(stem):
    path = _real(stem)
    algo, warnings = parse_msccl(path)
    assert warnings == []
    again, _ = parse_msccl_text(algo_to_xml(algo), str(path))
    assert again == algo


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_real_files_import_and_verify(stem):
    path = _real(stem)
    algo, warnings = parse_msccl(path)
    topo = _topology_for(algo.ngpus)
    if EXPECTED[stem] is None:
        with pytest.raises(MscclInvalid) as err:
            import_msccl(algo, topo, warnings=warnings)
        assert RD_RACE in str(err.value)
        return
    result = import_msccl(algo, topo, warnings=warnings)
    kind, chunks, steps, transfers, inplace = EXPECTED[stem]
    s = result.schedule
    assert (s.collective.kind.value, s.collective.num_chunks, s.num_steps, s.num_transfers, result.inplace) == (
        kind,
        chunks,
        steps,
        transfers,
        inplace,
    )
    assert verify(s, topo).ok
    assert result.race_checked and result.warnings == []
    assert s.method == "msccl-import" and s.params["msccl"]["file"] == path.name


def test_the_shared_real_files_are_all_covered():
    if not REALDATA.is_dir():
        pytest.skip(f"needs {REALDATA} (the shared real-data folder beside the checkout)")
    assert set(p.stem for p in REALDATA.glob("msccl-*.xml")) <= set(EXPECTED)


def test_ring_allreduce_is_reduce_scatter_then_allgather(builtin):
    algo, _ = parse_msccl(_real("msccl-allreduce-ring-8gpu"))
    s = import_msccl(algo, builtin("dgx-a100")).schedule
    ops = [{t.op for t in step} for step in s.steps]
    assert ops == [{"reduce"}] * 7 + [{"copy"}] * 7
    # one hop along the ring 0 → 1 → … → 7 → 0 per transfer
    assert all(t.dst == (t.src + 1) % 8 for step in s.steps for t in step)


def test_all_pairs_allreduce_scratch_becomes_reduce_into_owner(builtin):
    # rank r sends chunk j to rank j's scratch, j reduces it locally (re): a reduce r -> j
    algo, _ = parse_msccl(_real("msccl-allreduce-small-ll-8gpu"))
    s = import_msccl(algo, builtin("dgx-a100")).schedule
    first, second = s.steps
    assert {(t.src, t.dst, t.chunk, t.op) for t in first} == {(r, j, j, "reduce") for r in range(8) for j in range(8) if r != j}
    assert {(t.src, t.dst, t.chunk, t.op) for t in second} == {(j, r, j, "copy") for r in range(8) for j in range(8) if r != j}


def test_alltoall_and_allgather_chunk_numbering(builtin):
    algo, _ = parse_msccl(_real("msccl-alltoall-8gpu"))
    s = import_msccl(algo, builtin("dgx-a100")).schedule
    # rank s's i[d] is synth chunk s*8+d, sent to d
    assert {(t.src, t.dst, t.chunk) for t in s.steps[0]} == {(a, b, a * 8 + b) for a in range(8) for b in range(8) if a != b}
    algo, _ = parse_msccl(_real("msccl-allgather-ndv5-8gpu"))
    s = import_msccl(algo, builtin("dgx-a100")).schedule
    # in place: rank r's chunks sit at o[2r], o[2r+1]
    assert {(t.src, t.chunk) for t in s.steps[0]} == {(r, c) for r in range(8) for c in (2 * r, 2 * r + 1)}


# ------------------------------------------------------------------------------ MSCCLang's dialect
@pytest.mark.parametrize("n", [3, 4, 5])
def test_mscclang_nops_with_count_zero_import(n):
    """MSCCLang writes extra waits as nop steps with cnt="0" and offsets -1; they wait, and move nothing."""
    text = allpairs_allreduce(n)
    assert 'type="nop"' in text and 'cnt="0"' in text and 'srcoff="-1"' in text
    algo, warnings = parse_msccl_text(text, "pairs.xml")
    assert warnings == []
    result = import_msccl(algo, gen.nvswitch(n), warnings=warnings)
    s = result.schedule
    # reduce-scatter into each chunk's owner, then its allgather: 2 steps, n·n chunks
    assert (s.collective.num_chunks, s.num_steps, s.num_transfers) == (n * n, 2, 2 * n * n * (n - 1))
    assert {t.op for t in s.steps[0]} == {"reduce"} and {t.op for t in s.steps[1]} == {"copy"}
    assert all(t.dst == t.chunk // n for t in s.steps[0]) and result.warnings == []
    execute(algo, fifo_capacity=1)


def test_a_nops_wait_is_kept(n=3):
    """Without the wait its nop carries, the all-pairs allreduce reduces data whose arrival nothing
    orders before it."""
    text = allpairs_allreduce(n)
    lines = text.splitlines()
    first_nop = next(i for i, line in enumerate(lines) if 'type="nop"' in line)
    lines[first_nop] = lines[first_nop].replace('depid="1" deps="1"', 'depid="-1" deps="-1"')
    algo, _ = parse_msccl_text("\n".join(lines), "nowait.xml")
    with pytest.raises(MscclInvalid, match=r"gpu 0 tb 0 step 1 \(re\): reads s\[0\], which gpu 0 tb 1 step 1 \(r\) writes"):
        execute(algo)


def test_a_step_after_waiting_nops_must_wait_itself():
    # the runtime attaches a nop's wait to the next step, and refuses the file if that one has none
    text = allpairs_allreduce(3).replace(
        'type="re" srcbuf="s" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="2" deps="1"',
        'type="re" srcbuf="s" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1"',
        1,
    )
    with pytest.raises(InputError, match=r"gpu\[0\]\.tb\[0\]\.step\[1\]\.depid = -1: follows nop step 0, which waits"):
        parse_msccl_text(text, "lone.xml")


def test_nops_at_the_end_of_a_thread_block_do_not_wait():
    # the runtime drops nops after the last step that moves data, waits and all: one waiting for a
    # step that never publishes progress (no hasdep) does not hang
    tail = '<step s="2" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="1" deps="0" hasdep="0"/>'
    algo, _ = parse_msccl_text(_allgather_2().replace('hasdep="0"/></tb>', 'hasdep="0"/>' + tail + "</tb>", 1), "tail.xml")
    execute(algo)


def test_a_nop_without_a_wait_shifts_the_published_step_numbers():
    # the runtime does not count a nop without a wait, so the receive (step 2) publishes 1: a wait
    # for step 2 of that thread block is never satisfied
    extra = '<step s="1" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="-1" deps="-1" hasdep="0"/>'
    g0 = _gpu(
        0,
        [
            _tb(0, 1, 1, [_st(0, "s", "i0", "o0"), extra, _st(2, "r", "i0", "o1", hasdep=1)]),
            _tb(1, -1, -1, [_st(0, "cpy", "i0", "o0"), _st(1, "cpy", "o1", "o1", dep=(0, 2))]),
        ],
        i=1,
    )
    g1 = _gpu(
        1, [_tb(0, 0, 0, [_st(0, "s", "i0", "o1"), _st(1, "r", "i0", "o0")]), _tb(1, -1, -1, [_st(0, "cpy", "i0", "o1")])], i=1
    )
    algo, warnings = parse_msccl_text(_algo("allgather", 2, [g0, g1]), "shift.xml")
    assert warnings == [
        "shift.xml: gpu[0].tb[0].step[1] is a nop without a dependency: the runtime skips it without counting it, "
        "so later steps of this thread block are known to others by a number one lower"
    ]
    with pytest.raises(MscclInvalid, match=r"gpu 0 tb 1 step 1 \(cpy\): deadlock: waits forever for tb 0 step 2 \(no step 2"):
        execute(algo)


def test_a_race_between_thread_blocks_is_named_with_both_steps_and_the_slot():
    algo, _ = parse_msccl_text(recursive_doubling_allgather(racy=True), "rd.xml")
    with pytest.raises(MscclInvalid) as err:
        import_msccl(algo, gen.nvswitch(4))
    assert str(err.value).startswith("rd.xml: " + RD_RACE)
    # waiting for both receives (a nop, then the send's own wait) makes it correct
    fixed, _ = parse_msccl_text(recursive_doubling_allgather(racy=False), "rd.xml")
    s = import_msccl(fixed, gen.nvswitch(4)).schedule
    assert (s.num_steps, s.num_transfers) == (2, 24)


@pytest.mark.parametrize("n", [4, 32, 64])
def test_files_of_any_gpu_count_import(n):
    algo, warnings = parse_msccl_text(direct_allgather(n), "ag.xml")
    s = import_msccl(algo, gen.nvswitch(n), warnings=warnings).schedule
    assert (s.num_steps, s.num_transfers) == (1, n * (n - 1))


# ---------------------------------------------------------------------------- hand-written files
HEAD = '<algo name="t" proto="Simple" nchannels="1" nchunksperloop="{n}" ngpus="{g}" coll="{coll}" inplace="{ip}">'


def _algo(coll: str, n: int, gpus: list[str], ip: int = 0) -> str:
    return HEAD.format(n=n, g=len(gpus), coll=coll, ip=ip) + "".join(gpus) + "</algo>"


def _gpu(gid: int, tbs: list[str], i: int = 2, o: int = 2, s: int = 0) -> str:
    return f'<gpu id="{gid}" i_chunks="{i}" o_chunks="{o}" s_chunks="{s}">' + "".join(tbs) + "</gpu>"


def _tb(tid: int, send: int, recv: int, steps: list[str]) -> str:
    return f'<tb id="{tid}" send="{send}" recv="{recv}" chan="0">' + "".join(steps) + "</tb>"


def _st(s: int, kind: str, src: str, dst: str, dep=(-1, -1), hasdep: int = 0, cnt: int = 1) -> str:
    """A step; ``src``/``dst`` are buffer and offset, e.g. "i0", "s1"."""
    return (
        f'<step s="{s}" type="{kind}" srcbuf="{src[0]}" srcoff="{src[1:]}" dstbuf="{dst[0]}" dstoff="{dst[1:]}" '
        f'cnt="{cnt}" depid="{dep[0]}" deps="{dep[1]}" hasdep="{hasdep}"/>'
    )


def _allgather_2(send0="i0", copy0="cpy", extra0=(), extra1=(), cnt=1, hasdep_copy=0, dep_send=(-1, -1), s0=0) -> str:
    """Out-of-place allgather on 2 ranks: exchange pieces, copy the own piece to the output;
    the arguments break it in the ways the tests need."""
    g0 = _gpu(
        0,
        [
            _tb(0, 1, 1, [_st(0, "s", send0, "o0", cnt=cnt, dep=dep_send), _st(1, "r", "i0", "o1")]),
            _tb(1, -1, -1, [_st(0, copy0, "i0", "o0", hasdep=hasdep_copy), *extra0]),
        ],
        i=1,
        s=s0,
    )
    g1 = _gpu(
        1,
        [_tb(0, 0, 0, [_st(0, "s", "i0", "o1"), _st(1, "r", "i0", "o0"), *extra1]), _tb(1, -1, -1, [_st(0, "cpy", "i0", "o1")])],
        i=1,
    )
    return _algo("allgather", 2, [g0, g1])


def test_a_small_hand_written_algorithm_imports():
    algo, _ = parse_msccl_text(_allgather_2())
    s = import_msccl(algo, gen.ring(2)).schedule
    assert [[(t.src, t.dst, t.chunk) for t in step] for step in s.steps] == [[(0, 1, 0), (1, 0, 1)]]


def test_wrong_result_is_invalid():
    algo, _ = parse_msccl_text(_allgather_2(copy0="nop"), "ag.xml")
    expect = r"ag.xml: INVALID: at the end rank 0's o\[0\] holds no data; a allgather needs chunk 0 there"
    with pytest.raises(MscclInvalid, match=expect):
        execute(algo)


def test_deadlock_is_reported_with_the_stuck_step():
    # both ranks receive before sending
    def gpu(r: int) -> str:
        exchange = _tb(0, 1 - r, 1 - r, [_st(0, "r", "i0", f"o{1 - r}"), _st(1, "s", "i0", f"o{r}")])
        return _gpu(r, [exchange, _tb(1, -1, -1, [_st(0, "cpy", "i0", f"o{r}")])], i=1)

    algo, _ = parse_msccl_text(_algo("allgather", 2, [gpu(0), gpu(1)]), "dl.xml")
    with pytest.raises(MscclInvalid, match=r"gpu 0 tb 0 step 0 \(r\): deadlock: waits forever for a message from gpu 1"):
        execute(algo)


def test_a_dependency_on_a_step_without_hasdep_deadlocks_like_the_runtime():
    # rank 0's send waits for its copy (tb 1 step 0); the runtime publishes progress only at hasdep steps
    algo, _ = parse_msccl_text(_allgather_2(dep_send=(1, 0)), "hd.xml")
    with pytest.raises(MscclInvalid, match=r"waits forever for tb 1 step 0 \(no step 0 or later of tb 1 has hasdep=1\)"):
        execute(algo)
    fixed, _ = parse_msccl_text(_allgather_2(dep_send=(1, 0), hasdep_copy=1))
    execute(fixed)


def test_a_race_is_found():
    # rank 0 receives into o[1] in tb 0 and also copies its input over o[1] in tb 1, unordered
    algo, _ = parse_msccl_text(_allgather_2(extra0=[_st(1, "cpy", "i0", "o1")]), "race.xml")
    expect = r"gpu 0 tb 0 step 1 \(r\): writes o\[1\], which gpu 0 tb 1 step 1 \(cpy\) writes, and nothing orders the two"
    with pytest.raises(MscclInvalid, match=expect):
        execute(algo)


def test_a_receive_nothing_uses_is_left_out_with_a_warning():
    # rank 1 sends its chunk a second time, into rank 0's scratch, where nothing reads it
    text = _allgather_2(extra0=[], extra1=[_st(2, "s", "i0", "s0")], s0=1).replace(
        '<step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>',
        '<step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>'
        '<step s="2" type="r" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>',
        1,
    )
    algo, _ = parse_msccl_text(text, "extra.xml")
    result = import_msccl(algo, gen.ring(2))
    assert result.warnings == [
        "extra.xml: 1 received chunk(s) were never used (overwritten, or left where they landed, before being stored "
        "in an output, added into a value or sent on); they are left out of the schedule"
    ]
    assert result.schedule.num_transfers == 2


def test_counts_must_fit_the_buffers():
    with pytest.raises(InputError, match="outside its declared 1 chunk"):
        parse_msccl_text(_allgather_2(cnt=2))


def test_a_message_nobody_receives_is_invalid():
    algo, _ = parse_msccl_text(_allgather_2(extra1=[_st(2, "s", "i0", "o1")]), "left.xml")
    with pytest.raises(MscclInvalid, match="gpu 1 tb 0 step 2 sends to gpu 0 on channel 0, but no step receives it"):
        execute(algo)


def test_reading_uninitialized_scratch_is_invalid():
    algo, _ = parse_msccl_text(_allgather_2(send0="s0", s0=1), "u.xml")
    with pytest.raises(MscclInvalid, match=r"reads s\[0\], which holds no data at that point"):
        execute(algo)


def test_a_reduction_step_in_a_copy_collective_is_invalid():
    algo, _ = parse_msccl_text(_allgather_2(extra1=[_st(2, "re", "o0", "o0")]), "red.xml")
    with pytest.raises(MscclInvalid, match="a reduction step in a allgather"):
        execute(algo)


def test_double_counting_is_invalid():
    # allreduce on 2 ranks, 1 chunk: both reduce the other's value in, then rank 0 adds rank 1's again
    g0 = _tb(0, 1, 1, [_st(0, "s", "i0", "o0"), _st(1, "rrc", "i0", "i0"), _st(2, "r", "i0", "s0"), _st(3, "re", "s0", "i0")])
    g1 = _tb(0, 0, 0, [_st(0, "s", "i0", "o0"), _st(1, "rrc", "i0", "i0"), _st(2, "s", "i0", "s0")])
    algo, _ = parse_msccl_text(_algo("allreduce", 1, [_gpu(0, [g0], 1, 1, 1), _gpu(1, [g1], 1, 1)], ip=1), "dc.xml")
    with pytest.raises(MscclInvalid, match=r"counts the contribution of rank\(s\) 0, 1 twice in chunk 0"):
        execute(algo)


def test_forwarding_a_foreign_partial_untouched_is_refused():
    # rank 1 receives rank 0's partial into scratch and forwards it to rank 2 without adding its own:
    # synth holds one value per rank and chunk, so this cannot be expressed (and rank 1's part is lost)
    g0 = _gpu(0, [_tb(0, 1, -1, [_st(0, "s", "i0", "s0")])], i=1, o=1)
    g1 = _gpu(1, [_tb(0, 2, 0, [_st(0, "r", "i0", "s0"), _st(1, "s", "s0", "s0")])], i=1, o=1, s=1)
    g2 = _gpu(2, [_tb(0, -1, 1, [_st(0, "rrc", "i0", "i0")])], i=1, o=1)
    algo, _ = parse_msccl_text(_algo("reduce", 1, [g0, g1, g2], ip=1), "fw.xml")
    with pytest.raises(MscclInvalid):
        execute(algo, root=2)


def test_root_is_inferred_for_rooted_collectives():
    # broadcast from rank 1 on 3 ranks: only rank 1 reads its input
    sender = [
        _tb(0, 0, -1, [_st(0, "s", "i0", "o0")]),
        _tb(1, 2, -1, [_st(0, "s", "i0", "o0")]),
        _tb(2, -1, -1, [_st(0, "cpy", "i0", "o0")]),
    ]
    gpus = [
        _gpu(0, [_tb(0, -1, 1, [_st(0, "r", "i0", "o0")])], i=0, o=1),
        _gpu(1, sender, i=1, o=1),
        _gpu(2, [_tb(0, -1, 1, [_st(0, "r", "i0", "o0")])], i=0, o=1),
    ]
    algo, _ = parse_msccl_text(_algo("broadcast", 1, gpus))
    result = import_msccl(algo, gen.fully_connected(3))
    assert result.schedule.collective.root == 1
    with pytest.raises(InputError, match=r"position 0 is outside rank 1's input buffer of 0 chunk\(s\) in this broadcast"):
        import_msccl(algo, gen.fully_connected(3), root=0)


# ------------------------------------------------------------------------------- malformed input
def _one(step: str, send: int = 1, recv: int = -1, tid: int = 0) -> str:
    return _algo("allgather", 2, [_gpu(0, [_tb(tid, send, recv, [step] if step else [])], i=1), _gpu(1, [], i=1)])


_S = _st(0, "s", "i0", "o0")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<algo", "line 1 column 1: malformed XML (unclosed token)"),
        ("<system/>", '(root element) = "system": expected <algo>'),
        (HEAD.format(n=2, g=2, coll="bcast", ip=0) + "</algo>", 'algo.coll = "bcast": unknown collective'),
        (HEAD.format(n=2, g="two", coll="allgather", ip=0) + "</algo>", 'algo.ngpus = "two": expected an integer'),
        (HEAD.format(n=2, g=2, coll="allgather", ip=0) + "</algo>", "algo.ngpus = 2: the file has 0 <gpu> element(s)"),
        (_one(_st(0, "x", "i0", "o0")), 'gpu[0].tb[0].step[0].type = "x": unknown step type'),
        (_one(_S, send=-1), "a sending step in a thread block without a send peer"),
        (_one("", tid=1), "thread block ids must run 0 … n-1; 0 is missing"),
        (_one("", send=0), "cannot send to or receive from its own GPU"),
        (_one(_st(0, "s", "i0", "o0", dep=(3, 0))), "gpu 0 has no thread block 3"),
        (_one(_st(0, "s", "i0", "o0", cnt=72)), "count must be 1 … 71"),
        (_one(_st(0, "s", "i0", "o0", cnt=0)), "count must be 1 … 71"),
        (_one(_st(0, "nop", "i-1", "o-1", cnt=-1)), "gpu[0].tb[0].step[0].cnt = -1: must be at least 0"),
    ],
)
def test_malformed_files_name_the_field(text, message):
    with pytest.raises(InputError) as err:
        parse_msccl_text(text, "bad.xml")
    assert str(err.value).startswith("bad.xml: ") and message in str(err.value)


# ------------------------------------------------------------------------------- hostile input
def _allgather_2_with(**attrs: str) -> str:
    """`_allgather_2` with header attributes replaced."""
    text = _allgather_2()
    head, rest = text.split(">", 1)
    for key, value in attrs.items():
        head = re.sub(rf'{key}="[^"]*"', f'{key}="{value}"', head)
    return head + ">" + rest


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        # Python's int() reads all of these; the runtime's C parser does not read them as the same number
        ({"ngpus": "0_2"}, 'algo.ngpus = "0_2": expected an integer (ASCII digits'),
        ({"ngpus": "\u0662"}, 'algo.ngpus = "\u0662": expected an integer'),  # Arabic-Indic two
        ({"ngpus": " 2"}, 'algo.ngpus = " 2": expected an integer'),
        ({"ngpus": "+2"}, 'algo.ngpus = "+2": expected an integer'),
        ({"nchunksperloop": "1e12"}, 'algo.nchunksperloop = "1e12": expected an integer'),
        ({"nchunksperloop": "9" * 30}, "algo.nchunksperloop = " + '"' + "9" * 30 + '": out of range (more than 64 bits)'),
        ({"nchunksperloop": "9223372036854775808"}, "out of range (more than 64 bits)"),
        # a size the file cannot mean, refused before anything of that size is allocated (a GPU count
        # the file cannot mean: test_a_hostile_file_is_refused_in_bounded_memory_and_time)
        (
            {"nchunksperloop": "1000000000000"},
            "algo.nchunksperloop = 1000000000000: the file's steps write 4 chunk(s) in all, and allgather of that many "
            "chunks on 2 GPUs needs at least 500000000000 chunk writes",
        ),
    ],
)
def test_hostile_numbers_are_one_line_naming_the_field(attrs, message):
    with pytest.raises(InputError) as err:
        parse_msccl_text(_allgather_2_with(**attrs), "h.xml")
    assert str(err.value).startswith("h.xml: ") and message in str(err.value) and "\n" not in str(err.value)


def test_integer_fields_of_steps_and_gpus_are_strict_too():
    text = _allgather_2().replace('i_chunks="1"', 'i_chunks="\u0661"', 1)
    with pytest.raises(InputError, match=r'gpu\[0\]\.i_chunks = "\u0661": expected an integer'):
        parse_msccl_text(text, "h.xml")
    text = _allgather_2().replace('depid="-1"', 'depid="-0_1"', 1)
    with pytest.raises(InputError, match=r'step\[0\]\.depid = "-0_1": expected an integer'):
        parse_msccl_text(text, "h.xml")
    # negative values where they mean something are still read
    algo, _ = parse_msccl_text(_allgather_2(), "ok.xml")
    assert algo.gpus[0].threadblocks[1].send == -1


def test_a_chunk_count_past_what_synth_can_hold_is_refused(monkeypatch):
    monkeypatch.setattr(msccl_xml, "MAX_POSITIONS", 3)
    with pytest.raises(
        InputError, match=r"algo.nchunksperloop = 2: 2 GPUs x 2 chunks = 4 buffer positions; synth executes at most 3"
    ):
        parse_msccl_text(_allgather_2(), "big.xml")


def test_a_hostile_file_is_refused_in_bounded_memory_and_time(tmp_path):
    """The 5 KB file with ngpus 10^12 that once took 20 GB, and the nchunksperloop 1e12 that hung,
    through the command line: one line, exit 2, well within seconds and an address space of 2 GB."""
    import subprocess
    import sys
    import time

    gpus = "".join(f'<gpu id="{g}" i_chunks="1" o_chunks="1" s_chunks="0"/>' for g in range(8))
    for attrs, message in (
        ('ngpus="1000000000000" nchunksperloop="8"', "algo.ngpus = 1000000000000: the file has 8 <gpu> element(s)"),
        ('ngpus="8" nchunksperloop="1000000000000"', "algo.nchunksperloop = 1000000000000: the file's steps write 0"),
        ('ngpus="8" nchunksperloop="1e12"', 'algo.nchunksperloop = "1e12": expected an integer'),
    ):
        path = tmp_path / "hostile.xml"
        path.write_text(f'<algo name="x" proto="Simple" nchannels="1" {attrs} coll="allreduce" inplace="1">{gpus}</algo>')
        code = (
            "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
            "from synth.cli import main; sys.argv = ['synth', 'import', 'msccl', sys.argv[1], '-o', sys.argv[2]]; main()"
        )
        started = time.monotonic()
        p = subprocess.run(
            [sys.executable, "-c", code, str(path), str(tmp_path / "s.json")], capture_output=True, text=True, timeout=60
        )
        assert time.monotonic() - started < 30
        assert p.returncode == 2, p.stderr
        assert p.stderr.count("\n") == 1 and p.stderr.startswith(f"synth: error: {path}: {message}")


def test_unknown_elements_are_skipped_with_a_warning():
    text = _allgather_2().replace("</algo>", "<extra/></algo>")
    algo, warnings = parse_msccl_text(text, "w.xml")
    assert warnings == ["w.xml: skipped unknown element <extra> in <algo>"]
    import_msccl(algo, gen.ring(2))


def test_layouts_follow_nccl_in_place_conventions():
    ag = buffer_layout(Kind.ALLGATHER, 4, 8, inplace=True)
    assert ag.canonical(2, "i", 1) == ("o", 5) and ag.declared_sizes(2) == (0, 8)
    rs = buffer_layout(Kind.REDUCE_SCATTER, 4, 8, inplace=True)
    assert rs.canonical(3, "o", 0) == ("i", 6) and rs.declared_sizes(3) == (8, 0)
    a2a = buffer_layout(Kind.ALLTOALL, 4, 4, inplace=False)
    assert a2a.input_slot(1, 1 * 4 + 2) == ("i", 2) and a2a.output_slot(2, 1 * 4 + 2) == ("o", 1)
    red = buffer_layout(Kind.REDUCE, 4, 2, inplace=True, root=2)
    assert red.canonical(2, "o", 1) == ("i", 1) and red.canonical(1, "o", 1) == ("o", 1)
    assert red.declared_sizes(1) == (2, 0) and red.declared_sizes(2) == (2, 0)


@pytest.mark.parametrize("stem", sorted(stem for stem, expect in EXPECTED.items() if expect is not None))
def test_real_files_also_run_with_one_message_fifos(stem):
    algo, _ = parse_msccl(_real(stem))
    execute(algo, fifo_capacity=1)


def test_default_topology_for_the_cli_is_a_builtin_nvswitch_box():
    from synth.cli.interop import DEFAULT_NVSWITCH_BOX

    for gpus, name in DEFAULT_NVSWITCH_BOX.items():
        t = get_topology(name)
        assert t.num_ranks == gpus and any("nvswitch" in s.name for s in t.switches)


def test_a_file_declared_both_ways_is_imported_the_way_it_works(builtin):
    text = _real("msccl-allgather-ndv5-8gpu").read_text().replace('outofplace="0"', 'outofplace="1"', 1)
    algo, _ = parse_msccl_text(text, "both.xml")
    result = import_msccl(algo, builtin("dgx-a100"))
    assert result.inplace
    assert result.warnings == [
        "both.xml: declared out of place too, but fails that way: both.xml: INVALID: gpu 0 tb 14 step 0 (s): "
        "reads o[0], which holds no data at that point"
    ]


def test_the_readme_fixture_is_what_the_fixture_writer_writes():
    """tests/data/msccl-fixture-allpairs-4gpu.xml (README's import example) is
    `allpairs_allreduce(4)` under one comment line saying so."""
    text = (Path(__file__).parent / "data" / "msccl-fixture-allpairs-4gpu.xml").read_text(encoding="utf-8")
    comment, body = text.split("\n", 1)
    assert comment.startswith("<!-- Written by the project") and body == allpairs_allreduce(4)
