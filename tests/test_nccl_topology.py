"""NCCL topology dumps → topologies: every real dump imports, NCCL's figures come out, the quirks
of real files are handled, and each import compares with the hand-written built-in of the same
machine (see docs/interop.md for what "match" means)."""

from __future__ import annotations

from pathlib import Path

import pytest

from synth.errors import InputError
from synth.interop.nccl_topology import (
    MAX_XML_DEPTH,
    MAX_XML_ELEMENTS,
    import_nccl_topology,
    import_nccl_topology_text,
    inter_cpu_bandwidth,
    nvlink_bandwidth_for_sm,
    pcie_bandwidth,
    topology_figures,
)
from synth.topology import topology_from_document, topology_to_json

from .conftest import REPO

DATA = Path(__file__).parent / "data"
#: The dumps the project wrote (a hand-written DGX-1 and synthetic fixtures with the real dumps' quirks).
OWN_DUMPS = sorted(DATA.glob("nccl-*.xml"))
#: Real NCCL dumps are read from beside the clone (CI has ../shared there), never copied into the repository.
REALDATA = REPO.parent / "shared" / "reference" / "realdata"
REAL_DUMPS = ("nccl-azure-ncv4-4gpu", "nccl-b200-vm-8gpu", "nccl-hgx-a100-8gpu", "nccl-ibm-h100-8gpu", "nccl-rtx3090-pcie-8gpu")


def real(name: str) -> Path:
    """The real dump ``name`` from ../shared/reference/realdata, or skip the test saying why."""
    path = REALDATA / f"{name}.xml"
    if not path.is_file():
        pytest.skip(f"{path} is absent: the real NCCL dumps are read from ../shared/reference/realdata beside the clone")
    return path


def test_the_dumps_are_there():
    assert [p.stem for p in OWN_DUMPS] == [
        "nccl-dgx1-v100-8gpu",
        "nccl-fixture-nvbridge-4gpu",
        "nccl-fixture-nvswitch-8gpu",
        "nccl-fixture-vm-8gpu",
    ]
    if REALDATA.is_dir():
        assert all((REALDATA / f"{name}.xml").is_file() for name in REAL_DUMPS)


@pytest.mark.parametrize("name", [p.stem for p in OWN_DUMPS] + [f"real:{n}" for n in REAL_DUMPS])
@pytest.mark.parametrize("hosts", [1, 2])
def test_every_dump_imports_into_a_valid_topology(name, hosts):
    path = real(name[5:]) if name.startswith("real:") else DATA / f"{name}.xml"
    result = import_nccl_topology(path, hosts=hosts)
    t = result.topology
    assert result.warnings == []
    assert t.num_ranks == result.gpus_per_host * hosts
    assert sorted(set(t.hosts)) == [f"node{h}" for h in range(hosts)]
    # the file it writes reads back as the same topology
    import json

    again = topology_from_document(json.loads(topology_to_json(t)))
    assert again.links == t.links and again.ranks == t.ranks
    # every GPU reaches every other without relays (through PCIe, CPUs and, for hosts, the NICs)
    figures = topology_figures(t)
    assert all(figures.pair_bandwidth[a][b] > 0 for a in range(t.num_ranks) for b in range(t.num_ranks) if a != b)


def _links(t, a: str, b: str) -> float:
    i, j = t.node_index[a], t.node_index[b]
    return t.links[t.link_index[(i, j)]].bandwidth


def test_hgx_a100_figures():
    t = import_nccl_topology(real("nccl-hgx-a100-8gpu")).topology
    assert t.num_ranks == 8
    # 6 NVSwitch targets x 2 links x 20 GB/s (sm 80), one switch node
    assert [_links(t, f"gpu{g}", "nvswitch") for g in range(8)] == [240.0] * 8
    # old-style "16 GT/s" x16 = 24 GB/s; Ice Lake (model 106) sockets: 10 GB/s
    assert _links(t, "gpu0", "pci0000:11:00.0") == 24.0
    assert _links(t, "cpu0", "cpu1") == 10.0
    nics = sorted(s.name for s in t.switches if s.name.startswith("nic-"))
    assert nics == [f"nic-mlx5_bond_{i}" for i in range(5)]
    assert _links(t, "nic-mlx5_bond_0", "cpu0") == 24.0


