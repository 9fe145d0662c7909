"""The pure half of blob offload: find the large or binary values of a stored value, replace each
with a reference, and put them back. No I/O here; ``checkpointers.offload.flows`` stores and loads
the blobs.

What is offloaded (``Offloader``), wherever it sits inside a value (dicts, lists, tuples, Pydantic
models such as LangChain messages and provider SDK types, dataclasses):

* ``bytes``/``bytearray`` of at least ``min_bytes`` (Bedrock's ``{"source": {"bytes": ...}}``,
  Gemini's ``inline_data``/``Blob.data``, a tool's binary artifact);
* strings of at least ``min_bytes`` UTF-8 bytes that are binary written as text: a ``data:`` URL
  (OpenAI chat ``image_url``/``file_data``, Responses ``input_image``, LangChain ``image_url``) or
  base64 alone (LangChain ``{"type": "image", "base64": ...}``, Anthropic ``source.data``, OpenAI
  ``input_audio.data``, Gemini inline data as a dict);
* with ``tool_min_bytes`` set, every string of at least that many UTF-8 bytes inside a tool result:
  a message the core's adapter reads as one (``read_message(m).result_ids``) or a tool-result block
  (``tool_result``, ``function_call_output``, ``toolResult``, ``function_response``);
* any string or bytes that begins with the reference prefix, whatever its size, so that every
  value of the stored form that looks like a reference is one: the round trip is exact.

A reference has the type of what it replaces (``str`` for a string, ``bytes`` for bytes or a
bytearray), so a typed field keeps a value of its type in the stored copy:
``PREFIX + "sha256:<hex>:<kind>:<size>"``, kind ``s`` (a string, stored as UTF-8), ``b`` (bytes) or
``a`` (a bytearray). The blob's key is the SHA-256 of its stored bytes.

Invariants: the value given is never mutated; a container or object without anything to offload
(or restore) is returned as the very same object; ``restore(offload(v))`` equals ``v`` (the objects
rebuilt are copies with the same fields: ``model_copy(update=...)``, ``dataclasses.replace``).

Depth: the walk descends into containers ``_MAX_DEPTH`` levels below the value it is given and no
further (a cycle, or data that is not a message). Writes (``Offloader.offload``) and reads
(``references``, ``restore``, ``text_references``) walk the same values, one at a time from the
same root (each channel value, each write's value, each archived message), so they reach exactly
the same strings: a reference-like string a put reaches is escaped, and the reads see it as the
reference it became; one deeper than the limit is neither escaped nor read as a reference, so it
round-trips as it was written. Content can never be read as a reference, and no read reaches
further than the put did.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

__all__ = [
    "PREFIX",
    "Offloader",
    "Reference",
    "is_reference",
    "parse_reference",
    "references",
    "restore",
    "text_references",
]

#: What every reference begins with. Plain text: PostgreSQL's JSONB, where a saver may keep a
#: string channel, refuses NUL. A value of one's own that begins so is offloaded too (above).
PREFIX = "agentstate-blob:"
_PREFIX_BYTES = PREFIX.encode()
_REF_RE = re.compile(re.escape(PREFIX) + r"sha256:([0-9a-f]{64}):([sba]):([0-9]+)")
_BASE64_RE = re.compile(r"[A-Za-z0-9+/=_-]+")
_DATA_URL_RE = re.compile(r"data:[^,;]{0,200}(;[^,;]{0,200})*;base64,")
#: Block types and keys whose contents are a tool's result.
_TOOL_BLOCK_TYPES = frozenset({"tool_result", "function_call_output", "custom_tool_call_output",
                               "mcp_tool_result", "tool"})
_TOOL_BLOCK_KEYS = frozenset({"toolResult", "function_response", "functionResponse"})
#: Deeper than this, a value is left as it is (a cycle, or data that is not a message), by writes
#: and reads alike (module doc, "Depth").
_MAX_DEPTH = 48


class Reference(NamedTuple):
    """A parsed reference: the blob's SHA-256 (hex), what it replaced (``s``/``b``/``a``), its size."""

    digest: str
    kind: str
    size: int

    def text(self) -> str:
        return f"{PREFIX}sha256:{self.digest}:{self.kind}:{self.size}"

    def restore(self, data: bytes) -> Any:
        """The value this reference replaced, from its blob's bytes."""
        if self.kind == "s":
            return data.decode("utf-8")
        return bytearray(data) if self.kind == "a" else bytes(data)


