"""Examples in the README and docs run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCKS = [
    (path.name, i, code)
    for path in DOCS
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL))
]


@pytest.mark.parametrize(("doc", "index", "code"), BLOCKS, ids=[f"{d}#{i}" for d, i, _ in BLOCKS])
def test_python_examples_run(
    doc: str, index: int, code: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("TEAMGRAPH_DATABASE_URL", f"sqlite:///{tmp_path}/docs.db")
    exec(compile(code, f"{doc}[{index}]", "exec"), {"__name__": "__main__"})


def test_there_are_examples() -> None:
    assert len(BLOCKS) >= 2
