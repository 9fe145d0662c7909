"""What one message costs in tokens; the two built-in counters differ only in the text measure.

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
* Gemini parts and Bedrock blocks (named by one key): ``function_call`` / ``toolUse`` by id, name
  and arguments, ``function_response`` / ``toolResult`` by id, name and content, Bedrock
  ``reasoningContent`` by its text, ``inline_data``, ``file_data``, ``image``, ``document``,
  ``video`` at the fixed estimate; thought signatures, ``redacted_thinking`` blocks, Bedrock
  signatures and the ``encrypted_content`` of a Responses reasoning or compaction item are never
  counted by their length (the adapter leaves it out of the item's content); an Anthropic
  ``compaction`` block by its ``content`` (the summary text), never its encrypted content or
  signature;
* block objects (the Anthropic SDK's blocks, ``google-genai`` parts) by their fields that are set,
  as the dict blocks; binary values (``bytes``) never as text;
* any other block by the text of its JSON form;
* the name, every tool call's id, name and arguments (JSON text when they are a dict), and a tool
  result's ``tool_call_id``. A call present both as a ``tool_use`` block and in ``tool_calls``
  (LangChain messages from Anthropic) is counted once.

Each text piece is measured on its own: the heuristic by ``ceil(len(text) / 4)``, tiktoken
exactly, at most ``MAX_ENCODED_CHARS`` characters of one message (the rest by the heuristic).
Reading never raises on a message: content is walked without recursion (any depth), and a field
whose reading raises counts as absent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from agentstate_reducer.messages import MessageInfo, json_text, read_message, tool_call_payloads

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

TokenCounterFn = Callable[[Any], int]

_TEXT_BLOCKS: Final = frozenset(
    {"text", "input_text", "output_text", "summary_text", "reasoning_text", "text-plain"}
)
_MEDIA_BLOCKS: Final = frozenset(
    {"image_url", "image", "input_image", "file", "input_file", "document", "audio", "input_audio", "video"}
)


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
                elif isinstance(item, bytes | bytearray):
                    continue  # binary data (a thought signature, inline media): never text
                elif isinstance(item, Sequence):
                    stack.extend(reversed(item))  # read in order
                elif isinstance(attrs := getattr(item, "__dict__", None), dict):
                    # a block object (Anthropic SDK blocks, google-genai parts): its set fields
                    self.block({k: v for k, v in attrs.items() if v is not None}, stack)
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
        elif btype == "redacted_thinking":
            pass  # encrypted: what the provider counts is not its length
        elif btype == "compaction":  # Anthropic: the summary text; never encrypted_content or signature
            content = block.get("content")
            if isinstance(content, str):
                self.texts.append(content)
        elif btype is None and (keyed := _keyed_block(block)) is not None:
            self._keyed(*keyed, stack)
        elif btype == "server_tool_use":
            self.texts.append(str(block.get("name") or ""))
            self.texts.append(json_text(block.get("input")))
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

    def _keyed(self, key: str, value: Any, stack: list[Any]) -> None:
        """A block named by its one key (Gemini parts, Bedrock Converse blocks)."""
        if key in _MEDIA_KEYS:
            self.media += 1
        elif key in ("function_call", "functionCall"):
            self._call_id(_field(value, "id"))
            self.texts.append(str(_field(value, "name") or ""))
            self.texts.append(json_text(_field(value, "args")))
        elif key in ("function_response", "functionResponse"):
            self._call_id(_field(value, "id"))
            self.texts.append(str(_field(value, "name") or ""))
            stack.append(_field(value, "response"))
        elif key == "toolUse":
            self._call_id(_field(value, "toolUseId"))
            self.texts.append(str(_field(value, "name") or ""))
            self.texts.append(json_text(_field(value, "input")))
        elif key == "toolResult":
            self._call_id(_field(value, "toolUseId"))
            stack.append(_field(value, "content"))
        elif key == "reasoningContent":  # its text; never the signature or redacted bytes
            stack.append(_field(_field(value, "reasoningText"), "text"))
        # cachePoint, thought_signature alone: nothing to count

    def _call_id(self, value: Any) -> None:
        if isinstance(value, str) and value:
            self.texts.append(value)
            self.seen_ids.add(value)


#: keys naming a Gemini part or a Bedrock block (a block without ``type``); media at the fixed estimate
_MEDIA_KEYS: Final = frozenset(
    {"inline_data", "inlineData", "file_data", "fileData", "image", "document", "video", "audio"}
)
_KEYED: Final = _MEDIA_KEYS | {
    "function_call",
    "functionCall",
    "function_response",
    "functionResponse",
    "toolUse",
    "toolResult",
    "reasoningContent",
    "cachePoint",
    "thought_signature",
    "thoughtSignature",
}


def _keyed_block(block: Mapping[str, Any]) -> tuple[str, Any] | None:
    """``(key, value)`` of a block known by a key (not a ``type``), or None. A text part with a
    thought signature is a text block."""
    if isinstance(block.get("text"), str):
        return None
    for key in block:
        if key in _KEYED and key not in ("thought_signature", "thoughtSignature"):
            return key, block[key]
    if any(key in _KEYED for key in block):
        return "cachePoint", None  # only a signature (or a cache point): nothing to count
    return None


def _field(value: Any, key: str) -> Any:
    """``value[key]`` of a dict, the attribute of an object, None when absent."""
    if isinstance(value, Mapping):
        return value.get(key)
    return getattr(value, key, None)


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
        return plain_texts(info), 0
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


def plain_texts(info: MessageInfo) -> list[str]:
    """The text pieces of a message with text content and no tool calls: its reading says all."""
    texts = [info.content, info.name] if info.name else [info.content]
    if info.result_ids:
        texts += info.result_ids
    return texts


def measure_capped(measure: Callable[[str], int], texts: list[str]) -> int:
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
