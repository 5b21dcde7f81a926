"""The greedy engine: step by step, every free channel carries a chunk that its destination (or a
rank beyond it) still needs.

This is the time-expanded link–chunk matching of TACOS, made step-synchronous (FORMATS.md) and
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
"""

from synth.algorithms.engines.greedy_engine.engine import disseminate, link_capacity
from synth.algorithms.engines.greedy_engine.options import EngineOptions, Plan

__all__ = ["EngineOptions", "Plan", "disseminate", "link_capacity"]
