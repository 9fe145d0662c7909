"""Pytest fixtures that run a real, throwaway PostgreSQL server for the test suite.

How the server is found, in order:

1. ``POSTGRES_URL`` is set: use that server as is (nothing is started). ``new_database`` creates
   databases on it, and they are dropped again at session end.
2. Otherwise start a private cluster from the local server binaries (``initdb``/``pg_ctl`` on PATH or
   the highest ``/usr/lib/postgresql/*/bin``). It listens on 127.0.0.1 only, on a free port, with
   trust auth, and is stopped and deleted at session end.

If no server can be had, tests skip with the reason, except under ``CI=true`` where they fail:
a CI run that silently skips the database tests would look green without testing anything.

``tests/conftest.py`` registers the fixtures: ``pytest_plugins = ["tests.pg_service", ...]``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest

__all__ = ["PostgresServer"]

# Superuser name inside the cluster; fixed so URLs don't depend on which OS user ran initdb.
_SUPERUSER = "postgres"
# Dedicated OS user for running the server as root (initdb and pg_ctl refuse to run as root).
_OS_USER = "postgres"
# PostgreSQL truncates identifiers longer than this, which would break name uniqueness.
_MAX_IDENT = 63
_START_TIMEOUT_S = 60
_START_ATTEMPTS = 3  # the free port can be taken between picking it and binding it


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _unavailable(reason: str) -> NoReturn:
    """Skip locally, but fail under CI so a missing database can never pass unnoticed."""
    if _in_ci():
        pytest.fail(f"PostgreSQL is required under CI=true but unavailable: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL unavailable: {reason}")


def _sanitise(name: str) -> str:
    """Turn e.g. a module name into a safe lowercase identifier fragment."""
    cleaned = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")
    return cleaned or "db"


class PostgresServer:
    """Handle on a running server: ``base_url`` plus a factory for fresh databases."""

    def __init__(self, base_url: str, startup_seconds: float = 0.0) -> None:
        self.base_url = base_url
        self.startup_seconds = startup_seconds  # 0.0 for an external server
        self.created: list[str] = []

    def url_for(self, dbname: str) -> str:
        # Swap only the path so credentials/host/query of the base URL are kept.
        parts = urlsplit(self.base_url)
        return urlunsplit(parts._replace(path=f"/{dbname}"))

    def new_database(self, name_prefix: str) -> str:
        """CREATE a new uniquely named, empty database and return its connection URL."""
        import psycopg
        from psycopg import sql

        suffix = uuid.uuid4().hex[:10]
        prefix = _sanitise(name_prefix)[: _MAX_IDENT - len(suffix) - 1]
        dbname = f"{prefix}_{suffix}"
        # CREATE DATABASE cannot run inside a transaction, hence autocommit.
        with psycopg.connect(self.base_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        self.created.append(dbname)
        return self.url_for(dbname)

    def drop_created(self) -> None:
        """Best-effort cleanup of our databases on a server we don't own."""
        import psycopg
        from psycopg import sql

        try:
            with psycopg.connect(self.base_url, autocommit=True) as conn:
                for dbname in self.created:
                    # FORCE (PG13+) kicks out connections a test may have leaked.
                    conn.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
                    )
        except psycopg.Error:
            pass
        self.created.clear()


def _find_bin_dir() -> Path | None:
    """Directory holding initdb/pg_ctl: PATH first, then the highest /usr/lib/postgresql/N/bin."""
    initdb = shutil.which("initdb")
    if initdb:
        # Resolve symlinks (e.g. /usr/local/bin/initdb) so initdb and pg_ctl come from one install.
        bin_dir = Path(initdb).resolve().parent
        if (bin_dir / "pg_ctl").exists():
            return bin_dir

    def version_key(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", p.parent.name)) or (0,)

    candidates = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()]
    return max(candidates, key=version_key) if candidates else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ensure_os_user() -> None:
    """As root the server needs an unprivileged owner; create one if the image lacks it."""
    try:
        import pwd

        pwd.getpwnam(_OS_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/bin/false", _OS_USER],
            check=True,
            capture_output=True,
            text=True,
        )


