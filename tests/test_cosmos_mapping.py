"""The pure half of the Cosmos DB checkpointer (``checkpointers.cosmosdb._mapping``): ids, metadata
filters, batching, chunking and the prune/delete plans. No server needed."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from checkpointers._flow import adrive, drive
from checkpointers.cosmosdb import _mapping as m
from checkpointers.cosmosdb import sync as sync_module

LEGAL_ID = re.compile(r"[A-Za-z0-9_.\-~!]+\Z")


# -- ids ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("thread-1", "thread-1"),
        ("", ""),
        ("a/b", "a~2Fb"),
        ("a\\b?c#d$e f", "a~5Cb~3Fc~23d~24e~20f"),
        ("~", "~7E"),
        ("a~2Fb", "a~7E2Fb"),  # the escape character is escaped too: "a/b" and "a~2Fb" stay distinct
        ("ü", "~C3~BC"),
        ("!", "~21"),  # the segment separator never occurs inside a segment
    ],
)
def test_encode_part_escapes(value: str, expected: str) -> None:
    assert m.encode_part(value) == expected


def test_long_values_are_hashed_and_short() -> None:
    long_ascii, long_unicode = "t" * 1000, "🚀" * 1000
    a, b = m.encode_part(long_ascii), m.encode_part(long_unicode)
    assert a.startswith("~h") and b.startswith("~h") and a != b
    assert len(a) == len(b) == 66
    # a checkpoint id, channel, task id and namespace of 1,000 characters each still make a legal id
    wid = m.write_item_id(long_unicode, long_ascii, "x" * 999, -3) + "!12"
    assert LEGAL_ID.match(wid) and len(wid.encode()) <= 1023


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60), st.text(max_size=60))
def test_encode_part_is_injective_and_legal(a: str, b: str) -> None:
    ea, eb = m.encode_part(a), m.encode_part(b)
    assert (ea == eb) == (a == b)
    assert ea == "" or re.fullmatch(r"[A-Za-z0-9_.\-~]+", ea)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(*[st.lists(st.text(max_size=20), min_size=3, max_size=3)] * 2)
def test_item_ids_are_injective(x: list[str], y: list[str]) -> None:
    # (namespace, channel, version) triples that differ give different blob ids: segments are
    # joined with "!", which no encoded segment contains
    assert (m.blob_item_id(*x) == m.blob_item_id(*y)) == (x == y)


def test_versions_keep_their_type() -> None:
    assert m.blob_item_id("", "c", 1) != m.blob_item_id("", "c", "1")
    assert m.blob_item_id("", "c", 1).endswith("!~i1")
    with pytest.raises(TypeError, match="channel versions must be str, int or float"):
        m.blob_item_id("", "c", None)


def test_next_version_is_a_string_like_postgres() -> None:
    v1 = m.next_version(None)
    v2 = m.next_version(v1)
    assert v1.startswith("0" * 31 + "1.") and v2.startswith("0" * 31 + "2.")
    assert m.next_version(7).startswith("0" * 31 + "8.")
    assert v1 < v2
    assert m.next_version(None) != m.next_version(None)  # forks get distinct versions


# -- metadata filters --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        'x") OR 1=1 --',
        "x' OR '1'='1",
        'a"] OR true --',
        "a b",
        "1abc",
        "a.",
        ".a",
        "",
        "a..b",
        "a-b",
        "ä",
        "a;DROP",
        "a[0]",
    ],
)
def test_filter_keys_are_validated(key: str) -> None:
    with pytest.raises(ValueError, match="invalid metadata filter key"):
        m.metadata_conditions({key: 1})
    with pytest.raises(ValueError, match="invalid metadata filter key"):
        m.metadata_conditions({"parents": {key: 1}})


def test_filter_non_string_key_and_non_json_value() -> None:
    with pytest.raises(ValueError, match="must be strings"):
        m.metadata_conditions({1: 1})  # type: ignore[dict-item]  # a wrong key type on purpose
    with pytest.raises(TypeError, match="must be JSON"):
        m.metadata_conditions({"a": object()})
    with pytest.raises(TypeError, match="filter must be a dict"):
        m.metadata_conditions([("a", 1)])  # type: ignore[arg-type]


def test_filter_conditions_are_parameterized() -> None:
    flt = {"source": "loop", "value": 3, "nested.inner": None, "d": {"x": {"y": 1}}}
    conds, params = m.metadata_conditions(flt)
    assert conds == [
        'c["metadata"]["source"] = @f0',
        'c["metadata"]["value"] = @f1',
        'c["metadata"]["nested"]["inner"] = @f2',
        'c["metadata"]["d"]["x"]["y"] = @f3',
    ]
    assert params == [("@f0", "loop"), ("@f1", 3), ("@f2", None), ("@f3", 1)]
    assert m.metadata_conditions({"d": {}}) == (['IS_OBJECT(c["metadata"]["d"])'], [])


def test_metadata_fields_keep_exact_values() -> None:
    serde = JsonPlusSerializer()
    cfg: Any = {"configurable": {"thread_id": "t", "user": "u1", "__secret_internal": "x"}}
    md: Any = {"source": "loop", "step": 1, "writes": {"n": 1}}
    plain = m.metadata_fields(cfg, md, serde)
    assert plain == {"metadata": {"source": "loop", "step": 1, "user": "u1"}}
    at = datetime(2024, 5, 1, tzinfo=timezone.utc)
    md = {"step": 2**60, "at": at}
    odd = m.metadata_fields(cfg, md, serde)
    assert odd["metadata"] == {"user": "u1"}  # what JSON (doubles) cannot hold exactly is left out...
    type_, data = odd["metadata_typed"]
    restored = serde.loads_typed((type_, base64.b64decode(data)))
    assert restored == {"step": 2**60, "at": at, "user": "u1"}  # ...and kept exactly here


# -- values, items, batches --------------------------------------------------------------------------


def test_value_items_chunk_and_reassemble() -> None:
    data = bytes(range(256)) * ((m.CHUNK_BYTES * 2 + 1000) // 256)
    items = m.value_items("b!!ch!v", {"pk": "p", "kind": "blob"}, {"channel": "ch"}, ("bytes", data))
    # the head last: a write stopped part-way leaves chunks without a head, never the reverse
    assert [i["id"] for i in items] == ["b!!ch!v!1", "b!!ch!v!2", "b!!ch!v"]
    assert [i["part"] for i in items] == [1, 2, 0] and items[-1]["parts"] == 3
    assert {i["ref"] for i in items} == {"b!!ch!v"}
    assert max(m.item_bytes(i) for i in items) < m.MAX_ITEM_BYTES
    assert max(len(json.dumps(i)) for i in items) < m.MAX_ITEM_BYTES
    # rows come back in any order, from any partition
    out = m.assemble(list(reversed(items)))
    assert list(out) == [("p", "b!!ch!v")] and out[("p", "b!!ch!v")].typed == ("bytes", data)
    with pytest.raises(ValueError, match=r"missing chunk\(s\) \[1\] of 3"):
        m.assemble([items[1], items[2]])
    assert m.assemble(items[:-1]) == {}  # chunks without a head (a put that failed midway) are ignored


def test_plan_batches_respects_cosmos_limits() -> None:
    small = [("upsert", ({"id": f"i{n}", "data": "x" * 10},)) for n in range(250)]
    assert [len(b) for b in m.plan_batches(small)] == [100, 100, 50]
    big = [("upsert", ({"id": f"b{n}", "data": "x" * 1_000_000},)) for n in range(3)]
    batches = m.plan_batches([*big, small[0]])
    assert [len(b) for b in batches] == [1, 1, 2]
    assert all(sum(m.item_bytes(op[1][0]) for op in b) <= m.MAX_BATCH_BYTES for b in batches)
    assert [op for b in batches for op in b] == [*big, small[0]]  # order kept: checkpoint item last


def test_values_queries_one_query_for_many_checkpoints() -> None:
    docs = [{"pk": "p", "id": f"c!!{i}", "blobs": ["b!!x!1", f"b!!y!{i}"]} for i in range(10)]
    queries = m.values_queries(docs)
    assert len(queries) == 1 and queries[0].pk == "p"
    assert queries[0].sql == (
        "SELECT * FROM c WHERE (c.pk = @p0 AND ARRAY_CONTAINS(@v0, c.ref)) OR "
        "(c.pk = @p1 AND ARRAY_CONTAINS(@v1, c.cp))"
    )
    params = dict(queries[0].params)
    assert params["@v0"] == ["b!!x!1", *[f"b!!y!{i}" for i in range(10)]]  # shared values once
    two = [{"pk": "p1", "id": "c!!1", "blobs": []}, {"pk": "p2", "id": "c!!2", "blobs": []}]
    across = m.values_queries(two)
    assert len(across) == 1 and across[0].pk is None  # list across threads: one cross-partition query
    huge = [{"pk": "p", "id": f"c!!{'x' * 100}{i}", "blobs": []} for i in range(3000)]
    assert len(m.values_queries(huge)) > 1  # only when the ids would make one query too large


# -- prune and delete plans --------------------------------------------------------------------------


def _row(ns: str, cid: str, parent: str | None, blobs: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "id": f"c!{ns}!{cid}",
        "checkpoint_ns": ns,
        "checkpoint_id": cid,
        "parent_checkpoint_id": parent,
        "blobs": blobs,
        **extra,
    }


def test_plan_removal_relinks_to_the_nearest_kept_ancestor() -> None:
    rows = [_row("", str(i), str(i - 1) if i else None, [f"v{i}", "shared"]) for i in range(5)]
    plan = m.plan_removal(rows, {"c!!1", "c!!2"})
    assert plan.checkpoints == ["c!!1", "c!!2"]
    assert plan.relink == [("c!!3", "0")]
    assert plan.garbage == ["v1", "v2"]  # "shared" is still read by kept checkpoints


def test_delete_for_runs_flow_validates_arguments() -> None:
    with pytest.raises(TypeError, match="not one string"):
        next(m.delete_for_runs_flow("r"))


def test_docstring_examples() -> None:
    import doctest

    import checkpointers.cosmosdb
    from checkpointers.cosmosdb import _flows, _ids, _items, _ops, _queries

    for module in (m, _ids, _items, _queries, _ops, _flows, checkpointers.cosmosdb, sync_module):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__
    assert doctest.testmod(_ids).attempted == 6  # encode_part, check_name, check_account_key


# -- names, keys and a missing container ------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["checkpoints", "x" * 255, "ünï cødé ☃", " leading", "a.b-c_d!$%&'()*+,;=@[]", "~"]
)
def test_check_name_accepts_what_cosmos_db_accepts(name: str) -> None:
    m.check_name("container_name", name)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("a/b", "contains '/'"),
        ("a\\b", "contains '\\\\'"),
        ("a?b", "contains '?'"),
        ("a#b", "contains '#'"),
        ("x ", "ends with a space"),
        (" \t ", "is blank"),
        ("y" * 256, "is 256 characters long; the limit is 255"),
    ],
)
def test_check_name_says_what_is_wrong(name: str, why: str) -> None:
    with pytest.raises(ValueError) as info:
        m.check_name("database_name", name)
    assert str(info.value).startswith(f"database_name {name!r} is not a valid Cosmos DB name: it {why} (")


@pytest.mark.parametrize("name", [None, "", 3, b"db"])
def test_check_name_wants_a_non_empty_str(name: Any) -> None:
    with pytest.raises(ValueError, match=r"container_name must be a non-empty str \(or pass container=\)"):
        m.check_name("container_name", name)


@given(st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_check_name_raises_only_value_error_and_only_for_bad_names(name: str) -> None:
    bad = (
        not name.strip() or name.endswith(" ") or len(name) > 255 or any(c in name for c in "/\\?#")
    )
    try:
        m.check_name("database_name", name)
    except ValueError:
        assert bad
    else:
        assert not bad


@pytest.mark.slow
@given(st.binary(min_size=1, max_size=96), st.sampled_from(["", " ", "\n", "\t "]))
@settings(max_examples=200, deadline=None)
def test_check_account_key_accepts_every_base64_key(raw: bytes, pad: str) -> None:
    m.check_account_key(pad + base64.b64encode(raw).decode() + pad, "given as credential=")


@pytest.mark.slow
@given(
    st.binary(min_size=12, max_size=96),
    st.sampled_from(["drop-padding", "urlsafe", "foreign", "inner-space", "truncate"]),
)
@settings(max_examples=300, deadline=None)
def test_check_account_key_refuses_what_the_sdk_cannot_sign_with_and_never_shows_it(
    raw: bytes, damage: str
) -> None:
    key = base64.b64encode(raw).decode()
    if damage == "drop-padding":
        key = key.rstrip("=") + ("" if key.endswith("=") else "A")
    elif damage == "urlsafe":
        key = base64.urlsafe_b64encode(raw).decode().replace("A", "-", 1) + "-_"
    elif damage == "foreign":
        key = key[:8] + "~" + key[8:]
    elif damage == "inner-space":
        key = key[:8] + " " + key[8:]
    else:
        key = key[:-1] if len(key.rstrip("=")) % 4 != 1 else key[:-2]
    with pytest.raises(ValueError, match="the Cosmos DB key in COSMOSDB_KEY is not a valid base64") as info:
        m.check_account_key(key, "in COSMOSDB_KEY")
    assert key not in str(info.value) and key.strip("=")[:12] not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__ is False


def _explain(miss: m.Missing, answers: dict[bool, bool | None]) -> tuple[Any, list[Any]]:
    """Drive ``explain_missing_flow`` with fixed answers to its ``Exists`` ops; return (result, ops)."""
    asked: list[Any] = []

    def execute(op: m.Op) -> Any:
        assert isinstance(op, m.Exists)
        asked.append(op)
        return answers[op.database]

    return drive(m.explain_missing_flow(miss), execute), asked


def test_explain_missing_tells_an_item_miss_from_a_missing_container() -> None:
    error = LookupError("404")

    def miss(item: bool, sub_status: Any = None, database: str | None = "db") -> m.Missing:
        return m.Missing(error, database=database, container="c", sub_status=sub_status, item=item)

    # Cosmos DB said "no such item" (sub-status 0): no round trip
    assert _explain(miss(True, 0), {}) == (None, [])
    # the local protocol server gives no sub-status: one look at the container
    assert _explain(miss(True), {False: True}) == (None, [m.Exists()])
    assert _explain(miss(True), {False: None}) == (None, [m.Exists()])  # cannot tell: an item miss
    with pytest.raises(LookupError) as info:  # a query's 404 in an existing container: the SDK's error
        _explain(miss(False), {False: True})
    assert info.value is error
    with pytest.raises(m.ContainerNotFoundError, match="container 'c' does not exist in database 'db'"):
        _explain(miss(True, 1003), {False: False, True: True})
    with pytest.raises(m.ContainerNotFoundError, match="database 'db' does not exist") as gone:
        _explain(miss(False), {False: False, True: False})
    assert gone.value.__cause__ is error and (gone.value.database, gone.value.container) == ("db", "c")
    with pytest.raises(m.ContainerNotFoundError, match="pass client= and database_name= so setup"):
        _explain(miss(False, database=None), {False: False})



class _SdkNotFound(LookupError):
    """Stands for the SDK's 404 error."""