def test_h100_vm_quirks():
    t = import_nccl_topology(real("nccl-ibm-h100-8gpu")).topology
    # counts 5, 5, 4, 4 to four NVSwitches: 18 links x 20.6 GB/s (sm 90)
    assert _links(t, "gpu0", "nvswitch") == pytest.approx(370.8)
    # link_width 0 means 16: 32 GT/s x16 = 48 GB/s; the virtual bridge says 2.5 GT/s x1
    assert _links(t, "gpu0", "pci0000:a1:00.0") == 48.0
    assert _links(t, "pci0000:a1:00.0", "cpu0") == pytest.approx(0.1875)
    # Sapphire Rapids (model 143): 22 GB/s between the sockets
    assert _links(t, "cpu0", "cpu1") == 22.0


def test_b200_vm_quirks():
    t = import_nccl_topology(real("nccl-b200-vm-8gpu")).topology
    # one hidden NVSwitch target, count 18 x 40.1 GB/s (sm 100)
    assert _links(t, "gpu0", "nvswitch") == pytest.approx(721.8)
    # several nets under one nic: 4 x 100 + 200 Gb/s = 75 GB/s; 4 x 400 Gb/s = 200 GB/s
    # the NICs sit in host bridges with an empty link_speed and width 0: NCCL reads Gen3 x16, 12 GB/s
    assert _links(t, "nic-mlx5_0", "cpu0") == 12.0
    nics = {s.name for s in t.switches if s.name.startswith("nic-")}
    assert nics == {"nic-mlx5_0", "nic-mlx5_5", "nic-mlx5_9"}
    two = import_nccl_topology(real("nccl-b200-vm-8gpu"), hosts=2).topology
    assert _links(two, "n0-nic-mlx5_0", "net") == 75.0 and _links(two, "n1-nic-mlx5_5", "net") == 200.0
    assert _links(t, "cpu0", "cpu1") == 40.0  # Emerald Rapids (model 207)


def test_azure_direct_nvlink_and_nic_under_cpu():
    t = import_nccl_topology(real("nccl-azure-ncv4-4gpu")).topology
    # GPU pairs (0,1) and (2,3) bridged: 12 links x 20 GB/s each way, directed rows
    assert _links(t, "gpu0", "gpu1") == 240.0 and _links(t, "gpu1", "gpu0") == 240.0
    assert (t.node_index["gpu0"], t.node_index["gpu2"]) not in t.link_index
    # a NIC directly under a CPU, linked at its own speed; AMD Milan (family 175, Zen 3): 24 GB/s
    assert _links(t, "nic-eth0", "cpu0") == 12.5
    assert _links(t, "cpu0", "cpu3") == 24.0


def test_dgx1_nvlink_matrix_from_the_hand_written_dump(builtin):
    t = import_nccl_topology(DATA / "nccl-dgx1-v100-8gpu.xml", nvlink_bandwidth=25).topology
    reference = builtin("dgx1")
    for a in range(8):
        for b in range(8):
            key = (a, b)
            theirs = reference.links[reference.link_index[key]].bandwidth if key in reference.link_index else None
            ours = t.links[t.link_index[key]].bandwidth if key in t.link_index else None
            assert ours == theirs


