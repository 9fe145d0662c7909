"""What ``CosmosDBSaver`` and ``AsyncCosmosDBSaver`` share besides the document mapping: settings,
connection state, the reducer integration and the TTL refresh bookkeeping. No I/O here."""

from __future__ import annotations

import asyncio
import importlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.serde.base import SerializerProtocol

from agentstate_reducer import MessageReducer

from .. import retention as _retention
from .._flow import Flow, adrive, drive
from ..delta import DeltaMemo, DeltaOp, GetTuple, Reduce, reduced_checkpoint_flow
from ..offload.checkpoint import restored_tuple_flow, stored_checkpoint_flow, stored_writes_flow
from ..offload.config import BlobOffload, BlobRunner
from ..offload.ops import DropRefs
from ..reduction import (
    DEFAULT_MEMO,
    AbsentKeyCheck,
    DefaultMemo,
    OnReduce,
    SummaryMemo,
    areduce_for_put,
    reduce_for_put,
    resolve_memo,
)
from ..retention.blobs import bind_offload
from ..retention.follow import drop_refs_flow
from ._mapping import (
    ITEM_OPS,
    Missing,
    Op,
    PutPlan,
    Ttls,
    blob_item_id,
    check_account_key,
    check_name,
    next_version,
    parse_config,
    plan_put,
)

#: Largest ``ttl``: value items live 1.5x as long, and Cosmos DB TTLs are 32-bit signed seconds.
MAX_TTL = (2**31 - 1) * 2 // 3

ENDPOINT_ENV = "COSMOSDB_ENDPOINT"
KEY_ENV = "COSMOSDB_KEY"


