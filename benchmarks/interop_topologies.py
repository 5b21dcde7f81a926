"""NCCL topology dumps against synth's hand-written built-ins of the same machines: per GPU the
NVLink (or PCIe) bandwidth to its peers, the per-rank ingress, and the narrowest hop of the ring
synth's ring algorithms use, for the import with NCCL's per-link figures, the import with the
built-in's per-link figure (--nvlink-bandwidth), and the built-in. Then, for every dump, the
figures to hold against the machine's published hardware: NVLink per GPU (NCCL's figure and the
datasheet's, 25 GB/s per link for NVLink 2 to 4, 50 for NVLink 5), each GPU's PCIe link and the
slowest link on its way to its CPU, the NICs' network speed, the warnings of the import, and on two
hosts joined rail by rail the 1 GiB allreduce bound, how far NCCL's rings (multiring) are from it
and NCCL's model's bus bandwidth.

The real dumps are read from ../shared/reference/realdata beside the clone (the repository holds
only what the project wrote: the hand-written DGX-1 dump in tests/data); a dump that is absent is
skipped with a line saying so.

    .venv/bin/python benchmarks/interop_topologies.py
"""

from __future__ import annotations

from pathlib import Path

from synth.builtin import get_topology
from synth.compare import compare
from synth.interop.nccl_topology import import_nccl_topology, topology_figures
from synth.nccl_model import nccl_model_best

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
REALDATA = REPO.parent / "shared" / "reference" / "realdata"

# dump, the built-in of the same machine (None: there is none), per-link figure the built-in uses
CASES = [
    ("nccl-hgx-a100-8gpu", "dgx-a100", 25.0),
    ("nccl-ibm-h100-8gpu", "dgx-h100", 25.0),
    ("nccl-dgx1-v100-8gpu", "dgx1", 25.0),
    ("nccl-rtx3090-pcie-8gpu", "pcie-2socket", None),
    ("nccl-b200-vm-8gpu", None, None),
    ("nccl-azure-ncv4-4gpu", None, None),
]
#: the synthetic fixtures the project wrote, for the hardware table
FIXTURES = ["nccl-fixture-nvswitch-8gpu", "nccl-fixture-vm-8gpu", "nccl-fixture-nvbridge-4gpu"]
#: datasheet GB/s per NVLink per direction by GPU generation (NVLink 2, 3, 4: 25; NVLink 5: 50)
DATASHEET_PER_LINK = {70: 25.0, 80: 25.0, 90: 25.0, 100: 50.0}
GIB = 1 << 30


def _row(label: str, figures) -> str:
    n = len(figures.ingress)
    peers = sorted({figures.pair_bandwidth[0][b] for b in range(1, n)}, reverse=True)
    peer_text = "/".join(f"{p:g}" for p in peers)
    ingress = (
        f"{min(figures.ingress):g}"
        if min(figures.ingress) == max(figures.ingress)
        else f"{min(figures.ingress):g}..{max(figures.ingress):g}"
    )
    ring = " ".join(map(str, figures.ring))
    return f"  {label:<28}{peer_text:>22}{ingress:>12}{figures.ring_bottleneck:>10g}   {ring}"


def _path(dump: str) -> Path | None:
    for path in (DATA / f"{dump}.xml", REALDATA / f"{dump}.xml"):
        if path.is_file():
            return path
    print(f"{dump}: skipped, {REALDATA / dump}.xml is absent (real dumps are read from ../shared/reference/realdata)")
    return None


def _to_cpu(out: dict[tuple[str, str], float]) -> float:
    """The slowest link on gpu0's PCIe path to its CPU (fewest hops through PCIe switch nodes)."""
    paths, frontier = {"gpu0": float("inf")}, ["gpu0"]
    while frontier:
        nxt = []
        for node in frontier:
            for (a, b), bw in out.items():
                if a == node and b not in paths and b.startswith(("pci", "cpu")):
                    paths[b] = min(paths[node], bw)
                    if b.startswith("cpu"):
                        return paths[b]
                    nxt.append(b)
        frontier = nxt
    return float("nan")