class _LocalCluster:
    """A private cluster in a temp dir, run as the ``postgres`` OS user when we are root."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.as_root = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="pgtest-"))
        self.data_dir = self.root / "data"
        self.socket_dir = self.root / "sock"
        self.log_file = self.root / "server.log"
        self.port = 0

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin_dir / args[0]), *args[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", _OS_USER, "--", *cmd]
        # cwd inside our dir: the server user may not be able to read the caller's cwd.
        return subprocess.run(cmd, cwd=self.root, capture_output=True, text=True, timeout=_START_TIMEOUT_S)

    def _prepare_dirs(self) -> None:
        # mkdtemp makes a 0700 dir; the server user must own/traverse it.
        self.root.chmod(0o755)
        self.socket_dir.mkdir()
        if self.as_root:
            _ensure_os_user()
            shutil.chown(self.root, user=_OS_USER)
            shutil.chown(self.socket_dir, user=_OS_USER)
            probe = subprocess.run(["runuser", "-u", _OS_USER, "--", "test", "-w", str(self.root)])
            if probe.returncode != 0:
                raise RuntimeError(
                    f"user {_OS_USER!r} cannot reach {self.root}; a parent dir is not traversable "
                    "(set TMPDIR to e.g. /tmp)"
                )

    def _initdb(self) -> None:
        res = self._run(
            "initdb",
            "-D", str(self.data_dir),
            "-U", _SUPERUSER,
            "--auth=trust",  # local throwaway server: no passwords
            "-E", "UTF8",
            "--locale=C",  # always available, avoids locale-dependent initdb failures
            "--no-sync",  # nothing to protect; saves seconds
        )  # fmt: skip
        if res.returncode != 0:
            raise RuntimeError(f"initdb failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
        # Durability off: this data is thrown away, and it makes setup/DDL much faster.
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# --- test settings (pg_service.py) ---\n"
                "listen_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.socket_dir}'\n"
                "fsync = off\n"
                "synchronous_commit = off\n"
                "full_page_writes = off\n"
                "max_connections = 200\n"
            )

    def start(self) -> None:
        try:
            self._prepare_dirs()
            self._initdb()
            last = ""
            for _ in range(_START_ATTEMPTS):
                self.port = _free_port()
                res = self._run(
                    "pg_ctl", "start", "-w",
                    "-t", str(_START_TIMEOUT_S),
                    "-D", str(self.data_dir),
                    "-l", str(self.log_file),
                    "-o", f"-p {self.port}",
                )  # fmt: skip
                if res.returncode == 0:
                    return
                last = f"{res.stdout}\n{res.stderr}\n{self._log_tail()}"
            raise RuntimeError(f"pg_ctl start failed {_START_ATTEMPTS} times:\n{last}")
        except BaseException:
            self.stop()
            raise

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if (self.data_dir / "postmaster.pid").exists():
            try:
                self._run("pg_ctl", "stop", "-m", "fast", "-w", "-D", str(self.data_dir))
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def base_url(self) -> str:
        return f"postgresql://{_SUPERUSER}@127.0.0.1:{self.port}"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole session (external via POSTGRES_URL, else local)."""
    try:
        import psycopg
    except ImportError:
        _unavailable('psycopg is not installed (pip install ".[postgres]" in the checkout)')

    external = os.environ.get("POSTGRES_URL", "").strip()
    if external:
        server = PostgresServer(external)
        try:
            with psycopg.connect(external, autocommit=True, connect_timeout=10) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            _unavailable(f"cannot connect to POSTGRES_URL: {exc}")
        try:
            yield server
        finally:
            server.drop_created()
        return

    bin_dir = _find_bin_dir()
    if bin_dir is None:
        _unavailable("no initdb/pg_ctl on PATH or in /usr/lib/postgresql/*/bin, and POSTGRES_URL not set")
    cluster = _LocalCluster(bin_dir)
    t0 = time.perf_counter()
    try:
        cluster.start()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        _unavailable(f"could not start local server from {bin_dir}: {exc}")
    server = PostgresServer(cluster.base_url, startup_seconds=time.perf_counter() - t0)
    try:
        yield server
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def pg_url(postgres_server: PostgresServer, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database per test module, named after the module."""
    return postgres_server.new_database(request.module.__name__.rsplit(".", 1)[-1])
