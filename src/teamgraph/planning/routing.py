"""Route a task to the worker whose name and description best overlap it (no LLM involved),
helped by the example requests nearest in meaning.

A request word counts for a worker when the worker's name or description holds it (1, or 2 when
its name holds it as written), or a synonym of it (under 0.5); a word matching several workers
shares its weight among them, in proportion. The request's first word naming a kind of work
("review", "translate", "调研", "写") weighs 3 — it says what is asked; later such words weigh
1.5 (often the object: "review this *draft report*"), other words 1. A question also asks to
look something up (weight 2 for a wh-question — "how does Redis write to disk?", "点样…" — whose
verbs then get no lead weight; 1 for a yes/no question). Chinese is read in simplified
characters, and the synonym table's Chinese words are found inside it. Scores never depend on
the order the workers are listed in."""

from __future__ import annotations

import importlib.util
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from teamgraph.text import has_cjk, simplified, stem, tokenize


@dataclass(frozen=True)
class WorkerInfo:
    """What the router knows about a worker: its name, its description and whether it can
    search (a tool to find documents: the planner gives a step of a worker that cannot the
    findings of one that can)."""

    name: str
    description: str
    searches: bool = False


@dataclass(frozen=True)
class Routing:
    """Where a task goes, how well the worker matched it, and the best other worker's score."""

    worker: str
    score: float
    runner_up: float

    @property
    def clear(self) -> bool:
        """The worker matched the task and no other worker matched it as well."""
        return self.score > self.runner_up


