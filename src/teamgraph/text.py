"""Text handling shared by routing, planning, the offline model, notes and the knowledge index:
one word splitter, one stop-word list, one CJK definition, one stemmer.

Words are runs of letters and digits; a CJK run (Chinese, Japanese kana, CJK extensions) has no
separators, so it is cut at function characters (的, 和, 与, ...) and each piece yields its
overlapping bigrams ("数据库安全" → 数据, 据库, 库安, 安全), or itself when it is one
character. :func:`tokenize` stems the English words (for matching a request against
descriptions and notes); :func:`search_terms` keeps them as written (the full-text index stores
surface forms), so both searches cut text the same way and drop the same stop words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache, lru_cache
from typing import Any

CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_CJK = re.compile(f"[{CJK_RANGES}]")
_RUN = re.compile(f"[{CJK_RANGES}]+|[^\\W_{CJK_RANGES}]+")
_CJK_CUT = re.compile(r"[的了和与及或请吗呢吧啊把被]")  # function characters a run is cut at
_CJK_LONE_STOP = frozenset("是在也就都而这那之其")  # characters that mean nothing alone
_VOWEL = re.compile(r"[aeiouy]")
_STOP_TEXT = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each etc every few
    finally first for from further had has have having he her here hers herself him himself his
    how i if in into is it its itself just let may me might more most must my myself need next no
    nor not of off on once only or other our ours ourselves out over own please same shall she
    should so some such than that the their theirs them themselves then there these they this
    those through to too under until up us very want was we were what when where which while who
    whom why will with would you your yours yourself yourselves
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())


def has_cjk(text: str) -> bool:
    """True when ``text`` holds a CJK character."""
    return _CJK.search(text) is not None


def is_cjk(char: str) -> bool:
    return _CJK.fullmatch(char) is not None


def simplified(text: str) -> str:
    """``text`` with traditional Chinese characters as simplified ones (OpenCC ``t2s``), so
    "審查" meets "审查"; the same length, so positions found in it hold in ``text``."""
    if not has_cjk(text):
        return text
    converted: str = _t2s().convert(text)
    return converted if len(converted) == len(text) else text


@cache
def _t2s() -> Any:
    import opencc  # 14 ms of start-up, paid on the first Chinese text only

    return opencc.OpenCC("t2s")


def words(text: str) -> list[str]:
    """Lower-cased word runs and CJK runs, in order (no stop words dropped, nothing stemmed)."""
    return _RUN.findall(text.lower())


def cjk_terms(run: str) -> list[str]:
    """A CJK run cut at function characters, each piece as overlapping bigrams (or itself)."""
    terms: list[str] = []
    for piece in _CJK_CUT.split(run):
        if len(piece) == 1 and piece not in _CJK_LONE_STOP:
            terms.append(piece)
        terms.extend(piece[i : i + 2] for i in range(len(piece) - 1))
    return terms


def tokenize(text: str) -> list[str]:
    """Matching tokens: stemmed English words without stop words, and CJK bigrams of the text
    in simplified characters."""
    return _terms(simplified(text), stem)


def search_terms(text: str) -> list[str]:
    """Full-text search terms: words as written without stop words, and CJK bigrams; each once."""
    return list(dict.fromkeys(_terms(text, lambda word: word)))


def _terms(text: str, norm: Callable[[str], str]) -> list[str]:
    tokens: list[str] = []
    for run in words(text):
        if run[0] >= "\u3040" and is_cjk(run[0]):  # every CJK range starts at U+3040 or above
            tokens.extend(cjk_terms(run))
        elif run not in STOP_WORDS:
            tokens.append(norm(run))
    return tokens


@lru_cache(maxsize=1 << 16)  # pure, and the offline model stems the same words over and over
def stem(word: str) -> str:
    """Light, deterministic English stemming: plurals and verb forms (``-s``, ``-ing``, ``-ed``)
    and a final ``e``, so "reviews", "reviewing", "reviewed" and "review" meet ("findings" stays
    "finding": a plural in -ings is a noun); the qualities of adjectives in -able/-ible meet
    their adjective ("durability" and "durable", "reliability" and "reliable")."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith(("ability", "ibility")) and len(word) > 8:
        return word[:-5] + "l"  # durability -> durabl, as durable -> durabl
    noun = word.endswith("ings")  # "findings", "settings": nouns, not verb forms
    word = _strip_plural(word)
    for suffix in ("ed",) if noun else ("ing", "ed"):
        base = word[: -len(suffix)]
        if word.endswith(suffix) and len(base) >= 3 and _VOWEL.search(base):
            word = base
            if word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # debugging -> debugg -> debug
            break
    return word[:-1] if word.endswith("e") and len(word) > 2 else word


def _strip_plural(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


CLARIFIED = "\n\nClarification from the user: "


def clarified(request: str, answer: str) -> str:
    """The request with the user's answer to a clarifying question joined to it."""
    return f"{request}{CLARIFIED}{answer}"


def split_clarified(request: str) -> tuple[str, list[str]]:
    """The original request and the answers to the questions asked about it, oldest first."""
    original, *answers = request.split(CLARIFIED)
    return original, [a.strip() for a in answers]


_GREETINGS = (
    r"hello|hi|hey|hiya|howdy|greetings|good (?:morning|afternoon|evening)|thanks|thank you|"
    r"thx|cheers|你好|您好|嗨|哈囉|哈喽|早上好|晚上好|下午好|谢谢|謝謝|多谢|多謝|唔該|大家好"
)
_GREETING = re.compile(  # greetings and thanks, with at most a word of address around them
    rf"^(?:(?:{_GREETINGS}|there|everyone|all|team|again|so much)[\s,.!?！？。，~]*)+$",
    re.IGNORECASE,
)
_GREETING_WORD = re.compile(rf"(?:^|\b)(?:{_GREETINGS})", re.IGNORECASE)
_THANKS = re.compile(r"thank|thx|cheers|谢|謝|唔該", re.IGNORECASE)


def is_small_talk(text: str) -> bool:
    """Whether ``text`` is a greeting or a thank-you and nothing else ("Hi there!", "谢谢")."""
    text = text.strip()
    return len(text) <= 40 and bool(_GREETING.match(text)) and bool(_GREETING_WORD.search(text))


def is_thanks(text: str) -> bool:
    return bool(_THANKS.search(text))