# ------------------------------------------------------------------ comparison with built-ins
# What "match" means: the imported machine is the built-in's machine (same ranks, same switch
# structure for the links that carry collectives) measured with NCCL's per-link figures. With
# --nvlink-bandwidth set to the built-in's per-link figure, the best-route bandwidth between every
# pair of GPUs joined by NVLink, and the ring's narrowest hop, are exactly the built-in's; without
# it they are the built-in's scaled by NCCL's figure over the datasheet's (20/25 for sm 70/80,
# 20.6/25 for sm 90). Per-rank ingress differs by the side links each file models (PCIe in the
# dumps, NICs in the built-ins).
@pytest.mark.parametrize(
    ("dump", "builtin_name", "per_link", "nccl_scale"),
    [
        ("nccl-hgx-a100-8gpu", "dgx-a100", 25.0, 20 / 25),
        ("nccl-ibm-h100-8gpu", "dgx-h100", 25.0, 20.6 / 25),
        ("nccl-dgx1-v100-8gpu", "dgx1", 25.0, 20 / 25),
        ("nccl-rtx3090-pcie-8gpu", "pcie-2socket", None, 1.0),
    ],
)
def test_imports_match_the_builtin_of_the_same_machine(dump, builtin_name, per_link, nccl_scale, builtin):
    ref = topology_figures(builtin(builtin_name))
    path = DATA / f"{dump}.xml" if (DATA / f"{dump}.xml").is_file() else real(dump)
    same = topology_figures(import_nccl_topology(path, nvlink_bandwidth=per_link).topology)
    nccl = topology_figures(import_nccl_topology(path).topology)
    assert same.ring == ref.ring
    assert same.ring_bottleneck == ref.ring_bottleneck
    assert nccl.ring_bottleneck == pytest.approx(ref.ring_bottleneck * nccl_scale)
    for a in range(8):
        for b in range(8):
            theirs = ref.pair_bandwidth[a][b]
            if theirs > 0:  # pairs the built-in joins (dgx1 joins only NVLink pairs)
                assert same.pair_bandwidth[a][b] == theirs
                assert nccl.pair_bandwidth[a][b] == pytest.approx(theirs * nccl_scale)


def test_pcie_server_matches_the_builtin_exactly(builtin):
    ref = topology_figures(builtin("pcie-2socket"))
    got = topology_figures(import_nccl_topology(real("nccl-rtx3090-pcie-8gpu")).topology)
    assert got == ref


# --------------------------------------------------------------------------------- the network
def test_hosts_join_through_one_switch_or_rails():
    single = import_nccl_topology(real("nccl-hgx-a100-8gpu"), hosts=3).topology
    assert single.num_ranks == 24 and sum(s.name == "net" for s in single.switches) == 1
    assert _links(single, "n2-nic-mlx5_bond_4", "net") == 25.0
    rails = import_nccl_topology(real("nccl-hgx-a100-8gpu"), hosts=2, network="rails").topology
    assert sorted(s.name for s in rails.switches if s.name.startswith("rail")) == [f"rail{i}" for i in range(5)]
    assert _links(rails, "n1-nic-mlx5_bond_3", "rail3") == 25.0
    # a GPU next to its NIC reaches the other host at the NIC's PCIe rate
    figures = topology_figures(rails)
    assert figures.pair_bandwidth[1][9] == 24.0


def test_hosts_need_nics():
    text = (real("nccl-rtx3090-pcie-8gpu")).read_text().replace("<nic>", "<nicx>").replace("</nic>", "</nicx>")
    with pytest.raises(InputError, match="--hosts needs NICs"):
        import_nccl_topology_text(text, "x.xml", hosts=2)


# ------------------------------------------------------------------------------ robustness
def test_unknown_elements_are_skipped_with_a_warning():
    text = (real("nccl-rtx3090-pcie-8gpu")).read_text()
    text = text.replace(
        '<gpu dev="0" sm="86" rank="0" gdr="0"/>', '<gpu dev="0" sm="86" rank="0" gdr="0"><xgmi target="x"/></gpu>'
    )
    text = text.replace("</system>", "<c2c/></system>")
    result = import_nccl_topology_text(text, "w.xml")
    assert result.warnings == [
        "w.xml: skipped unknown element <xgmi> in pci[0000:0f:00.0].gpu",
        "w.xml: skipped unknown element <c2c> in <system>",
    ]
    assert result.topology.num_ranks == 8


def test_a_self_link_like_the_later_azure_file_is_skipped():
    # the later azhpc-images version points every GPU's nvlink at its own bus id
    text = (real("nccl-azure-ncv4-4gpu")).read_text().replace('target="0002:00:00.0"', 'target="0001:00:00.0"', 1)
    result = import_nccl_topology_text(text, "self.xml")
    assert result.warnings == [
        "self.xml: gpu0 (0001:00:00.0) has an NVLink to 0001:00:00.0, which is not another GPU of the dump; skipped"
    ]