def is_reference(value: Any) -> bool:
    if isinstance(value, str):
        return value.startswith(PREFIX)
    return isinstance(value, (bytes, bytearray)) and value.startswith(_PREFIX_BYTES)


def parse_reference(value: str | bytes | bytearray) -> Reference | None:
    """The reference ``value`` holds, or None when it holds none (a malformed one included)."""
    text = value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")
    match = _REF_RE.fullmatch(text)
    if match is None:
        return None
    return Reference(match.group(1), match.group(2), int(match.group(3)))


# -- the walk -------------------------------------------------------------------------------------


def _is_model(value: Any) -> bool:
    cls = type(value)
    return hasattr(cls, "model_fields") and hasattr(value, "model_copy")


def _walk(value: Any, leaf: Callable[[Any, bool], Any], tool: bool, depth: int) -> Any:
    """``value`` with ``leaf(x, tool)`` applied to every string and bytes inside it; the same
    object where nothing changed. ``tool``: inside a tool's result."""
    if isinstance(value, (str, bytes, bytearray)):
        return leaf(value, tool)
    if depth > _MAX_DEPTH or value is None or isinstance(value, (int, float, bool)):
        return value
    if isinstance(value, dict):
        inner = tool or value.get("type") in _TOOL_BLOCK_TYPES or not _TOOL_BLOCK_KEYS.isdisjoint(value)
        changed: dict[Any, Any] = {}
        for key, item in value.items():
            new = _walk(item, leaf, inner, depth + 1)
            if new is not item:
                changed[key] = new
        if not changed:
            return value
        if type(value) is dict:
            return {k: changed.get(k, v) for k, v in value.items()}
        copy = value.copy()
        copy.update(changed)
        return copy
    if isinstance(value, (list, tuple)):
        items = [_walk(item, leaf, tool, depth + 1) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        if type(value) is list:
            return items
        if type(value) is tuple:
            return tuple(items)
        if hasattr(value, "_make"):  # a NamedTuple
            return value._make(items)
        return type(value)(items)
    if _is_model(value):
        updates: dict[str, Any] = {}
        for name in type(value).model_fields:
            old = getattr(value, name, None)
            new = _walk(old, leaf, tool, depth + 1)
            if new is not old:
                updates[name] = new
        extra = getattr(value, "__pydantic_extra__", None) or {}
        for name, old in extra.items():
            new = _walk(old, leaf, tool, depth + 1)
            if new is not old:
                updates[name] = new
        return value.model_copy(update=updates) if updates else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f for f in dataclasses.fields(value) if f.init]
        changes = {}
        for f in fields:
            old = getattr(value, f.name, None)
            new = _walk(old, leaf, tool, depth + 1)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


def _is_tool_result(message: Any) -> bool:
    from agentstate_reducer import read_message

    try:
        return bool(read_message(message).result_ids)
    except Exception:  # not a message: the media rule alone applies
        return False


def _binary_text(text: str) -> bool:
    if text.startswith("data:"):
        return _DATA_URL_RE.match(text) is not None
    return _BASE64_RE.fullmatch(text) is not None


