"""The generated histories hold every defect they name, and the ledger catches a loss and a twice."""

from __future__ import annotations

from tests import convo
from tests.histories import DEFECTS, Ledger, calls, generate, histories, text_id


def test_histories_hold_every_defect_and_unique_ids() -> None:
    hs = histories(30)
    assert set().union(*(h.defects for h in hs)) == set(DEFECTS)
    for h in hs:
        assert len(h.ids) == len(set(h.ids))
        assert h.defect_ids <= set(h.ids)
    assert generate(7) == generate(7)


def test_calls_grow_to_the_whole_history() -> None:
    h = generate(3)
    prefixes = list(calls(h))
    assert prefixes[-1] == h.spec
    assert all(p == h.spec[: len(p)] for p in prefixes)
    assert [len(p) for p in prefixes] == sorted(len(p) for p in prefixes)


def test_ledger_reports_a_lost_and_a_twice_summarized_message() -> None:
    h = generate(1, turns=3, rate=0.0)
    messages = convo.openai_dicts(h.spec)
    ledger = Ledger(h, key=lambda m: m["id"])
    assert ledger.errors(m["id"] for m in messages) == []
    ledger.summarizer(messages[:2])
    ledger.summarizer(messages[1:2])
    ledger.hook(messages[:1])
    errors = ledger.errors(m["id"] for m in messages[1:])
    assert errors == [f"{h.ids[1]}: kept 1x, pruned 0x, summarized 2x"]
    assert text_id(messages[0]["content"]) == h.ids[0]
    assert Ledger(h, key=text_id).errors([]) == [f"{i}: lost (neither kept nor pruned)" for i in h.ids]
