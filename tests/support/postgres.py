"""A real PostgreSQL 16 with pgvector for the Rails app's tests, from the `pgserver` wheel's binaries (Debian 12
packages no pgvector): initdb into a private directory, the server on a free loopback port, removed after.

pgserver's own Python API is not used: as root it adds a system user and widens the permissions of every
folder above its files. PostgreSQL refuses to run as root, so here, as root, the server runs as `nobody`
in a directory of its own.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.localstack import free_port
from tests.support.programs import missing
from tests.support.waiting import wait_until

START_TIMEOUT_S = 60
NOBODY = 65534


def postgres_bin() -> Path:
    """The folder of the pgserver wheel's PostgreSQL programs (the dev lock pins pgserver)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        missing("pgserver is not installed (it is in requirements/dev.lock: bash scripts/setup.sh)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


@dataclass(frozen=True)
class Postgres:
    """A running server: `url(database)` for Rails' DATABASE_URL, `psql(sql)` for the test's own reads."""

    bin: Path
    port: int

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> list[list[str]]:
        """Rows of `sql` (unaligned, tab-separated), every value as text; raises on an SQL error."""
        done = subprocess.run(
            [str(self.bin / "psql"), "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1",
             "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database, "-c", sql],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return [line.split("\t") for line in done.stdout.splitlines() if line]


@contextlib.contextmanager
def running_postgres() -> Iterator[Postgres]:
    """A fresh cluster (trust authentication on loopback only, fsync off: a test's throwaway data) on a
    free port; stopped and its directory removed on exit."""
    bin_dir = postgres_bin()
    home = Path(tempfile.mkdtemp(prefix="inference-tasks-pg-"))
    data = home / "data"
    as_root = os.geteuid() == 0
    user = {"user": NOBODY, "group": NOBODY} if as_root else {}
    if as_root:
        os.chown(home, NOBODY, NOBODY)
    port = free_port()
    log = home / "server.log"
    server = None
    try:
        subprocess.run(
            [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"],
            check=True, capture_output=True, cwd=home, **user,  # type: ignore[arg-type]
        )  # fmt: skip
        with open(log, "wb") as output:
            server = subprocess.Popen(
                [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-h", "127.0.0.1", "-k", str(home),
                 "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                stdout=output, stderr=subprocess.STDOUT, cwd=home, **user,  # type: ignore[arg-type]
            )  # fmt: skip

        def accepting() -> bool:
            assert server is not None and server.poll() is None, log.read_text()
            ready = [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
            return subprocess.run(ready, capture_output=True).returncode == 0

        wait_until(accepting, START_TIMEOUT_S, "PostgreSQL accepting connections")
        yield Postgres(bin_dir, port)
    finally:
        if server is not None:
            server.terminate()  # SIGTERM: PostgreSQL's smart shutdown; nothing stays connected by now
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(home, ignore_errors=True)
