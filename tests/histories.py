"""Generated agent histories with the defects real runs leave, for the integration tests.

A history is a spec in ``tests.convo``'s form, ``("human", id)``, ``("ai", id)``,
``("call", id, [call_ids])``, ``("tool", id, call_id)``, which each integration's tests turn into
its framework's own message types. ``generate(seed)`` builds one, deterministically, with some of
these defects (``History.defects`` names those it holds):

* ``partial``: a step of two parallel calls, one answered (a run that died between two tools);
* ``dangling``: calls with no result at all, a later user message after them;
* ``late``: the result of a dangling call, after the next user message;
* ``duplicate``: a second result for an answered call;
* ``orphan``: a result answering a call id no call made;
* ``split``: the results of one step with an assistant text between them;
* ``replayed``: an older result sent again, late in the history (its call far back).

``History.defect_ids`` are the messages a repair may drop (late, duplicate, orphan, the second
half of a split, a replay): every other message must be kept or reach the summarizer/archive,
exactly once. ``Ledger`` counts that; ``calls(history)`` gives the growing histories a framework
sends at its model calls. Stdlib only (the CrewAI environment imports it too).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.convo import Spec

DEFECTS = ("partial", "dangling", "late", "duplicate", "orphan", "split", "replayed")

_TEXT_ID = re.compile(r"message (\S+) x")


@dataclass(frozen=True)
class History:
    """One generated history: the spec, the defects it holds and the messages a repair may drop."""

    spec: Spec
    defects: frozenset[str]
    defect_ids: frozenset[str]
    seed: int = 0

    @property
    def ids(self) -> list[str]:
        """Every message id, in history order."""
        return [step[1] for step in self.spec]


def generate(seed: int, *, turns: int | None = None, rate: float = 0.35, system: bool = False) -> History:
    """A history of ``turns`` user turns (4 to 14 when None), each defect drawn with ``rate``.

    Ids: ``u<n>`` user, ``a<n>`` answers, ``c<n>.<k>`` call steps, ``t<n>.<k>.<j>`` results,
    ``x<n>...`` the defects' extra messages; call ids ``k<n>.<k>.<j>``. Every id is unique.
    """
    rng = random.Random(seed)
    n_turns = turns if turns is not None else rng.randint(4, 14)
    spec: Spec = [("system", "sys")] if system else []
    defects: set[str] = set()
    defect_ids: set[str] = set()
    answered: list[tuple[str, str]] = []  # (call id, result id) answered so far
    dangling: list[str] = []  # call ids no result answered yet

    def draw(name: str) -> bool:
        if rng.random() < rate:
            defects.add(name)
            return True
        return False

    for n in range(n_turns):
        spec.append(("human", f"u{n}"))
        if dangling and draw("late"):
            call = dangling.pop(0)
            spec.append(("tool", f"x{n}.late", call))
            defect_ids.add(f"x{n}.late")
        if answered and n > 2 and draw("replayed"):
            call, _ = answered[rng.randrange(len(answered) // 2 + 1)]
            spec.append(("tool", f"x{n}.replay", call))
            defect_ids.add(f"x{n}.replay")
        if draw("orphan"):
            spec.append(("tool", f"x{n}.orphan", f"k{n}.none"))
            defect_ids.add(f"x{n}.orphan")
        for s in range(rng.choice((0, 1, 1, 2))):
            width = rng.choice((1, 1, 2, 3))
            calls = [f"k{n}.{s}.{j}" for j in range(width)]
            spec.append(("call", f"c{n}.{s}", calls))
            if width >= 2 and draw("partial"):
                spec.append(("tool", f"t{n}.{s}.0", calls[0]))
                dangling.extend(calls[1:])
                break  # the run died: nothing else this turn
            if n < n_turns - 1 and draw("dangling"):
                dangling.extend(calls)
                break
            split = width >= 2 and draw("split")
            for j, call in enumerate(calls):
                if split and j == 1:
                    spec.append(("ai", f"x{n}.{s}.between"))
                    defect_ids.add(f"t{n}.{s}.{j}")
                    # the later results answer nothing that is still open: a repair drops them
                    defect_ids.update(f"t{n}.{s}.{k}" for k in range(j, width))
                spec.append(("tool", f"t{n}.{s}.{j}", call))
                answered.append((call, f"t{n}.{s}.{j}"))
            if answered and draw("duplicate"):
                call = answered[-1][0]
                spec.append(("tool", f"x{n}.{s}.dup", call))
                defect_ids.add(f"x{n}.{s}.dup")
        else:
            spec.append(("ai", f"a{n}"))
    return History(spec, frozenset(defects), frozenset(defect_ids), seed)


def histories(count: int, *, seed: int = 0, **kwargs: Any) -> list[History]:
    """``count`` histories from consecutive seeds, until every defect appears at least once."""
    out = [generate(seed + i, **kwargs) for i in range(count)]
    missing = set(DEFECTS) - set().union(*(h.defects for h in out))
    extra = count
    while missing and extra < count + 1000:
        h = generate(seed + extra, **kwargs)
        if h.defects & missing:
            out.append(h)
            missing -= h.defects
        extra += 1
    return out


def calls(history: History) -> Iterator[Spec]:
    """The histories a framework sends at its model calls: the spec up to each user message and
    each result that ends a run of results, then the whole spec."""
    spec = history.spec
    for i, step in enumerate(spec):
        nxt = spec[i + 1][0] if i + 1 < len(spec) else None
        if step[0] == "human" or (step[0] == "tool" and nxt != "tool"):
            if i + 1 < len(spec):
                yield spec[: i + 1]
    yield spec


def text_id(text: Any) -> str | None:
    """The id a generated message's text carries (``message <id> xxx...``, see ``tests.convo``)."""
    match = _TEXT_ID.search(str(text))
    return match.group(1) if match else None