def _hardware_row(dump: str, path: Path) -> str:
    result = import_nccl_topology(path)
    t = result.topology
    out = {(t.node_name(lk.src), t.node_name(lk.dst)): lk.bandwidth for lk in t.links}
    sm = min(result.nvlink_per_link)
    nvlink = out.get(("gpu0", "nvswitch")) or sum(bw for (a, b), bw in out.items() if a == "gpu0" and b.startswith("gpu"))
    links = round(nvlink / result.nvlink_per_link[sm])
    nvlink_text = f"{nvlink:g}/{links * DATASHEET_PER_LINK.get(sm, 0.0):g}" if nvlink else "-"
    pcie = next(bw for (a, b), bw in out.items() if a == "gpu0" and b.startswith(("pci", "cpu")))
    nics = [s.name for s in t.switches if s.name.startswith("nic-")]
    uplinks = sorted({bw for (a, b), bw in out.items() if a in nics and b.startswith(("pci", "cpu"))}, reverse=True)
    two = import_nccl_topology(path, hosts=2, network="rails").topology
    to_rail = {two.node_name(lk.src): lk.bandwidth for lk in two.links if two.node_name(lk.dst).startswith("rail")}
    speeds = sorted({bw for name, bw in to_rail.items() if name.startswith("n0-")}, reverse=True)
    cmp = compare(two, "allreduce", [GIB], methods=["multiring"])
    bound = cmp.bounds[0].time_us
    factor = 2 * (two.num_ranks - 1) / two.num_ranks
    multiring = cmp.outcomes[0].times_us[0] / bound if cmp.outcomes[0].ok else float("nan")
    nccl = nccl_model_best(two, "allreduce", [GIB])[0]
    net = "/".join(f"{s:g}" for s in speeds)
    up = "/".join(f"{s:g}" for s in uplinks)
    return (
        f"{dump:<28}{sm:>4}{nvlink_text:>14}{pcie:>7g}{_to_cpu(out):>9g}{net:>12}{up:>9}{len(result.warnings):>6}"
        f"{GIB / bound / 1e3 * factor:>10.1f}{multiring:>8.2f}{GIB / nccl.time_us / 1e3 * factor:>8.1f}"
    )


def main() -> None:
    print(f"  {'':<28}{'GPU0 to peers GB/s':>22}{'ingress':>12}{'ring min':>10}   ring")
    for dump, builtin, per_link in CASES:
        path = _path(dump)
        if path is None:
            continue
        print(dump)
        print(_row("import (NCCL figures)", topology_figures(import_nccl_topology(path).topology)))
        if per_link is not None:
            same = import_nccl_topology(path, nvlink_bandwidth=per_link).topology
            print(_row(f"import, {per_link:g} GB/s per NVLink", topology_figures(same)))
        if builtin is not None:
            print(_row(f"built-in {builtin}", topology_figures(get_topology(builtin))))
    print()
    print("GB/s per direction; NVLink per GPU NCCL/datasheet; GPU0's PCIe link and the slowest link on its way to a")
    print("CPU; NIC network speeds and their PCIe uplinks; warnings; 2 hosts on rails, allreduce 1 GiB: bound busbw,")
    print("multiring time / bound, NCCL model busbw")
    header = f"{'dump':<28}{'sm':>4}{'NVLink':>14}{'PCIe':>7}{'to CPU':>9}{'NICs':>12}{'uplink':>9}{'warn':>6}"
    print(header + f"{'bound':>10}{'x ring':>8}{'NCCL':>8}")
    for dump in [c[0] for c in CASES] + FIXTURES:
        path = _path(dump)
        if path is not None:
            print(_hardware_row(dump, path))


if __name__ == "__main__":
    main()
