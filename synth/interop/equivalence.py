"""Whether two schedules move the same data the same way (for round trips through other formats).

Two schedules are *data-flow equivalent* when they have the same transfers (src, dst, chunk, op)
and every transfer reads the same value and overwrites (or adds to) the same value in both: the
value a transfer reads is named by the transfers that last wrote the sender's chunk before it (or
"initial"), and the value it writes over by the transfers that last wrote the receiver's chunk. A
schedule and its equivalent compute the same thing with the same messages; they may differ in how
the transfers are grouped into steps (an importer that places every transfer as early as its data
allows moves independent transfers forward) and in the switches a transfer is routed through.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from synth.schedule import OP_NAMES, Schedule

TransferId = tuple[int, int, int, str, int]  # src, dst, chunk, op, occurrence


def _signature(schedule: Schedule) -> dict[TransferId, tuple[frozenset | None, frozenset | None]]:
    last_writers: dict[tuple[int, int], frozenset] = {}
    seen: Counter = Counter()
    sig: dict[TransferId, tuple[frozenset | None, frozenset | None]] = {}
    src, dst, chunk, op = (a.tolist() for a in (schedule.src, schedule.dst, schedule.chunk, schedule.op))
    for s in range(schedule.num_steps):
        sl = schedule.step_slice(s)
        writes: dict[tuple[int, int], list[TransferId]] = {}
        for i in range(sl.start, sl.stop):
            key = (src[i], dst[i], chunk[i], OP_NAMES[op[i]])
            tid = (*key, seen[key])
            seen[key] += 1
            sig[tid] = (last_writers.get((src[i], chunk[i])), last_writers.get((dst[i], chunk[i])))
            writes.setdefault((dst[i], chunk[i]), []).append(tid)
        for target, tids in writes.items():
            last_writers[target] = frozenset(tids)
    return sig


@dataclass(frozen=True)
class Comparison:
    """Outcome of `compare`: ``equivalent`` data flow, how many transfers sit in the same step in
    both, and the first difference found (empty when equivalent)."""

    equivalent: bool
    same_step: int
    transfers: int
    difference: str = ""

    @property
    def identical_steps(self) -> bool:
        return self.equivalent and self.same_step == self.transfers


def compare(a: Schedule, b: Schedule) -> Comparison:
    """Compare two schedules' data flow (see the module docstring)."""
    if a.collective != b.collective:
        return Comparison(
            False, 0, a.num_transfers, f"collectives differ: {a.collective.describe()} vs {b.collective.describe()}"
        )
    sa, sb = _signature(a), _signature(b)
    if sa.keys() != sb.keys():
        only_a = sorted(sa.keys() - sb.keys())
        only_b = sorted(sb.keys() - sa.keys())
        first = f"only in the first: {only_a[0]}" if only_a else f"only in the second: {only_b[0]}"
        return Comparison(False, 0, a.num_transfers, f"transfers differ ({len(only_a)} vs {len(only_b)} unmatched); {first}")
    for tid in sorted(sa):
        if sa[tid] != sb[tid]:
            return Comparison(False, 0, a.num_transfers, f"transfer {tid} reads or overwrites a different value")
    steps_a = _steps_by_transfer(a)
    steps_b = _steps_by_transfer(b)
    same = sum(1 for tid, s in steps_a.items() if steps_b.get(tid) == s)
    return Comparison(True, same, a.num_transfers)


def _steps_by_transfer(schedule: Schedule) -> dict[TransferId, int]:
    seen: Counter = Counter()
    out: dict[TransferId, int] = {}
    src, dst, chunk, op = (x.tolist() for x in (schedule.src, schedule.dst, schedule.chunk, schedule.op))
    step_of = schedule.step_of_transfer.tolist()
    for i in range(schedule.num_transfers):
        key = (src[i], dst[i], chunk[i], OP_NAMES[op[i]])
        out[(*key, seen[key])] = step_of[i]
        seen[key] += 1
    return out
