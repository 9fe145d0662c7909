"""Pytest fixtures that provide a real Cosmos DB endpoint for the test suite.

How the endpoint is found, in order:

1. ``COSMOSDB_ENDPOINT`` is set: use that account or emulator with ``COSMOSDB_KEY`` (default: the
   well-known emulator key). Nothing is started.
2. Otherwise start the local Cosmos DB wire-protocol server ``tests/cosmos_server/launcher.js``
   (``@vercel/cosmosdb-server`` plus our fixes, see the comment at its top) with Node on
   127.0.0.1 and a free port, over HTTPS. It is stopped by its PID at session end. If its
   ``node_modules`` is missing, ``npm ci`` is run once first.

Both give an ordinary client: ``CosmosClient(server.endpoint, server.key, **server.client_kwargs)``
(``client_kwargs`` is empty for both; the SDK itself skips certificate checks for 127.0.0.1).

If no endpoint can be had, tests skip with the reason, except under ``CI=true`` where they fail:
a CI run that silently skips the Cosmos DB tests would look green without testing anything.

``tests/conftest.py`` registers the fixtures: ``pytest_plugins = ["tests.cosmos_service", ...]``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

__all__ = ["EMULATOR_KEY", "CosmosServer"]

# The well-known key of the Cosmos DB emulator (public, not a secret); the local server accepts any key.
EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

_SERVER_DIR = Path(__file__).resolve().parent / "cosmos_server"
_LAUNCHER = _SERVER_DIR / "launcher.js"
_START_TIMEOUT_S = 30
_NPM_TIMEOUT_S = 600
_LISTENING = re.compile(r"^LISTENING (\d+)$", re.MULTILINE)

def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _unavailable(reason: str) -> NoReturn:
    """Skip locally, but fail under CI so a missing Cosmos DB can never pass unnoticed."""
    if _in_ci():
        pytest.fail(f"Cosmos DB is required under CI=true but unavailable: {reason}", pytrace=False)
    pytest.skip(f"Cosmos DB unavailable: {reason}")


@dataclass
class CosmosServer:
    """Handle on a Cosmos DB endpoint: build clients with ``endpoint``, ``key`` and ``client_kwargs``."""

    endpoint: str
    key: str
    client_kwargs: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None  # the local server's process id; None for an external endpoint
    log_path: Path | None = None  # the local server's stdout+stderr

    @property
    def is_local(self) -> bool:
        return self.pid is not None

    def client(self, **kwargs: Any) -> Any:
        """A new sync ``azure.cosmos.CosmosClient`` for this endpoint (close it, or use ``with``).

        Prefer this to building one in tests: it waits for the client's start-up health check (see
        ``_settle``), so that closing the client soon after cannot make a background thread fail.
        """
        from azure.cosmos import CosmosClient

        client = CosmosClient(self.endpoint, self.key, **{**self.client_kwargs, **kwargs})
        _settle(client)
        return client

    def async_client(self, **kwargs: Any) -> Any:
        """A new ``azure.cosmos.aio.CosmosClient`` (use ``async with``)."""
        from azure.cosmos.aio import CosmosClient

        return CosmosClient(self.endpoint, self.key, **{**self.client_kwargs, **kwargs})


def _settle(client: Any) -> None:
    """Wait for the endpoint health check that a new sync CosmosClient runs in a background thread.

    If the client is closed first, that thread fails ("HTTP transport has already been closed") and
    logs a traceback; formatting it calls ``ast.parse``, which on CPython 3.11.7 races with pytest's
    own ``ast.parse`` in the main thread (CPython gh-106905) and rarely crashes the session with
    "SystemError: AST constructor recursion depth mismatch". The attribute names are internal to
    azure-cosmos 4.x; if they change, this is a no-op.
    """
    manager = getattr(getattr(client, "client_connection", None), "_global_endpoint_manager", None)
    thread = getattr(manager, "_refresh_thread", None)
    if thread is not None:
        thread.join(timeout=30)


def _log_tail(log_path: Path, limit: int = 2000) -> str:
    try:
        return log_path.read_text(errors="replace")[-limit:].strip()
    except OSError:
        return ""


def _ensure_node_modules() -> None:
    """Install the pinned server package from package-lock.json if it is not there yet."""
    if (_SERVER_DIR / "node_modules" / "@vercel" / "cosmosdb-server" / "package.json").is_file():
        return
    npm = shutil.which("npm")
    if npm is None:
        _unavailable(f"`npm` not found on PATH, needed once to install {_SERVER_DIR / 'node_modules'}")
    cmd = [npm, "ci", "--prefix", str(_SERVER_DIR), "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=_NPM_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        _unavailable(f"`{' '.join(cmd)}` took longer than {_NPM_TIMEOUT_S} s")
    if done.returncode != 0:
        _unavailable(f"`{' '.join(cmd)}` failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")


def _start_local_server(log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    node = shutil.which("node")
    if node is None:
        _unavailable("`node` not found on PATH (Node >= 20 runs tests/cosmos_server/launcher.js)")
    _ensure_node_modules()
    log = log_path.open("wb")
    try:
        # stdin stays open as a pipe: the launcher exits when it closes, should this process die hard.
        proc = subprocess.Popen(
            [node, str(_LAUNCHER), "--port", "0", "--exit-on-stdin-close"],
            cwd=_SERVER_DIR,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    finally:
        log.close()  # the child holds its own descriptor
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        match = _LISTENING.search(_log_tail(log_path, limit=100_000))
        if match:
            return proc, int(match.group(1))
        if proc.poll() is not None:
            _unavailable(f"the local Cosmos DB server exited with {proc.returncode}: {_log_tail(log_path)}")
        time.sleep(0.05)
    _stop(proc)
    _unavailable(f"the local Cosmos DB server did not listen in {_START_TIMEOUT_S} s: {_log_tail(log_path)}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()  # SIGTERM to this PID only
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    if proc.stdin is not None:
        proc.stdin.close()


@pytest.fixture(autouse=True)
def _quiet_local_tls_warning() -> None:
    """The SDK skips certificate checks for 127.0.0.1/localhost (as for the emulator) and urllib3 warns
    on every such request. pytest resets warning filters per test, hence a (cheap) autouse fixture."""
    warnings.filterwarnings(
        "ignore", message=r"Unverified HTTPS request is being made to host '(127\.0\.0\.1|localhost)'"
    )


@pytest.fixture(scope="session")
def cosmos_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CosmosServer]:
    """A Cosmos DB endpoint for the whole session: external (``COSMOSDB_ENDPOINT``) or the local server."""
    try:
        import azure.cosmos  # noqa: F401
    except ImportError as exc:
        _unavailable(f"azure-cosmos is not installed ({exc}); install the project's [cosmosdb] extra")

    endpoint = os.environ.get("COSMOSDB_ENDPOINT", "").strip()
    if endpoint:
        yield CosmosServer(endpoint=endpoint, key=os.environ.get("COSMOSDB_KEY") or EMULATOR_KEY)
        return

    log_path = tmp_path_factory.mktemp("cosmos_server") / "server.log"
    proc, port = _start_local_server(log_path)
    try:
        yield CosmosServer(
            endpoint=f"https://127.0.0.1:{port}",
            key=EMULATOR_KEY,
            client_kwargs={},
            pid=proc.pid,
            log_path=log_path,
        )
    finally:
        _stop(proc)


@pytest.fixture
def cosmos_database(cosmos_server: CosmosServer) -> Iterator[str]:
    """Name of a new, empty database (unique per test), deleted again after the test."""
    from azure.cosmos import exceptions

    name = f"test-{uuid.uuid4().hex[:16]}"
    with cosmos_server.client() as client:
        client.create_database(name)
        try:
            yield name
        finally:
            try:
                client.delete_database(name)
            except exceptions.CosmosResourceNotFoundError:
                pass