class Secret:
    """Holds a credential; its repr never shows it (so neither do reprs or logs of the saver)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "Secret(<hidden>)"


class Connection:
    """A saver's client, database and container, and whether it owns them; shared by its shallow
    copies (``with_allowlist``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.client: Any = None
        self.database: Any = None
        self.container: Any = None
        #: the saver created the client (and credential) and must close them
        self.owns_client = False
        self.owned_credential: Any = None
        #: connected and, with create_if_missing, set up
        self.ready = False
        #: AsyncCosmosDBSaver: its event loop and the lock that guards its first connection
        self.loop: Any = None
        self.alock: Any = None


@dataclass(frozen=True, slots=True)
class Settings:
    database_name: str | None
    container_name: str | None
    endpoint: str | None
    credential: Secret | None
    client_kwargs: Mapping[str, Any]
    create_if_missing: bool
    ttls: Ttls


class WrittenValues:
    """When this process last wrote each channel-value item (with ``ttl``): a value still read by
    new checkpoints is rewritten once its last known write is ``refresh_after`` seconds old, so it
    never expires before them (see ``Ttls``). Unknown items count as old. Bounded, thread-safe."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self._max = max_entries
        self._at: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._lock = threading.Lock()

    def stale(self, pk: str, item_id: str, now: float, after: float) -> bool:
        with self._lock:
            at = self._at.get((pk, item_id))
        return at is None or now - at >= after

    def mark(self, pk: str, item_ids: Iterable[str], at: float) -> None:
        with self._lock:
            for item_id in item_ids:
                self._at[(pk, item_id)] = at
                self._at.move_to_end((pk, item_id))
            while len(self._at) > self._max:
                self._at.popitem(last=False)

    def forget(self, pks: Iterable[str]) -> None:
        drop = set(pks)
        if not drop:
            return
        with self._lock:
            for key in [k for k in self._at if k[0] in drop]:
                del self._at[key]


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


class CosmosSaverBase(_retention.RetentionSettings, BaseCheckpointSaver[str]):
    """Shared constructor and logic; see ``CosmosDBSaver`` for the documentation."""

    def __init__(
        self,
        database_name: str | None = None,
        container_name: str | None = "checkpoints",
        *,
        endpoint: str | None = None,
        credential: Any = None,
        client: Any = None,
        container: Any = None,
        serde: SerializerProtocol | None = None,
        ttl: int | None = None,
        create_if_missing: bool = True,
        reducer: MessageReducer | None = None,
        messages_key: str = "messages",
        on_reduce: OnReduce | None = None,
        summary_memo: SummaryMemo | DefaultMemo | None = DEFAULT_MEMO,
        client_kwargs: Mapping[str, Any] | None = None,
        keep_last: int | None = None,
        retention_every: int = 8,
        branch_grace: timedelta = _retention.BRANCH_GRACE,
        offload: BlobOffload | None = None,
    ) -> None:
        self._require_sdk()
        super().__init__(serde=serde)
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 < ttl <= MAX_TTL):
            raise ValueError(f"ttl must be None or an int number of seconds in 1..{MAX_TTL}, got {ttl!r}")
        if not isinstance(create_if_missing, bool):
            raise TypeError(f"create_if_missing must be a bool, got {type(create_if_missing).__name__}")
        if client is not None and container is not None:
            raise ValueError("pass client= or container=, not both")
        own = client is None and container is None
        if not own and (endpoint is not None or credential is not None or client_kwargs):
            raise ValueError(
                "endpoint=, credential= and client_kwargs= are for a client the saver creates; they cannot "
                "be combined with client= or container="
            )
        if container is None:  # checked here: a '/' would otherwise reach the service as a URL path
            check_name("database_name", database_name)
            check_name("container_name", container_name)
        secret = None
        if own:
            # These two variables are all the saver reads from the environment.
            endpoint = endpoint or _env(ENDPOINT_ENV)
            if not endpoint:
                raise ValueError(
                    f"no Cosmos DB endpoint: pass endpoint='https://<account>.documents.azure.com:443/', set "
                    f"{ENDPOINT_ENV}, or pass client= / container="
                )
            if credential is None:
                credential = _env(KEY_ENV)
                if credential is not None:
                    check_account_key(credential, f"in {KEY_ENV}")
            elif isinstance(credential, str):  # an account key; else a TokenCredential or token dict
                check_account_key(credential, "given as credential=")
            secret = Secret(credential)  # None: DefaultAzureCredential, created on connect
        self._settings = Settings(
            database_name=database_name,
            container_name=container_name,
            endpoint=endpoint,
            credential=secret,
            client_kwargs=dict(client_kwargs or {}),
            create_if_missing=create_if_missing,
            ttls=Ttls(ttl),
        )
        self._connection = Connection()
        if client is not None:
            self._check_sdk_object(client, "client")
            self._connection.client = client
            self._connection.database = client.get_database_client(database_name)
            self._connection.container = self._connection.database.get_container_client(container_name)
        elif container is not None:
            self._check_sdk_object(container, "container")
            self._connection.container = container
        if self._aio:
            try:  # the loop AsyncCosmosDBSaver's sync methods run on; else set by its first async call
                self._connection.loop = asyncio.get_running_loop()
            except RuntimeError:
                pass
        self._written = WrittenValues()
        self.reducer = reducer
        self.messages_key = messages_key
        self.on_reduce = on_reduce
        self.summary_memo = resolve_memo(summary_memo)
        self._absent_key = AbsentKeyCheck()
        self._delta = DeltaMemo()
        self._init_retention(keep_last, retention_every, branch_grace)
        self._offload: BlobOffload | None = None
        self._blobs: BlobRunner | None = None
        self.offload = offload

    # -- subclass hooks ---------------------------------------------------------------------------

    #: True for AsyncCosmosDBSaver (azure.cosmos.aio objects), False for CosmosDBSaver
    _aio = False

    #: the azure.identity module (sync or async, as the saver) whose DefaultAzureCredential signs
    #: in when no key is given
    _identity_module = "azure.identity"

    @classmethod
    def _require_sdk(cls) -> None:
        """Raise a clear ImportError when the SDK the subclass needs is not installed."""

    @classmethod
    def _default_credential(cls) -> Any:
        """A new ``DefaultAzureCredential`` of ``_identity_module`` (the saver owns and closes it)."""
        module = cls._identity_module
        try:
            credential_class = importlib.import_module(module).DefaultAzureCredential
        except ImportError as exc:
            raise ImportError(
                "no Cosmos DB key was given (credential= or COSMOSDB_KEY), so Azure AD sign-in through "
                f"{module}.DefaultAzureCredential is used, but azure-identity is not installed: "
                "pip install azure-identity (or pip install \".[cosmosdb]\" in the checkout), or pass a key"
            ) from exc
        return credential_class()

    @staticmethod
    def _check_conn_info(kwargs: Mapping[str, Any]) -> None:
        """``from_conn_info`` creates the client: it takes no ``client=`` or ``container=``."""
        for bad in ("client", "container"):
            if bad in kwargs:
                raise TypeError(
                    f"from_conn_info creates its own client; pass {bad}= to the constructor instead"
                )

    def _check_sdk_object(self, obj: Any, what: str) -> None:
        is_aio = type(obj).__module__.startswith("azure.cosmos.aio")
        if is_aio != self._aio:
            want = "azure.cosmos.aio" if self._aio else "azure.cosmos (sync)"
            other = "CosmosDBSaver" if self._aio else "AsyncCosmosDBSaver"
            raise TypeError(
                f"{type(self).__name__} needs an {want} {what}, got "
                f"{type(obj).__module__}.{type(obj).__name__}; use {other} for that one"
            )

    # -- reducer settings (the adoption rule of ReducingCheckpointSaver sets these) ------------------

    @property
    def reducer(self) -> MessageReducer | None:
        """The ``MessageReducer`` applied to ``channel_values[messages_key]`` on every put, or None."""
        return self._reducer

    @reducer.setter
    def reducer(self, value: MessageReducer | None) -> None:
        if value is not None and not isinstance(value, MessageReducer):
            raise TypeError(
                f"reducer must be an agentstate_reducer.MessageReducer or None, got {type(value).__name__}"
            )
        self._reducer = value

    @property
    def messages_key(self) -> str:
        return self._messages_key

    @messages_key.setter
    def messages_key(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise TypeError(f"messages_key must be a non-empty str, got {value!r}")
        self._messages_key = value

    @property
    def on_reduce(self) -> OnReduce | None:
        return self._on_reduce

    @on_reduce.setter
    def on_reduce(self, value: OnReduce | None) -> None:
        if value is not None and not callable(value):
            raise TypeError(f"on_reduce must be callable(PutReduction) or None, got {type(value).__name__}")
        self._on_reduce = value

    @property
    def summary_memo(self) -> SummaryMemo | None:
        return self._summary_memo

    @summary_memo.setter
    def summary_memo(self, value: SummaryMemo | None) -> None:
        if value is not None and not isinstance(value, SummaryMemo):
            raise TypeError(f"summary_memo must be a SummaryMemo or None, got {type(value).__name__}")
        self._summary_memo = value

    # -- blob offload (ReducingCheckpointSaver's offload= is handed to this setter: adoption) --------

    @property
    def offload(self) -> BlobOffload | None:
        """The ``BlobOffload`` applied to every stored checkpoint and write, or None."""
        return self._offload

    @offload.setter
    def offload(self, value: BlobOffload | None) -> None:
        if value is not None and not isinstance(value, BlobOffload):
            raise TypeError(
                f"offload must be a checkpointers.BlobOffload or None, got {type(value).__name__}"
            )
        if value is not None and self._settings.ttls.ttl is not None:
            raise ValueError(
                "offload= cannot be combined with ttl=: a checkpoint that expires would leave its blobs "
                "named (Cosmos DB deletes expired items without telling the saver), so they would be kept "
                "forever; use keep_last= (or prune/sweep) to bound the store instead of ttl"
            )
        self._offload = value
        self._blobs = None if value is None else bind_offload(value, self)

    def _blob_safe(self, method: str) -> None:
        """Raise for a method that would copy or delete checkpoints without their blob references."""
        if self._offload is not None:
            raise NotImplementedError(
                f"{type(self).__name__}.{method} is not available with offload=: it would copy or delete "
                "checkpoints without the references that keep their blobs; use delete_thread or prune"
            )

    def _stored_checkpoint_flow(self, config: RunnableConfig, checkpoint: Checkpoint) -> Flow[Any, Any, Any]:
        assert self._blobs is not None
        return stored_checkpoint_flow(self._blobs.offloader, config, checkpoint, self._messages_key)

    def _stored_writes_flow(
        self, config: RunnableConfig, writes: Any, task_id: str
    ) -> Flow[Any, Any, Any]:
        assert self._blobs is not None
        return stored_writes_flow(self._blobs.offloader, config, writes, task_id, self._messages_key)

    @property
    def blob_runner(self) -> BlobRunner | None:
        """The runner of this saver's blob operations (None without ``offload``)."""
        return self._blobs

    def _dropped_thread_flow(self, thread_id: str) -> Flow[Any, Any, Any]:
        """A deleted thread's blob references dropped, then the blobs nothing names collected (for
        blobs in a ``BaseStore``; in the container retention's ``follow_blobs`` does it)."""
        return drop_refs_flow([DropRefs(thread_id)])

    @property
    def _blobs_in_container(self) -> bool:
        """Offload on, with the blobs as items of this container (not in a ``BaseStore``)."""
        return self._offload is not None and self._offload.store is None

    def _restored_flow(self, tup: Any, cache: Any = None) -> Flow[Any, Any, Any]:
        assert self._blobs is not None
        return restored_tuple_flow(tup, self._blobs.where, cache)

    # -- retention ---------------------------------------------------------------------------------

    def _after_put(self, saved: RunnableConfig, metadata: CheckpointMetadata) -> None:
        if self._schedule is not None:
            self._schedule.after_put(_retention.backend_for(self), saved, metadata)

    async def _aafter_put(self, saved: RunnableConfig, metadata: CheckpointMetadata) -> None:
        if self._schedule is not None:
            await self._schedule.aafter_put(_retention.backend_for(self), saved, metadata)

    @property
    def ttl(self) -> int | None:
        """Seconds a checkpoint lives after it is written (None: forever)."""
        return self._settings.ttls.ttl

    def __repr__(self) -> str:
        settings = self._settings
        where = (
            f"database_name={settings.database_name!r}, container_name={settings.container_name!r}"
            if settings.database_name is not None
            else f"container={getattr(self._connection.container, 'id', '?')!r}"
        )
        endpoint = f", endpoint={settings.endpoint!r}" if settings.endpoint else ""
        return (
            f"{type(self).__name__}({where}{endpoint}, ttl={settings.ttls.ttl!r}, reducer={self._reducer!r}, "
            f"messages_key={self._messages_key!r})"
        )

    def _missing(self, op: Op, error: Exception) -> Missing:
        """The SDK answered ``op`` with 404: what the flow driver needs to explain it."""
        conn = self._connection
        return Missing(
            error,
            database=self._settings.database_name if conn.database is not None else None,
            container=str(getattr(conn.container, "id", None) or self._settings.container_name),
            sub_status=getattr(error, "sub_status", None),
            item=isinstance(op, ITEM_OPS),
        )

    def get_next_version(self, current: str | None, channel: None) -> str:
        return next_version(current)

    # -- put: reduce (the one reduction path, as ReducingCheckpointSaver), then plan -----------------

    def _reduce(
        self, config: RunnableConfig, checkpoint: Checkpoint, new_versions: ChannelVersions
    ) -> Checkpoint:
        if self._reducer is None:
            return checkpoint
        self._absent_key.check(type(self).__name__, config, checkpoint, self._messages_key)
        flow = reduced_checkpoint_flow(
            config, checkpoint, new_versions, self._messages_key, self._delta, self._on_reduce
        )
        return drive(flow, self._perform_delta)

    def _perform_delta(self, op: DeltaOp) -> Any:
        if isinstance(op, Reduce):
            assert self._reducer is not None
            return reduce_for_put(
                self._reducer, op.config, op.checkpoint, op.new_versions,
                self._messages_key, self._on_reduce, self._summary_memo,
            )  # fmt: skip
        if isinstance(op, GetTuple):
            return self.get_tuple(op.config)
        return self.get_delta_channel_history(config=op.config, channels=[op.channel])[op.channel]

    async def _aperform_delta(self, op: DeltaOp) -> Any:
        if isinstance(op, Reduce):
            assert self._reducer is not None
            return await areduce_for_put(
                self._reducer, op.config, op.checkpoint, op.new_versions,
                self._messages_key, self._on_reduce, self._summary_memo,
            )  # fmt: skip
        if isinstance(op, GetTuple):
            return await self.aget_tuple(op.config)
        history = await self.aget_delta_channel_history(config=op.config, channels=[op.channel])
        return history[op.channel]

    async def _areduce(
        self, config: RunnableConfig, checkpoint: Checkpoint, new_versions: ChannelVersions
    ) -> Checkpoint:
        if self._reducer is None:
            return checkpoint
        self._absent_key.check(type(self).__name__, config, checkpoint, self._messages_key)
        flow = reduced_checkpoint_flow(
            config, checkpoint, new_versions, self._messages_key, self._delta, self._on_reduce
        )
        return await adrive(flow, self._aperform_delta)

    def _plan_put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[PutPlan, float]:
        """The put's items, and the time to record for the values it writes."""
        started = time.monotonic()
        ttls = self._settings.ttls
        write_versions: dict[str, Any] = dict(new_versions)
        if self._schedule is not None:
            write_versions = _retention.versions_to_store(checkpoint, metadata, new_versions)
        after = ttls.refresh_after
        if after is not None:
            # With a TTL, an unchanged value still read by this checkpoint is rewritten when its
            # last known write is old (see Ttls); else it could expire before this checkpoint.
            address = parse_config(config)
            ns = address.checkpoint_ns or ""
            values = checkpoint["channel_values"]
            for channel, version in checkpoint["channel_versions"].items():
                if channel not in write_versions and channel in values and self._written.stale(
                    address.pk, blob_item_id(ns, channel, version), started, after
                ):
                    write_versions[channel] = version
        return plan_put(config, checkpoint, metadata, write_versions, self.serde, ttls), started

    def _written_by(self, plan: PutPlan, started: float) -> None:
        if self._settings.ttls.ttl is not None:
            self._written.mark(plan.pk, plan.blob_ids, started)

