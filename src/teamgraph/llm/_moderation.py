"""The offline model as moderator: asks for clarification of very short or vague requests."""

from __future__ import annotations

import re
import uuid
from typing import Any

from langchain_core.messages import AIMessage

from teamgraph.text import simplified

# Words that ask for help without saying with what: a request made only of them ("Can you
# help?", "Make it better please", "Do the thing we talked about") names no subject and no kind
# of result. Any other word is a subject ("Explain MVCC", "Define entropy" are clear).
_FILLER = frozenset(
    """a about again all am an and any anything are as assist assistance at be better bit can
    could deal discussed do does doing done earlier else every everything figure fix for get
    go got handle have hello help hey hi i i'm idea ideas im improve in is it it's just know
    let let's like look make me mentioned mine my need now of ok okay on one out please pls
    question questions quick quickly said should so some someone something sort sorry stuff
    sure talked tell than thanks thank that the them then there thing things think this those
    to try u up us want we what whatever will with work would yes you your""".split()
    # nouns that ask for a hand or a view without saying on what: "give me a hand", "any
    # suggestions?", "do me a favour"
) | frozenset(
    """ah advice erm favor favour feedback give got hand hmm huh input into minute moment oh opinion
    opinions reckon uh um well suggest suggestion suggestions thought thoughts tip tips view
    views""".split()
)
# The same in Chinese (read in simplified characters): requests, pronouns, particles and
# verbs that stand for any work ("弄", "搞", "做").
_ZH_FILLER = re.compile(
    r"帮帮忙|帮帮|帮忙|帮|唔该|麻烦|请|可唔可以|可不可以|能不能|能否|可以|可否|你们|你|我们|我|"
    r"佢|它|他|她|这个|那个|呢个|嗰个|这|那|呢|一下|下|弄|搞|掂|定|做|处理|点|什么|咩|乜|东西|"
    r"事情|事|随便|好|建议|意见|想法|有冇|有没有|冇|嘢|想问|问下|问|啲|些|吗|吧|啊|呀|嘛|么|了|的|得|个|之|就|都|也|想|要|需要|有|问题"
)
_LATIN_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9']*")
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")


QUESTION = (
    "Could you say more about what you need — which subject, and what kind of result "
    "(for example a comparison, a summary, a plan or code)?"
)


def is_vague(request: str) -> bool:
    """Whether ``request`` names nothing to work on: every English word of it is a filler
    (``_FILLER``) and at most one Chinese character is left once its filler words are removed.
    Short requests with a subject ("Explain MVCC", "解释一下闭包") are clear."""
    text = simplified(request.strip())
    subjects = [w for w in _LATIN_WORD.findall(text.lower()) if w not in _FILLER]
    left = _CJK_CHAR.findall(_ZH_FILLER.sub("", text))
    return not subjects and len(left) <= 1


def moderate(request: str, tool: dict[str, Any]) -> AIMessage:
    """A forced structured-output call answered by rule."""
    vague = is_vague(request)
    args = {"needs_clarification": vague, "question": QUESTION if vague else ""}
    call = {"name": tool["function"]["name"], "args": args, "id": f"call_{uuid.uuid4().hex[:12]}"}
    return AIMessage(content="", tool_calls=[call])
