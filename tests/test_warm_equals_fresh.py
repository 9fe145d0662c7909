"""A warm reducer's every output equals a fresh reducer's on the same input.

Stated on the public API only (``MessageReducer``, ``ReducerConfig``, ``reduce``/``areduce``,
``as_langgraph_reducer``, the built-in and user token counters), so that it holds whatever the
reducer remembers between calls and however it remembers it. A "warm" reducer has reduced other
lists before; a "fresh" one is a new ``MessageReducer`` with its own counter. Both are given the
same objects, and their results must agree: the same surviving and pruned messages (the caller's
own objects, compared by identity; an injected summary, a new object, by equality), the same
summary text and the same stats.

The calls follow what applications do between two reductions: append a turn (``reduce(prev,
new)`` and ``reduce([*prev, *new])``), reduce the output again, hand back an equal deep copy (a
checkpoint read back), replace a message by a new object with its id, edit a message in place,
reduce the whole unreduced history, and alternate between two conversations; from one thread, from
several threads at once and from several asyncio tasks sharing one reducer.

One documented difference is allowed, and only where it is documented (``ReducerStats``,
docs/tokens.md "What a warm reduction checks"): after a message was edited in place, a built-in
counter's ``tokens_before`` may hold the count the message had when it was last checked. Edits in
place keep a message's kind and call ids (contents and tool-call arguments change), the assumption
docs/contract.md states for memos; a replacement by a new object may change anything.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentstate_reducer import MessageReducer, ReducerConfig, ReducerResult, TokenCounter, read_message
from agentstate_reducer.summary import SUMMARY_ID
from agentstate_reducer.tokens import heuristic_counter
from tests.convo import Spec, ids, langchain_objects, openai_dicts
from tests.test_properties import conversations

pytestmark = pytest.mark.slow  # see the slow marker in pyproject.toml

#: the two message shapes: LangChain messages (pydantic objects) and OpenAI-style dicts
SHAPES: dict[str, Callable[[Spec], list[Any]]] = {"langchain": langchain_objects, "openai": openai_dicts}

# -- policies ------------------------------------------------------------------------------------


def _summarize(messages: list[Any]) -> str:
    """Names every message it is given with a checksum of its content, so that a summary of other
    messages, or of a message as it was before an edit, reads differently."""
    parts = [f"{read_message(m).id}:{zlib.crc32(repr(read_message(m).content).encode())}" for m in messages]
    return "summary of " + " ".join(parts)


async def _asummarize(messages: list[Any]) -> str:
    for _ in range(3):  # let the other tasks run between this reduction's plan and its result
        await asyncio.sleep(0)
    return _summarize(messages)


def _count_chars(message: Any) -> int:
    """A user's counter: not a ``TokenCounter``, so the package caches nothing of it."""
    return len(repr(read_message(message).content)) // 4 + 3


@dataclasses.dataclass(frozen=True)
class Policy:
    """A config and how to make the config of a fresh reducer: one with a counter of its own."""

    config: ReducerConfig
    counter: str  # "none" (count mode), "heuristic", "heuristic-small", "default", "user"

    def fresh(self) -> ReducerConfig:
        if isinstance(self.config.token_counter, TokenCounter):
            own = heuristic_counter(cache_size=self.config.token_counter.cache_size)
            return dataclasses.replace(self.config, token_counter=own)
        return self.config  # count mode, a user function, or None: each reducer resolves its own

    @property
    def cached_counts(self) -> bool:
        """A built-in counter counts: an edited message may keep its older count (see above)."""
        return self.counter in ("heuristic", "heuristic-small", "default")


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    # count mode ("none") drawn as often as two token-mode counters
    counter = draw(st.sampled_from(("none", "none", "heuristic", "heuristic-small", "default", "user")))
    summary = draw(st.sampled_from(["none", "text", "inject"]))
    common: dict[str, Any] = {
        "preserve_first": draw(st.booleans()),
        "start_on_human": draw(st.booleans()),
        "summarize_fn": None if summary == "none" else _summarize,
        "asummarize_fn": None if summary == "none" else _asummarize,
        "inject_summary": summary == "inject",
    }
    if counter == "none":
        low = draw(st.integers(0, 6))
        config = ReducerConfig(min_messages=low, max_messages=low + draw(st.integers(0, 12)), **common)
    else:
        # messages cost about 12 tokens: from budgets under one message to ones the history fits in
        target = draw(st.integers(0, 200))
        own: Any = {
            "heuristic": heuristic_counter(),
            # a cache smaller than a history: the counter evicts on almost every call
            "heuristic-small": heuristic_counter(cache_size=draw(st.integers(1, 6))),
            "default": None,  # tiktoken (offline copy, see conftest) resolved by each reducer
            "user": _count_chars,
        }[counter]
        config = ReducerConfig(
            max_tokens=target + draw(st.integers(0, 60)), target_tokens=target, token_counter=own, **common
        )
    return Policy(config, counter)


