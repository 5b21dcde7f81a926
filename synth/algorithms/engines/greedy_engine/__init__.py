"""The greedy engine: step by step, every free channel carries a chunk that its destination (or a
rank beyond it) still needs.

This is the time-expanded link–chunk matching of TACOS, made step-synchronous (docs/formats.md,
'Step-synchronous cost') and
vectorized. A step is one round of the slowest link: a link of b times the reference bandwidth may
carry b chunks in it (`link_capacity`). In each step:

1. every channel (`synth.algorithms.engines.path_channels`) whose links all have room proposes one chunk that
   its source holds and that is useful beyond it: its destination needs the chunk, or (gather,
   scatter, alltoall) the destination is closer to the rank that needs it;
2. a channel prefers chunks that its destination's *neighbourhood* lacks altogether: a channel
   over a NIC into a server, chunks no GPU of the server has; through a spine into a rack, chunks
   the rack lacks (the neighbourhoods are the ranks the destination reaches over more local
   channels: fewer links, or as many but faster). So long-haul links bring new data in, once, and
   the local ones spread it. Within that, it takes the chunk that the most ranks still lack (rarest
   first), or for chunks with one destination the one farthest from it, ties broken by a random
   order from the seed;
3. proposals for the same (destination, chunk), or bringing the same chunk into the same
   neighbourhood, keep the best one; on every link the best proposals up to its remaining room win;
   the others propose again, until nothing changes.

Candidates are every chunk the source holds when the collective is small enough for bitsets
(``exact_bytes``), so the choice is then exact; beyond that, a window of the source's arrivals (the
oldest its destination still lacks, and the newest). A switch holds nothing: a channel through
switches is one transfer, and it uses room on every link of its path. Every (rank, chunk) is
received at most once, so reductions follow by duality (`synth.transform.dual_reduction`).

The modules:

- `options`: `Plan` (seed, link room multiplier, `EngineOptions`) and `EngineOptions`, the
  thresholds that choose the proposal mode (``exact_bytes``, ``exact_chunks``,
  ``offer_all_up_to``) and the knobs of the step loop, with the values every schedule is made with
  as defaults;
- `state`: `SharedState`, what every mode reads and the step loop updates (who holds and lacks
  what, what each neighbourhood holds, the links' room in `LinkRoom`);
- `engine`: the step loop (`Engine`), the choice of mode (`proposer_class`), the contest between
  proposals, and `disseminate`, which turns the steps into a schedule;
- `proposer`: the interface of a mode (`Proposer`: ``start_step``, ``propose``, ``accept``,
  ``deliver``) and the rarest-first base (`RarestFirstProposer`);
- `proposals_single_target`: gather, scatter, alltoall (each chunk has one destination);
- `proposals_bitset`: rarest first over every held chunk, as bitsets (exact);
- `proposals_window`: rarest first over windows of arrival lists (thousands of ranks), with the
  per-(rank, chunk) flags `ChunkState`;
- `offers`: which channels take part in a step (all, or a random few per link: *sampled*);
- `step_bound`: a lower bound on the time of every schedule a run can make, before making it
  (what lets `synth.algorithms.greedy` give up on a time to beat early);
- `bitwords`: bit and flag scans over 64-bit words.
"""

from synth.algorithms.engines.greedy_engine.engine import Engine, disseminate, proposer_class
from synth.algorithms.engines.greedy_engine.options import EngineOptions, Plan
from synth.algorithms.engines.greedy_engine.proposals_bitset import BitsetProposer
from synth.algorithms.engines.greedy_engine.proposals_single_target import SingleTargetProposer
from synth.algorithms.engines.greedy_engine.proposals_window import ChunkState, WindowProposer
from synth.algorithms.engines.greedy_engine.proposer import Proposer
from synth.algorithms.engines.greedy_engine.state import SharedState, link_capacity

__all__ = [
    "BitsetProposer",
    "ChunkState",
    "Engine",
    "EngineOptions",
    "Plan",
    "Proposer",
    "SharedState",
    "SingleTargetProposer",
    "WindowProposer",
    "disseminate",
    "link_capacity",
    "proposer_class",
]
