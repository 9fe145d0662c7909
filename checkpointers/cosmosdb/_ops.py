"""What a Cosmos DB flow asks its saver's I/O half to do (``Op``), and what a 404 means.

When the I/O half answers an op with ``Missing`` (Cosmos DB said 404), ``explaining_missing`` has
the flow ask with ``Exists`` ops whether the container or database is gone and raise
``ContainerNotFoundError`` naming it (``explain_missing_flow``), so neither half decides that on its
own.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar, overload

from langgraph.checkpoint.base import CheckpointTuple

from .._flow import Emit, recovering
from ._items import PARTITION_KEY_PATH

# -- ops -------------------------------------------------------------------------------------------


class Op:
    """What a flow asks its saver's I/O half to do: ``Read``, ``Query``, ``Pages``, ``NextPage``,
    ``Batch``, ``Exists``, or one of the single-item writes ``Create``, ``ReplaceIf`` and
    ``DeleteIf``; each says what its result is."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Read(Op):
    """Point read of one item; result: the item, or None when it does not exist."""

    pk: str
    id: str


@dataclass(frozen=True, slots=True)
class Query(Op):
    """A parameterized query; result: all rows. ``pk`` None: cross-partition."""

    sql: str
    params: tuple[tuple[str, Any], ...]
    pk: str | None

    @property
    def parameters(self) -> list[dict[str, Any]]:
        return [{"name": n, "value": v} for n, v in self.params]


@dataclass(frozen=True, slots=True)
class Pages(Op):
    """Start a paged query; result: a pager handle for ``NextPage``."""

    query: Query
    page_size: int


@dataclass(frozen=True, slots=True)
class NextPage(Op):
    """Next page of a ``Pages`` query; result: its rows, or None when there are no more."""

    pager: Any


@dataclass(frozen=True, slots=True)
class Batch(Op):
    """One transactional batch (<= 100 operations, <= 2 MB) in one partition; result: None.

    ``missing_ok``: the operations are deletes/patches of items that may already be gone (TTL,
    a concurrent delete); the driver then retries them one by one, ignoring 404."""

    pk: str
    operations: tuple[tuple[str, tuple[Any, ...]], ...]
    missing_ok: bool = False


@dataclass(frozen=True, slots=True)
class Exists(Op):
    """Does the saver's container (or, ``database=True``, its database) exist? Result: True, False,
    or None when that cannot be told (no database handle, or the service refused to say)."""

    database: bool = False


@dataclass(frozen=True, slots=True)
class Create(Op):
    """Create one item; result: True, or False when an item with its id exists (409)."""

    pk: str
    item: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReplaceIf(Op):
    """Replace one item only if its ``_etag`` is still ``etag`` (If-Match); result: True, False
    when it changed since (412), or None when it does not exist."""

    pk: str
    item: dict[str, Any]
    etag: str


@dataclass(frozen=True, slots=True)
class DeleteIf(Op):
    """Delete one item only if its ``_etag`` is still ``etag`` (If-Match); result: True, False
    when it changed since (412), or None when it does not exist."""

    pk: str
    id: str
    etag: str


#: Ops whose 404 means "no such item" (their result is then None), as for a point read.
ITEM_OPS = (Read, ReplaceIf, DeleteIf)

R = TypeVar("R")
#: A flow of Cosmos DB ops returning ``R``; each op's result is as its class says.
CosmosFlow: TypeAlias = Generator[Op, Any, R]
#: A listing: a flow that also emits the checkpoints it lists, newest first.
ListingFlow: TypeAlias = Generator[Op | Emit[CheckpointTuple], Any, None]


# -- a missing container or database ---------------------------------------------------------------


class ContainerNotFoundError(LookupError):
    """The saver's Cosmos DB container (or its database) does not exist: deleted under a running
    saver, or never created (``create_if_missing=False``). ``setup()`` creates them. The SDK's
    404 error is the ``__cause__``."""

    def __init__(self, message: str, database: str | None, container: str) -> None:
        super().__init__(message)
        #: the database name, or None for a saver given only ``container=``
        self.database = database
        self.container = container


class Missing(Exception):
    """What an I/O half's ``execute`` raises when Cosmos DB answered an op with 404; the driver
    then finds out what is missing (``explaining_missing``). Never escapes a saver."""

    def __init__(
        self, error: BaseException, *, database: str | None, container: str, sub_status: Any = None,
        item: bool = False,
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.database = database
        self.container = container
        #: the 404's sub-status: 0 on Cosmos DB means "no such item", 1003 "no such container"
        self.sub_status = sub_status
        #: the op was a point read, which may miss an item of an existing container
        self.item = item


def explain_missing_flow(miss: Missing) -> CosmosFlow[None]:
    """After a 404: return (the op's result is None) when it was a point read of a missing item
    in an existing container; raise ``ContainerNotFoundError`` when the container or database is
    gone; else re-raise the SDK's error. One round trip (container properties) unless Cosmos DB
    already said "no such item" (sub-status 0), two when the container is gone."""
    if miss.item and miss.sub_status == 0:
        return None
    container_exists = yield Exists()
    if container_exists is not False:  # there, or cannot be checked: a point read missed its item
        if miss.item:
            return None
        raise miss.error  # some other 404: not ours to explain
    database_exists = None if miss.database is None else (yield Exists(database=True))
    raise _missing_error(miss.database, miss.container, database_exists) from miss.error


def _missing_error(
    database: str | None, container: str, database_exists: bool | None
) -> ContainerNotFoundError:
    if database is None:
        text = (
            f"Cosmos DB container {container!r} does not exist (deleted, or never created): create it with "
            f"partition key {PARTITION_KEY_PATH!r}, or pass client= and database_name= so setup() can"
        )
    elif database_exists is False:
        text = (
            f"Cosmos DB database {database!r} does not exist (deleted, or never created), so neither does "
            f"its container {container!r}: run the saver's setup() to create them"
        )
    else:
        text = (
            f"Cosmos DB container {container!r} does not exist in database {database!r} (deleted, or "
            "never created): run the saver's setup() to create it"
        )
    return ContainerNotFoundError(text, database, container)


@overload
def explaining_missing(flow: ListingFlow) -> ListingFlow: ...


@overload
def explaining_missing(flow: CosmosFlow[R]) -> CosmosFlow[R]: ...


def explaining_missing(flow: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
    """``flow`` with each ``Missing`` explained by ``explain_missing_flow``: the op's result is
    None (an item's miss) or the flow gets ``ContainerNotFoundError`` (or the SDK's error) there."""
    return recovering(flow, Missing, explain_missing_flow)