# -- comparing results ---------------------------------------------------------------------------


def assert_same(
    warm: ReducerResult, fresh: ReducerResult, handed_in: list[Any], policy: Policy, *, edited: bool
) -> None:
    """``warm`` and ``fresh`` agree on ``handed_in`` (every message handed to the call)."""
    handed = {id(m) for m in handed_in}
    for name, w, f in (("surviving", warm.surviving, fresh.surviving), ("pruned", warm.pruned, fresh.pruned)):
        assert ids(w) == ids(f), f"{name} differ"
        for a, b in zip(w, f, strict=True):
            if id(a) in handed or id(b) in handed:
                assert a is b, f"{name}: not the caller's own object {read_message(a).id}"
            else:  # a new summary message
                assert a == b, f"{name}: summary messages differ"
    assert warm.summary == fresh.summary
    ws, fs = warm.stats, fresh.stats
    if edited and policy.cached_counts:
        # documented (ReducerStats.tokens_before): a message edited in place before what a
        # triggered decision reads keeps its older count there, through any number of warm
        # reductions; everything the decision reads is checked, so the rest agrees exactly
        ws, fs = dataclasses.replace(ws, tokens_before=None), dataclasses.replace(fs, tokens_before=None)
    assert ws == fs


# -- what an application does between two reductions ----------------------------------------------


@dataclasses.dataclass
class Conversation:
    """One thread's messages: ``source`` in the order they arrive, ``stored`` what the application
    keeps (the last output, as a checkpoint holds it)."""

    source: list[Any]
    arrived: int = 0
    stored: list[Any] = dataclasses.field(default_factory=list)
    #: a message was edited in place (see ``assert_same``)
    edited: bool = False
    edits: int = 0
    #: ``id()`` of the objects other conversations hold too (a shared system prompt): never edited
    #: in place, which would change another thread's input while it is being reduced
    shared: frozenset[int] = frozenset()

    def take(self, k: int) -> list[Any]:
        new = self.source[self.arrived : self.arrived + k]
        self.arrived += len(new)
        return new

    def target(self, where: int, calls: bool = False, own: bool = False) -> int | None:
        """The index in ``stored`` of a message to replace or edit: any but an injected summary;
        ``calls``: one with tool calls when there is one; ``own``: not a shared one."""
        places = [
            i
            for i, m in enumerate(self.stored)
            if read_message(m).id != SUMMARY_ID and not (own and id(m) in self.shared)
        ]
        with_calls = [i for i in places if read_message(self.stored[i]).call_ids]
        if calls and with_calls:
            places = with_calls
        return places[where % len(places)] if places else None


def _prefixed(spec: Spec, prefix: str) -> Spec:
    """The spec with its message ids prefixed, so two conversations' messages have their own ids."""
    return [(kind, f"{prefix}{mid}", *rest) for kind, mid, *rest in spec]


def _share_prompt(convos: list[tuple[str, Conversation]]) -> None:
    """Start every conversation with one system message object per shape: the same prompt
    object at the front of every thread's history, as applications build them."""
    prompts = {shape: build([("system", "prompt")])[0] for shape, build in SHAPES.items()}
    for shape, convo in convos:
        convo.source.insert(0, prompts[shape])
        convo.arrived += 1
        convo.stored = convo.source[: convo.arrived]
        convo.shared = frozenset(map(id, prompts.values()))


