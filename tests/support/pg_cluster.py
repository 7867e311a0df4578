"""A throwaway PostgreSQL cluster for tests: ``initdb`` + ``pg_ctl`` in a temp dir on loopback.

Shared by tests/postgres and tests/distributed through the session fixture
``postgres_cluster`` in tests/conftest.py (one server per test session).

The server listens on 127.0.0.1 at a free port and on a Unix socket inside the temp
dir, trusts local connections, and runs without fsync (it is deleted afterwards).
initdb refuses to run as root, so as root every server command runs as the
``postgres`` system user (created by Debian's ``postgresql`` package) and the temp
dir belongs to that user.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

NO_SERVER_HELP = (
    "PostgreSQL server binaries (initdb, pg_ctl) were not found on PATH, in "
    "/usr/lib/postgresql/<version>/bin or in $AAIS_PG_BINDIR. Install them "
    "(Debian: `apt-get install -y postgresql`, which CI does before the tests) or set "
    "AAIS_ALLOW_NO_POSTGRES=1 to skip the PostgreSQL tests locally."
)

_SERVER_SETTINGS = (
    "-c listen_addresses=127.0.0.1",
    "-c fsync=off",
    "-c synchronous_commit=off",
    "-c full_page_writes=off",
    "-c max_connections=200",
)


ALLOW_NO_POSTGRES = os.environ.get("AAIS_ALLOW_NO_POSTGRES") == "1"
"""Set locally to skip (instead of fail) when the server binaries are missing; never in CI."""

_schema_numbers = itertools.count(1)


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, newest version first; None if absent."""
    candidates: list[Path] = []
    if os.environ.get("AAIS_PG_BINDIR"):
        candidates.append(Path(os.environ["AAIS_PG_BINDIR"]))
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)  # Debian links into its versioned dir
    versioned = [*Path("/usr/lib/postgresql").glob("*/bin"), *Path("/usr").glob("pgsql-*/bin")]
    candidates += sorted(versioned, key=_version_key, reverse=True)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    return None


def _version_key(bindir: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", bindir.parent.name))


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ClusterError(RuntimeError):
    """The throwaway server could not be created or started."""


class PostgresCluster:
    """One throwaway server: :meth:`start`, :meth:`url` for a database, :meth:`stop`."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="aais-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.log = self.root / "server.log"
        self.port = 0
        self._run_as = "postgres" if os.geteuid() == 0 else None

    def start(self) -> None:
        """initdb, then start the server on a free port (retrying if the port was taken)."""
        self.sockets.mkdir()
        if self._run_as is not None:
            _give_to(self.root, self._run_as)
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust",
            "-E", "UTF8", "--no-locale", "--no-sync",
        )  # fmt: skip
        for _ in range(3):
            self.port = free_port()
            options = " ".join((f"-p {self.port}", f"-k {self.sockets}", *_SERVER_SETTINGS))
            started = self._run(
                "pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data),
                "-l", str(self.log), "-o", options,
                check=False,
            )  # fmt: skip
            if started.returncode == 0:
                return
        raise ClusterError(f"pg_ctl could not start the server:\n{self.log_tail()}")

    def stop(self) -> None:
        """Stop the server at once and delete its directory."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", check=False)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        """A libpq URL of ``database`` over TCP on loopback."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create an empty database and return its URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def _run(
        self, program: str, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bindir / program), *args]
        if self._run_as is not None:
            argv = ["runuser", "-u", self._run_as, "--", *argv]
        result = subprocess.run(
            argv, cwd=self.root, capture_output=True, text=True, timeout=120, check=False
        )
        if check and result.returncode != 0:
            raise ClusterError(
                f"{program} failed ({result.returncode}):\n{result.stdout}{result.stderr}"
            )
        return result


def _give_to(root: Path, user: str) -> None:
    """Hand ``root`` and everything in it to ``user`` (initdb refuses root)."""
    if shutil.which("runuser") is None:
        raise ClusterError("running as root needs `runuser` (util-linux) to start PostgreSQL")
    try:
        import pwd

        account = pwd.getpwnam(user)
    except KeyError:
        raise ClusterError(
            f"running as root needs the `{user}` system user, which Debian's postgresql "
            "package creates"
        ) from None
    for path in [root, *root.rglob("*")]:
        os.chown(path, account.pw_uid, account.pw_gid)


def fresh_schema_url(cluster: PostgresCluster, database: str = "aais") -> str:
    """The URL of a new, empty schema (via ``search_path``) in ``database``."""
    import psycopg
    from psycopg import sql

    schema = f"t_{os.getpid()}_{next(_schema_numbers)}"
    url = cluster.url(database)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    return f"{url}?options={quote(f'-c search_path={schema}')}"
