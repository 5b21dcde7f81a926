"""The call sizes an exported MSCCL algorithm is declared for (minBytes/maxBytes): a schedule tuned
for sizes gets the range around them (`synth.interop.msccl_sizes`), others every size."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import replace

from click.testing import CliRunner

from synth import generators as gen
from synth.cli import main
from synth.collective import Kind
from synth.interop.msccl_export import DEFAULT_MAX_BYTES, export_msccl
from synth.interop.msccl_sizes import boundary, call_bytes, lower_edge, sample_ranges, tuned_range, upper_edge
from synth.registry import synthesize
from synth.schedule import load_schedule

from .conftest import REPO

RING = REPO / "generated" / "dgx1" / "allreduce-ring.json"
MIB = 1 << 20


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _header(path) -> dict[str, str]:
    return ET.parse(path).getroot().attrib


# ------------------------------------------------------------------------------------- the rule
def test_boundaries_are_geometric_means_rounded_up():
    assert boundary(1024, 2048) == math.ceil(math.sqrt(1024 * 2048)) == 1449
    assert boundary(4, 9) == 6 and boundary(5, 6) == 6
    assert lower_edge(MIB) == math.ceil(MIB / math.sqrt(2)) == 741456
    assert upper_edge(MIB) == math.ceil(MIB * math.sqrt(2)) == 1482911
    # tuned at neighbouring powers of two, the ranges tile the axis
    for size in (1, 2, 1024, 3 << 20, 1 << 30):
        assert upper_edge(size) == lower_edge(2 * size) == boundary(size, 2 * size)


def test_sample_ranges_are_contiguous_and_cover_first_to_last():
    sizes = [1024, 4096, 1 << 20, 1 << 30]
    ranges = sample_ranges(sizes)
    assert ranges[0][0] == 1024 and ranges[-1][1] == (1 << 30) + 1
    for (lo, hi), (nlo, _), size in zip(ranges, ranges[1:], sizes):
        assert lo <= size < hi == nlo
    assert sample_ranges([64]) == [(64, 65)]


def test_gather_and_scatter_count_one_rank_s_piece():
    # the runtime multiplies by the rank count only for allgather, reduce-scatter and alltoall
    assert call_bytes(Kind.GATHER, 8, 8 * MIB) == MIB and call_bytes(Kind.SCATTER, 8, 8 * MIB + 1) == MIB + 1
    assert call_bytes(Kind.ALLGATHER, 8, 8 * MIB) == 8 * MIB and call_bytes(Kind.ALLREDUCE, 8, 5) == 5


# ------------------------------------------------------------------------------ tuned schedules
def test_a_schedule_tuned_for_a_size_is_declared_for_the_sizes_around_it():
    topo = gen.nvswitch(4)
    tuned = synthesize(topo, Kind.ALLGATHER, "greedy", options={"size": MIB})
    assert tuned.params["chosen_at_size"] == MIB
    exported = export_msccl(tuned)
    assert (exported.algo.min_bytes, exported.algo.max_bytes) == (741456, 1482910)
    assert "sizes 741456 … 1482910 bytes (tuned for 1MiB)" in exported.summary()
    # auto over several sizes: from below the first to above the last
    chosen = synthesize(topo, Kind.ALLGATHER, "auto", options={"sizes": [1024, MIB], "budget": 0})
    assert tuned_range(chosen) == (lower_edge(1024), upper_edge(MIB) - 1, [1024, MIB])
    # a gather counts one rank's piece
    g = synthesize(topo, Kind.GATHER, "auto", options={"size": 4 * MIB, "budget": 0})
    assert tuned_range(g)[:2] == (
        call_bytes(Kind.GATHER, 4, lower_edge(4 * MIB)),
        call_bytes(Kind.GATHER, 4, upper_edge(4 * MIB)) - 1,
    )


def test_a_schedule_not_tuned_for_a_size_allows_every_size():
    exported = export_msccl(load_schedule(RING))
    assert (exported.algo.min_bytes, exported.algo.max_bytes) == (0, DEFAULT_MAX_BYTES)
    assert "sizes" not in exported.summary()


def test_the_export_command_writes_the_tuned_range_and_options_override_it(tmp_path):
    sched = tmp_path / "g.json"
    assert invoke("synthesize", "dgx1", "-c", "allreduce", "-m", "greedy", "--size", "1MiB", "-o", sched).exit_code == 0
    xml = tmp_path / "g.xml"
    r = invoke("export", "msccl", sched, "-o", xml)
    assert r.exit_code == 0, r.stderr
    assert (_header(xml)["minBytes"], _header(xml)["maxBytes"]) == ("741456", "1482910")
    assert r.stdout.strip().endswith("; sizes 741456 … 1482910 bytes (tuned for 1MiB)")
    r = invoke("export", "msccl", sched, "-o", xml, "--max-bytes", "4M")
    assert r.exit_code == 0 and (_header(xml)["minBytes"], _header(xml)["maxBytes"]) == ("741456", str(4 * MIB))
    r = invoke("export", "msccl", sched, "-o", xml, "--min-bytes", "0", "--max-bytes", "1G")
    assert r.exit_code == 0 and (_header(xml)["minBytes"], _header(xml)["maxBytes"]) == ("0", str(1 << 30))


def test_params_that_name_no_usable_size_are_ignored():
    schedule = load_schedule(RING)
    for params in ({"sizes": []}, {"size": "big"}, {"chosen_at_size": True}, {"sizes": [1, -2]}):
        assert tuned_range(replace(schedule, params=params)) is None
