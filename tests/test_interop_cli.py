"""``synth export msccl``, ``synth import msccl``, ``synth topo import nccl``: outputs, one-line
errors and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from synth.cli import main

from .conftest import REALDATA, REPO
from .msccl_fixtures import allpairs_allreduce, direct_allgather

DATA = Path(__file__).parent / "data"
RING = str(REPO / "generated" / "dgx1" / "allreduce-ring.json")


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_help_lists_the_commands():
    out = invoke("--help").output
    assert "  export " in out and "  import " in out
    assert "  import " in invoke("topo", "--help").output


def test_export_then_import_round_trip(tmp_path):
    xml = tmp_path / "ar.xml"
    r = invoke("export", "msccl", RING, "-o", str(xml), "--channels", "2", "--proto", "LL128", "--max-bytes", "1M")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith(
        f"wrote {xml}: synth allreduce ring on dgx1: allreduce on 8 GPUs, out of place, LL128, 2 channel(s)"
    )
    head = xml.read_text().splitlines()[0]
    assert 'minBytes="0" maxBytes="1048576"' in head and 'outofplace="1"' in head
    back = tmp_path / "back.json"
    r = invoke("import", "msccl", str(xml), "-o", str(back), "--topology", "dgx1")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip().endswith("-> 14 steps, 112 transfers on dgx1; verified")
    r = invoke("verify", str(back))
    assert r.exit_code == 0 and r.stdout.startswith("OK allreduce on 8 ranks")


def test_export_to_standard_output():
    r = invoke("export", "msccl", RING, "--inplace")
    assert r.exit_code == 0
    assert r.stdout.startswith('<algo name="synth allreduce ring on dgx1"') and r.stdout.endswith("</algo>\n")
    assert r.stderr.startswith("exported synth allreduce ring on dgx1")


def test_export_refuses_an_invalid_schedule(tmp_path):
    doc = json.loads(Path(RING).read_text())
    doc["steps"][3] = doc["steps"][3][1:]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = invoke("export", "msccl", str(bad), "-o", str(tmp_path / "x.xml"))
    assert r.exit_code == 1 and "INVALID allreduce" in r.stdout
    assert not (tmp_path / "x.xml").exists()


def test_export_bad_options_exit_2(tmp_path):
    for args, message in (
        (["--channels", "0"], "--channels: channels = 0: must be 1 … 32"),
        (["--min-bytes", "lots"], '--min-bytes = "lots"'),
        (["--min-bytes", "2M", "--max-bytes", "1M"], "need 0 <= min-bytes <= max-bytes"),
        (["-o", RING], "is also an input of this command"),
    ):
        r = invoke("export", "msccl", RING, *args)
        assert r.exit_code == 2, args
        assert message in r.stderr and r.stderr.count("\n") == 1


def test_import_real_files_default_topology(tmp_path):
    if not REALDATA.is_dir():
        pytest.skip(f"needs {REALDATA} (the shared real-data folder beside the checkout)")
    files = sorted(REALDATA.glob("msccl-*.xml"))
    assert files
    for path in files:
        out = tmp_path / f"{path.stem}.json"
        r = invoke("import", "msccl", str(path), "-o", str(out))
        if "recursive-doubling" in path.stem:  # MSCCLang's allgather with a race between thread blocks
            assert (
                r.exit_code == 1 and "INVALID: gpu 1 tb 2 step 0 (s): reads o[1], which gpu 1 tb 1 step 1 (r) writes" in r.stderr
            )
            assert not out.exists()
            continue
        assert r.exit_code == 0, r.stderr
        assert "verified" in r.stdout and "never used" not in r.stderr
        assert r.stderr.startswith("synth: note: no --topology: assuming ")
        if "-8gpu" in path.stem:
            assert "on dgx-a100; verified" in r.stdout
            assert invoke("verify", str(out)).exit_code == 0


def test_import_errors(tmp_path):
    ring4 = tmp_path / "ring4.json"
    assert invoke("topo", "gen", "ring", "--ranks", "4", "-o", str(ring4)).exit_code == 0
    pairs = tmp_path / "pairs.xml"
    pairs.write_text(allpairs_allreduce(4))
    r = invoke("import", "msccl", str(pairs), "-o", str(tmp_path / "s.json"), "-t", str(ring4))
    assert r.exit_code == 2 and "has no link or switch path" in r.stderr
    bad = tmp_path / "bad.xml"
    bad.write_text("<algo name='x'")
    r = invoke("import", "msccl", str(bad), "-o", str(tmp_path / "s.json"))
    assert r.exit_code == 2 and r.stderr.startswith(f"synth: error: {bad}: line 1 column")
    # a broken algorithm: drop the last receive
    text = pairs.read_text().splitlines()
    idx = max(i for i, line in enumerate(text) if 'type="r"' in line)
    broken = tmp_path / "broken.xml"
    broken.write_text("\n".join(text[:idx] + text[idx + 1 :]))
    r = invoke("import", "msccl", str(broken), "-o", str(tmp_path / "s.json"))
    assert r.exit_code == 1 and "INVALID: gpu 2 tb 3 step 8 sends to gpu 3 on channel 0, but no step receives it" in r.stderr
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("gpus", [4, 32, 64])
def test_import_assumes_a_switch_box_of_any_size_and_says_so(tmp_path, gpus):
    xml = tmp_path / "ag.xml"
    xml.write_text(direct_allgather(gpus))
    out = tmp_path / "s.json"
    r = invoke("import", "msccl", str(xml), "-o", str(out))
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip().endswith(f"-> 1 steps, {gpus * (gpus - 1)} transfers on nvswitch{gpus}; verified")
    assert r.stderr.startswith(f"synth: note: no --topology: assuming nvswitch{gpus}, {gpus} GPUs on one switch")
    if gpus > 32:
        return  # the rest takes seconds at 64 GPUs and checks nothing new
    # the topology assumed is the one `synth topo gen nvswitch --gpus N` writes, so verify finds it
    topo = tmp_path / "t.json"
    assert invoke("topo", "gen", "nvswitch", "--gpus", str(gpus), "-o", str(topo)).exit_code == 0
    r = invoke("verify", str(out), "-t", str(topo))
    assert r.exit_code == 0, r.stdout
    # a given topology is used as it is, without a note
    box = tmp_path / "box.json"
    assert (
        invoke("topo", "gen", "nvswitch", "--gpus", str(gpus), "--bandwidth", "100", "--name", "box", "-o", str(box)).exit_code
        == 0
    )
    r = invoke("import", "msccl", str(xml), "-o", str(out), "-t", str(box))
    assert r.exit_code == 0 and r.stderr == "" and "on box; verified" in r.stdout


def test_the_8_and_16_gpu_defaults_are_the_builtin_boxes(tmp_path):
    for gpus, name in ((8, "dgx-a100"), (16, "dgx2")):
        xml = tmp_path / "ag.xml"
        xml.write_text(direct_allgather(gpus))
        r = invoke("import", "msccl", str(xml), "-o", str(tmp_path / "s.json"))
        assert r.exit_code == 0 and f"on {name}; verified" in r.stdout
        assert r.stderr == f"synth: note: no --topology: assuming the built-in {name}, an {gpus}-GPU NVSwitch box\n"
        assert invoke("verify", str(tmp_path / "s.json")).exit_code == 0


def test_reimporting_an_exported_direct_allreduce_loses_nothing(tmp_path):
    """Relayed reductions accumulate into the same output position (rrc o[c] -> o[c]); the received
    data is carried on there, not dropped, so no "never used" warning."""
    sched, xml = tmp_path / "a.json", tmp_path / "a.xml"
    assert invoke("synthesize", "dgx1", "-c", "allreduce", "-m", "direct", "-o", str(sched)).exit_code == 0
    assert invoke("export", "msccl", str(sched), "-o", str(xml)).exit_code == 0
    r = invoke("import", "msccl", str(xml), "-o", str(tmp_path / "b.json"), "-t", "dgx1")
    assert r.exit_code == 0 and r.stderr == "", r.stderr
    assert r.stdout.strip().endswith("-> 4 steps, 112 transfers on dgx1; verified")


def test_topo_import_nccl(tmp_path):
    out = tmp_path / "hgx.json"
    fixture = str(DATA / "nccl-fixture-nvswitch-8gpu.xml")
    r = invoke("topo", "import", "nccl", fixture, "-o", str(out), "--hosts", "2", "--network", "rails")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"wrote {out}: nccl-fixture-nvswitch-8gpu-x2: 16 ranks on 2 host(s), 45 switches, 156 directed links\n"
    r = invoke("topo", "show", str(out))
    assert r.exit_code == 0 and "ranks: 16 on 2 host(s)" in r.stdout
    r = invoke("topo", "import", "nccl", str(DATA / "nccl-fixture-nvbridge-4gpu.xml"), "--name", "pairs")
    assert r.exit_code == 0 and json.loads(r.stdout)["name"] == "pairs"


def test_topo_import_nccl_errors_and_warnings(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<system><cpu>")
    r = invoke("topo", "import", "nccl", str(bad), "-o", str(tmp_path / "t.json"))
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "malformed XML" in r.stderr
    odd = tmp_path / "odd.xml"
    odd.write_text((DATA / "nccl-fixture-nvswitch-8gpu.xml").read_text().replace("</system>", "<gin/></system>"))
    r = invoke("topo", "import", "nccl", str(odd), "-o", str(tmp_path / "t.json"))
    assert r.exit_code == 0 and r.stderr == f"synth: warning: {odd}: skipped unknown element <gin> in <system>\n"
    r = invoke("topo", "import", "nccl", str(odd), "-o", str(odd))
    assert r.exit_code == 2 and "is also an input" in r.stderr


def test_topo_import_nccl_vm_warnings_and_virtual_bridges(tmp_path):
    vm = DATA / "nccl-fixture-vm-8gpu.xml"
    out = tmp_path / "vm.json"
    r = invoke("topo", "import", "nccl", str(vm), "-o", str(out))
    assert r.exit_code == 0, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 4 and all(line.startswith(f"synth: warning: {vm}: ") for line in lines)
    assert "emulated bridge; counted at 48 GB/s" in lines[3]
    links = {(lk["a"], lk["b"]): lk["bandwidth"] for lk in json.loads(out.read_text())["links"]}
    assert links[("cpu0", "pci0000:80:00.0")] == 48
    r = invoke("topo", "import", "nccl", str(vm), "-o", str(out), "--virtual-bridges", "dumped")
    assert r.exit_code == 0 and "kept at 0.1875 GB/s" in r.stderr
    links = {(lk["a"], lk["b"]): lk["bandwidth"] for lk in json.loads(out.read_text())["links"]}
    assert links[("cpu0", "pci0000:80:00.0")] == 0.1875
    # to standard output, the topology JSON stays parseable; warnings go to standard error
    r = invoke("topo", "import", "nccl", str(vm))
    assert r.exit_code == 0 and json.loads(r.stdout)["name"] == "nccl-fixture-vm-8gpu" and "synth: warning:" in r.stderr


def test_topo_import_nccl_deep_nesting_through_a_real_process(tmp_path):
    """XML nested 5,000 deep (a RecursionError traceback before) gets one line and exit 2."""
    deep = tmp_path / "deep.xml"
    deep.write_text("<system><cpu>" + "<pci busid='0:1:0.0'>" * 5000 + "</pci>" * 5000 + "</cpu></system>")
    p = subprocess.run(
        [sys.executable, "-m", "synth", "topo", "import", "nccl", str(deep), "-o", str(tmp_path / "t.json")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1
    assert p.stderr.startswith(f"synth: error: {deep}: line 1 column 1316: refused: <pci> nested deeper than 64 elements")
    assert not (tmp_path / "t.json").exists()


def test_topo_import_nccl_misreadable_figures_through_a_real_process(tmp_path):
    """Figures NCCL would misread (strtol) get one line naming file, element and value, and exit 2."""
    count = tmp_path / "count.xml"
    count.write_text((DATA / "nccl-fixture-nvswitch-8gpu.xml").read_text().replace('count="2"', 'count="1000000000000"', 1))
    width = tmp_path / "width.xml"
    width.write_text((DATA / "nccl-fixture-nvswitch-8gpu.xml").read_text().replace('link_width="16"', 'link_width="x"', 1))
    expected = {
        count: 'pci[0000:14:00.0].gpu.nvlink[0].count = "1000000000000": expected a number of NVLinks',
        width: 'pci[0000:0e:00.0].link_width = "x": expected a lane count',
    }
    for path, message in expected.items():
        p = subprocess.run(
            [sys.executable, "-m", "synth", "topo", "import", "nccl", str(path), "-o", str(tmp_path / "t.json")],
            capture_output=True,
            text=True,
        )
        assert p.returncode == 2 and p.stdout == ""
        assert p.stderr.startswith(f"synth: error: {path}: ") and p.stderr.count("\n") == 1 and message in p.stderr
    assert not (tmp_path / "t.json").exists()


def test_exit_codes_through_a_real_process(tmp_path):
    out = tmp_path / "a.xml"
    p = subprocess.run(
        [sys.executable, "-m", "synth", "export", "msccl", RING, "-o", str(out)], capture_output=True, text=True, cwd=REPO
    )
    assert p.returncode == 0 and out.is_file()
    p = subprocess.run(
        [sys.executable, "-m", "synth", "import", "msccl", str(tmp_path / "missing.xml"), "-o", str(tmp_path / "s.json")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and p.stderr == f"synth: error: {tmp_path / 'missing.xml'}: no such file\n"


def test_topo_import_nccl_nvlink_only(tmp_path):
    out = tmp_path / "dgx1.json"
    r = invoke(
        "topo",
        "import",
        "nccl",
        str(DATA / "nccl-dgx1-v100-8gpu.xml"),
        "--nvlink-only",
        "--nvlink-bandwidth",
        "25",
        "-o",
        str(out),
    )
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"wrote {out}: nccl-dgx1-v100-8gpu: 8 ranks on 1 host(s), 0 switches, 32 directed links\n"
    pcie_only = tmp_path / "pcie.xml"
    pcie_only.write_text((DATA / "nccl-fixture-nvbridge-4gpu.xml").read_text().replace('count="12"', 'count="0"'))
    r = invoke("topo", "import", "nccl", str(pcie_only), "--nvlink-only")
    assert r.exit_code == 2 and "the dump has no NVLink between GPUs" in r.stderr
