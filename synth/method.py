"""What a synthesizer is, and the one way to run one.

Every method module exports its description as ``METHOD``, a `Method`: its name, what it serves,
its build function ``build(topology, collective, router=None, **options) -> Schedule`` (raising
`synth.errors.NotApplicable` with the reason when it cannot serve a case), its default chunk
count, the keyword options it takes. `Method.synthesize` fills in the chunk count and the root,
checks the options, calls ``build``, checks that what came back is the collective asked for, and
verifies the schedule: no schedule leaves it unverified. Any layer can run a `Method` it holds
(hierarchical runs ring or direct inside hosts, the ILP warm-starts from the classic methods)
without the registry (`synth.registry`), which sits above all of them and only collects the table.

A method with ``chooses_chunks`` (greedy, packing, auto) also gets ``requested_chunks``: the
caller's chunks per piece, or None when the caller left it to the method, which may then return a
schedule with another chunk count than ``collective``'s default (the best one for its ``size``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from synth.collective import Collective, Kind
from synth.errors import NotApplicable
from synth.limits import BYTES_PER_TRANSFER
from synth.routing import Router
from synth.schedule import Schedule
from synth.topology import Topology
from synth.verify import check

#: What kind of synthesizer a method is; `synth.selection` treats each alike:
#: ``classic`` and ``nccl`` (the baselines: cheap, always run), ``scalable`` (self-tuning
#: synthesizers), ``exact`` (a solver with a work limit and a time limit, run on small machines
#: only; it takes the options ``size``, ``time_limit``, ``work_limit``, ``pipeline`` and
#: ``wave_chunks``), ``meta`` (a method over
#: the others: auto; never a candidate of its own).
FAMILIES = ("classic", "nccl", "scalable", "exact", "meta")
EXACT_OPTIONS = frozenset({"size", "time_limit", "work_limit", "pipeline", "wave_chunks"})


def one_chunk(kind: Kind, ranks: int) -> int:
    """Default chunks per piece: one."""
    return 1


def ranks_for_allreduce(kind: Kind, ranks: int) -> int:
    """Default chunks per piece: one per rank for allreduce (it is split into R shares), else one."""
    return ranks if kind is Kind.ALLREDUCE else 1


@dataclass(frozen=True)
class Method:
    """A synthesizer: its name (written once, here), a one-line summary, its family (`FAMILIES`),
    the collectives it serves and how to build and run it."""

    name: str
    summary: str
    family: str
    collectives: frozenset[Kind]
    build: Callable[..., Schedule]
    default_chunks: Callable[[Kind, int], int]
    #: for methods whose natural chunk count depends on the machine (e.g. one chunk per ring
    #: channel); when set it is used instead of ``default_chunks``
    topology_chunks: Callable[[Kind, Topology], int] | None = None
    #: Keyword options ``build`` accepts beyond (topology, collective, router).
    options: frozenset[str] = frozenset()
    #: with no chunk count from the caller, the method may choose one (e.g. for its ``size``
    #: option): its ``build`` also gets ``requested_chunks``, the caller's chunks per piece or None
    chooses_chunks: bool = False
    #: Bytes of memory per transfer of the schedule while building and verifying it, for refusing
    #: a collective too large for this machine before starting (`synth.limits`); methods that
    #: build in columns measure less than the default
    memory_per_transfer: int = BYTES_PER_TRANSFER
    #: the same figure for the collectives a method builds differently from its others (e.g. in
    #: columns for one of them): (kind, bytes) pairs; the others take ``memory_per_transfer``
    memory_per_transfer_of: tuple[tuple[Kind, int], ...] = ()

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"method {self.name}: family must be one of {', '.join(FAMILIES)}, got {self.family!r}")
        if self.family == "exact" and not self.options >= EXACT_OPTIONS:
            raise ValueError(f"method {self.name}: an exact method takes the options {', '.join(sorted(EXACT_OPTIONS))}")

    def bytes_per_transfer(self, kind: Kind) -> int:
        """`memory_per_transfer` for the collective ``kind``."""
        return dict(self.memory_per_transfer_of).get(kind, self.memory_per_transfer)

    def serves(self, kind: Kind) -> bool:
        return kind in self.collectives

    @property
    def tunes_for_size(self) -> bool:
        """The method builds a schedule for a message size (its ``size`` option)."""
        return "size" in self.options

    def collective(self, topology: Topology, kind: Kind | str, root: int | None = None, chunks: int | None = None) -> Collective:
        """The collective this method will be asked for: default chunks per piece and root filled in."""
        kind = Kind(kind)
        if chunks is not None:
            k = chunks
        elif self.topology_chunks is not None:
            k = self.topology_chunks(kind, topology)
        else:
            k = self.default_chunks(kind, topology.num_ranks)
        return Collective(kind, topology.num_ranks, k, root)

    def synthesize(
        self,
        topology: Topology,
        kind: Kind | str,
        *,
        root: int | None = None,
        chunks: int | None = None,
        router: Router | None = None,
        verify: bool = True,
        options: Mapping[str, Any] | None = None,
    ) -> Schedule:
        """Synthesize and verify a schedule of ``kind`` on ``topology`` with this method.

        ``chunks`` is k, the chunks per piece (default: what the method needs, e.g. R for a ring
        allreduce, or what a method with ``chooses_chunks`` picks). ``options`` are the method's own
        keyword options (``options``). Raises `NotApplicable` if the method cannot serve the case or
        does not know an option, and `synth.verify.VerificationError` if the result fails the
        verifier (a bug, never silent).
        """
        kind = Kind(kind)
        if not self.serves(kind):
            raise NotApplicable(
                f"method {self.name} does not serve {kind.value} "
                f"(it serves {', '.join(sorted(k.value for k in self.collectives))})"
            )
        unknown = sorted(set(options or {}) - self.options)
        if unknown:
            takes = ", ".join(sorted(self.options)) or "none"
            raise NotApplicable(f"method {self.name} takes no option(s) {', '.join(unknown)} (it takes: {takes})")
        collective = self.collective(topology, kind, root, chunks)
        kwargs = dict(options or {})
        if self.chooses_chunks:
            kwargs["requested_chunks"] = chunks
        schedule = self.build(topology, collective, router, **kwargs)
        produced = schedule.collective
        if produced.kind is not kind or produced.root != collective.root or produced.num_ranks != collective.num_ranks:
            raise RuntimeError(f"method {self.name} returned {produced.describe()} for {collective.describe()}")
        if (chunks is not None or not self.chooses_chunks) and produced != collective:
            raise RuntimeError(f"method {self.name} returned {produced.describe()} for {collective.describe()}")
        if verify:
            check(schedule, topology)
        return schedule
