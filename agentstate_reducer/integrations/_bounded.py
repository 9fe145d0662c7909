"""``BoundedMap``: the per-thread notes of the integrations, never more than ``max_size``.

>>> notes: BoundedMap[str, int] = BoundedMap(2)
>>> notes.put("a", 1), notes.put("b", 2), notes.put("a", 3)
(None, None, 1)
>>> notes.put("c", 4)  # "b" is the least recently written: it goes
>>> notes.get("b"), notes.get("a"), len(notes)
(None, 3, 2)
>>> notes.pop("a"), notes.pop("a")
(3, None)
>>> notes.sweep(lambda value: value > 3), len(notes)
(1, 0)

With ``max_bytes``, the entries' weights (``weigh(value)``, bytes) stay within it too; the newest
entry stays whatever it weighs:

>>> texts: BoundedMap[str, str] = BoundedMap(10, max_bytes=5, weigh=len)
>>> texts.put("a", "xx"), texts.put("b", "yyy"), texts.put("c", "z")
(None, None, None)
>>> texts.get("a"), texts.weight
(None, 4)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar, overload

__all__ = ["BoundedMap"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
D = TypeVar("D")


class BoundedMap(Generic[K, V]):
    """A map holding at most ``max_size`` entries; writing one more evicts the least recently
    written. Reads do not count as use: an entry lives for ``max_size`` writes of other keys.
    With ``max_bytes`` and ``weigh`` (a value's bytes, taken once when it is written), writing
    also evicts the least recently written entries until the others weigh at most ``max_bytes``.

    Every method holds one lock for its whole work, so threads and asyncio tasks may share a map;
    ``put`` answers with the value it replaced, so a read-and-write is one step.

    Raises:
        ValueError: ``max_size`` or ``max_bytes`` is not an int >= 1, or only one of
            ``max_bytes`` and ``weigh`` is given.
    """

    __slots__ = ("_entries", "_lock", "_weigh", "_weights", "max_bytes", "max_size", "weight")

    def __init__(
        self, max_size: int, *, max_bytes: int | None = None, weigh: Callable[[V], int] | None = None
    ) -> None:
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ValueError(f"max_size must be an int >= 1, got {max_size!r}")
        if max_bytes is not None and (
            isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1
        ):
            raise ValueError(f"max_bytes must be an int >= 1 or None, got {max_bytes!r}")
        if (max_bytes is None) != (weigh is None):
            raise ValueError("give max_bytes and weigh together: the bound needs each value's bytes")
        self.max_size = max_size
        self.max_bytes = max_bytes
        self._weigh = weigh
        self._entries: OrderedDict[K, V] = OrderedDict()
        #: key -> the weight of its value, with ``max_bytes``
        self._weights: dict[K, int] = {}
        #: the entries' weights together (0 without ``max_bytes``)
        self.weight = 0
        self._lock = threading.Lock()

    @overload
    def get(self, key: K) -> V | None: ...
    @overload
    def get(self, key: K, default: D) -> V | D: ...

    def get(self, key: K, default: object = None) -> object:
        """The value of ``key``, or ``default``."""
        with self._lock:
            return self._entries.get(key, default)

    def put(self, key: K, value: V) -> V | None:
        """Write ``value`` as the newest entry; the value it replaced, or None."""
        weight = self._weigh(value) if self._weigh is not None else 0
        with self._lock:
            previous = self._entries.pop(key, None)
            self.weight -= self._weights.pop(key, 0)
            self._entries[key] = value
            if self._weigh is not None:
                self._weights[key] = weight
                self.weight += weight
            while len(self._entries) > self.max_size or (
                self.max_bytes is not None and self.weight > self.max_bytes and len(self._entries) > 1
            ):
                old, _ = self._entries.popitem(last=False)
                self.weight -= self._weights.pop(old, 0)
            return previous

    def sweep(self, gone: Callable[[V], bool]) -> int:
        """Remove every entry whose value ``gone(value)`` says is no longer needed; how many.
        ``gone`` runs under the map's lock: it must not use the map."""
        with self._lock:
            dead = [key for key, value in self._entries.items() if gone(value)]
            for key in dead:
                del self._entries[key]
                self.weight -= self._weights.pop(key, 0)
            return len(dead)

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Remove ``key``; its value, or ``default``."""
        with self._lock:
            self.weight -= self._weights.pop(key, 0)
            return self._entries.pop(key, default)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __repr__(self) -> str:
        return f"BoundedMap(max_size={self.max_size}, entries={len(self)})"
