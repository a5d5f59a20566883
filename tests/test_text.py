"""One text module: routing, the notes search and the knowledge search cut text the same way."""

from __future__ import annotations

from teamgraph.knowledge.fts_query import query_terms
from teamgraph.text import has_cjk, search_terms, tokenize


def test_word_forms_meet_when_matching() -> None:
    assert tokenize("reviews") == tokenize("reviewing") == tokenize("reviewed") == ["review"]
    assert tokenize("Debugging the scripts") == ["debug", "script"]


def test_both_searches_drop_the_same_words_and_cut_chinese_the_same_way() -> None:
    text = "Please review the 数据库安全 documents and the essays"
    assert search_terms(text) == ["review", "数据", "据库", "库安", "安全", "documents", "essays"]
    assert tokenize(text) == ["review", "数据", "据库", "库安", "安全", "document", "essay"]
    assert query_terms(text) == search_terms(text)  # the knowledge index asks the same terms


def test_function_characters_cut_a_chinese_run() -> None:
    assert tokenize("比较性能和安全") == ["比较", "较性", "性能", "安全"]
    assert search_terms("是") == []  # meaningless alone
    assert has_cjk("PostgreSQL 的性能") and not has_cjk("PostgreSQL")
