"""An exclusive lock on a run directory: two runs into one dir would write every question twice.

The lock file ``<run_dir>/.lock`` holds the owner's host, pid, process start time and SLURM job (if any). A lock
of another machine is stale only when it names a SLURM job that squeue says is over (a cancelled or killed job;
the resume may run on another node); otherwise it is never taken over. A lock whose owner process is gone (killed, crashed; a zombie counts as gone) or whose pid now belongs to another process
(same pid, different start time) is stale and taken over with a warning; so is an empty or torn lock file
(a lock is created with its content in one step, so only a killed writer of an older version or a crash of the
file system leaves one). A takeover (read the owner, remove its lock, create ours) runs under an exclusive
``flock`` of ``<run_dir>/.lock.takeover``, so two processes that both found the lock stale never both hold it (the
second reads the first one's fresh lock and is refused); a fresh lock needs no guard (it is created only where none
exists, atomically).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import threading
from pathlib import Path

from gear_repro.utils.errors import ConfigError
from gear_repro.utils.slurm import job_active, slurm_job

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
TAKEOVER_FILE = ".lock.takeover"  # flock'ed while a stale lock is taken over (kept: removing it would race)


def process_start(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22); None if it is not
    running or is a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "(comm) ": state is field 3, starttime field 22
    return None if fields[0] in ("Z", "X") else fields[19]


def _owner_alive(owner: dict) -> bool:
    if not owner.get("host") or not isinstance(owner.get("pid"), int):
        return False  # empty or torn (a lock is written whole, see RunDirLock._create): nobody holds it
    if owner.get("host") != socket.gethostname():  # another machine's process: only SLURM can tell
        return not owner.get("slurm_job") or job_active(str(owner["slurm_job"])) is not False
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    start = process_start(pid)
    return start is not None and (owner.get("start") is None or str(owner["start"]) == start)


class RunDirInUse(ConfigError):
    """The run dir is locked by a live process: the refused command must leave that run's files (run.log) alone."""


class RunDirTaken(RunDirInUse):
    """The run dir holds a run this command may not write over (another stage's): its files are left alone."""


class RunDirLock:
    """``with RunDirLock(run_dir): ...`` holds the run dir for this process or raises ConfigError."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / LOCK_FILE
        self.held = False

    def _read_owner(self) -> dict:
        try:
            owner = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # vanished or torn (killed while writing): stale
        return owner if isinstance(owner, dict) else {}

    def _create(self, me: dict) -> None:
        """Create the lock file with its content in one step (a temp file hard-linked into place, so no reader
        ever sees it empty); FileExistsError if it exists. Where hard links fail, O_EXCL and a write."""
        tmp = self.path.with_name(f"{LOCK_FILE}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(me), encoding="utf-8")
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            raise
        except OSError:  # no hard links on this file system
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(me, f)
        finally:
            tmp.unlink(missing_ok=True)

    @contextlib.contextmanager
    def _takeover_guard(self):
        """Hold an exclusive flock of :data:`TAKEOVER_FILE` (blocking: a takeover takes milliseconds). Where the file
        system has no flock (some network mounts), the takeover runs unguarded, as before the guard existed."""
        import fcntl

        fd = os.open(self.path.with_name(TAKEOVER_FILE), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as e:
                if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                log.warning("%s: no flock on this file system (%s): a stale lock is taken over unguarded",
                            self.path, e)
            yield
        finally:
            os.close(fd)  # releases the flock

    def _take_over(self, me: dict) -> bool:
        """Under the takeover guard: re-read the lock (another process may have taken it over meanwhile); refuse a
        live owner, else replace the stale lock by ours. False when a fresh lock appeared between (try again)."""
        with self._takeover_guard():
            owner = self._read_owner()
            if _owner_alive(owner):
                raise RunDirInUse(
                    f"{self.path.parent} is in use by process {owner.get('pid')} on {owner.get('host')}; wait "
                    f"for it to finish or use another hydra.run.dir (delete {self.path} if that process is "
                    "gone)") from None
            if not self.path.exists():
                pass  # released meanwhile: created below like a fresh lock
            elif owner.get("pid") is None:
                log.warning("%s: taking over an empty or torn lock (its writer was killed)", self.path)
            else:
                log.warning("%s: taking over the stale lock of process %s (no longer running)", self.path,
                            owner.get("pid"))
            self.path.unlink(missing_ok=True)
            try:
                self._create(me)
            except FileExistsError:  # a fresh lock created between the unlink and ours
                return False
            return True

    def acquire(self) -> None:
        job = slurm_job()
        me = {"host": socket.gethostname(), "pid": os.getpid(), "start": process_start(os.getpid()),
              "slurm_job": job["job_id"] if job else None}
        for _ in range(3):
            try:
                self._create(me)
            except FileExistsError:
                if not self._take_over(me):
                    continue
            self.held = True
            return
        raise ConfigError(f"could not lock {self.path.parent}: another process keeps taking the lock")

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> RunDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