def _replaced(message: Any, n: int, structural: bool) -> Any:
    """A new object with the message's id and new content; ``structural``: its first tool call
    gets a new id too (its results become orphans), which only a new object may do."""
    text = f"replaced {n} " + "y" * (7 * n % 90)
    if isinstance(message, dict):
        out = {**copy.deepcopy(message), "content": text}
        if structural and out.get("tool_calls"):
            out["tool_calls"][0]["id"] = f"new{n}"
        return out
    update: dict[str, Any] = {"content": text}
    calls = getattr(message, "tool_calls", None)
    if structural and calls:
        update["tool_calls"] = [{**calls[0], "id": f"new{n}"}, *calls[1:]]
    return message.model_copy(update=update, deep=True)


def _edit_in_place(message: Any, n: int) -> None:
    """Change the message's content (longer or shorter) and its tool calls' arguments, keeping its
    kind, call ids and compaction block (docs/contract.md: what a memo takes an object edited in
    place to keep)."""
    text: Any = f"edited {n} " + "z" * (11 * n % 150)
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    if read_message(message).compaction and isinstance(content, list):  # it keeps its compaction block
        kept = [b for b in content if (b.get("type") if isinstance(b, dict) else b.type) == "compaction"]
        text = [*kept, {"type": "text", "text": text}]
    if isinstance(message, dict):
        message["content"] = text
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = f'{{"q": "{text}"}}'
        return
    message.content = text
    for call in getattr(message, "tool_calls", None) or []:
        call["args"] = {"q": text}


Op = tuple[Any, ...]

#: one step: how many new messages arrive, and how the call is made (a turn arriving is the
#: common step: drawn as often as the others together, so that histories grow past the triggers)
_append = st.tuples(st.just("append"), st.integers(1, 12), st.sampled_from(["pair", "concat", "one"]))
ops = st.one_of(
    *[_append] * 5,
    st.tuples(st.just("again")),
    st.tuples(st.just("copy"), st.integers(0, 3)),
    st.tuples(st.just("replace"), st.integers(0, 10**6), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("edit"), st.integers(0, 10**6), st.integers(0, 3)),
    st.tuples(st.just("full"),),
)


def call_for(convo: Conversation, op: Op) -> tuple[Any, Any, bool]:
    """Apply ``op`` to ``convo``; ``(existing, new, keep)``: the reduce call it makes, and whether
    its output becomes ``stored``."""
    kind = op[0]
    if kind == "again":
        return convo.stored, None, True
    if kind == "full":  # the whole history, as an application that stores it unreduced passes it
        return convo.source[: convo.arrived], None, False
    if kind == "append":
        new = convo.take(op[1])
        if op[2] == "concat":
            return [*convo.stored, *new], None, True
        if op[2] == "one" and len(new) == 1:
            return convo.stored, new[0], True
        return convo.stored, new, True
    if kind == "copy":  # a checkpoint read back: equal messages, other objects
        convo.stored = copy.deepcopy(convo.stored)
        return convo.stored, convo.take(op[1]) or None, True
    at = convo.target(op[1], calls=kind == "replace" and op[3], own=kind == "edit")
    convo.edits += 1
    if at is not None and kind == "replace":
        stored = list(convo.stored)
        stored[at] = _replaced(stored[at], convo.edits, structural=op[3])
        convo.stored = stored
    elif at is not None:
        _edit_in_place(convo.stored[at], convo.edits)
        convo.edited = True
    return convo.stored, convo.take(op[2]) or None, True  # None: reduce(stored) alone


def _given(existing: Any, new: Any) -> list[Any]:
    extra = [] if new is None else [new] if not isinstance(new, list) else new
    return [*existing, *extra]


def step(reducer: MessageReducer, policy: Policy, convo: Conversation, op: Op) -> None:
    """One call on the warm ``reducer``, checked against a fresh reducer on the same input."""
    existing, new, keep = call_for(convo, op)
    warm = reducer.reduce(existing, new)
    fresh = MessageReducer(config=policy.fresh()).reduce(existing, new)
    assert_same(warm, fresh, _given(existing, new), policy, edited=convo.edited)
    if keep:
        convo.stored = warm.surviving


