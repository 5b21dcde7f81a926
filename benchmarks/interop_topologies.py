"""NCCL topology dumps against synth's hand-written built-ins of the same machines: per GPU the
NVLink (or PCIe) bandwidth to its peers, the per-rank ingress, and the narrowest hop of the ring
synth's ring algorithms use, for the import with NCCL's per-link figures, the import with the
built-in's per-link figure (--nvlink-bandwidth), and the built-in.

The real dumps are read from ../shared/reference/realdata beside the clone (the repository holds
only what the project wrote: the hand-written DGX-1 dump in tests/data); a dump that is absent is
skipped with a line saying so.

    .venv/bin/python benchmarks/interop_topologies.py
"""

from __future__ import annotations

from pathlib import Path

from synth.builtin import get_topology
from synth.interop.nccl_topology import import_nccl_topology, topology_figures

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


def main() -> None:
    print(f"  {'':<28}{'GPU0 to peers GB/s':>22}{'ingress':>12}{'ring min':>10}   ring")
    for dump, builtin, per_link in CASES:
        path = DATA / f"{dump}.xml"
        if not path.is_file():
            path = REALDATA / f"{dump}.xml"
        if not path.is_file():
            print(f"{dump}: skipped, {path} is absent (real dumps are read from ../shared/reference/realdata)")
            continue
        print(dump)
        print(_row("import (NCCL figures)", topology_figures(import_nccl_topology(path).topology)))
        if per_link is not None:
            same = import_nccl_topology(path, nvlink_bandwidth=per_link).topology
            print(_row(f"import, {per_link:g} GB/s per NVLink", topology_figures(same)))
        if builtin is not None:
            print(_row(f"built-in {builtin}", topology_figures(get_topology(builtin))))


if __name__ == "__main__":
    main()
