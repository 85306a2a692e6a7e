"""A throwaway PostgreSQL server for tests: the Debian package's binaries on a temp dir.

The server refuses to run as root, so as root it runs as the ``postgres`` user on a data
directory that user owns. It listens on a free loopback port (and a socket in its own dir),
trusts local connections, and is stopped and removed when the test session ends.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from support.loopback import free_port


def pg_bin() -> Path | None:
    """The folder of ``initdb``/``pg_ctl`` (newest installed version), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


@dataclass
class PostgresServer:
    bindir: Path
    datadir: Path
    port: int
    user: str
    options: str = ""

    def halt(self) -> None:
        """Kill the server at once (an outage), keeping its data: :meth:`restart` brings it back."""
        _as_owner([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop"])

    def restart(self) -> None:
        """Start a halted server again on the same port and data."""
        _as_owner([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-o", self.options,
                   "-l", str(self.datadir.parent / "log"), "-w", "-t", "60", "start"])

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A fresh, empty database; its SQLAlchemy URL back."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(host="127.0.0.1", port=self.port, user=self.user, dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        _as_owner([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop"],
                  check=False)
        shutil.rmtree(self.datadir.parent, ignore_errors=True)


def _as_owner(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120)


def start_server(durable: bool = False) -> PostgresServer:
    """initdb + pg_ctl start on a temp dir and a free loopback port; raises if binaries are missing.
    ``durable``: commits are on disk when they return (a server a test kills and starts again);
    else the fast settings (fsync, synchronous commit and full-page writes off)."""
    bindir = pg_bin()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL binaries (initdb, pg_ctl) not found: apt-get install postgresql")
    root = Path(tempfile.mkdtemp(prefix="evalloop-pg-"))
    datadir = root / "data"
    user = "postgres" if os.geteuid() == 0 else os.environ.get("USER", "postgres")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        os.chmod(root, 0o755)
    _as_owner([str(bindir / "initdb"), "-D", str(datadir), "-U", user, "--auth=trust",
               "--no-sync", "-E", "UTF8", "--locale=C"])
    port = free_port()
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=200"
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    try:
        _as_owner([str(bindir / "pg_ctl"), "-D", str(datadir), "-o", options, "-l", str(root / "log"),
                   "-w", "-t", "60", "start"])
    except subprocess.CalledProcessError as exc:
        log = (root / "log").read_text() if (root / "log").exists() else ""
        raise RuntimeError(f"pg_ctl start failed: {exc.stderr}\n{log}") from None
    return PostgresServer(bindir, datadir, port, user, options)