@dataclass
class Ledger:
    """Counts where each message of a history went: kept, or pruned into the summary/archive.

    Give ``hook`` as an ``on_prune`` hook (or call ``pruned_ids``) and ``summarizer`` as the
    summarizer; ``key`` reads a message's id in the framework's type. ``errors(kept)`` lists every
    message of ``history`` not accounted for exactly once (a defect message may also be gone: a
    repair dropped it), and every message that reached ``on_prune`` or the summarizer twice.
    """

    history: History
    key: Callable[[Any], str | None]
    pruned: Counter[str] = field(default_factory=Counter)
    summarized: Counter[str] = field(default_factory=Counter)
    summary_calls: int = 0

    def hook(self, messages: Sequence[Any], namespace: Any = None) -> None:
        self.pruned_ids(self.key(m) for m in messages)

    def pruned_ids(self, ids: Iterable[str | None]) -> None:
        for i in ids:
            if i is not None:
                self.pruned[i] += 1

    def summarizer(self, messages: Sequence[Any]) -> str:
        """A summarizer listing the ids it was given (the running summary's own ids too)."""
        self.summary_calls += 1
        ids = [self.key(m) for m in messages]
        self.summarized.update(i for i in ids if i is not None)
        return "covers " + " ".join(i for i in ids if i is not None)

    async def asummarizer(self, messages: Sequence[Any]) -> str:
        return self.summarizer(messages)

    def errors(self, kept: Iterable[str | None]) -> list[str]:
        kept_ids = Counter(i for i in kept if i is not None)
        out: list[str] = []
        for mid in self.history.ids:
            where = kept_ids[mid] + self.pruned[mid]
            if where > 1 or self.summarized[mid] > 1:
                out.append(
                    f"{mid}: kept {kept_ids[mid]}x, pruned {self.pruned[mid]}x, "
                    f"summarized {self.summarized[mid]}x"
                )
            elif where == 0 and mid not in self.history.defect_ids:
                out.append(f"{mid}: lost (neither kept nor pruned)")
        return out
