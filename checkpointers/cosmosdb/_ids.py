"""Names, keys, ids and configs of the Cosmos DB checkpointer: checked or encoded before any request.

Every user-supplied string in an id (thread id, namespace, checkpoint id, channel, task id,
version) goes through ``encode_part``: reversible escaping into ``[A-Za-z0-9_.-~]``, or a SHA-256
when too long, so ids never hold ``/ \\ ? #`` and stay far below 1,023 bytes. Ids are never parsed
back: the raw values are stored as fields.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import random
import re
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import get_checkpoint_id

# -- names and keys, checked before any request ----------------------------------------------------

#: Cosmos DB's limit on a database or container name (characters).
MAX_NAME_CHARS = 255
#: Characters a Cosmos DB resource id may not contain: they are separators of the request's URL.
_FORBIDDEN_NAME_CHARS = ("/", "\\", "?", "#")
_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


def check_name(what: str, name: Any) -> None:
    """Raise ``ValueError`` unless ``name`` is a database or container name Cosmos DB accepts: a
    str of 1 to 255 characters, not blank, not ending with a space, without ``/ \\ ? #``.
    ``what`` names the argument in the message.

    >>> check_name("container_name", "checkpoints")
    >>> check_name("container_name", "a/b")
    Traceback (most recent call last):
    ...
    ValueError: container_name 'a/b' is not a valid Cosmos DB name: it contains '/' (names may not \
contain '/', '\\\\', '?' or '#', nor end with a space)
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} must be a non-empty str (or pass container=), got {name!r}")
    why = None
    bad = [ch for ch in _FORBIDDEN_NAME_CHARS if ch in name]
    if bad:
        why = f"contains {bad[0]!r}"
    elif not name.strip():
        why = "is blank"
    elif name.endswith(" "):
        why = "ends with a space"
    elif len(name) > MAX_NAME_CHARS:
        why = f"is {len(name)} characters long; the limit is {MAX_NAME_CHARS}"
    if why is not None:
        raise ValueError(
            f"{what} {name!r} is not a valid Cosmos DB name: it {why} (names may not contain "
            "'/', '\\\\', '?' or '#', nor end with a space)"
        )


def check_account_key(key: str, source: str) -> None:
    """Raise ``ValueError`` unless ``key`` is a base64 account key (what the SDK signs requests
    with; it would fail on the first request with ``binascii.Error``). Surrounding whitespace is
    allowed. ``source`` says where the key came from. The message never contains the key.

    >>> check_account_key("c2VjcmV0", "given as credential=")
    >>> check_account_key("not-base64", "in COSMOSDB_KEY")
    Traceback (most recent call last):
    ...
    ValueError: the Cosmos DB key in COSMOSDB_KEY is not a valid base64 account key (it has \
characters outside A-Z, a-z, 0-9, '+', '/' and '=' padding): use the account's primary or \
secondary key as the Azure portal shows it (Keys), or pass a TokenCredential
    """
    text = key.strip()
    hint = (
        "use the account's primary or secondary key as the Azure portal shows it (Keys), or pass a "
        "TokenCredential"
    )
    if not text:
        raise ValueError(f"the Cosmos DB key {source} is empty: {hint}")
    if not set(text) <= _BASE64_CHARS:
        why = "it has characters outside A-Z, a-z, 0-9, '+', '/' and '=' padding"
    else:
        try:
            base64.b64decode(text, validate=True)
            return
        except (binascii.Error, ValueError):
            why = "its length or '=' padding is wrong"
    raise ValueError(f"the Cosmos DB key {source} is not a valid base64 account key ({why}): {hint}")


# -- ids -------------------------------------------------------------------------------------------

_SAFE = re.compile(r"[A-Za-z0-9_.\-]*\Z")
_SAFE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
#: Longest escaped segment kept readable; longer ones are hashed (ids stay < 1,023 bytes).
_PART_BUDGET = 128
#: Partition key values: up to 2 KB on Cosmos DB; escaped thread ids longer than this are hashed.
_PK_BUDGET = 256


