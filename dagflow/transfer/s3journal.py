"""Which unfinished multipart uploads are a dagflow transfer's own, and whether that transfer is gone.

S3 lists unfinished uploads with their key, id and start time, but not who began them: two transfers of
the same key under the same credentials look alike. So every upload (one call of dagflow.transfer.s3's
upload) keeps a journal, a file in the state directory ($XDG_STATE_HOME/dagflow/s3-uploads, else
~/.local/state/dagflow/s3-uploads) with one JSON line per multipart upload it began, and holds an
exclusive flock on it while it runs. The kernel drops the lock when the process ends, however it ends
(SIGKILL included), so:

* a journal whose lock another transfer can take is a dead transfer's: the uploads it lists are provably
  stale and may be aborted (an upload that was completed meanwhile answers NoSuchUpload, harmlessly);
* a journal still locked is a live transfer's: the uploads it lists are left alone, whatever their age.

A transfer that finishes cleanly removes its journal (s3transfer completed every upload it began, or
aborted it on failure); one that fails leaves it, unlocked, so the next transfer aborts what it could not.
Best effort: where the directory cannot be written, nothing is journaled, and only the age rule of
dagflow.transfer.s3 protects or cleans up.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from types import TracebackType
from typing import Any

JOURNAL_SUFFIX = ".jsonl"


@dataclass(frozen=True, slots=True)
class JournaledUpload:
    endpoint: str
    bucket: str
    key: str
    upload_id: str


def journal_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "dagflow" / "s3-uploads"


class UploadJournal:
    """The journal of one running upload: use it as a context manager, and watch() its S3 client."""

    def __init__(self, endpoint: str, directory: Path | None = None) -> None:
        self.endpoint = endpoint
        self.directory = directory or journal_dir()
        self.path: Path | None = None
        self._fd: int | None = None

    def __enter__(self) -> UploadJournal:
        name = f"{os.getpid()}-{secrets.token_hex(6)}"
        creating = self.directory / f".{name}.creating"
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(creating, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        except OSError:
            return self
        try:
            # Locked before it gets the name others look for, so no one ever sees it unlocked while alive.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.path = creating.with_name(name + JOURNAL_SUFFIX)
            os.rename(creating, self.path)
        except OSError:
            os.close(fd)
            creating.unlink(missing_ok=True)
            self.path = None
            return self
        self._fd = fd
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._fd is None or self.path is None:
            return
        if kind is None:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)  # releases the lock
        self._fd = None

    def watch(self, client: Any) -> None:
        """Record every multipart upload the client begins, as soon as S3 has given it an id."""
        client.meta.events.register("after-call.s3.CreateMultipartUpload", self._began)

    def _began(self, parsed: dict[str, Any], **_: Any) -> None:
        if self._fd is None or not parsed.get("UploadId"):
            return  # no journal, or S3 refused: nothing was begun
        entry = JournaledUpload(self.endpoint, parsed["Bucket"], parsed["Key"], parsed["UploadId"])
        # One write per line to an O_APPEND file: lines from the transfer's threads never interleave.
        os.write(self._fd, (json.dumps(asdict(entry)) + "\n").encode())


def reap_dead_journals(
    endpoint: str, abort: Callable[[JournaledUpload], bool], *, max_age_s: float, directory: Path | None = None
) -> set[str]:
    """Abort (abort() says whether the upload is gone) what dead transfers' journals list at this endpoint,
    and remove those journals once nothing of theirs is left, or once they are older than max_age_s (the
    age rule covers their uploads from then on). Returns the upload ids live transfers' journals list."""
    live: set[str] = set()
    try:
        paths = sorted((directory or journal_dir()).glob("*" + JOURNAL_SUFFIX))
    except OSError:
        return live
    for path in paths:
        with contextlib.suppress(OSError):
            live |= _reap(path, endpoint, abort, max_age_s)
    return live


def _reap(path: Path, endpoint: str, abort: Callable[[JournaledUpload], bool], max_age_s: float) -> set[str]:
    """One journal: the ids it lists if its transfer is alive; else abort what it lists, and an empty set."""
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return {entry.upload_id for entry in _entries(path)}
        entries = _entries(path)
        gone = [abort(entry) for entry in entries if entry.endpoint == endpoint]
        everything_gone = len(gone) == len(entries) and all(gone)
        if everything_gone or time.time() - os.fstat(fd).st_mtime > max_age_s:
            path.unlink(missing_ok=True)
        return set()
    finally:
        os.close(fd)


def _entries(path: Path) -> list[JournaledUpload]:
    """The uploads a journal lists; a line cut short by a kill, or not ours, is left out."""
    entries: list[JournaledUpload] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
            entries.append(JournaledUpload(**{item.name: str(record[item.name]) for item in fields(JournaledUpload)}))
        except (ValueError, TypeError, KeyError):
            continue
    return entries
