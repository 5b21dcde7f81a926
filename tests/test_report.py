"""``synth report``: one self-contained HTML page; it renders in headless Chromium with every
image loaded."""

from __future__ import annotations

import base64
import re
import struct
import subprocess
from html.parser import HTMLParser

import pytest

from synth.plot import best_ranges
from synth.report import build_report, render_html, report_sections
from synth.units import size_range

from .conftest import CHROMIUM_FLAGS

KINDS = ["allreduce", "broadcast"]
SIZES = size_range(8, 1 << 30, 64)  # 8 B, 512 B, 32 KiB, 2 MiB, 128 MiB


class Page(HTMLParser):
    """The parts of the page the tests look at."""

    def __init__(self, text: str):
        super().__init__()
        self.images: list[dict[str, str]] = []
        self.ids: list[str] = []
        self.tags: list[str] = []
        self.table_rows: dict[str, int] = {}
        self._table: str | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        self.tags.append(tag)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "img":
            self.images.append(a)
        if tag == "table":
            self._table = f"{a.get('class', '')}-{len(self.table_rows)}"
            self.table_rows[self._table] = 0
        if tag == "tr" and self._table is not None:
            self.table_rows[self._table] += 1

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def sections(dgx1):
    return report_sections(dgx1, KINDS, sizes=SIZES)


@pytest.fixture(scope="module")
def page(dgx1, sections):
    from synth.plot import plot_topology, render

    return render_html(dgx1, render(plot_topology(dgx1), "png", dpi=100), sections, "sync")


def test_page_is_self_contained(page):
    p = Page(page)
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    # images: the topology, then per collective its curves and its timeline; all embedded PNGs
    ids = ["topology", "curves-allreduce", "timeline-allreduce", "curves-broadcast", "timeline-broadcast"]
    assert [img["id"] for img in p.images] == ids
    for img in p.images:
        assert img["src"].startswith("data:image/png;base64,") and img["alt"]
        w, h = png_size(base64.b64decode(img["src"].split(",", 1)[1]))
        assert w > 300 and h > 200
    # nothing to fetch: no links, scripts, external sources or URLs
    assert "script" not in p.tags and "link" not in p.tags and "iframe" not in p.tags
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)
    assert not re.search(r"(https?:|//[a-z]|url\()", text)
    assert "allreduce" in p.ids and "broadcast" in p.ids


def test_page_tables(page, sections):
    p = Page(page)
    ranges = [n for k, n in p.table_rows.items() if k.startswith("ranges")]
    methods = [n for k, n in p.table_rows.items() if k.startswith("methods")]
    assert ranges == [len(best_ranges(s.comparison)) + 1 for s in sections]  # + header row
    assert methods == [len(SIZES) + 1] * len(sections)
    for s in sections:
        for r in best_ranges(s.comparison):
            assert f'<td class="name">{r.method}</td>' in page
    # the best method of each size is marked
    assert page.count('class="best"') == len(SIZES) * len(sections)


def test_timeline_is_the_fastest_at_the_largest_size(sections):
    for s in sections:
        assert s.timeline_size == max(SIZES)
        assert s.timeline_method == s.comparison.best(len(SIZES) - 1).method


def test_report_is_reproducible(dgx1):
    a = build_report(dgx1, ["reduce"], sizes=[1024, 1 << 20])
    b = build_report(dgx1, ["reduce"], sizes=[1024, 1 << 20])
    assert a == b
    assert "reduce (root 0)" in a


CHECK_IMAGES = """<script>
window.addEventListener("load", function () {
  var imgs = Array.from(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0 && i.naturalHeight > 0; });
  document.body.setAttribute("data-images", String(imgs.length));
  document.body.setAttribute("data-images-loaded", String(ok.length));
  document.body.setAttribute("data-width", String(document.documentElement.scrollWidth));
});
</script>"""


def run_chromium(chromium, tmp_path, *args):
    profile = tmp_path / "chromium-profile"
    cmd = [str(chromium), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def test_report_renders_in_chromium_with_every_image_loaded(page, tmp_path, chromium):
    """Headless Chromium opens the page from disk (no network), and a probe script added to a copy
    of it reports how many images finished loading with a real size."""
    n = len(Page(page).images)
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", CHECK_IMAGES + "</body>"), encoding="utf-8")
    done = run_chromium(chromium, tmp_path, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", done.stdout)
    assert body, done.stdout[:2000]
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1)))
    assert attrs.get("data-images") == str(n) == "5"
    assert attrs.get("data-images-loaded") == str(n)

    # and the untouched page paints: a screenshot with ink on it
    from matplotlib.image import imread

    report = tmp_path / "report.html"
    report.write_text(page, encoding="utf-8")
    shot = tmp_path / "shot.png"
    done = run_chromium(chromium, tmp_path, "--window-size=1280,2000", f"--screenshot={shot}", report.as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    pixels = imread(shot)
    assert pixels.shape[0] >= 1000 and pixels.shape[1] >= 1200
    ink = (pixels[..., :3].min(axis=2) < 0.6).mean()
    assert 0.01 < ink < 0.9  # text, lines and pictures; neither blank nor a solid block
