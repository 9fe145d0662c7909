"""``BoundedMap``: the per-thread notes of the integrations, never more than ``max_size``.

>>> notes: BoundedMap[str, int] = BoundedMap(2)
>>> notes.put("a", 1), notes.put("b", 2), notes.put("a", 3)
(None, None, 1)
>>> notes.put("c", 4)  # "b" is the least recently written: it goes
>>> notes.get("b"), notes.get("a"), len(notes)
(None, 3, 2)
>>> notes.pop("a"), notes.pop("a")
(3, None)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar, overload

__all__ = ["BoundedMap"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
D = TypeVar("D")


class BoundedMap(Generic[K, V]):
    """A map holding at most ``max_size`` entries; writing one more evicts the least recently
    written. Reads do not count as use: an entry lives for ``max_size`` writes of other keys.

    Every method holds one lock for its whole work, so threads and asyncio tasks may share a map;
    ``put`` answers with the value it replaced, so a read-and-write is one step.

    Raises:
        ValueError: ``max_size`` is not an int >= 1.
    """

    __slots__ = ("_entries", "_lock", "max_size")

    def __init__(self, max_size: int) -> None:
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ValueError(f"max_size must be an int >= 1, got {max_size!r}")
        self.max_size = max_size
        self._entries: OrderedDict[K, V] = OrderedDict()
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
        with self._lock:
            previous = self._entries.pop(key, None)
            self._entries[key] = value
            if len(self._entries) > self.max_size:
                self._entries.popitem(last=False)
            return previous

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Remove ``key``; its value, or ``default``."""
        with self._lock:
            return self._entries.pop(key, default)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __repr__(self) -> str:
        return f"BoundedMap(max_size={self.max_size}, entries={len(self)})"