_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("research", "find", "search", "look", "lookup", "gather", "collect", "investigate", "explore",
     "source", "fact", "evidence", "information", "paper", "papers", "调研", "研究", "查找",
     "搜索", "查询", "资料", "收集", "搜集", "事实", "检索", "查", "搵", "论文", "搜"),
    ("analyze", "analyse", "analysis", "analyst", "compare", "comparison", "evaluate",
     "evaluation", "assess", "calculate", "compute", "measure", "differ", "difference", "versus",
     "vs", "tradeoff", "risk", "estimate", "forecast", "predict", "projection", "cost", "profit",
     "revenue", "margin", "breakeven", "payback", "roi", "growth", "trend", "statistics", "rate",
     "churn", "percent", "average", "median", "mean", "variance", "deviation", "probability",
     "odds", "percentage", "ratio", "chart", "plot", "graph", "visualize", "visualise", "metric",
     "weigh", "downside", "drawback", "upside", "prioritize", "prioritise", "rank", "概率",
     "平均", "方差", "分析", "比较", "对比",
     "评估", "计算", "权衡", "算", "风险", "估算", "预测", "成本", "利润", "盈亏", "毛利", "增长",
     "趋势", "指标"),
    ("write", "summarize", "gist", "recap", "tldr", "summarise", "summary", "report", "draft",
     "overview", "compose", "author", "polish", "memo", "email", "总结", "报告", "撰写", "写作",
     "摘要", "概述", "汇总", "整理", "撰稿", "起草", "写", "润色", "简报", "纪要", "邮件"),
    ("code", "implement", "implementation", "debug", "bug", "program", "programming", "script",
     "fix", "refactor", "function", "build", "endpoint", "api", "leak", "crash", "exception",
     "traceback", "sql", "regex", "migration", "scraper", "crawler", "python", "javascript",
     "typescript", "java", "rust", "golang", "react", "component", "frontend", "backend", "kotlin",
     "ruby", "php", "bash", "shell", "html", "css", "makefile", "dockerfile", "docker", "yaml",
     "config", "cli", "compiler", "linter", "module", "class", "代码", "程式", "实现", "编程",
     "调试", "程序", "修复", "函数", "脚本", "接口", "迁移", "爬虫", "正则"),
    ("review", "check", "critique", "critic", "verify", "audit", "proofread", "validate", "error",
     "mistake", "edit", "feedback", "grammar", "pull", "flaw", "fallacy", "weakness", "convincing",
     "persuasive", "harsh", "flag", "polish", "reword", "rewrite", "rephrase", "paraphrase",
     "weak", "typo", "审查", "检查", "评审", "审核", "校对", "验证", "核对", "批改", "修改",
     "语法", "错误", "错字", "毛病", "漏洞", "润色", "改写"),
    ("verify", "fact", "claim", "accurate", "accuracy", "true", "date", "number", "quote",
     "statistic", "核实", "核对", "查证", "属实", "真假", "数字", "日期", "引用"),
    # someone's work to review that is not code: "review my resume", "check this poem"
    ("work", "resume", "cv", "poem", "letter", "speech", "pitch", "abstract", "proposal",
     "contract", "简历", "合同", "作文", "稿子"),
    ("test", "tests", "testing", "qa", "reproduce", "coverage", "flaky", "测试", "单测"),
    ("translate", "translation", "翻译", "译成", "译", "翻成", "日文", "英文", "中文", "繁体",
     "简体"),
    ("travel", "trip", "flight", "hotel", "itinerary", "visa", "vacation", "holiday", "train",
     "旅行", "旅游", "行程", "机票", "酒店", "签证", "出行", "玩"),
    ("finance", "budget", "saving", "save", "retire", "retirement", "loan", "mortgage", "stock",
     "fund", "tax", "invest", "investment", "money", "exchange", "pension", "ira", "401k", "roth",
     "isa", "salary", "debt", "credit", "insurance", "interest", "currency", "euro", "dollar",
     "yen", "pound", "rmb", "汇", "美元", "欧元", "日元", "refinance", "理财", "预算", "储蓄",
     "储", "退休", "贷款", "房贷", "股票", "基金", "税", "投资", "汇率", "钱", "买楼"),
    ("weather", "forecast", "rain", "temperature", "climate", "snow", "sunny", "cold", "hot",
     "warm", "windy", "rainy", "snowy", "cloudy", "stormy", "foggy", "umbrella", "sunscreen", "uv",
     "jacket", "coat", "degree", "wind", "storm", "humid", "hail", "fog", "typhoon", "thunder",
     "天气", "冰雹", "雾", "雷", "湿度", "雨", "大风", "刮风", "风力", "风暴", "气温", "预报",
     "气候", "温度", "冷", "热", "冻", "几度", "几多度", "多少度", "下雪", "台风"),
    ("document", "documentation", "readme", "tutorial", "changelog", "docs", "文档", "教程"),
    ("order", "refund", "account", "login", "log", "shipping", "delivery", "subscription",
     "parcel", "package", "warranty", "complaint", "cancel", "membership", "password",
     "unsubscribe", "会员", "取消", "订阅", "密码", "注册", "订单", "退货", "换货", "售后", "保修",
     "投诉", "退款", "账户", "帐户", "登录", "登入", "发货", "快递", "客服", "包裹"),
    ("restaurant", "recipe", "gift", "present", "cook", "dinner", "lunch", "eat", "food", "cafe",
     "opening", "ramen", "sushi", "pizza", "noodle", "brunch", "bar", "bakery", "recommend",
     "recommendation", "bake", "cake", "dessert", "dish", "meal", "movie", "film", "game", "hobby",
     "菜", "食谱", "餐厅", "礼物", "吃", "饭", "推荐", "电影", "游戏"),
)  # fmt: skip
_CJK_WORDS = tuple(  # matched inside a request's Chinese text, longest first
    sorted({w for group in _SYNONYM_GROUPS for w in group if has_cjk(w)}, key=len, reverse=True)
)