async def astep(reducer: MessageReducer, policy: Policy, convo: Conversation, op: Op) -> None:
    existing, new, keep = call_for(convo, op)
    warm = await reducer.areduce(existing, new)
    fresh = MessageReducer(config=policy.fresh()).reduce(existing, new)
    assert_same(warm, fresh, _given(existing, new), policy, edited=convo.edited)
    if keep:
        convo.stored = warm.surviving


@st.composite
def conversation(draw: st.DrawFn, prefix: str, roles: bool = True) -> tuple[str, Conversation]:
    """A conversation in either shape, long enough to trigger: a few generated ones in a row.
    ``roles=False``: without messages of an unknown role (LangGraph's state cannot hold them)."""
    shape = draw(st.sampled_from(list(SHAPES)))
    parts = draw(st.lists(conversations(), min_size=2, max_size=5))
    # a provider's compaction between some parts (planner rule 5)
    compacted = draw(st.lists(st.booleans(), min_size=len(parts), max_size=len(parts)))
    spec: Spec = []
    for k, part in enumerate(parts):
        if k and compacted[k]:
            spec.append(("compaction", f"{prefix}{k}-k"))
        spec += _prefixed(part, f"{prefix}{k}-")
    if not roles:
        spec = [m for m in spec if m[0] != "unknown"]
    source = SHAPES[shape](spec)
    # a thread the reducer meets with some history already (kept unreduced until then)
    ready = draw(st.integers(0, len(source)))
    return shape, Conversation(source, ready, source[:ready])


SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- the properties ------------------------------------------------------------------------------


@settings(SETTINGS, max_examples=120)
@given(
    policy=policies(),
    first=conversation("a"),
    second=conversation("b"),
    script=st.lists(st.tuples(st.booleans(), ops), min_size=4, max_size=16),
    reducers=st.sampled_from([1, 2]),
    prompt=st.booleans(),
)
def test_warm_equals_fresh(
    policy: Policy,
    first: tuple[str, Conversation],
    second: tuple[str, Conversation],
    script: list[tuple[bool, Op]],
    reducers: int,
    prompt: bool,
) -> None:
    """Two conversations (each in either shape) reduced in turn by one reducer, or by one reducer
    each sharing one config (and so one built-in counter): each step on either, as the flag says.
    ``prompt``: both start with the same system message object."""
    if prompt:
        _share_prompt([first, second])
    one = MessageReducer(config=policy.config)
    pair = [one, one if reducers == 1 else MessageReducer(config=policy.config)]
    convos = [first[1], second[1]]
    for other, op in script:
        step(pair[other], policy, convos[other], op)


@settings(SETTINGS, max_examples=40)
@given(
    policy=policies(),
    workers=st.lists(
        st.tuples(conversation("t"), st.lists(ops, min_size=3, max_size=8)), min_size=2, max_size=3
    ),
    prompt=st.booleans(),
)
def test_warm_equals_fresh_across_threads(
    policy: Policy, workers: list[tuple[tuple[str, Conversation], list[Op]]], prompt: bool
) -> None:
    """Several threads share one reducer, each reducing its own conversation at the same time."""
    reducer = MessageReducer(config=policy.config)
    convos = _workers_conversations(workers, prompt)
    start = threading.Barrier(len(workers))
    errors: list[BaseException] = []

    def work(convo: Conversation, script: list[Op]) -> None:
        try:
            start.wait()
            for op in script:
                step(reducer, policy, convo, op)
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=work, args=(convo, script))
        for convo, (_, script) in zip(convos, workers, strict=True)
    ]
    with _switching_often():
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]


