"""The MSCCL algorithm XML: data model, reader, writer, and each collective's buffer layout.

An MSCCL algorithm (the format the MSCCL runtime, msccl-executor-nccl and RCCL's MSCCL support
load) is an ``<algo>`` with one ``<gpu>`` per rank; a GPU runs thread blocks (``<tb>``), each with
at most one peer it sends to and one it receives from, on one channel; a thread block runs its
``<step>``s in order. Buffers are counted in chunks: ``i`` (the input), ``o`` (the output) and ``s``
(scratch); a step names a source and destination buffer and offset and a count of consecutive
chunks. ``docs/interop.md`` describes the semantics this module and its users implement.

This module only reads and writes the format and knows where each collective's data sits in the
buffers (`BufferLayout`); `synth.interop.msccl_import` and `synth.interop.msccl_export` give it
meaning.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from synth.collective import Collective, Kind
from synth.errors import InputError
from synth.fileio import read_text_file

# ---------------------------------------------------------------------------------- runtime limits
#: Steps per thread block (the runtime's MSCCL_MAX_NUM_STEPS; step numbers run 0 … 255).
MAX_STEPS_PER_THREADBLOCK = 256
#: Thread blocks on one channel of one GPU (MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL).
MAX_THREADBLOCKS_PER_CHANNEL = 32
#: Channels (NCCL's MAXCHANNELS).
MAX_CHANNELS = 32
#: A step's count must stay below this (MSCCL_MAX_COUNT).
MAX_COUNT = 72

PROTOCOLS = ("Simple", "LL", "LL128")
BUFFERS = ("i", "o", "s")

#: Step types the runtime executes, with what each does (see docs/interop.md).
STEP_TYPES = {
    "s": "send",
    "r": "recv",
    "rcs": "recv-copy-send",
    "rrs": "recv-reduce-send",
    "rrc": "recv-reduce-copy",
    "rrcs": "recv-reduce-copy-send",
    "cpy": "copy",
    "re": "reduce",
    "nop": "nop",
}
SENDING = frozenset({"s", "rcs", "rrs", "rrcs"})
RECEIVING = frozenset({"r", "rcs", "rrs", "rrc", "rrcs"})
REDUCING = frozenset({"rrs", "rrc", "rrcs", "re"})

#: ``coll`` attribute values, as the runtime spells them, and the synth collective of each.
COLL_NAMES: dict[Kind, str] = {
    Kind.ALLREDUCE: "allreduce",
    Kind.ALLGATHER: "allgather",
    Kind.REDUCE_SCATTER: "reducescatter",
    Kind.ALLTOALL: "alltoall",
    Kind.BROADCAST: "broadcast",
    Kind.REDUCE: "reduce",
    Kind.GATHER: "gather",
    Kind.SCATTER: "scatter",
}
_COLL_ALIASES = {"reduce_scatter": Kind.REDUCE_SCATTER, "reduce-scatter": Kind.REDUCE_SCATTER}


def coll_kind(name: str) -> Kind | None:
    """The collective of a ``coll`` attribute (msccl-tools' ``reduce_scatter`` is accepted too)."""
    key = name.strip().lower()
    for kind, text in COLL_NAMES.items():
        if text == key:
            return kind
    return _COLL_ALIASES.get(key)


# ========================================================================================== model
@dataclass(frozen=True)
class Step:
    """One ``<step>``: ``count`` consecutive chunks from ``srcbuf[srcoff…]`` to ``dstbuf[dstoff…]``
    (which of the two are local depends on ``type``); waits for step ``deps`` of thread block
    ``depid`` of the same GPU when ``depid >= 0``; ``hasdep`` announces that another thread block
    waits for this step."""

    s: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    count: int = 1
    depid: int = -1
    deps: int = -1
    hasdep: bool = False
    synth_step: int | None = None  # extra attribute written by synth: the schedule step a receive belongs to


@dataclass(frozen=True)
class Threadblock:
    """One ``<tb>``: ``send``/``recv`` peers (-1 for none) and its channel."""

    id: int
    send: int
    recv: int
    channel: int
    steps: tuple[Step, ...] = ()


@dataclass(frozen=True)
class Gpu:
    """One ``<gpu>`` (a rank) with its buffer sizes in chunks."""

    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    threadblocks: tuple[Threadblock, ...] = ()


@dataclass(frozen=True)
class Algo:
    """An MSCCL algorithm. ``inplace``/``outofplace``/``min_bytes``/``max_bytes`` are None when the
    file does not give them (older files)."""

    name: str
    proto: str
    nchannels: int
    nchunksperloop: int
    ngpus: int
    coll: str
    inplace: bool | None
    outofplace: bool | None
    min_bytes: int | None
    max_bytes: int | None
    gpus: tuple[Gpu, ...] = ()
    source: str = field(default="<msccl>", compare=False)

    @property
    def kind(self) -> Kind | None:
        return coll_kind(self.coll)

    def threadblock(self, gpu: int, tb: int) -> Threadblock:
        return self.gpus[gpu].threadblocks[tb]


# ========================================================================================= reader
def _where(*parts: str) -> str:
    return ".".join(p for p in parts if p)


#: An integer attribute: ASCII decimal digits, with a minus sign where the field allows -1. Python's
#: ``int()`` also takes ``0_8``, ``+8``, `` 8 `` and non-ASCII digits such as Arabic-Indic ones,
#: which the runtime's C parser does not read as the same number; such values are refused.
_INTEGER = re.compile(r"-?[0-9]+")
#: int64 (the runtime's widest field, ``minBytes``/``maxBytes``) has 19 digits.
_MAX_DIGITS = 19
_INT64_MAX = 2**63 - 1


class _Attrs:
    """Typed attribute access that reports the file, the field and the value."""

    def __init__(self, elem: ET.Element, path: str, source: str):
        self.elem = elem
        self.path = path
        self.source = source

    def text(self, name: str, default: str | None = None) -> str:
        value = self.elem.get(name)
        if value is None:
            if default is not None:
                return default
            raise InputError(self.source, _where(self.path, name), None, f"<{self.elem.tag}> needs the attribute {name!r}")
        return value

    def int(self, name: str, default: int | None = None, *, minimum: int | None = None) -> int:
        raw = self.elem.get(name)
        if raw is None:
            if default is not None:
                return default
            raise InputError(self.source, _where(self.path, name), None, f"<{self.elem.tag}> needs the attribute {name!r}")
        if not _INTEGER.fullmatch(raw):
            raise InputError(self.source, _where(self.path, name), raw, "expected an integer (ASCII digits, e.g. 8 or -1)")
        if len(raw.lstrip("-")) > _MAX_DIGITS or abs(int(raw)) > _INT64_MAX:
            raise InputError(self.source, _where(self.path, name), raw, "out of range (more than 64 bits)")
        value = int(raw)
        if minimum is not None and value < minimum:
            raise InputError(self.source, _where(self.path, name), value, f"must be at least {minimum}")
        return value

    def optional_int(self, name: str) -> int | None:
        return None if self.elem.get(name) is None else self.int(name)

    def flag(self, name: str) -> bool | None:
        if self.elem.get(name) is None:
            return None
        value = self.int(name)
        if value not in (0, 1):
            raise InputError(self.source, _where(self.path, name), value, "expected 0 or 1")
        return bool(value)


def parse_msccl_text(text: str, source: str = "<msccl>") -> tuple[Algo, list[str]]:
    """Parse MSCCL algorithm XML; returns the algorithm and warnings (unknown elements, runtime
    limits exceeded). Raises `InputError` for anything the runtime would reject as malformed."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line, col = exc.position
        reason = re.sub(r": line \d+, column \d+$", "", str(exc))
        raise InputError(source, f"line {line} column {col + 1}", None, f"malformed XML ({reason})", show_value=False) from None
    warnings: list[str] = []
    if root.tag != "algo":
        raise InputError(source, "(root element)", root.tag, "expected <algo> (an MSCCL algorithm file)")
    a = _Attrs(root, "algo", source)
    ngpus = a.int("ngpus", minimum=1)
    nchannels = a.int("nchannels", minimum=1)
    nchunks = a.int("nchunksperloop", minimum=1)
    coll = a.text("coll")
    if coll_kind(coll) is None:
        names = ", ".join(COLL_NAMES.values())
        raise InputError(source, "algo.coll", coll, f"unknown collective (expected one of {names})")
    proto = a.text("proto", "Simple")
    if proto not in PROTOCOLS:
        raise InputError(source, "algo.proto", proto, f"unknown protocol (expected one of {', '.join(PROTOCOLS)})")
    if nchannels > MAX_CHANNELS:
        warnings.append(f"{source}: algo.nchannels = {nchannels}: runtimes allow at most {MAX_CHANNELS} channels")
    present = sum(1 for child in root if child.tag == "gpu")
    if present < ngpus:
        raise InputError(
            source, "algo.ngpus", ngpus, f"the file has {present} <gpu> element(s); every rank needs one (ids 0 … ngpus-1)"
        )
    gpus: dict[int, Gpu] = {}
    for child in root:
        if child.tag != "gpu":
            warnings.append(f"{source}: skipped unknown element <{child.tag}> in <algo>")
            continue
        gpu = _parse_gpu(child, ngpus, nchannels, source, warnings)
        if gpu.id in gpus:
            raise InputError(source, f"gpu[{gpu.id}].id", gpu.id, "duplicate gpu id")
        gpus[gpu.id] = gpu
    algo = Algo(
        name=a.text("name", ""),
        proto=proto,
        nchannels=nchannels,
        nchunksperloop=nchunks,
        ngpus=ngpus,
        coll=coll,
        inplace=a.flag("inplace"),
        outofplace=a.flag("outofplace"),
        min_bytes=a.optional_int("minBytes"),
        max_bytes=a.optional_int("maxBytes"),
        gpus=tuple(gpus[g] for g in range(ngpus)),
        source=source,
    )
    _check_dependencies(algo, warnings)
    kind = coll_kind(coll)
    assert kind is not None
    _check_chunk_count(source, kind, ngpus, nchunks, algo.gpus)
    return algo, warnings


#: Buffer positions (ranks × chunks of the larger buffer; for alltoall × ranks again, its synth
#: chunks) the symbolic execution holds at most: every position may carry a value object of a few
#: hundred bytes. 2^22 is twice the largest schedule in ``generated/`` (the 128-rank alltoall,
#: 128 × 128 × 128) and four times a 128-rank allgather of 8192 chunks (packing at 1 GiB).
MAX_POSITIONS = 1 << 22

#: Step types that write a local buffer position.
_WRITING = frozenset({"r", "rcs", "rrc", "rrcs", "cpy", "re"})


def _check_chunk_count(source: str, kind: Kind, ngpus: int, nchunks: int, gpus: Iterable[Gpu]) -> None:
    """Refuse a ``nchunksperloop`` the file cannot mean, before anything of that size is allocated.

    On two or more ranks, every collective needs at least nchunksperloop / 2 chunk writes in all
    (a reduce-scatter one per chunk; a gather (R-1)/R of them at its root; the others more), and a
    step writes at most ``cnt`` chunks; so a count beyond twice what the steps write cannot be
    computed by the file. Past that, the symbolic execution's memory bounds it (`MAX_POSITIONS`)."""
    written = sum(st.count for g in gpus for tb in g.threadblocks for st in tb.steps if st.type in _WRITING)
    if ngpus >= 2 and nchunks > 2 * written:
        raise InputError(
            source,
            "algo.nchunksperloop",
            nchunks,
            f"the file's steps write {written} chunk(s) in all, and {COLL_NAMES[kind]} of that many chunks on {ngpus} "
            f"GPUs needs at least {(nchunks + 1) // 2} chunk writes",
        )
    positions = ngpus * nchunks * (ngpus if kind is Kind.ALLTOALL else 1)
    if positions > MAX_POSITIONS:
        raise InputError(
            source,
            "algo.nchunksperloop",
            nchunks,
            f"{ngpus} GPUs x {nchunks} chunks{' x ' + str(ngpus) + ' peers' if kind is Kind.ALLTOALL else ''} = "
            f"{positions} buffer positions; synth executes at most {MAX_POSITIONS} symbolically",
        )


def parse_msccl(path: str | Path) -> tuple[Algo, list[str]]:
    """Read an MSCCL algorithm file (see `parse_msccl_text`)."""
    path = Path(path)
    text = read_text_file(path)
    return parse_msccl_text(text, str(path))


def _parse_gpu(elem: ET.Element, ngpus: int, nchannels: int, source: str, warnings: list[str]) -> Gpu:
    gid = _Attrs(elem, "gpu", source).int("id", minimum=0)
    path = f"gpu[{gid}]"
    if gid >= ngpus:
        raise InputError(source, f"{path}.id", gid, f"not a rank of the algorithm (ngpus = {ngpus})")
    a = _Attrs(elem, path, source)
    i_chunks = a.int("i_chunks", minimum=0)
    o_chunks = a.int("o_chunks", minimum=0)
    s_chunks = a.int("s_chunks", 0, minimum=0)
    tbs: dict[int, Threadblock] = {}
    for child in elem:
        if child.tag != "tb":
            warnings.append(f"{source}: skipped unknown element <{child.tag}> in {path}")
            continue
        tb = _parse_tb(child, gid, ngpus, nchannels, (i_chunks, o_chunks, s_chunks), path, source, warnings)
        if tb.id in tbs:
            raise InputError(source, f"{path}.tb[{tb.id}].id", tb.id, "duplicate thread block id")
        tbs[tb.id] = tb
    for expect in range(len(tbs)):
        if expect not in tbs:
            raise InputError(source, f"{path}.tb", sorted(tbs)[-1], f"thread block ids must run 0 … n-1; {expect} is missing")
    per_channel: dict[int, int] = {}
    for tb in tbs.values():
        per_channel[tb.channel] = per_channel.get(tb.channel, 0) + 1
    for chan, n in sorted(per_channel.items()):
        if n > MAX_THREADBLOCKS_PER_CHANNEL:
            warnings.append(
                f"{source}: {path} has {n} thread blocks on channel {chan}; runtimes allow {MAX_THREADBLOCKS_PER_CHANNEL}"
            )
    return Gpu(gid, i_chunks, o_chunks, s_chunks, tuple(tbs[t] for t in range(len(tbs))))


def _parse_tb(
    elem: ET.Element,
    gid: int,
    ngpus: int,
    nchannels: int,
    sizes: tuple[int, int, int],
    gpath: str,
    source: str,
    warnings: list[str],
) -> Threadblock:
    tid = _Attrs(elem, f"{gpath}.tb", source).int("id", minimum=0)
    path = f"{gpath}.tb[{tid}]"
    a = _Attrs(elem, path, source)
    peers = {}
    for key in ("send", "recv"):
        peer = a.int(key, -1)
        if peer < -1 or peer >= ngpus:
            raise InputError(source, f"{path}.{key}", peer, f"not a rank (-1 or 0 … {ngpus - 1})")
        if peer == gid:
            raise InputError(source, f"{path}.{key}", peer, "a thread block cannot send to or receive from its own GPU")
        peers[key] = peer
    chan = a.int("chan", 0, minimum=0)
    if chan >= nchannels:
        raise InputError(source, f"{path}.chan", chan, f"beyond the algorithm's nchannels = {nchannels}")
    steps: list[Step] = []
    for child in elem:
        if child.tag != "step":
            warnings.append(f"{source}: skipped unknown element <{child.tag}> in {path}")
            continue
        step = _parse_step(child, len(steps), peers, sizes, path, source)
        steps.append(step)
    if len(steps) > MAX_STEPS_PER_THREADBLOCK:
        warnings.append(f"{source}: {path} has {len(steps)} steps; runtimes allow {MAX_STEPS_PER_THREADBLOCK}")
    return Threadblock(tid, peers["send"], peers["recv"], chan, tuple(steps))


def _parse_step(
    elem: ET.Element, index: int, peers: dict[str, int], sizes: tuple[int, int, int], tpath: str, source: str
) -> Step:
    a0 = _Attrs(elem, f"{tpath}.step", source)
    s = a0.int("s", index)
    path = f"{tpath}.step[{s}]"
    a = _Attrs(elem, path, source)
    if s != index:
        raise InputError(source, f"{path}.s", s, f"steps must be numbered 0, 1, … in order (expected {index})")
    kind = a.text("type")
    if kind not in STEP_TYPES:
        raise InputError(source, f"{path}.type", kind, f"unknown step type (expected one of {', '.join(STEP_TYPES)})")
    count = a.int("cnt", 1)
    # the runtime checks the count of steps that move data only: MSCCLang writes its nops with cnt="0"
    if kind == "nop":
        if count < 0:
            raise InputError(source, f"{path}.cnt", count, "must be at least 0")
    elif not 0 < count < MAX_COUNT:
        raise InputError(source, f"{path}.cnt", count, f"count must be 1 … {MAX_COUNT - 1}")
    depid = a.int("depid", -1, minimum=-1)
    deps = a.int("deps", -1, minimum=-1)
    if depid >= 0 and deps < 0:
        raise InputError(source, f"{path}.deps", deps, "a dependency (depid >= 0) needs the step it waits for")
    hasdep = a.flag("hasdep") or False
    bufs = {}
    for key in ("srcbuf", "dstbuf"):
        buf = a.text(key, "i")
        if buf not in BUFFERS:
            raise InputError(source, f"{path}.{key}", buf, "unknown buffer (expected i, o or s)")
        bufs[key] = buf
    srcoff = a.int("srcoff", -1, minimum=-1)
    dstoff = a.int("dstoff", -1, minimum=-1)
    if kind in SENDING and peers["send"] < 0:
        raise InputError(source, f"{path}.type", kind, "a sending step in a thread block without a send peer")
    if kind in RECEIVING and peers["recv"] < 0:
        raise InputError(source, f"{path}.type", kind, "a receiving step in a thread block without a recv peer")
    # the local ends must lie inside the declared buffers (the runtime checks the same)
    local_src = kind in ("s", "rrs", "rrc", "rrcs", "cpy", "re")
    local_dst = kind in ("r", "rcs", "rrc", "rrcs", "cpy", "re")
    size_of = dict(zip(BUFFERS, sizes))
    for used, bkey, okey, off in ((local_src, "srcbuf", "srcoff", srcoff), (local_dst, "dstbuf", "dstoff", dstoff)):
        if not used:
            continue
        buf = bufs[bkey]
        if off < 0 or off + count > size_of[buf]:
            raise InputError(
                source,
                f"{path}.{okey}",
                off,
                f"chunks {off} … {off + count - 1} of buffer {buf!r} are outside its declared {size_of[buf]} chunk(s)",
            )
    hint = a.optional_int("synth_step")
    return Step(s, kind, bufs["srcbuf"], srcoff, bufs["dstbuf"], dstoff, count, depid, deps, hasdep, hint)


def published_steps(tb: Threadblock) -> list[int]:
    """For each step of ``tb``, the step number the runtime counts for it, which is what it publishes
    when the step carries ``hasdep`` and what ``deps`` of other thread blocks are compared with.
    It is ``s`` except after nops without a wait, which the runtime skips without counting."""
    out = []
    skipped = 0
    for step in tb.steps:
        out.append(step.s - skipped)
        if step.type == "nop" and step.depid < 0:
            skipped += 1
    return out


def effective_waits(tb: Threadblock) -> list[tuple[int, int] | None]:
    """For each step, the (thread block, step) it waits for before it runs, as the runtime does it:
    a nop's wait counts only when a step that moves data follows it (the runtime attaches it there)."""
    out: list[tuple[int, int] | None] = [None] * len(tb.steps)
    data_follows = False
    for i in range(len(tb.steps) - 1, -1, -1):
        step = tb.steps[i]
        if step.type != "nop":
            data_follows = True
        if step.depid >= 0 and data_follows:
            out[i] = (step.depid, step.deps)
    return out


def _check_dependencies(algo: Algo, warnings: list[str]) -> None:
    """The runtime's rules for waits. A ``nop`` moves nothing: its wait is attached to the next step
    that moves data, which must then wait itself (the runtime refuses the file otherwise); nops after
    the last such step are dropped, waits and all. A nop without a wait is not counted by the
    runtime, so the step numbers it publishes for later steps are one lower (`published_steps`)."""
    for gpu in algo.gpus:
        for tb in gpu.threadblocks:
            pending: Step | None = None  # the first nop with a wait since the last data step
            for step in tb.steps:
                path = f"gpu[{gpu.id}].tb[{tb.id}].step[{step.s}]"
                if step.type == "nop":
                    if step.depid >= 0:
                        pending = pending or step
                    else:
                        warnings.append(
                            f"{algo.source}: {path} is a nop without a dependency: the runtime skips it without "
                            "counting it, so later steps of this thread block are known to others by a number one lower"
                        )
                elif pending is not None:
                    if step.depid < 0:
                        raise InputError(
                            algo.source,
                            f"{path}.depid",
                            step.depid,
                            f"follows nop step {pending.s}, which waits: the runtime attaches a nop's wait to the next "
                            "step and refuses the file unless that step waits too",
                        )
                    pending = None
                if step.depid < 0:
                    continue
                if step.depid >= len(gpu.threadblocks):
                    raise InputError(algo.source, f"{path}.depid", step.depid, f"gpu {gpu.id} has no thread block {step.depid}")
                if step.depid == tb.id and step.deps >= step.s:
                    raise InputError(
                        algo.source, f"{path}.deps", step.deps, "a step cannot wait for itself or a later step of its own tb"
                    )
                target = gpu.threadblocks[step.depid]
                if step.deps >= len(target.steps):
                    raise InputError(
                        algo.source, f"{path}.deps", step.deps, f"thread block {step.depid} has only {len(target.steps)} step(s)"
                    )


# ========================================================================================= writer
def _attr(value: object) -> str:
    return escape(str(value), {'"': "&quot;"})


def algo_to_xml(algo: Algo) -> str:
    """The algorithm as XML text, attributes in the order msccl-tools writes them (plus
    ``outofplace``, ``minBytes`` and ``maxBytes`` whenever they are known)."""
    head = [
        ("name", algo.name),
        ("proto", algo.proto),
        ("nchannels", algo.nchannels),
        ("nchunksperloop", algo.nchunksperloop),
        ("ngpus", algo.ngpus),
        ("coll", algo.coll),
    ]
    if algo.inplace is not None:
        head.append(("inplace", int(algo.inplace)))
    if algo.outofplace is not None:
        head.append(("outofplace", int(algo.outofplace)))
    if algo.min_bytes is not None:
        head.append(("minBytes", algo.min_bytes))
    if algo.max_bytes is not None:
        head.append(("maxBytes", algo.max_bytes))
    out = ["<algo " + " ".join(f'{k}="{_attr(v)}"' for k, v in head) + ">"]
    for gpu in algo.gpus:
        out.append(f'  <gpu id="{gpu.id}" i_chunks="{gpu.i_chunks}" o_chunks="{gpu.o_chunks}" s_chunks="{gpu.s_chunks}">')
        for tb in gpu.threadblocks:
            out.append(f'    <tb id="{tb.id}" send="{tb.send}" recv="{tb.recv}" chan="{tb.channel}">')
            for st in tb.steps:
                out.append(
                    f'      <step s="{st.s}" type="{st.type}" srcbuf="{st.srcbuf}" srcoff="{st.srcoff}" '
                    f'dstbuf="{st.dstbuf}" dstoff="{st.dstoff}" cnt="{st.count}" depid="{st.depid}" '
                    f'deps="{st.deps}" hasdep="{int(st.hasdep)}"'
                    + ("" if st.synth_step is None else f' synth_step="{st.synth_step}"')
                    + "/>"
                )
            out.append("    </tb>")
        out.append("  </gpu>")
    out.append("</algo>")
    return "\n".join(out) + "\n"


# ==================================================================================== buffer layout
Slot = tuple[str, int]  # (buffer, chunk offset)


@dataclass(frozen=True)
class BufferLayout:
    """Where a collective's data sits in MSCCL's buffers, for R ranks and N = ``nchunksperloop``.

    A *slot* is ``(buffer, offset)``. In place, one buffer points into the other (NCCL's in-place
    conventions, e.g. allgather's input is the rank's own piece of the output); `canonical` maps a
    slot to the one name used for that memory, so two names of one chunk are one slot.
    ``input_slot``/``output_slot`` give, for a synth chunk on a rank, where it starts (its input
    position, or its contribution for reductions) and where the collective wants it at the end.
    """

    collective: Collective
    nchunks: int
    inplace: bool
    sizes: Callable[[int], tuple[int, int]]
    canonical: Callable[[int, str, int], Slot]
    input_slot: Callable[[int, int], Slot | None]
    output_slot: Callable[[int, int], Slot | None]

    @property
    def kind(self) -> Kind:
        return self.collective.kind

    def initial(self, rank: int) -> list[tuple[Slot, int]]:
        """(canonical slot, synth chunk) that rank starts with."""
        out = []
        for chunk in range(self.collective.num_chunks):
            slot = self.input_slot(rank, chunk)
            if slot is not None:
                out.append((self.canonical(rank, *slot), chunk))
        return out

    def required(self, rank: int) -> list[tuple[Slot, int]]:
        """(canonical slot, synth chunk) that must hold the result at the end."""
        need = self.collective.required()
        out = []
        for chunk in range(self.collective.num_chunks):
            if need[rank, chunk]:
                slot = self.output_slot(rank, chunk)
                assert slot is not None
                out.append((self.canonical(rank, *slot), chunk))
        return out

    def declared_sizes(self, rank: int) -> tuple[int, int]:
        """(i_chunks, o_chunks) to declare for a rank: the buffer sizes, with a buffer that is
        entirely another one's alias (in place) declared empty, as MSCCL's own files do."""
        i_size, o_size = self.sizes(rank)
        if self.inplace:
            if i_size and all(self.canonical(rank, "i", x)[0] == "o" for x in range(i_size)):
                i_size = 0
            if o_size and all(self.canonical(rank, "o", x)[0] == "i" for x in range(o_size)):
                o_size = 0
        return i_size, o_size


def chunks_per_piece(kind: Kind, num_ranks: int, nchunks: int) -> int:
    """k for ``nchunksperloop`` chunks (raises ValueError when they do not divide)."""
    if kind in (Kind.ALLGATHER, Kind.GATHER, Kind.SCATTER, Kind.REDUCE_SCATTER, Kind.ALLTOALL):
        if nchunks % num_ranks:
            raise ValueError(f"{COLL_NAMES[kind]} on {num_ranks} ranks needs nchunksperloop to be a multiple of {num_ranks}")
        return nchunks // num_ranks
    return nchunks


def nchunks_for(collective: Collective) -> int:
    """``nchunksperloop`` of a synth collective: the larger buffer in chunks."""
    if collective.kind is Kind.ALLTOALL:
        return collective.num_chunks // collective.num_ranks
    return collective.num_chunks


def buffer_layout(kind: Kind, num_ranks: int, nchunks: int, *, inplace: bool, root: int | None = None) -> BufferLayout:
    """The layout of a collective over ``num_ranks`` ranks with ``nchunks`` chunks per loop."""
    r_count = num_ranks
    k = chunks_per_piece(kind, num_ranks, nchunks)
    coll = Collective(kind, num_ranks, k, root if kind in (Kind.BROADCAST, Kind.REDUCE, Kind.GATHER, Kind.SCATTER) else None)
    root = coll.root
    n = nchunks

    def identity(rank: int, buf: str, idx: int) -> Slot:
        return (buf, idx)

    canonical: Callable[[int, str, int], Slot] = identity
    if kind is Kind.ALLREDUCE or kind is Kind.ALLTOALL:

        def sizes(rank: int) -> tuple[int, int]:
            return (n, n)

        def canon_io(rank: int, buf: str, idx: int) -> Slot:
            return ("i", idx) if buf == "o" else (buf, idx)

        canonical = canon_io
        if kind is Kind.ALLREDUCE:

            def input_slot(rank: int, chunk: int) -> Slot | None:
                return ("i", chunk)

            def output_slot(rank: int, chunk: int) -> Slot | None:
                return ("o", chunk)
        else:

            def input_slot(rank: int, chunk: int) -> Slot | None:
                pair, j = divmod(chunk, k)
                s, d = divmod(pair, r_count)
                return ("i", d * k + j) if rank == s else None

            def output_slot(rank: int, chunk: int) -> Slot | None:
                pair, j = divmod(chunk, k)
                s, d = divmod(pair, r_count)
                return ("o", s * k + j) if rank == d else None

    elif kind is Kind.REDUCE:

        def sizes(rank: int) -> tuple[int, int]:
            return (n, n if rank == root else 0)

        def canon_reduce(rank: int, buf: str, idx: int) -> Slot:
            return ("i", idx) if (buf == "o" and rank == root) else (buf, idx)

        canonical = canon_reduce

        def input_slot(rank: int, chunk: int) -> Slot | None:
            return ("i", chunk)

        def output_slot(rank: int, chunk: int) -> Slot | None:
            return ("o", chunk) if rank == root else None

    elif kind is Kind.BROADCAST:

        def sizes(rank: int) -> tuple[int, int]:
            return (n if rank == root else 0, n)

        def canon_bcast(rank: int, buf: str, idx: int) -> Slot:
            return ("o", idx) if (buf == "i" and rank == root) else (buf, idx)

        canonical = canon_bcast

        def input_slot(rank: int, chunk: int) -> Slot | None:
            return ("i", chunk) if rank == root else None

        def output_slot(rank: int, chunk: int) -> Slot | None:
            return ("o", chunk)

    elif kind in (Kind.ALLGATHER, Kind.GATHER):
        everyone = kind is Kind.ALLGATHER

        def sizes(rank: int) -> tuple[int, int]:
            return (k, n if (everyone or rank == root) else 0)

        def canon_gather(rank: int, buf: str, idx: int) -> Slot:
            if buf == "i" and (everyone or rank == root):
                return ("o", rank * k + idx)
            return (buf, idx)

        canonical = canon_gather

        def input_slot(rank: int, chunk: int) -> Slot | None:
            return ("i", chunk - rank * k) if chunk // k == rank else None

        def output_slot(rank: int, chunk: int) -> Slot | None:
            return ("o", chunk) if (everyone or rank == root) else None

    else:  # REDUCE_SCATTER, SCATTER
        everyone = kind is Kind.REDUCE_SCATTER

        def sizes(rank: int) -> tuple[int, int]:
            return (n if (everyone or rank == root) else 0, k)

        def canon_scatter(rank: int, buf: str, idx: int) -> Slot:
            if buf == "o" and (everyone or rank == root):
                return ("i", rank * k + idx)
            return (buf, idx)

        canonical = canon_scatter

        def input_slot(rank: int, chunk: int) -> Slot | None:
            return ("i", chunk) if (everyone or rank == root) else None

        def output_slot(rank: int, chunk: int) -> Slot | None:
            return ("o", chunk - rank * k) if chunk // k == rank else None

    return BufferLayout(
        collective=coll,
        nchunks=nchunks,
        inplace=inplace,
        sizes=sizes,
        canonical=canonical if inplace else identity,
        input_slot=input_slot,
        output_slot=output_slot,
    )
