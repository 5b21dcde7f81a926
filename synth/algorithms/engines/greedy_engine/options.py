"""How one greedy run is set up: `Plan` (seed, link room multiplier, engine options) and
`EngineOptions`, the thresholds that decide which proposal mode runs and the knobs of the step loop."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineOptions:
    """The thresholds that decide how the engine chooses its candidates (`engine.proposer_class`:
    bitsets or windows; whether offers are sampled), and the knobs of its step loop. The defaults
    are the values every schedule of `synth` is made with; tests change the thresholds to put
    small collectives into the code paths of thousands of ranks."""

    #: Rarest-first over every held chunk uses bitsets of the chunks (in rarity order, 64 per
    #: word): one candidate matrix of (channels × chunks / 8) bytes per round, used while it stays
    #: at most this size; beyond it, the windowed scan of arrival lists.
    exact_bytes: int = 4 << 20
    #: Up to this many chunks, the windowed scan looks at every held chunk (its window is as wide
    #: as the collective).
    exact_chunks: int = 512
    #: Up to this many channels, every channel takes part in every step; beyond, offers are
    #: sampled (``sampled_offer``) and windows are ``sampled_window`` wide.
    offer_all_up_to: int = 32_768
    #: Oldest-first and newest-first arrivals of a source scanned per channel (each) in the
    #: windowed mode beyond ``exact_chunks`` chunks; ``sampled_window`` instead when offers are
    #: sampled.
    window: int = 8
    sampled_window: int = 4
    #: Beyond ``offer_all_up_to`` channels, a rank's link with room for c chunks per step offers
    #: them to max(``offer_min``, sampled_offer·c) of the channels that start with it, a fresh
    #: random draw each step (all of them when they are fewer).
    sampled_offer: int = 4
    offer_min: int = 4
    #: Queued chunks per carrier that its channels look at (farthest from their rank first), for
    #: collectives whose chunks each have one destination (gather, scatter, alltoall).
    single_scan: int = 64
    #: A channel offers its share of the room into its destination plus this many chunks per round.
    share_extra: int = 1
    #: Arrivals a pointer looks ahead at most at once when skipping what its destination holds.
    advance_span: int = 64
    #: Passes over the links when settling one round's proposals (later rounds pick up the rest).
    link_passes: int = 6
    #: Proposal rounds per step at most (a step normally settles in a few).
    max_rounds: int = 64
    #: Chunks a channel proposes at once, at most (when its links have room for several).
    multi: int = 8
    #: The rarity order of the bitsets is recomputed every this many steps (deliveries in between
    #: are added to the bitsets as they happen).
    reorder_every: int = 1

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            least = 0 if name in ("exact_bytes", "exact_chunks", "offer_all_up_to", "share_extra") else 1
            if name == "advance_span":
                least = 8  # a pointer first looks 8 arrivals ahead: the arrival lists are padded by this
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"greedy engine option {name} must be an integer >= {least}, got {value!r}")

    def samples_offers(self, channels: int) -> bool:
        """Whether a run over ``channels`` channels samples the channels that take part in a step."""
        return channels > self.offer_all_up_to


@dataclass(frozen=True)
class Plan:
    """How one greedy run is set up: random ``seed``, link room multiplier ``quantum`` (a link of
    the reference bandwidth carries ``quantum`` chunks per step) and ``engine``, the engine's
    thresholds and knobs."""

    seed: int = 0
    quantum: int = 1
    engine: EngineOptions = EngineOptions()