@settings(SETTINGS, max_examples=40)
@given(
    policy=policies(),
    workers=st.lists(
        st.tuples(conversation("t"), st.lists(ops, min_size=3, max_size=8)), min_size=2, max_size=3
    ),
    prompt=st.booleans(),
)
def test_warm_equals_fresh_across_asyncio_tasks(
    policy: Policy, workers: list[tuple[tuple[str, Conversation], list[Op]]], prompt: bool
) -> None:
    """Several asyncio tasks share one reducer (one thread: they interleave at every await,
    between a reduction's plan and its result while the summarizer runs)."""
    reducer = MessageReducer(config=policy.config)
    convos = _workers_conversations(workers, prompt)

    async def work(convo: Conversation, script: list[Op]) -> None:
        for op in script:
            await astep(reducer, policy, convo, op)
            await asyncio.sleep(0)

    async def main() -> None:
        scripts = [script for _, script in workers]
        await asyncio.gather(*(work(convo, script) for convo, script in zip(convos, scripts, strict=True)))

    asyncio.run(main())


def _workers_conversations(
    workers: list[tuple[tuple[str, Conversation], list[Op]]], prompt: bool
) -> list[Conversation]:
    """Each worker's conversation with its message ids prefixed (generated apart, they share ids);
    ``prompt``: all start with the same system message object."""
    convos = []
    for k, ((shape, c), _) in enumerate(workers):
        source = [_with_id(m, f"w{k}-{read_message(m).id}") for m in c.source]
        convos.append((shape, Conversation(source, c.arrived, source[: c.arrived])))
    if prompt:
        _share_prompt(convos)
    return [convo for _, convo in convos]


def _with_id(message: Any, mid: str) -> Any:
    if isinstance(message, dict):
        return {**message, "id": mid}
    return message.model_copy(update={"id": mid})


@contextmanager
def _switching_often() -> Iterator[None]:
    """Switch threads every few bytecodes instead of every 5 ms, so that the workers' calls
    interleave within a reduction rather than one after the other."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


# -- the LangGraph state annotation ------------------------------------------------------------------


graph_ops = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 6)),
    st.tuples(st.just("copy"), st.integers(0, 3)),  # the state read back from a checkpoint
    st.tuples(st.just("replace"), st.integers(0, 10**6), st.booleans()),  # a node re-sends an id
    st.tuples(st.just("edit"), st.integers(0, 10**6), st.integers(0, 3)),
    st.tuples(st.just("switch"),),
)


@settings(SETTINGS, max_examples=40)
@given(
    policy=policies(),
    first=conversation("a", roles=False),
    second=conversation("b", roles=False),
    script=st.lists(graph_ops, min_size=1, max_size=10),
    prompt=st.booleans(),
)
def test_langgraph_annotation_warm_equals_fresh(
    policy: Policy,
    first: tuple[str, Conversation],
    second: tuple[str, Conversation],
    script: list[Op],
    prompt: bool,
) -> None:
    """``as_langgraph_reducer()`` merges by id (``add_messages``) and prunes: warm, across updates
    of two threads' states, it returns what a fresh reducer's annotation returns. LangGraph makes
    dicts into LangChain messages, new objects on each call: those are compared by equality."""
    if prompt:
        _share_prompt([first, second])
    warm = MessageReducer(config=policy.config).as_langgraph_reducer()
    convos = [first[1], second[1]]
    on = 0
    for op in script:
        kind = op[0]
        if kind == "switch":
            on = 1 - on
            continue
        convo = convos[on]
        new: list[Any]
        if kind == "append":
            new = convo.take(op[1])
        elif kind == "copy":
            convo.stored = copy.deepcopy(convo.stored)
            new = convo.take(op[1])
        elif kind == "replace":
            at = convo.target(op[1], calls=op[2])
            convo.edits += 1
            new = [] if at is None else [_replaced(convo.stored[at], convo.edits, structural=op[2])]
        else:
            at = convo.target(op[1], own=True)
            convo.edits += 1
            if at is not None:
                _edit_in_place(convo.stored[at], convo.edits)
                convo.edited = True
            new = convo.take(op[2])
        existing = convo.stored
        out = warm(existing, new)
        expected = MessageReducer(config=policy.fresh()).as_langgraph_reducer()(existing, new)
        handed = {id(m) for m in [*existing, *new]}
        assert ids(out) == ids(expected)
        for a, b in zip(out, expected, strict=True):
            assert (a is b) if id(a) in handed or id(b) in handed else (a == b)
        convo.stored = out