def _missing_execute(gone: bool, log: list[Any]) -> Any:
    """An I/O half whose container exists (``gone=False``) or not; ``Read`` of "absent" and every
    ``Query`` answer 404 (``Missing``), the way ``CosmosDBSaver._execute`` does."""

    def execute(op: m.Op) -> Any:
        log.append(op)
        if isinstance(op, m.Exists):
            return not gone
        if isinstance(op, m.Read) and op.id != "absent" and not gone:
            return {"id": op.id}
        raise m.Missing(_SdkNotFound("404"), database=None, container="c", item=isinstance(op, m.Read))

    return execute


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_explaining_missing_answers_an_item_miss_and_names_a_gone_container(mode: str) -> None:
    def run(flow: m.CosmosFlow[Any], execute: Any) -> Any:
        if mode == "sync":
            return drive(m.explaining_missing(flow), execute)

        async def aexecute(op: m.Op) -> Any:
            return execute(op)

        return asyncio.run(adrive(m.explaining_missing(flow), aexecute))

    def reads() -> m.CosmosFlow[list[Any]]:
        return [(yield m.Read("pk", "present")), (yield m.Read("pk", "absent")), (yield m.Read("pk", "x"))]

    log: list[Any] = []
    assert run(reads(), _missing_execute(False, log)) == [{"id": "present"}, None, {"id": "x"}]
    assert log == [m.Read("pk", "present"), m.Read("pk", "absent"), m.Exists(), m.Read("pk", "x")]

    seen: list[BaseException] = []

    def query() -> m.CosmosFlow[None]:
        try:
            yield m.Query("SELECT * FROM c", (), "pk")
        except m.ContainerNotFoundError as exc:
            seen.append(exc)  # the flow is told at the op that failed
            raise

    with pytest.raises(m.ContainerNotFoundError, match="container 'c' does not exist") as info:
        run(query(), _missing_execute(True, []))
    assert seen == [info.value] and isinstance(info.value.__cause__, _SdkNotFound)

    log = []
    with pytest.raises(_SdkNotFound) as sdk:  # a query's 404 in a container that exists: the SDK's error
        run(query(), _missing_execute(False, log))
    assert sdk.value.__context__ is None and log[-1] == m.Exists()
