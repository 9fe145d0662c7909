"""Token counting: a user callable, else tiktoken when its encoding loads, else a heuristic.

What one message costs (both built-in counters use the same rule, only the text measure differs):

* ``MESSAGE_OVERHEAD`` tokens of framing per message (role, separators), as OpenAI's chat format
  spends about 3-4 per message;
* the text of the content: a string, or the text of each content block (``text``, ``tool_use``
  name and input, ``tool_result`` content, ``thinking``);
* images (``image_url``, ``image``, ``input_image``, base64 data URLs, Anthropic ``source`` blocks)
  and other media (``file``, ``document``, ``audio``, ``input_audio``, ``video``) at a fixed
  ``IMAGE_TOKENS`` each, never by the length of a base64 payload and never by fetching a URL;
* any other block by the text of its JSON form;
* the name, every tool call's id, name and arguments, and a tool result's ``tool_call_id``.

The heuristic measures text as ``ceil(len(text) / 4)`` characters per token; it needs nothing
installed. tiktoken measures it exactly for OpenAI-family models.

tiktoken downloads its encoding file on first use. Where that fails (a firewall, no network),
this module warns once per process and falls back to the heuristic; the load is tried once per
process and encoding, off the calling thread, and given up after ``TIKTOKEN_LOAD_TIMEOUT``
seconds, so a request never hangs on it. ``TIKTOKEN_CACHE_DIR`` (tiktoken's own setting) points
tiktoken at a local directory of encoding files; an encoding can also be passed as a ready
``tiktoken.Encoding`` built from a local file.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from .messages import read_message, tool_call_payloads

logger = logging.getLogger("agentstate_reducer.tokens")

MESSAGE_OVERHEAD: Final = 4
IMAGE_TOKENS: Final = 765  # OpenAI's cost of one high-detail 1024x1024 image tile set
HEURISTIC_CHARS_PER_TOKEN: Final = 4
TIKTOKEN_LOAD_TIMEOUT: Final = 10.0
DEFAULT_CACHE_SIZE: Final = 65_536

TokenCounterFn = Callable[[Any], int]

_TEXT_BLOCKS: Final = frozenset({"text", "input_text", "output_text"})
_MEDIA_BLOCKS: Final = frozenset(
    {"image_url", "image", "input_image", "file", "input_file", "document", "audio", "input_audio", "video"}
)


def heuristic_text_tokens(text: str) -> int:
    """The dependency-free measure: four characters per token, rounded up."""
    return math.ceil(len(text) / HEURISTIC_CHARS_PER_TOKEN)


def _content_parts(content: Any, texts: list[str]) -> int:
    """Append the countable text of ``content`` to ``texts``; return its fixed media tokens."""
    if content is None:
        return 0
    if isinstance(content, str):
        texts.append(content)
        return 0
    if isinstance(content, Mapping):
        return _block_parts(content, texts)
    if isinstance(content, Sequence) and not isinstance(content, bytes):
        return sum(_content_parts(block, texts) for block in content)
    texts.append(str(content))
    return 0


def _block_parts(block: Mapping[str, Any], texts: list[str]) -> int:
    btype = block.get("type")
    if btype in _TEXT_BLOCKS or (btype is None and isinstance(block.get("text"), str)):
        texts.append(str(block.get("text") or ""))
        return 0
    if btype in _MEDIA_BLOCKS or "image_url" in block or (
        isinstance(block.get("source"), Mapping) and btype != "tool_result"
    ):
        return IMAGE_TOKENS
    if btype == "tool_use":
        texts.append(str(block.get("name") or ""))
        texts.append(json.dumps(block.get("input"), ensure_ascii=False, sort_keys=True, default=str))
        return 0
    if btype == "tool_result":
        return _content_parts(block.get("content"), texts)
    if btype in ("thinking", "reasoning"):
        texts.append(str(block.get("thinking") or block.get("text") or block.get("summary") or ""))
        return 0
    texts.append(json.dumps(block, ensure_ascii=False, sort_keys=True, default=str))
    return 0


def message_parts(message: Any) -> tuple[list[str], int]:
    """The texts of one message to be measured, and its fixed (media) token cost."""
    info = read_message(message)
    texts: list[str] = []
    media = _content_parts(info.content, texts)
    if info.name:
        texts.append(info.name)
    for call_id, name, args in tool_call_payloads(message):
        texts.extend((call_id, name, args))
    texts.extend(info.result_ids if info.kind == "tool" and not _has_blocks(info.content) else ())
    return texts, media


def _has_blocks(content: Any) -> bool:
    return isinstance(content, Sequence) and not isinstance(content, str | bytes)


def _fingerprint(message: Any) -> int:
    """A cheap value that changes when a message's counted fields change (see ``TokenCounter``)."""
    info = read_message(message)
    content = info.content
    if isinstance(content, str):
        content_fp: object = hash(content)  # str caches its hash: O(1) after the first call
    else:
        content_fp = json.dumps(content, sort_keys=True, default=str)
    calls = tuple(tool_call_payloads(message))
    return hash((info.kind, info.id, info.name, content_fp, calls, info.result_ids))


