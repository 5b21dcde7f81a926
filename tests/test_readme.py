"""The README's Python example runs as written (in a scratch folder)."""

from __future__ import annotations

import re

from .conftest import REPO


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "ar.json").is_file()