def test_unrecognized_link_speed_warns_and_falls_back():
    text = (real("nccl-rtx3090-pcie-8gpu")).read_text()
    gpu0 = text.index('busid="0000:0f:00.0"')
    text = text[:gpu0] + text[gpu0:].replace('link_speed="16.0 GT/s PCIe"', 'link_speed="fast"', 1)
    result = import_nccl_topology_text(text, "s.xml")
    assert "unrecognized link_speed 'fast'; counted as 6 Gb/s per lane" in result.warnings[0]
    assert _links(result.topology, "gpu0", "pci0000:0c:00.0") == 12.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<system", "x.xml: line 1 column 1: malformed XML (unclosed token)"),
        ("<algo/>", 'x.xml: (root element) = "algo": expected <system>'),
        ("<system version='1'></system>", "x.xml: system: the dump has no <gpu>"),
        (
            "<system><cpu><pci busid='0:1:0.0' class='0x030200'><gpu dev='0'/></pci></cpu></system>",
            "gpu.sm = null: a <gpu> needs its compute capability",
        ),
        (
            "<system><cpu><pci class='0x030200'><gpu sm='80'/></pci></cpu></system>",
            "cpu[0].pci.busid = null: a <pci> element needs a busid",
        ),
        ("<system><cpu numaid='x'/></system>", 'cpu[0].numaid = "x": expected an integer'),
        # no document type declarations: no entities, internal (a billion laughs) or external
        (
            '<?xml version="1.0"?>\n<!DOCTYPE s [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>\n'
            '<system><cpu arch="&b;"/></system>',
            "x.xml: line 2 column 13: refused: a document type declaration (<!DOCTYPE>): NCCL's dumps have none",
        ),
        (
            '<!DOCTYPE s [<!ENTITY e SYSTEM "file:///etc/passwd">]><system><cpu arch="&e;"/></system>',
            "x.xml: line 1 column 13: refused: a document type declaration",
        ),
        ("<system><cpu arch='&e;'/></system>", "malformed XML (undefined entity)"),
    ],
)
def test_bad_files_get_one_line(text, message):
    with pytest.raises(InputError) as err:
        import_nccl_topology_text(text, "x.xml")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_reader_is_bounded():
    # 5,000 nested <pci> (a RecursionError before): refused at depth MAX_XML_DEPTH, with the line
    deep = "<system><cpu>" + "<pci busid='0:1:0.0'>" * 5000 + "</pci>" * 5000 + "</cpu></system>"
    with pytest.raises(InputError) as err:
        import_nccl_topology_text(deep, "deep.xml")
    assert str(err.value) == (
        f"deep.xml: line 1 column {13 + 21 * (MAX_XML_DEPTH - 2) + 1}: refused: <pci> nested deeper than "
        f"{MAX_XML_DEPTH} elements (NCCL's dumps nest about 8 deep)"
    )
    wide = "<system><cpu>" + "<pci busid='0:1:0.0'/>" * (MAX_XML_ELEMENTS + 1) + "</cpu></system>"
    with pytest.raises(InputError, match=f"refused: more than {MAX_XML_ELEMENTS} elements"):
        import_nccl_topology_text(wide, "wide.xml")
    with pytest.raises(InputError, match="larger than 8 MiB: not an NCCL topology dump"):
        import_nccl_topology_text("<system>" + " " * (8 << 20) + "</system>", "big.xml")