class _Digests:
    """SHA-256 of recently seen strings and bytes, by identity: LangGraph hands the same objects
    at every step, so an image is hashed once, not once per put. Holds each value it remembers,
    so an id is never reused while remembered."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._seen: OrderedDict[int, tuple[Any, str, bytes | None]] = OrderedDict()
        self._lock = threading.Lock()

    def known(self, value: Any) -> bool:
        """Whether ``value`` (this very object) was offloaded lately."""
        hit = self._seen.get(id(value))
        return hit is not None and hit[0] is value

    def digest(self, value: str | bytes | bytearray) -> tuple[str, bytes]:
        immutable = not isinstance(value, bytearray)
        key = id(value)
        if immutable:
            with self._lock:
                hit = self._seen.get(key)
                if hit is not None and hit[0] is value:
                    self._seen.move_to_end(key)
                    data = hit[2] if hit[2] is not None else _payload(value)
                    return hit[1], data
        data = _payload(value)
        digest = hashlib.sha256(data).hexdigest()
        if immutable:
            with self._lock:
                # bytes are their own payload; a string's UTF-8 copy is not kept
                self._seen[key] = (value, digest, data if isinstance(value, bytes) else None)
                while len(self._seen) > self._size:
                    self._seen.popitem(last=False)
        return digest, data


def _payload(value: str | bytes | bytearray) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


class Offloader:
    """Replaces what ``min_bytes``/``tool_min_bytes`` say with references (module doc).

    Thread-safe; one per ``BlobOffload``.
    """

    def __init__(self, min_bytes: int, tool_min_bytes: int | None) -> None:
        self.min_bytes = min_bytes
        self.tool_min_bytes = tool_min_bytes
        self._digests = _Digests()

    def _wanted(self, value: str | bytes | bytearray, tool: bool) -> bool:
        if is_reference(value):
            return True  # escaped: every reference-like value of the stored form is one
        if isinstance(value, str):
            if len(value) < min(self.min_bytes, self.tool_min_bytes or self.min_bytes) // 4:
                return False  # fewer than a quarter as many characters cannot reach the size
            size = len(value.encode("utf-8")) if not value.isascii() else len(value)
            if tool and self.tool_min_bytes is not None and size >= self.tool_min_bytes:
                return True
            return size >= self.min_bytes and _binary_text(value)
        return len(value) >= self.min_bytes

    def offload(
        self, value: Any, *, messages: bool = False, keep: Mapping[str, bytes] | None = None
    ) -> tuple[Any, dict[str, bytes]]:
        """(``value``'s stored copy, the blobs it references by SHA-256). ``messages``: ``value``
        is a message or a list of messages, each read by the core's adapter for the tool rule.
        ``keep`` (digest -> bytes): ``value`` is already a stored form, and each reference in it to
        one of these blobs stays as it is (and is among the blobs returned), so offloading a stored
        value again changes nothing; a reference-like value naming another blob is escaped."""
        blobs: dict[str, bytes] = {}

        def leaf(item: Any, tool: bool) -> Any:
            if keep and is_reference(item):
                ref = parse_reference(item)
                if ref is not None and ref.digest in keep:
                    blobs[ref.digest] = keep[ref.digest]
                    return item
            if not self._digests.known(item) and not self._wanted(item, tool):
                return item
            digest, data = self._digests.digest(item)
            blobs[digest] = data
            kind = "s" if isinstance(item, str) else "a" if isinstance(item, bytearray) else "b"
            text = Reference(digest, kind, len(data)).text()
            return text if kind == "s" else text.encode()

        if messages and self.tool_min_bytes is not None:
            items = value if isinstance(value, list) else None
            if items is not None:
                new = [_walk(m, leaf, _is_tool_result(m), 1) for m in items]
                stored = value if all(a is b for a, b in zip(new, items, strict=True)) else new
            else:
                stored = _walk(value, leaf, _is_tool_result(value), 0)
        else:
            stored = _walk(value, leaf, False, 0)
        return stored, blobs


def references(value: Any) -> dict[str, Reference]:
    """Every reference inside ``value``, by digest: one stored value, as a put offloaded it (a
    channel value, a write's value, a message), so the walk reaches what the put reached."""
    found: dict[str, Reference] = {}

    def leaf(item: Any, tool: bool) -> Any:
        if is_reference(item):
            ref = parse_reference(item)
            if ref is not None:
                found[ref.digest] = ref
        return item

    _walk(value, leaf, False, 0)
    return found


def text_references(value: Any) -> Any:
    """``value`` (one stored value, as for ``references``) with each bytes reference as the same
    reference in text (it still restores to bytes), for a store that keeps JSON."""

    def leaf(item: Any, tool: bool) -> Any:
        if isinstance(item, (bytes, bytearray)) and is_reference(item):
            return bytes(item).decode("ascii")
        return item

    return _walk(value, leaf, False, 0)


def restore(value: Any, blobs: Mapping[str, bytes], missing: Callable[[Reference], Any]) -> Any:
    """``value`` (one stored value, as for ``references``) with every reference replaced by what it
    stands for, from ``blobs`` (digest -> bytes); ``missing(ref)`` is called for a reference whose
    blob ``blobs`` lacks (it raises)."""

    def leaf(item: Any, tool: bool) -> Any:
        if not is_reference(item):
            return item
        ref = parse_reference(item)
        if ref is None:
            return item
        data = blobs.get(ref.digest)
        if data is None:
            return missing(ref)
        return ref.restore(data)

    return _walk(value, leaf, False, 0)
