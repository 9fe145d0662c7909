"""The queries of the Cosmos DB checkpointer, always parameterized: metadata filters, listings,
and the values and writes of checkpoints in as few queries as the request size allows."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import get_checkpoint_id

from ._ids import CheckpointAddress
from ._items import json_exact
from ._ops import Query

#: Characters of ids passed as one query's array parameters; bigger sets are split across queries
#: (Cosmos DB limits a query request's size).
MAX_QUERY_PARAM_CHARS = 100_000
#: Page size of paged checkpoint listings.
PAGE_SIZE = 100


_FILTER_KEY_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def metadata_conditions(filter: Mapping[str, Any] | None) -> tuple[list[str], list[tuple[str, Any]]]:
    """WHERE conditions and parameters for a metadata filter.

    Keys come from users: each must be identifier-like (``[A-Za-z_][A-Za-z0-9_]*``), dots separate
    nested keys (``{"parents.child": "x"}``), and a dict value matches by containment like the
    Postgres saver's ``@>`` (``{"a": {"b": 1}}`` is ``a.b == 1``). A validated key is written as a
    quoted property name (``c["metadata"]["step"]``: brackets also allow names that are Cosmos SQL
    keywords, such as ``value``); values are always parameters.
    """
    conds: list[str] = []
    params: list[tuple[str, Any]] = []
    if not filter:
        return conds, params
    if not isinstance(filter, Mapping):
        raise TypeError(f"filter must be a dict of metadata keys to values, got {type(filter).__name__}")

    def add(path: list[str], value: Any) -> None:
        expr = 'c["metadata"]' + "".join(f'["{p}"]' for p in path)
        if type(value) is dict and value:
            for k, v in value.items():
                add([*path, *_split_key(k)], v)
            return
        if type(value) is dict:  # {} matches any object, as containment does
            conds.append(f"IS_OBJECT({expr})")
            return
        if not json_exact(value):
            raise TypeError(
                f"metadata filter value for {'.'.join(path)!r} must be JSON (str, int, float, bool, None, "
                f"list, dict), got {type(value).__name__}"
            )
        name = f"@f{len(params)}"
        params.append((name, value))
        conds.append(f"{expr} = {name}")

    for key, value in filter.items():
        add(_split_key(key), value)
    return conds, params


def _split_key(key: Any) -> list[str]:
    if not isinstance(key, str):
        raise ValueError(f"metadata filter keys must be strings, got {type(key).__name__}: {key!r}")
    parts = key.split(".")
    if not all(_FILTER_KEY_PART.match(p) for p in parts):
        raise ValueError(
            f"invalid metadata filter key {key!r}: use letters, digits and '_' (not starting with a "
            "digit), with '.' between nested keys, e.g. 'source' or 'parents.child'"
        )
    return parts


# -- reads -----------------------------------------------------------------------------------------

#: The condition that selects checkpoint items.
IS_CHECKPOINT = "c.kind = 'checkpoint'"


def latest_query(address: CheckpointAddress) -> Query:
    return Query(
        f"SELECT TOP 1 * FROM c WHERE {IS_CHECKPOINT} AND c.thread_id = @thread AND c.checkpoint_ns = @ns "
        "ORDER BY c.checkpoint_id DESC",
        (("@thread", address.thread_id), ("@ns", address.checkpoint_ns or "")),
        address.pk,
    )


def list_query(
    address: CheckpointAddress | None,
    filter: Mapping[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> Query:
    conds = [IS_CHECKPOINT]
    params: list[tuple[str, Any]] = []
    if address is not None:
        conds.append("c.thread_id = @thread")
        params.append(("@thread", address.thread_id))
        if address.checkpoint_ns is not None:
            conds.append("c.checkpoint_ns = @ns")
            params.append(("@ns", address.checkpoint_ns))
        if address.checkpoint_id is not None:
            conds.append("c.checkpoint_id = @cid")
            params.append(("@cid", address.checkpoint_id))
    md_conds, md_params = metadata_conditions(filter)
    conds += md_conds
    params += md_params
    if before is not None and (before_id := get_checkpoint_id(before)) is not None:
        conds.append("c.checkpoint_id < @before")
        params.append(("@before", before_id))
    top = ""
    if limit is not None:
        top = "TOP @limit "
        params.append(("@limit", limit))
    sql = f"SELECT {top}* FROM c WHERE {' AND '.join(conds)} ORDER BY c.checkpoint_id DESC"
    return Query(sql, tuple(params), None if address is None else address.pk)


def split_by_size(values: Sequence[str], budget: int = MAX_QUERY_PARAM_CHARS) -> list[list[str]]:
    """``values`` in order, in parts of about ``budget`` characters each (one query parameter)."""
    out: list[list[str]] = []
    current: list[str] = []
    size = 0
    for v in values:
        if current and size + len(v) > budget:
            out.append(current)
            current, size = [], 0
        current.append(v)
        size += len(v) + 4
    if current:
        out.append(current)
    return out


def values_queries(docs: Sequence[Mapping[str, Any]]) -> list[Query]:
    """Queries for the channel values and pending writes of ``docs`` (checkpoint items): one in the
    usual case, whatever the number of checkpoints (never a query per checkpoint); more only when
    the ids would make one query too large."""
    units: list[tuple[str, str, list[str]]] = []  # (pk, field, ids): "ref" for values, "cp" for writes
    by_pk: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
    for doc in docs:
        blobs, cps = by_pk.setdefault(doc["pk"], ({}, {}))
        blobs.update(dict.fromkeys(doc.get("blobs") or ()))
        cps[doc["id"]] = None
    for pk, (blobs, cps) in by_pk.items():
        units += [(pk, "ref", part) for part in split_by_size(list(blobs))]
        units += [(pk, "cp", part) for part in split_by_size(list(cps))]
    queries: list[Query] = []
    clauses: list[str] = []
    params: list[tuple[str, Any]] = []
    pks: set[str] = set()
    size = 0
    for pk, column, ids in units:
        n = sum(len(i) + 4 for i in ids)
        if clauses and size + n > MAX_QUERY_PARAM_CHARS:
            queries.append(_or_query(clauses, params, pks))
            clauses, params, pks, size = [], [], set(), 0
        i = len(clauses)
        params += [(f"@p{i}", pk), (f"@v{i}", ids)]
        clauses.append(f"(c.pk = @p{i} AND ARRAY_CONTAINS(@v{i}, c.{column}))")
        pks.add(pk)
        size += n
    if clauses:
        queries.append(_or_query(clauses, params, pks))
    return queries


def _or_query(clauses: list[str], params: list[tuple[str, Any]], pks: set[str]) -> Query:
    # one partition: a partition-scoped query; several (list across threads): cross-partition
    pk = next(iter(pks)) if len(pks) == 1 else None
    return Query(f"SELECT * FROM c WHERE {' OR '.join(clauses)}", tuple(params), pk)


def ids_where_in(pk: str, column: str, values: Sequence[str]) -> Iterator[Query]:
    """Queries for the ids of the items in partition ``pk`` whose ``column`` is one of ``values``."""
    for part in split_by_size(values):
        yield Query(f"SELECT c.id FROM c WHERE ARRAY_CONTAINS(@v, c.{column})", (("@v", part),), pk)