def test_figures_tables():
    assert [nvlink_bandwidth_for_sm(sm) for sm in (60, 70, 75, 80, 86, 89, 90, 100)] == [18, 20, 20, 20, 12, 20, 20.6, 40.1]
    assert pcie_bandwidth("16 GT/s", "16") == (24.0, True)
    assert pcie_bandwidth("16.0 GT/s PCIe", "0") == (24.0, True)
    assert pcie_bandwidth("32.0 GT/s PCIe", "16") == (48.0, True)
    assert pcie_bandwidth("64.0 GT/s PCIe", "16") == (96.0, True)
    assert pcie_bandwidth("2.5 GT/s PCIe", "1") == (0.1875, True)
    assert pcie_bandwidth("", "0") == (12.0, True)
    assert inter_cpu_bandwidth("x86_64", "GenuineIntel", 6, 79)[0] == 6.0
    assert inter_cpu_bandwidth("x86_64", "GenuineIntel", 6, 106)[0] == 10.0
    assert inter_cpu_bandwidth("x86_64", "GenuineIntel", 6, 143)[0] == 22.0
    assert inter_cpu_bandwidth("x86_64", "GenuineIntel", 6, 207)[0] == 40.0
    assert inter_cpu_bandwidth("x86_64", "GenuineIntel", 6, 0xAD)[0] == 40.0  # Granite Rapids
    assert inter_cpu_bandwidth("x86_64", "AuthenticAMD", 23, 49)[0] == 16.0  # Rome
    assert inter_cpu_bandwidth("x86_64", "AuthenticAMD", 175, 1)[0] == 24.0  # Milan, as older NCCL wrote the family
    assert inter_cpu_bandwidth("x86_64", "AuthenticAMD", 25, 17)[0] == 24.0  # Genoa
    assert inter_cpu_bandwidth("x86_64", "AuthenticAMD", 26, 2)[0] == 32.0  # Turin


def test_c2c_joins_a_gpu_to_its_cpu():
    pairs = DATA / "nccl-fixture-nvbridge-4gpu.xml"
    text = pairs.read_text().replace(
        'count="12" tclass="0x030200"/>', 'count="12" tclass="0x030200"/><c2c count="10" bw="45000"/>', 1
    )
    t = import_nccl_topology_text(text, "c.xml").topology
    # 10 links x 45000 MB/s, beside the 12 GB/s PCIe link between the same two nodes (they add up)
    assert _links(t, "gpu0", "cpu0") == 462.0 and _links(t, "cpu0", "gpu0") == 462.0


def test_several_host_hashes_are_said():
    pairs = DATA / "nccl-fixture-nvbridge-4gpu.xml"
    text = pairs.read_text().replace('<cpu numaid="0"', '<cpu host_hash="0x1" numaid="0"')
    text = text.replace('<cpu numaid="1"', '<cpu host_hash="0x2" numaid="1"')
    result = import_nccl_topology_text(text, "h.xml")
    assert "2 different host_hash values: NCCL sees that many hosts" in result.warnings[-1]


def test_nvlink_only_imports_are_the_builtins_fabric(builtin):
    # with NCCL's PCIe, CPUs and NICs left out and the datasheet's 25 GB/s per NVLink, an import is
    # link for link the built-in's NVLink fabric: any bound computed on one holds for the other
    from synth import generators as gen
    from synth.topology import topologies_equal

    dgx1 = import_nccl_topology(DATA / "nccl-dgx1-v100-8gpu.xml", nvlink_only=True, nvlink_bandwidth=25).topology
    assert topologies_equal(dgx1, builtin("dgx1"))
    hgx = import_nccl_topology(real("nccl-hgx-a100-8gpu"), nvlink_only=True, nvlink_bandwidth=25).topology
    assert topologies_equal(hgx, gen.nvswitch(8, 300.0, 0.35))
    h100 = import_nccl_topology(real("nccl-ibm-h100-8gpu"), nvlink_only=True, nvlink_bandwidth=25).topology
    assert topologies_equal(h100, gen.nvswitch(8, 450.0, 0.35))
    # the built-ins add dead-end NIC nodes to the same NVSwitch fabric
    ref = builtin("dgx-a100")
    assert [
        lk for lk in ref.links if not ref.node_name(lk.dst).startswith("nic") and not ref.node_name(lk.src).startswith("nic")
    ] == list(hgx.links)


def test_nvlink_only_needs_nvlinks_that_join_every_gpu():
    with pytest.raises(InputError, match="--nvlink-only: the dump has no NVLink between GPUs"):
        import_nccl_topology(real("nccl-rtx3090-pcie-8gpu"), nvlink_only=True)
    with pytest.raises(InputError, match="--nvlink-only: NVLinks alone do not join every GPU"):
        import_nccl_topology(real("nccl-azure-ncv4-4gpu"), nvlink_only=True)
    with pytest.raises(InputError, match="use --nvlink-only for one host"):
        import_nccl_topology(real("nccl-hgx-a100-8gpu"), nvlink_only=True, hosts=2)