class TokenCounter:
    """A ``message -> int`` counter with a bounded per-message cache.

    The cache is keyed by the message id when it has one, else by object identity (the cache
    holds a reference, so an identity is never reused while cached), and each entry is checked
    against a fingerprint of the counted fields (role, id, name, content, tool calls, tool call
    id). A message that changes, in place or by replacement, is therefore recounted; what stays
    cached is only the expensive part, the encoding. At most ``cache_size`` entries are kept
    (least recently used first out).
    """

    def __init__(
        self,
        measure: Callable[[str], int],
        *,
        name: str,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self.measure = measure
        self.name = name
        self.cache_size = cache_size
        self._cache: OrderedDict[object, tuple[object, int, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def count_uncached(self, message: Any) -> int:
        texts, media = message_parts(message)
        return MESSAGE_OVERHEAD + media + sum(self.measure(t) for t in texts if t)

    def __call__(self, message: Any) -> int:
        if self.cache_size <= 0:
            return self.count_uncached(message)
        info_id = read_message(message).id
        key: object = ("id", info_id) if info_id is not None else ("obj", id(message))
        fp = _fingerprint(message)
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None and entry[1] == fp and (info_id is not None or entry[0] is message):
                self._cache.move_to_end(key)
                self.hits += 1
                return entry[2]
        count = self.count_uncached(message)
        with self._lock:
            self.misses += 1
            self._cache[key] = (message if info_id is None else None, fp, count)
            self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return count

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    def __repr__(self) -> str:
        return f"TokenCounter(name={self.name!r}, cache_size={self.cache_size})"


# --- tiktoken, loaded once per process and encoding -------------------------------------------

_encodings: dict[str, Any] = {}  # encoding name -> tiktoken.Encoding, or None after a failure
_encodings_lock = threading.Lock()


def _load_encoding(name: str, timeout: float) -> Any:
    """Return the tiktoken encoding, or None (warned once) when tiktoken or the file is missing."""
    with _encodings_lock:
        if name in _encodings:
            return _encodings[name]
        try:
            import tiktoken
        except ImportError:
            _encodings[name] = None
            return None
        box: dict[str, Any] = {}

        def load() -> None:
            try:
                box["enc"] = tiktoken.get_encoding(name)
            except BaseException as exc:
                box["error"] = exc

        worker = threading.Thread(target=load, name=f"tiktoken-load-{name}", daemon=True)
        worker.start()
        worker.join(timeout)
        enc = box.get("enc")
        if enc is None:
            reason = box.get("error") or f"no answer within {timeout:g} s"
            warnings.warn(
                f"agentstate_reducer: tiktoken could not load encoding {name!r} ({type(reason).__name__}: "
                f"{str(reason)[:200]}); counting tokens with the chars/4 heuristic for the rest of this "
                "process. Set TIKTOKEN_CACHE_DIR to a directory holding the encoding file, or pass "
                "token_counter=..., to count exactly offline.",
                RuntimeWarning,
                stacklevel=4,
            )
        _encodings[name] = enc
        return enc


def heuristic_counter(*, cache_size: int = DEFAULT_CACHE_SIZE) -> TokenCounter:
    return TokenCounter(heuristic_text_tokens, name="heuristic", cache_size=cache_size)


def resolve_token_counter(
    token_counter: TokenCounterFn | None = None,
    *,
    encoding: Any = "cl100k_base",
    cache_size: int = DEFAULT_CACHE_SIZE,
    load_timeout: float = TIKTOKEN_LOAD_TIMEOUT,
) -> TokenCounterFn:
    """Resolve the counter: ``token_counter`` as is; else tiktoken ``encoding`` (a name such as
    ``"cl100k_base"`` or ``"o200k_base"``, or a ready ``tiktoken.Encoding``) when tiktoken is
    installed and the encoding loads; else the heuristic. Never raises for a missing tiktoken or
    an unreachable download: it warns once and falls back.
    """
    if token_counter is not None:
        if not callable(token_counter):
            raise TypeError(
                f"token_counter must be a callable message -> int, got {type(token_counter).__name__}"
            )
        return token_counter
    if isinstance(encoding, str):
        enc = _load_encoding(encoding, load_timeout)
    else:
        enc = encoding
    if enc is None:
        return heuristic_counter(cache_size=cache_size)

    def measure(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))

    return TokenCounter(measure, name=f"tiktoken:{getattr(enc, 'name', encoding)}", cache_size=cache_size)