def encode_part(value: str, budget: int = _PART_BUDGET) -> str:
    """``value`` as a legal, injective id segment over ``[A-Za-z0-9_.-~]``.

    Characters outside ``[A-Za-z0-9_.-]`` become ``~XX`` per UTF-8 byte (uppercase hex); a result
    longer than ``budget`` becomes ``~h`` + SHA-256 of the value. Escapes never contain ``~h``, so the
    two forms cannot collide, and ``!`` (the separator between segments) never occurs in a segment.

    >>> encode_part("thread 1/ä#")
    'thread~201~2F~C3~A4~23'
    >>> encode_part("x" * 300)[:2], len(encode_part("x" * 300))
    ('~h', 66)
    """
    if _SAFE.match(value):
        escaped = value
    else:
        escaped = "".join(
            ch if ch in _SAFE_CHARS else "".join(f"~{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
            for ch in value
        )
    if len(escaped) <= budget:
        return escaped
    return "~h" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _encode_version(version: Any) -> str:
    # Versions are strings here (get_next_version) but conformance tests and other savers use ints:
    # the type is part of the segment so 1 and "1" stay distinct.
    if isinstance(version, str):
        return encode_part(version)
    if isinstance(version, bool) or not isinstance(version, (int, float)):
        raise TypeError(f"channel versions must be str, int or float, got {type(version).__name__}")
    return f"~i{version}" if isinstance(version, int) else f"~f{version!r}"


def partition_key(thread_id: str) -> str:
    """The partition key value of a thread."""
    return encode_part(thread_id, _PK_BUDGET)


def checkpoint_item_id(checkpoint_ns: str, checkpoint_id: str) -> str:
    return f"c!{encode_part(checkpoint_ns)}!{encode_part(checkpoint_id)}"


def blob_item_id(checkpoint_ns: str, channel: str, version: Any) -> str:
    return f"b!{encode_part(checkpoint_ns)}!{encode_part(channel)}!{_encode_version(version)}"


def write_item_id(checkpoint_ns: str, checkpoint_id: str, task_id: str, idx: int) -> str:
    return f"w!{encode_part(checkpoint_ns)}!{encode_part(checkpoint_id)}!{encode_part(task_id)}!{idx}"


def chunk_item_id(head_id: str, part: int) -> str:
    """The id of chunk ``part`` (>= 1) of the value whose head item is ``head_id``."""
    return f"{head_id}!{part}"


def next_version(current: Any) -> str:
    """String versions like LangGraph's Postgres saver: a zero-padded counter, then a random
    fraction. Forks from one parent get distinct versions, so a (channel, version) item is written
    once and never means two values."""
    if current is None:
        n = 0
    elif isinstance(current, int):
        n = current
    else:
        n = int(str(current).split(".")[0])
    return f"{n + 1:032}.{random.random():016}"


# -- config ----------------------------------------------------------------------------------------


class CheckpointAddress(NamedTuple):
    """The thread, namespace and checkpoint a RunnableConfig's ``configurable`` part names, parsed
    once."""

    thread_id: str
    #: None only where "every namespace" is meant (list)
    checkpoint_ns: str | None
    checkpoint_id: str | None

    @property
    def pk(self) -> str:
        return partition_key(self.thread_id)


def parse_config(config: RunnableConfig, *, any_namespace: bool = False) -> CheckpointAddress:
    conf = config.get("configurable") or {}
    thread_id = conf.get("thread_id")
    if thread_id is None or thread_id == "":
        raise ValueError(
            "config['configurable']['thread_id'] is required, e.g. "
            "{'configurable': {'thread_id': 'my-thread'}}"
        )
    ns = conf.get("checkpoint_ns")
    if ns is None and not any_namespace:
        ns = ""
    return CheckpointAddress(str(thread_id), None if ns is None else str(ns), get_checkpoint_id(config))


def thread_config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    conf = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id}
    return {"configurable": conf}