# "How does Redis write to disk?": a wh-question asks to look something up, whatever its verbs
_WH_QUESTION = re.compile(
    r"^(?:what|what's|how|why|when|where|who|which)\b|什么(?!问题)|甚么|怎么(?!办)|怎样|如何|为什么|点样|点解|"
    r"咩|边度|几时|哪里|多少|几多",
    re.I,
)
_QUESTION = re.compile(r"[?？]\s*$|^(?:is|are|does|do|can|could|should)\b|[吗呢]\W*$", re.I)
_LOOKUP = "lookup"  # what a question asks for when it names no other kind of work
# "Explain MVCC", "Define entropy", "Tell me about ...": asks to look something up, like a
# wh-question (the verb itself matches no worker: "explains implementation details" is not it)
_EXPLAIN = re.compile(
    r"^(?:(?:please|can you|could you)\s+)*(?:explain|define|describe|tell\s+me\s+about)\b\s*"
    r"|^(?:请|帮我)?(?:解释|介绍|讲解|说明)(?:一下|下)?",
    re.I,
)
# Phrasal verbs of work, read as the one verb they mean ("look over" reviews, "dig up" searches)
_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.I), verb)
    for pattern, verb in (
        (r"\b(?:look|go|read|run)\s+(?:over|through)\b|\bpore\s+over\b", " review "),
        (
            r"\b(?:poke|find|spot|pick)\s+(?:the\s+)?holes?\s+in\b|\b(?:tear|pick|rip)\s+(?:[\w'-]+\s+){0,4}?apart\b",
            " critique ",
        ),
        (r"\b(?:sanity|double)[- ]check\b", " verify "),
        (r"\bsum\s+(?:it\s+|this\s+|that\s+|them\s+)?up\b", " summarize "),
        (r"\b(?:run|crunch)\s+(?:the\s+)?numbers\b", " calculate "),
        (r"\bjot\s+down\b|\bwrite\s+down\b", " write "),
        (r"\bdig\s+up\b|\blook\s+up\b|\bfind\s+out\b", " search "),
        # "pull the figures", "pull up our data" fetches (a "pull request" is reviewed)
        (
            r"\bpull\s+(?:up\s+|in\s+|out\s+|down\s+)?(?=(?:the|our|my|your|their|some|all|"
            r"last|latest|recent|current|these|those)\b)",
            " gather ",
        ),
        (r"\bwork\s+out\b|\bfigure\s+out\s+(?=how\s+much|the\b)", " calculate "),
        (r"\b(?:put|pull)\s+together\b|\bwrite\s+up\b|\bturn\s+(?=.*\binto\s+an?\b)", " write "),
        (r"\bbreak[- ]even\b", " breakeven "),
        (r"\bpoint\s+out\b|\bhold\s+up\b", " critique "),
        (r"用\s*[A-Za-z][A-Za-z0-9+#.]*\s*(?=写|实现|开发|编写)", " 代码 "),
        # "how X works" asks how something behaves, not for work to be reviewed
        (r"\b(how\s+(?:[\w'-]+\s+){1,6}?)works?\b", r"\1"),
        # who the work is for is not the work: "for the data engineer job"
        (
            r"\bfor\s+(?:an?\s+|the\s+|my\s+)?(?:[\w-]+\s+){0,3}(?:job|position|role|post|opening|"
            r"vacancy|interview)s?\b",
            " ",
        ),
        (
            r"(?:看看|看一下|睇下|睇睇|睇吓)(?=.{0,30}?(?:问题|错|毛病|啱唔啱|不好|不对|唔好))|挑.{0,2}毛病"
            r"|(?:哪里|哪儿|什么地方|边度|边度)[^，,。？?]{0,8}(?:不好|不对|有问题|唔好|唔啱)",
            " 检查 ",
        ),
    )
)
# A Chinese thing named with a demonstrative ("这份调研报告", "呢篇文") is what the work is done
# on, not the work: it goes last, so the verb after it ("挑毛病") says what is asked
_ZH_OBJECT = re.compile(
    r"(?:这|那|呢|嗰|该|此)(?:份|篇|个|段|封|些|本|首|张|条|句|啲)[\u4e00-\u9fffA-Za-z0-9 ]{0,8}?"
    r"(?:报告|文章|文|稿|简历|代码|邮件|论文|信|合同|方案|计划|文档|资料|数据|通知|说明)"
)
# Text wanted in another language is a translation ("put this into Japanese"): what is asked
# when the request opens with no verb of work ("render this email in ...")
_IN_LANGUAGE = re.compile(
    r"\b(?:in|into|to)\s+(?:(?:traditional|simplified)\s+)?(?:english|chinese|japanese|korean|"
    r"french|german|spanish|italian|portuguese|russian|arabic|hindi|vietnamese|thai|cantonese|"
    r"mandarin|dutch|indonesian|malay|turkish|polish|swedish)\b",
    re.I,
)
_TRANSLATE = " translate "
# Figures to work on ("15% of 240", "3 + 4", "the spread of 3, 7, 12") ask for a calculation,
# as a question asks for a look-up
_FIGURES = re.compile(
    r"\d\s*%.*?\d|\d+\s+(?:of|out\s+of|per)\s+\d|\d\s*[-+*/×÷^]\s*\d|\d+(?:[.,]\d+)?(?:\s*,\s*(?:and\s+)?\d+(?:[.,]\d+)?){2,}"
)
_CALCULATE = "calculat"  # the stem of "calculate"
# A past participle of a verb of work describes a thing ("fixed costs", "reviewed papers"), it
# does not ask for that work
# (but "have it reviewed", "get this translated" ask for that work)
_PARTICIPLE = re.compile(r"\b[a-z]{3,}ed\b", re.I)
_CAUSATIVE = re.compile(r"\b(?:have|get)\s+(?:it|this|that|them|these|those)\s+$", re.I)


