"""Local sync: copy what is under a source path into a destination directory.

Rules, in order of importance:

* A file that appears under its final name is complete. Every copy is written to a temporary file in
  the destination directory (``.NAME.<nonce>-<tag>.dagflow-partial``), flushed to disk, then moved
  into place with ``os.replace``; a killed transfer leaves at most a partial file, never a short file
  under the final name.
* A destination file with the same size and the same sha256 as its source is skipped, so rerunning an
  interrupted transfer resumes: it copies only what is missing or changed.
* It copies; it never deletes. Files in the destination that the source lacks stay where they are.
  Partial files left by an earlier interrupted run are removed once their target is complete. A
  partial file is recognised by its tag (a hash of the target name and the nonce), not by its suffix
  alone: a user's own file that merely ends in ``.dagflow-partial`` is copied like any other and never
  removed.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dagflow.errors import DagflowError

PARTIAL_SUFFIX = ".dagflow-partial"
_CHUNK = 1024 * 1024


class TransferError(DagflowError):
    """A transfer that cannot start: bad location, missing source, unsupported scheme."""


@dataclass(slots=True)
class SyncResult:
    copied: int = 0
    skipped: int = 0
    bytes_copied: int = 0
    bytes_skipped: int = 0
    copied_paths: list[Path] = field(default_factory=list)  # destination paths written this run

    @property
    def files(self) -> int:
        return self.copied + self.skipped


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _partial_tag(target_name: str, nonce: str) -> str:
    return hashlib.sha256(f"dagflow-partial\0{target_name}\0{nonce}".encode()).hexdigest()[:16]


def partial_name(target_name: str, nonce: str) -> str:
    """The name of a temporary file that becomes target_name when complete."""
    return f".{target_name}.{nonce}-{_partial_tag(target_name, nonce)}{PARTIAL_SUFFIX}"


def partial_target(name: str) -> str | None:
    """The target name a partial file made by a transfer was for; None for any other name."""
    if not name.startswith(".") or not name.endswith(PARTIAL_SUFFIX):
        return None
    target, _, token = name[1 : -len(PARTIAL_SUFFIX)].rpartition(".")
    nonce, _, tag = token.partition("-")
    if target and nonce and tag == _partial_tag(target, nonce):
        return target
    return None


def is_partial(path: Path) -> bool:
    """Whether path is a transfer's temporary file (not merely a name ending in the suffix)."""
    return partial_target(path.name) is not None


def open_partial(target: Path, mode: int = 0o600) -> tuple[int, Path]:
    """Create a new, empty partial file for target: (file descriptor, path)."""
    while True:
        path = target.with_name(partial_name(target.name, secrets.token_hex(6)))
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), path
        except FileExistsError:  # a nonce collision: practically never
            continue


def same_content(src: Path, dst: Path) -> bool:
    """True when dst is a regular file with src's size and sha256."""
    try:
        dst_stat = dst.stat()
    except FileNotFoundError:
        return False
    if not dst.is_file() or dst_stat.st_size != src.stat().st_size:
        return False
    return sha256_of(src) == sha256_of(dst)


def copy_atomic(src: Path, dst: Path) -> int:
    """Copy src to dst through a temporary file in dst's directory; return the bytes written."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = open_partial(dst)
    try:
        with src.open("rb") as reader, os.fdopen(fd, "wb") as writer:
            shutil.copyfileobj(reader, writer, _CHUNK)
            writer.flush()
            os.fsync(writer.fileno())
        shutil.copystat(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(dst.parent)
    return dst.stat().st_size


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # not every platform lets a directory be opened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_stale_partials(dst: Path) -> None:
    """Remove partial files an earlier interrupted copy of dst left behind (only those a transfer made)."""
    for stale in dst.parent.glob(f".{glob_escape(dst.name)}.*{PARTIAL_SUFFIX}"):
        if partial_target(stale.name) == dst.name:
            stale.unlink(missing_ok=True)


def glob_escape(name: str) -> str:
    return "".join(f"[{ch}]" if ch in "*?[" else ch for ch in name)


def _source_files(src: Path) -> Iterator[Path]:
    """Regular files under src (relative paths), sorted; partial files and symlinked dirs skipped."""
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            path = Path(root, name)
            if is_partial(path) or not path.is_file():
                continue
            yield path.relative_to(src)


def sync_file(src: Path, dst: Path, result: SyncResult) -> None:
    size = src.stat().st_size
    if same_content(src, dst):
        result.skipped += 1
        result.bytes_skipped += size
    else:
        if dst.is_dir():
            raise TransferError(f"cannot copy file {src} over directory {dst}")
        result.bytes_copied += copy_atomic(src, dst)
        result.copied += 1
        result.copied_paths.append(dst)
    _remove_stale_partials(dst)


def sync(src: Path, dst: Path, *, dst_is_dir: bool = False) -> SyncResult:
    """Copy src into dst.

    A directory source copies what is under it into the directory dst. A file source is copied to dst,
    or into dst when dst is an existing directory or dst_is_dir (a trailing slash in the location).
    """
    result = SyncResult()
    if src.is_dir():
        if dst.exists() and not dst.is_dir():
            raise TransferError(f"source {src} is a directory but destination {dst} is a file")
        dst.mkdir(parents=True, exist_ok=True)
        for relative in _source_files(src):
            sync_file(src / relative, dst / relative, result)
        return result
    if src.is_file():
        target = dst / src.name if dst_is_dir or dst.is_dir() else dst
        sync_file(src, target, result)
        return result
    if src.exists():
        raise TransferError(f"source {src} is neither a file nor a directory")
    raise TransferError(f"source {src} does not exist")
