"""The offline model as moderator: asks for clarification of very short or vague requests."""

from __future__ import annotations

import re
import uuid
from typing import Any

from langchain_core.messages import AIMessage

from teamgraph.planning.request_structure import WORK_VERBS
from teamgraph.text import simplified

# A request is vague when it names no subject: every word of it is of a kind that names none.
# English kinds: function words (pronouns, determiners, prepositions, auxiliaries, particles,
# greetings, politeness, adverbs of place, time and degree), verbs that stand for any work ("do",
# "make", "fix", "handle", "take", "talk"), and nouns that ask for a hand or a view without saying
# on what ("a hand", "a favour", "any suggestions?", "a look", "a minute").
_FILLER = (
    frozenset(
        """a about again all am an and any anything are as assist assistance at be better bit can
    could deal discussed do does doing done earlier else every everything figure fix for get
    go got handle have hello help hey hi i i'm idea ideas im improve in is it it's just know
    let let's like look make me mentioned mine my need now of ok okay on one out please pls
    question questions quick quickly said should so some someone something sort sorry stuff
    sure talked tell than thanks thank that the them then there thing things think this those
    to try u up us want we what whatever will with work would yes you your""".split()
    )
    | frozenset(
        """ah advice erm favor favour feedback give got hand hmm huh input into minute moment oh
    opinion opinions reckon uh um well suggest suggestion suggestions thought thoughts tip tips view
    views""".split()
    )
    | frozenset(  # adverbs of place, time and degree; more verbs of any work or talk; the nouns
        # light verbs take ("take a look", "have a go") and more nouns of advice
        """here also too maybe really very little asap right away soon today already still
    take see change tweak finish start continue keep put use talk chat speak discuss ask say
    glance peek shot stab recommend recommendation recommendations pointer pointers hint hints
    guidance insight insights cents""".split()
    )
)
_DETERMINERS = frozenset(
    "a an the my your our their his her its this that these those some any".split()
)
# A verb of work asks for work, it does not name a subject ("Review this", "Can you test it?"),
# unless a determiner or another word makes it a noun ("run the tests", "write tests")
_WORK_VERB = re.compile(rf"(?:{WORK_VERBS})(?:e?s|e?d|ing)?", re.I)
_PRONOUNS = frozenset("it this that them these those".split())
_COMPLEMENTED = frozenset("make makes get keep leave".split())  # "make it pop": no subject
# The same in Chinese (read in simplified characters): requests, pronouns, particles, verbs that
# stand for any work ("弄", "搞", "做", "看", "改") and verbs of work with no object ("检查一下").
_ZH_FILLER = re.compile(
    r"帮帮忙|帮帮|帮忙|帮手|帮|唔该|麻烦|请|可唔可以|可不可以|能不能|能否|可以|可否|你们|你|我们|我|"
    r"佢|它|他|她|这个|那个|呢个|嗰个|这|那|呢|一下|下|弄|搞|掂|定|做|处理|点|什么|咩|乜|东西|"
    r"事情|事|随便|好|建议|意见|想法|有冇|有没有|冇|嘢|想问|问下|问|啲|些|吗|吧|啊|呀|嘛|么|了|的|得|个|之|就|都|也|想|要|需要|有|问题|"
    r"检查|翻译|总结|分析|修改|审查|校对|优化|改进|完善|解决|看|睇|改|修|试|整"
)
_REDUPLICATED = re.compile(r"([\u3400-\u9fff])\1")  # "看看", "睇睇": the verb once
_LATIN_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9']*")
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")


def _subjects(words: list[str]) -> list[str]:
    """The words of an English request that may name a subject (see ``_FILLER``)."""
    out: list[str] = []
    for i, word in enumerate(words):
        before = words[i - 1] if i else ""
        if word in _FILLER or (word.endswith("s") and word[:-1] in _FILLER):
            continue
        if before == "your":  # "do your magic", "your take": the helper's, not a subject
            continue
        if before in _PRONOUNS and i > 1 and words[i - 2] in _COMPLEMENTED:
            continue
        if _WORK_VERB.fullmatch(word) and (not before or before in _FILLER - _DETERMINERS):
            continue
        out.append(word)
    return out


QUESTION = (
    "Could you say more about what you need — which subject, and what kind of result "
    "(for example a comparison, a summary, a plan or code)?"
)


def is_vague(request: str) -> bool:
    """Whether ``request`` names nothing to work on: no English word of it names a subject
    (``_subjects``) and at most one Chinese character is left once its filler words are removed.
    Short requests with a subject ("Explain MVCC", "解释一下闭包") are clear."""
    text = simplified(request.strip())
    subjects = _subjects(_LATIN_WORD.findall(text.lower()))
    left = _CJK_CHAR.findall(_ZH_FILLER.sub("", _REDUPLICATED.sub(r"\1", text)))
    return not subjects and len(left) <= 1


def moderate(request: str, tool: dict[str, Any]) -> AIMessage:
    """A forced structured-output call answered by rule."""
    vague = is_vague(request)
    args = {"needs_clarification": vague, "question": QUESTION if vague else ""}
    call = {"name": tool["function"]["name"], "args": args, "id": f"call_{uuid.uuid4().hex[:12]}"}
    return AIMessage(content="", tool_calls=[call])