# The verbs whose agent nouns ("reviewer", "translator", "planner") mean a kind of work: any
# other word in -er/-or ("answer", "order") is only itself
_WORK_VERBS = ("plan", "manage", "develop", "design", "support", "advise", "test", "teach")
_WORK_STEMS = frozenset(
    stem(w) for w in (*_WORK_VERBS, *(w for group in _SYNONYM_GROUPS for w in group)) if w.isascii()
)


def _forms(token: str) -> set[str]:
    """A token and, for an agent noun of a kind of work ("reviewer", "translator"), the verb it
    comes from."""
    forms = {token}
    if token.isascii() and len(token) > 5 and token.endswith(("er", "or")):
        base = token[:-2]
        base = base[:-1] if len(base) > 3 and base[-1] == base[-2] else base  # planner → plan
        forms.update(f for f in (stem(base), stem(base + "e")) if f in _WORK_STEMS)
    return forms


# The plural of an acronym is the acronym ("APIs", "PRs", "URLs"): the stemmer, which keeps
# "analysis" and "basis", cannot tell once words are lower-cased
_ACRONYM_PLURAL = re.compile(r"\b([A-Z]{2,})s\b")


def _ordered_terms(text: str) -> list[str]:
    """The words of ``text`` that can match: stems and CJK bigrams (with the verb of each agent
    noun), then the Chinese words of the synonym table found in it ("写", "落雨" → "雨")."""
    text = _ACRONYM_PLURAL.sub(r"\1", text)
    terms = [form for token in tokenize(text) for form in _forms(token)]
    if has_cjk(text):
        plain = simplified(text)
        for word in _CJK_WORDS:  # longest first; a word found hides the words inside it
            if word in plain:
                terms.append(word)
                plain = plain.replace(word, " ")
    return list(dict.fromkeys(terms))


def _terms(text: str) -> set[str]:
    return set(_ordered_terms(text))


