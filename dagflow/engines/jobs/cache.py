"""Skip nodes whose work is unchanged since they last succeeded.

A node's cache key hashes its name, `Plan.node_fingerprint` (command, environment, params, kind, declared paths),
the content of its input files and directories (resolved against the plan workdir; symlinked directories
inside them followed), the content of the files its command runs (its scripts, configuration files, a
shell's `-c` words, `python -m` modules and the pipeline's modules those import: plan/script_files.py says
what cannot be seen), for a transfer step the content of its source (a local path's files, an S3 object's
or prefix's keys, sizes and ETags), and its parents' keys, so a change anywhere upstream also reruns
everything downstream of it. A key is a hit when an earlier success recorded it in `<cache-dir>/index.jsonl`
and what the node produced is still there and unchanged: at each success the index also records a
fingerprint of the node's products (its declared outputs, its metrics file and, for a transfer or publish
step, its destination): every local file's absolute path, size and mtime_ns, an S3 destination's keys,
sizes and ETags, so a deleted or rewritten output, or the same pipeline copied to another directory, is a
miss. Entries written before fingerprints (no "o") fall back to "the declared outputs exist".

The cache entry of a success is written before its journal event (runner.py): a runner killed between the
two leaves an exit its keeper recorded and the journal lacks, which the next run takes (earlier_runs.py),
so no kill makes a finished node look unfinished to both.
An entry of an input directory that is not a regular file (a FIFO, a device) counts by its name alone:
its content is never read (bounded.open_regular), so it cannot block the run.
File content hashes are remembered by (size, mtime, inode) in `<cache-dir>/files.json`, as git's index
does, so unchanged large inputs are not read again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dagflow.bounded import BoundedInputError, open_regular
from dagflow.errors import DagflowError
from dagflow.files import write_atomic
from dagflow.plan import Node, Plan
from dagflow.plan.script_files import ScriptFiles, is_transfer, transfer_source
from dagflow.transfer import Location, S3Location, TransferError, parse_location


class NodeCache:
    def __init__(self, cache_dir: Path, workdir: Path) -> None:
        self.cache_dir = cache_dir
        self.workdir = workdir
        self._index_path = cache_dir / "index.jsonl"
        self._memo_path = cache_dir / "files.json"
        self._keys: dict[str, str | None] | None = None  # key -> products fingerprint (None: not recorded)
        self._memo: dict[str, list] | None = None
        self._memo_dirty = False
        self._index_fd: int | None = None
        self._pending: list[str] = []  # index lines not written yet
        self._scripts = ScriptFiles(workdir)  # the files a node's command runs: their content is part of its key
        self._s3: Any = None  # one S3 client for every S3 location of the run, made at the first

    def key(self, plan: Plan, node: Node, parent_keys: list[str]) -> str:
        inputs = [self._digest_path(path) for path in node.inputs] if node.inputs else []
        # The name is part of the key: nodes with equal commands in different matrix cells are
        # different work (they see their own DAGFLOW_NODE), and each has its own cache entry.
        parts: list[object] = [node.name, plan.node_fingerprint(node), inputs, sorted(parent_keys)]
        scripts = self._scripts.of(node)
        if scripts:  # appended only when there are any: keys of nodes that run no file stay as they were
            parts.append([f"{path}\0{self._digest_path(path)}" for path in scripts])
        source = transfer_source(plan, node)
        if source is not None:  # what it copies: new source data must reach a new run
            parts.append(["source", self._digest_location(source)])
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def hit(self, plan: Plan, key: str, node: Node) -> bool:
        if self._keys is None:
            self._keys = self._load_keys()
        if key not in self._keys:
            return False
        recorded = self._keys[key]
        if recorded is None:  # an entry from before fingerprints
            return all(self._resolve(path).exists() for path in node.outputs if "://" not in path)
        return recorded == self.products_fingerprint(plan, node)

    def record(self, key: str, plan: Plan, node: Node) -> None:
        """Remember a success; written to the index by `flush()` (the runner's loop calls it each turn)."""
        self._scripts.changed()  # the node may have written files that commands name
        products = self.products_fingerprint(plan, node)
        entry = {"k": key, "n": node.name, "t": round(time.time()), "o": products}
        self._pending.append(json.dumps(entry) + "\n")
        if self._keys is not None:
            self._keys[key] = products

    def flush(self) -> bool:
        """Write the successes recorded since the last flush; whether there were any."""
        if not self._pending:
            return False
        if self._index_fd is None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            self._index_fd = _open_index(self._index_path)
        data = "".join(self._pending).encode()
        self._pending.clear()
        self._index_fd = _lock_index(self._index_fd, self._index_path)
        try:
            os.write(self._index_fd, data)
        finally:
            fcntl.flock(self._index_fd, fcntl.LOCK_UN)
        return True

    def products_fingerprint(self, plan: Plan, node: Node) -> str:
        """size and mtime_ns of every local file the node produced, by absolute path, and the keys, sizes and
        ETags of an S3 destination ("" when it declares none)."""
        paths = products_of(plan, node)
        if not paths:
            return ""
        digest = hashlib.sha256()
        for path in paths:
            if "://" in path:
                digest.update(f"{path}\0{self._remote_signature(path)}\n".encode())
                continue
            target = self._resolve(path).absolute()
            digest.update(f"{target}\0{_tree_signature(target)}\n".encode())
        return digest.hexdigest()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._index_fd is not None:
                os.close(self._index_fd)
                self._index_fd = None
        if self._memo_dirty and self._memo is not None:
            write_atomic(self._memo_path, json.dumps(self._memo, separators=(",", ":")).encode())
            self._memo_dirty = False

    def _load_keys(self) -> dict[str, str | None]:
        keys: dict[str, str | None] = {}
        try:
            data = self._index_path.read_bytes()
        except FileNotFoundError:
            return keys
        for line in data.split(b"\n"):
            try:
                entry = json.loads(line)
                products = entry.get("o")
                keys[entry["k"]] = products if isinstance(products, str) else None
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a torn line: that entry is simply not cached
        return keys

    def _digest_location(self, text: str) -> str:
        """A transfer source's content: a local path's as an input's, an S3 location's listing."""
        try:
            location = parse_location(text)
        except TransferError:
            return "unreadable"  # the transfer refuses it when it runs
        if isinstance(location, Location):
            return self._digest_path(str(location.path))
        return self._remote_signature(text, location)

    def _remote_signature(self, url: str, location: Location | S3Location | None = None) -> str:
        """An S3 location's keys, sizes and ETags (transfer/s3.py); when S3 cannot say, a value no later
        look matches, so the node runs (and its transfer says why S3 failed)."""
        try:
            location = location or parse_location(url)
            if not isinstance(location, S3Location):
                return f"url:{url}"  # only s3:// is a remote dagflow reads
            from dagflow.transfer import s3
            from dagflow.transfer.s3client import TransferOptions, make_client

            if self._s3 is None:
                self._s3 = make_client(TransferOptions())
            return s3.signature(self._s3, location)
        except DagflowError:
            return f"unknown:{secrets.token_hex(8)}"

    def _resolve(self, path: str) -> Path:
        return Path(os.path.expanduser(path)) if os.path.isabs(path) else self.workdir / path

    def _digest_path(self, path: str) -> str:
        if "://" in path:  # remote: only its name can be part of the key
            return f"url:{path}"
        target = self._resolve(path)
        if target.is_file():
            return f"file:{self._digest_file(target)}"
        if target.is_dir():
            digest = hashlib.sha256()
            for file in _files_under(target):
                digest.update(f"{file.relative_to(target).as_posix()}\0{self._digest_file(file)}\n".encode())
            return f"dir:{digest.hexdigest()}"
        return "missing"

    def _digest_file(self, file: Path) -> str:
        if self._memo is None:
            self._memo = self._load_memo()
        stat = file.stat()
        signature = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
        cached = self._memo.get(str(file))
        if cached is not None and cached[:3] == signature:
            return cached[3]
        try:
            handle = open_regular(file)
        except BoundedInputError:
            return "not-a-regular-file"
        with handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        self._memo[str(file)] = [*signature, digest]
        self._memo_dirty = True
        return digest

    def _load_memo(self) -> dict[str, list]:
        try:
            memo = json.loads(self._memo_path.read_text())
            return memo if isinstance(memo, dict) else {}
        except (OSError, ValueError):
            return {}


def drop_entries(cache_dir: Path, keys: set[str]) -> int:
    """Remove the index entries of these keys (those only runs `dagflow runs gc` removed account for); how
    many. The index is rewritten in one rename while its lock is held, and a runner appending meanwhile
    appends to the new one (flush). A run started during the gc that made one of these keys again loses
    that entry: its next run runs the node again rather than trust it."""
    index = cache_dir / "index.jsonl"
    if not keys:
        return 0
    try:
        fd = _lock_index(os.open(index, os.O_RDONLY), index, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        lines = index.read_bytes().splitlines(keepends=True)
        kept = [line for line in lines if _key_of(line) not in keys]
        if len(kept) < len(lines):
            write_atomic(index, b"".join(kept))
    finally:
        os.close(fd)  # the lock goes with it, after the rename: who waited for it sees the new index
    return len(lines) - len(kept)


def _key_of(line: bytes) -> str | None:
    try:
        key = json.loads(line)["k"]
    except (ValueError, KeyError, TypeError):
        return None  # a torn line: not ours to judge
    return key if isinstance(key, str) else None


def _open_index(path: Path, flags: int = os.O_WRONLY | os.O_APPEND | os.O_CREAT) -> int:
    return os.open(path, flags, 0o644)


def _lock_index(fd: int, path: Path, flags: int = os.O_WRONLY | os.O_APPEND | os.O_CREAT) -> int:
    """fd, or one opened on path again, holding the index's flock: a file `runs gc` renamed another over while
    fd waited is not the index any more."""
    while True:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)
        fd = _open_index(path, flags)


def products_of(plan: Plan, node: Node) -> list[str]:
    """What a node leaves behind: its declared outputs and metrics file, a transfer step's destination and
    a publish node's."""
    products = [*node.outputs, *([node.metrics] if node.metrics else [])]
    if is_transfer(plan, node, "transfer"):
        products.append(node.argv[3])
    elif is_transfer(plan, node, "publish"):
        products.append(node.argv[2])
    return products


def _files_under(top: Path) -> Iterator[Path]:
    """Every file under a directory, sorted, through symlinked directories too (an edit under the link is
    an edit of the input); a directory met again through a link loop is walked once."""
    seen: set[str] = set()
    for root, dirs, files in os.walk(top, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs.clear()
            continue
        seen.add(real)
        dirs.sort()
        for name in sorted(files):
            yield Path(root) / name


def _tree_signature(target: Path) -> str:
    """ "missing", or size:mtime_ns of a file, or of every file under a directory (sorted, relative)."""
    try:
        stat = target.stat()
    except OSError:
        return "missing"
    if not target.is_dir():
        return f"{stat.st_size}:{stat.st_mtime_ns}"
    entries = []
    for file in _files_under(target):
        try:
            file_stat = file.stat()
        except OSError:
            continue
        entries.append(f"{file.relative_to(target).as_posix()}={file_stat.st_size}:{file_stat.st_mtime_ns}")
    return "dir[" + ",".join(entries) + "]"
