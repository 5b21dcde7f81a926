import json
import re

import networkx as nx
import pytest

from synth import generators as gen
from synth.builtin import BUILTIN_NAMES, BUILTIN_RECIPES, builtin_path, get_topology
from synth.canonical import canonical_sha256
from synth.errors import InputError
from synth.topology import Topology, content_document, load_topology, topology_from_document, topology_to_json

from .conftest import write_json

GOOD = {
    "format": "synth-topology",
    "version": 1,
    "name": "example",
    "ranks": [{"name": "gpu0", "host": "node0"}, "gpu1"],
    "switches": [{"name": "sw", "host": "node0"}],
    "links": [
        {"a": "gpu0", "b": "sw", "bandwidth": 300.0, "latency": 0.7},
        {"a": "gpu1", "b": "sw", "bandwidth": 300.0, "latency": 0.7, "duplex": True},
    ],
}


def test_example_from_formats_loads(tmp_path):
    t = load_topology(write_json(tmp_path / "t.json", GOOD))
    assert t.num_ranks == 2 and len(t.switches) == 1
    assert len(t.links) == 4  # duplex: one directed link each way
    assert t.ranks[0].host == "node0" and t.ranks[1].host is None
    assert t.document_sha256 == canonical_sha256(GOOD)  # the whole file, for schedules written before
    assert t.sha256 == canonical_sha256(content_document(t))


def test_parallel_entries_add_bandwidth_and_simplex_links():
    doc = dict(
        GOOD,
        switches=[],
        links=[
            {"a": "gpu0", "b": "gpu1", "bandwidth": 25, "latency": 0.5},
            {"a": "gpu0", "b": "gpu1", "bandwidth": 25, "latency": 0.7},
            {"a": "gpu1", "b": "gpu0", "bandwidth": 10, "latency": 1, "duplex": False},
        ],
    )
    t = topology_from_document(doc)
    fwd = t.links[t.link_index[(0, 1)]]
    back = t.links[t.link_index[(1, 0)]]
    assert fwd.bandwidth == 50 and fwd.latency == 0.7  # latency: the largest of the entries'
    assert back.bandwidth == 60  # 25 + 25 (duplex entries) + 10


def test_unknown_fields_ignored():
    doc = dict(GOOD, extra={"x": 1}, links=[dict(GOOD["links"][0], color="red"), GOOD["links"][1]])
    assert topology_from_document(doc).num_ranks == 2


BAD = [
    ("format", lambda d: d.update(format="other"), "format"),
    ("version", lambda d: d.update(version=2), "version"),
    ("no ranks", lambda d: d.update(ranks=[]), "ranks"),
    ("rank not a name", lambda d: d.update(ranks=[7, "gpu1"]), "ranks[0]"),
    ("duplicate", lambda d: d.update(ranks=["gpu0", "gpu0"]), "ranks[1].name"),
    ("switch named like a rank", lambda d: d.update(switches=["gpu1"]), "switches[0].name"),
    ("unknown node", lambda d: d["links"][0].update(b="nvswitch9"), "links[0].b"),
    ("zero bandwidth", lambda d: d["links"][0].update(bandwidth=0), "links[0].bandwidth"),
    ("negative bandwidth", lambda d: d["links"][1].update(bandwidth=-5), "links[1].bandwidth"),
    ("string bandwidth", lambda d: d["links"][1].update(bandwidth="300"), "links[1].bandwidth"),
    ("bool bandwidth", lambda d: d["links"][1].update(bandwidth=True), "links[1].bandwidth"),
    ("negative latency", lambda d: d["links"][0].update(latency=-0.1), "links[0].latency"),
    ("duplex not bool", lambda d: d["links"][0].update(duplex="yes"), "links[0].duplex"),
    ("self link", lambda d: d["links"][0].update(b="gpu0"), "links[0].b"),
    ("missing bandwidth", lambda d: d["links"][0].pop("bandwidth"), "links[0]"),
    ("links not a list", lambda d: d.update(links={}), "links"),
    ("unreachable rank", lambda d: d["links"].pop(1), "ranks[1]"),
    ("one-way only", lambda d: d["links"][1].update(duplex=False), "ranks[1]"),
]


@pytest.mark.parametrize(("case", "mutate", "field"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_file_field_value(tmp_path, case, mutate, field):
    doc = json.loads(json.dumps(GOOD))
    mutate(doc)
    path = write_json(tmp_path / "bad.json", doc)
    with pytest.raises(InputError) as err:
        load_topology(path)
    text = str(err.value)
    assert text.startswith(f"{path}: {field}")
    assert "\n" not in text


def test_invalid_json_and_missing_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"format": "synth-topology",\n "version": 1,, }')
    with pytest.raises(InputError, match=r"broken.json: line 2 column 15: invalid JSON"):
        load_topology(path)
    with pytest.raises(InputError, match="no such file"):
        load_topology(tmp_path / "absent.json")


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_files_match_their_recipes(name):
    assert builtin_path(name).read_text() == topology_to_json(BUILTIN_RECIPES[name]())


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtins_valid_and_described(name):
    t = get_topology(name)
    assert t.name == name
    # its figures are carried with their public sources (a paper, a vendor document, NCCL's code)
    assert re.search(r"arXiv \d{4}\.\d{4,5}|github\.com/|datasheet|white paper", t.description), t.description
    assert t.num_ranks >= 8


def test_builtin_shapes(builtin):
    assert [builtin(n).num_ranks for n in ("dgx1", "dgx2", "dgx-a100", "dgx-h100", "pcie-2socket")] == [8, 16, 8, 8, 8]
    assert [builtin(n).num_ranks for n in ("ndv2x2", "dgx-a100x2", "dgx-a100x4", "fattree-4rack")] == [16, 16, 32, 128]
    ft = builtin("fattree-4rack")
    assert len(set(ft.hosts)) == 16
    tor_up = sum(lk.bandwidth for lk in ft.links if ft.node_name(lk.src) == "tor0" and ft.node_name(lk.dst).startswith("spine"))
    tor_down = sum(lk.bandwidth for lk in ft.links if ft.node_name(lk.src) == "tor0" and "nic" in ft.node_name(lk.dst))
    assert tor_down / tor_up == 4.0  # 4:1 oversubscription
    pcie = builtin("pcie-2socket")
    assert not any(lk.src < 8 and lk.dst < 8 for lk in pcie.links)  # no GPU-to-GPU (NVLink) links


def test_dgx1_matches_nvlink_matrix(dgx1):
    for i in range(8):
        for j in range(8):
            count = gen.DGX1_NVLINKS[i][j]
            idx = dgx1.link_index.get((i, j))
            assert (idx is None) == (count == 0)
            if count:
                assert dgx1.links[idx].bandwidth == 25.0 * count


def test_networkx_round_trip(builtin):
    t = builtin("ndv2x2")
    g = t.to_networkx()
    assert isinstance(g, nx.DiGraph) and g.number_of_edges() == len(t.links)
    back = Topology.from_networkx(g)
    assert back.ranks == t.ranks and back.switches == t.switches and back.links == t.links


def test_written_file_reloads_identically(tmp_path, builtin):
    t = builtin("fattree-4rack")
    path = tmp_path / "ft.json"
    path.write_text(topology_to_json(t))
    again = load_topology(path)
    assert again.links == t.links and again.sha256 == t.sha256