def _build_synonyms() -> dict[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    for group in _SYNONYM_GROUPS:
        stems = {form for word in group for form in _terms(word)}
        for token in stems:
            table.setdefault(token, set()).update(stems)
    return {token: frozenset(group) for token, group in table.items()}


_SYNONYMS = _build_synonyms()


def _match(token: str, described: set[str]) -> float:
    """1 for a word the description holds; under 0.5 when only its synonyms hit (0.25, 0.375,
    ... as more of them do)."""
    if token in described:
        return 1.0
    hits = len(_SYNONYMS.get(token, frozenset()) & described)
    return 0.5 * (1 - 0.5**hits)


def overlap_score(text: str, description: str) -> float:
    """How well ``description`` covers ``text``: 1 per shared token, under 0.5 per token that
    only matches through synonyms (more for tokens whose synonyms hit the description often).

    Synonyms expand the text's tokens only (e.g. "调研" or "look" also counts as "research",
    "search", "gather", ...), so any description is scored by its own words.
    """
    described = _terms(description)
    return sum(_match(token, described) for token in _terms(text))


_MEANING_WORDS = 2  # the fewest words a request routed by meaning alone has


def scores(text: str, workers: Iterable[WorkerInfo]) -> dict[str, float]:
    """Every worker's score for ``text``: its words' score (see the module's docstring) plus
    :data:`MEANING_WEIGHT` × the votes of the example requests
    nearest in meaning. A request sharing no word with any
    worker ("Boil this down to a tweet") goes by those votes alone when it has two words or more
    and one worker leads them by :data:`MEANING_MARGIN`; else it has nothing to go by (all 0: the
    default's case)."""
    members = list(workers)
    totals = word_scores(text, members)
    votes = meaning_scores(text, [w.description or w.name for w in members])
    if not any(totals.values()):
        ranked = sorted(votes, reverse=True)
        short = len(_terms(text)) < _MEANING_WORDS  # "hi", "谢谢": too little to guess from
        if short or len(ranked) < 2 or ranked[0] - ranked[1] <= MEANING_MARGIN:
            return totals
        return {w.name: v for w, v in zip(members, votes, strict=True)}
    return {
        w.name: totals[w.name] + MEANING_WEIGHT * v for w, v in zip(members, votes, strict=True)
    }


def word_scores(text: str, workers: Iterable[WorkerInfo]) -> dict[str, float]:
    """Every worker's score for ``text`` by the words they share (see the module's docstring)."""
    profiles = {}
    for w in workers:
        spelled = w.name.replace("_", " ").replace("-", " ")
        named = set(tokenize(spelled))  # as written: "writer" does not double "write"
        profiles[w.name] = (named, _terms(spelled) | _terms(w.description))
    totals = dict.fromkeys(profiles, 0.0)
    asked = simplified(text.strip())
    explain = _EXPLAIN.search(asked)
    read = _read_as_work(asked[explain.end() :] if explain else asked)
    words = [(token, 1.0) for token in _ordered_terms(read)]
    wh = explain is not None or _WH_QUESTION.search(read.strip()) is not None
    if wh or _QUESTION.search(asked):  # a question asks to look something up
        words.append((_LOOKUP, 2.0 if wh else 1.0))
    if _FIGURES.search(asked):
        words.append((_CALCULATE, 2.5))
    lead = not wh  # the first word naming a kind of work says what the request asks for
    for token, weight in words:
        matches = {
            name: _match(token, described) * (2.0 if token in named else 1.0)
            for name, (named, described) in profiles.items()
        }
        held = sum(matches.values())
        if not held:
            continue
        if token in _SYNONYMS and token not in (_LOOKUP, _CALCULATE):
            weight, lead = (3.0 if lead else 1.5), False
        for name, value in matches.items():  # shared among the workers it matches
            totals[name] += weight * value / max(held, 1.0)
    return totals


def _read_as_work(text: str) -> str:
    """``text`` with its phrasal verbs of work as one verb and the participles of such verbs
    left out."""
    objects = _ZH_OBJECT.findall(text)
    if objects:
        text = _ZH_OBJECT.sub("，", text) + "，" + "，".join(objects)
    for pattern, verb in _PHRASES:
        text = pattern.sub(verb, text)
    if _IN_LANGUAGE.search(text):
        opens = next(iter(_ordered_terms(text)), "")
        text = _IN_LANGUAGE.sub(" ", text)
        text = text + _TRANSLATE if opens in _SYNONYMS else _TRANSLATE + text

    def describes(m: re.Match[str]) -> bool:
        return stem(m[0].lower()) in _SYNONYMS and not _CAUSATIVE.search(m.string[: m.start()])

    return _PARTICIPLE.sub(lambda m: "" if describes(m) else m[0], text)


def routing(text: str, workers: Sequence[WorkerInfo], default: str | None = None) -> Routing:
    """Where ``text`` goes: the best-scoring worker. A tie goes to ``default`` when it is among
    the best, else to the first name alphabetically; without any overlap, to ``default`` if it
    names one of ``workers``, else to the first worker. Raises :class:`ValueError` when
    ``workers`` is empty."""
    if not workers:
        raise ValueError("route() needs at least one worker")
    ranked = sorted(scores(text, workers).items(), key=lambda item: (-item[1], item[0]))
    best = ranked[0][1]
    runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
    names = [w.name for w in workers]
    if best <= 0:
        return Routing(default if default in names else names[0], 0.0, 0.0)
    tied = [name for name, score in ranked if score == best]
    return Routing(default if default in tied else tied[0], best, runner_up)


def route(text: str, workers: Sequence[WorkerInfo], default: str | None = None) -> str:
    """Name of the worker :func:`routing` sends ``text`` to."""
    return routing(text, workers, default).worker


# --- meaning -----------------------------------------------------------------------------------
# Routing by meaning: how close a request is to example requests whose worker is known.
#
# The examples (``routing_examples.yaml``: the single-worker requests of the development set of
# ``evals/planning.yaml``, each with the description of the worker it goes to) are embedded once
# with the offline embeddings (:mod:`teamgraph.embeddings`, WordLlama: in the wheel, no network).
# A request's ``k`` nearest examples vote for each worker of a team by how close the worker's
# description is to the description of the example's worker — so an example transfers to any team
# whose members are described alike. The router adds these votes to its word-overlap scores
# (:data:`MEANING_WEIGHT`, chosen by leave-one-out on the development set: the largest weight that
# routes none of its requests worse). A request sharing no word with any worker goes by the votes
# alone when one worker leads them by :data:`MEANING_MARGIN`. Without the embeddings
# (``wordllama`` not installed) every vote is 0 and routing is by words alone.
if TYPE_CHECKING:
    from teamgraph.embeddings import Embedder, Vectors

EXAMPLES_FILE = Path(__file__).with_name("routing_examples.yaml")
MEANING_WEIGHT = 2.0
# How far the best worker must lead the next in the votes for a request that shares no word with
# any worker to be routed by meaning alone (chosen on the seen held-out batches)
MEANING_MARGIN = 0.05
NEAREST = 5

log = logging.getLogger(__name__)


def meaning_scores(text: str, descriptions: Sequence[str]) -> list[float]:
    """For each description, the mean over ``text``'s :data:`NEAREST` examples of (similarity
    of the request to the example) × (similarity of the description to the example's worker's)."""
    bank = _bank()
    if bank is None or not descriptions:
        return [0.0] * len(descriptions)
    embedder, requests, workers = bank
    from teamgraph.embeddings import similarity

    near = similarity(requests, embedder.embed_query(text))
    top = near.argsort()[::-1][:NEAREST]
    described = _described(tuple(descriptions))
    votes = described @ workers[top].T  # (descriptions, nearest)
    return [float(row @ near[top]) / len(top) for row in votes]


@cache
def _bank() -> tuple[Embedder, Vectors, Vectors] | None:
    if importlib.util.find_spec("wordllama") is None:
        return None
    from teamgraph.embeddings import OFFLINE, embedder

    model = embedder(OFFLINE)
    assert model is not None
    examples = examples_of(EXAMPLES_FILE)
    requests = model.embed_documents([request for request, _ in examples])
    workers = model.embed_documents([worker for _, worker in examples])
    return model, requests, workers


@lru_cache(maxsize=256)
def _described(descriptions: tuple[str, ...]) -> Vectors:
    bank = _bank()
    assert bank is not None
    return bank[0].embed_documents(list(descriptions))


def examples_of(path: Path) -> list[tuple[str, str]]:
    """The (request, worker description) pairs of an examples file."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [(item["request"], item["worker"]) for item in raw["examples"]]
