"""Template matching by words (today's rules) against by meaning (the offline embeddings).

    .venv/bin/python evals/template_matching.py

Each request of ``evals/template_matching.yaml`` expects a workflow template or none. By words: the
first template the rules tier would take (a score of 3 or a regex). By meaning: the template whose
description is nearest the request, when its similarity is at least a threshold and leads the
next by 0.05. Words then meaning: meaning only where words find none. The comparison template is
left out: comparisons are planned by the comparison rule before any template.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from teamgraph.embeddings import similarity
from teamgraph.planning import routing
from teamgraph.planning.rules import STRONG_TEMPLATE
from teamgraph.planning.templates import available, ranked, shaped

CASES = Path(__file__).with_name("template_matching.yaml")
MARGIN = 0.05


def main() -> None:
    cases = [(r, e) for r, e in yaml.safe_load(CASES.read_text(encoding="utf-8"))["cases"]]
    templates = {k: v for k, v in available().items() if k != "parallel_comparison"}
    bank = routing._bank()
    if bank is None:
        raise SystemExit("needs the offline embeddings (wordllama)")
    names = list(templates)
    described = bank[0].embed_documents([templates[n].description for n in names])

    def by_words(request: str) -> str:
        for score, t in ranked(request, templates):
            if score >= STRONG_TEMPLATE or shaped(t, request):
                return t.name
        return "none"

    def by_meaning(request: str, threshold: float) -> str:
        near = similarity(described, bank[0].embed_query(request))
        first, second = np.argsort(near)[::-1][:2]
        if near[first] < threshold or near[first] - near[second] < MARGIN:
            return "none"
        return str(names[first])

    def show(label: str, choose: dict[str, str]) -> None:
        right = sum(choose[r] == e for r, e in cases)
        wrong_template = sum(e == "none" and choose[r] != "none" for r, e in cases)
        print(f"{label:<34}{right:>3} / {len(cases)}   templates where none fits: {wrong_template}")

    words = {r: by_words(r) for r, _ in cases}
    show("by words", words)
    for threshold in (0.2, 0.25, 0.3, 0.35):
        meant = {r: by_meaning(r, threshold) for r, _ in cases}
        show(f"by meaning (>= {threshold})", meant)
        both = {r: words[r] if words[r] != "none" else meant[r] for r, _ in cases}
        show(f"words, then meaning (>= {threshold})", both)


if __name__ == "__main__":
    main()
