"""Sync between S3 and local directories, in both directions.

The same rules as the local sync (dagflow.transfer.local), for S3:

* Skip unchanged: an object and a file are the same when their sizes match and their sha256 does.
  Uploads store the file's sha256 in the object's metadata (x-amz-meta-dagflow-sha256), because an
  ETag is an MD5 only for single-part uploads. For objects without it (uploaded by other tools), a
  single-part ETag is compared with the file's MD5; anything else is copied again.
* Atomic writes: downloads go to a temporary file in the destination directory, are checked against
  the size and checksum S3 announced, and are renamed into place. An S3 object appears whole or not at
  all: a single PUT, or a multipart upload that S3 assembles only on its final request. A killed
  transfer therefore never leaves anything that looks complete, and rerunning it resumes: what is
  complete is skipped.
* Large files move in parts, several files move at once, and failures are retried (see retry.py).
* Unfinished multipart uploads: an upload aborts only those that are provably stale, and only before
  its own requests begin. S3 keeps (and bills) the parts of an upload nobody completes, so a killed
  transfer's must go; but another transfer of the same key may be in the middle of its own, and
  aborting that one makes its next part fail with NoSuchUpload. Provably stale means either
  - a dead transfer's own: one listed in the journal of a dagflow upload that is no longer running
    (s3journal.py), at any age; or
  - begun longer ago than TransferOptions.stale_upload_age_s (7 days by default) and listed by no
    running dagflow upload's journal, for the keys this transfer writes (uploads of other keys belong
    to other writers).
  A running transfer's uploads are never aborted by another; its own failed ones s3transfer aborts
  itself. Without the permission to list or abort, uploads stay where they are.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ProxyConnectionError,
)

from dagflow.transfer.local import (
    SyncResult,
    TransferError,
    _fsync_dir,
    _remove_stale_partials,
    _source_files,
    open_partial,
    sha256_of,
)
from dagflow.transfer.progress import Progress
from dagflow.transfer.redact import redact
from dagflow.transfer.retry import IntegrityError, causes, error_code, retrying
from dagflow.transfer.s3client import (
    S3TransferError,
    S3UnreachableError,
    TransferOptions,
    make_client,
    transfer_config,
)
from dagflow.transfer.s3journal import JournaledUpload, UploadJournal, reap_dead_journals
from dagflow.transfer.s3url import S3Location

SHA256_METADATA = "dagflow-sha256"
_CHUNK = 1024 * 1024
MAX_REPORTED_FAILURES = 10


@dataclass(frozen=True, slots=True)
class RemoteObject:
    key: str
    size: int
    etag: str = ""


def describe(error: BaseException) -> str:
    """A one-line, credential-free account of an S3 failure: S3's own error code and message when
    there is one (boto3 wraps them in less useful errors)."""
    client_error = next((item for item in causes(error) if isinstance(item, ClientError)), None)
    if client_error is not None:
        info = client_error.response.get("Error", {})
        text = f"{info.get('Code', 'error')}: {info.get('Message') or client_error}"
    else:
        text = str(error) or type(error).__name__
    return redact(" ".join(text.split()))


def is_unreachable(error: BaseException) -> bool:
    """Whether no connection to the endpoint could be made at all (not a failure mid-request)."""
    return any(
        isinstance(item, EndpointConnectionError | ConnectTimeoutError | ProxyConnectionError) for item in causes(error)
    )


def s3_error(what: str, error: BaseException) -> S3TransferError:
    """The error to raise for a failed request: unreachable (exit 3) or any other S3 failure (exit 1)."""
    if is_unreachable(error):
        return S3UnreachableError(f"S3 is unreachable: {what}: {describe(error)}")
    return S3TransferError(f"{what}: {describe(error)}")


def md5_of(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def matches(path: Path, size: int, sha256: str | None, etag: str | None) -> bool:
    """Whether the local file at path has this object's content (size plus checksum)."""
    try:
        if not path.is_file() or path.stat().st_size != size:
            return False
    except OSError:
        return False
    if sha256:
        return sha256_of(path) == sha256
    if etag and "-" not in etag and len(etag) == 32:  # a single-part upload's ETag is the MD5
        return md5_of(path) == etag
    return False


class _Sync:
    """One sync: the client, the options, the progress line and the result, shared by worker threads."""

    def __init__(self, options: TransferOptions, progress: Progress) -> None:
        self.options = options
        self.client = make_client(options)
        self.config = transfer_config(options)
        self.progress = progress
        self.result = SyncResult()
        self._lock = threading.Lock()

    def count(self, *, copied: bool, size: int, path: Path | None = None) -> None:
        with self._lock:
            if copied:
                self.result.copied += 1
                self.result.bytes_copied += size
                if path is not None:
                    self.result.copied_paths.append(path)
            else:
                self.result.skipped += 1
                self.result.bytes_skipped += size
        self.progress.file_done(0 if copied else size)

    def with_retries(self, what: str, call: Callable[[Callable[[int], None]], None]) -> None:
        """Run call(callback) with whole-file retries; callback feeds the progress line, and the bytes
        an attempt moved are taken back when it fails."""
        moved = [0]

        def callback(count: int) -> None:
            moved[0] += count
            self.progress.bytes_moved(count)

        def attempt() -> None:
            moved[0] = 0
            try:
                call(callback)
            except BaseException:
                self.progress.bytes_moved(-moved[0])
                raise

        retrying(attempt, self.options.file_backoff)

    def run_all(self, jobs: list[tuple[str, Callable[[], None]]]) -> None:
        """Run the per-file jobs in parallel; report every failure together at the end."""
        failures: list[tuple[str, BaseException]] = []
        with ThreadPoolExecutor(max_workers=self.options.jobs, thread_name_prefix="dagflow-s3") as pool:
            futures: dict[Future[None], str] = {pool.submit(job): name for name, job in jobs}
            try:
                for future in as_completed(futures):
                    error = future.exception()
                    if error is not None:
                        failures.append((futures[future], error))
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        if failures:
            failures.sort(key=lambda item: item[0])
            if all(is_unreachable(error) for _, error in failures):
                raise S3UnreachableError(
                    f"S3 is unreachable; {len(failures)} of {len(jobs)} files not copied ({self.result.files} done;"
                    f" rerun to resume): {describe(failures[0][1])}"
                )
            lines = [f"  {name}: {describe(error)}" for name, error in failures[:MAX_REPORTED_FAILURES]]
            if len(failures) > MAX_REPORTED_FAILURES:
                lines.append(f"  ... and {len(failures) - MAX_REPORTED_FAILURES} more")
            done_count = self.result.files
            raise S3TransferError(
                f"{len(failures)} of {len(jobs)} files failed ({done_count} done; rerun to resume):\n"
                + "\n".join(lines)
            )


def _call(what: str, call: Callable[[], Any]) -> Any:
    """A listing or lookup request; its failure ends the transfer with a clean message."""
    try:
        return call()
    except (ClientError, BotoCoreError) as error:
        raise s3_error(what, error) from None


# --- download -------------------------------------------------------------------------------------


def list_objects(client: Any, location: S3Location) -> list[RemoteObject]:
    """Objects under a prefix (folder marker keys ending in '/' left out), sorted by key."""
    prefix = location.as_prefix() if location.key else ""
    objects: list[RemoteObject] = []
    paginator = client.get_paginator("list_objects_v2")

    def collect() -> None:
        for page in paginator.paginate(Bucket=location.bucket, Prefix=prefix):
            for item in page.get("Contents", ()):
                if not item["Key"].endswith("/"):
                    objects.append(RemoteObject(item["Key"], int(item["Size"]), str(item.get("ETag", ""))))

    _call(f"cannot list s3://{location.bucket}/{prefix}", collect)
    return sorted(objects, key=lambda obj: obj.key)


def head(client: Any, bucket: str, key: str) -> dict[str, Any] | None:
    try:
        return client.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if error_code(error) in ("404", "NoSuchKey", "NotFound"):
            return None
        raise


def signature(client: Any, location: S3Location) -> str:
    """What identifies the objects at location as a download takes them (the object itself, else every
    object under the prefix): a digest of each key, size and ETag, so a rewritten object, one added or
    one removed changes it. "" when there is nothing there."""
    bucket, key = location.bucket, location.key
    single = None if location.is_prefix else _call(f"cannot read {location}", lambda: head(client, bucket, key))
    if single is not None:
        objects = [RemoteObject(location.key, int(single["ContentLength"]), str(single.get("ETag", "")))]
    else:
        objects = list_objects(client, location)
    if not objects:
        return ""
    digest = hashlib.sha256()
    for obj in objects:
        etag = obj.etag.strip('"')
        digest.update(f"{obj.key}\0{obj.size}\0{etag}\n".encode())
    return digest.hexdigest()


def safe_relative(key: str, prefix: str) -> PurePosixPath:
    """The local path an object key maps to; keys that would escape the destination are refused."""
    relative = PurePosixPath(key[len(prefix) :])
    if not relative.parts or relative.is_absolute() or any(part in ("", ".", "..") for part in relative.parts):
        raise S3TransferError(f"object key {key!r} cannot be written as a local path under the destination")
    return relative


def download(
    src: S3Location, dst: Path, *, dst_is_dir: bool, options: TransferOptions, progress: Progress
) -> SyncResult:
    sync = _Sync(options, progress)
    client = sync.client
    mode = _file_mode()
    targets: list[tuple[RemoteObject, Path]] = []
    single = None if src.is_prefix else _call(f"cannot read {src}", lambda: head(client, src.bucket, src.key))
    if single is not None:
        target = dst / PurePosixPath(src.key).name if dst_is_dir or dst.is_dir() else dst
        targets.append((RemoteObject(src.key, int(single["ContentLength"])), target))
    else:
        objects = list_objects(client, src)
        if not objects:
            shown = S3Location(src.bucket, src.as_prefix() if src.key else "")
            raise S3TransferError(f"nothing to copy: no objects under {shown}")
        if dst.exists() and not dst.is_dir():
            raise TransferError(f"source {src} is a prefix but destination {dst} is a file")
        prefix = src.as_prefix() if src.key else ""
        targets.extend((obj, dst.joinpath(*safe_relative(obj.key, prefix).parts)) for obj in objects)
    progress.set_total(len(targets), sum(obj.size for obj, _ in targets))

    def job(obj: RemoteObject, target: Path) -> Callable[[], None]:
        return lambda: _download_one(sync, src.bucket, obj, target, mode)

    sync.run_all([(f"s3://{src.bucket}/{obj.key}", job(obj, target)) for obj, target in targets])
    return sync.result


def _file_mode() -> int:
    """What a newly created file gets under the current umask (temporary files start private)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _download_one(sync: _Sync, bucket: str, obj: RemoteObject, target: Path, mode: int) -> None:
    client = sync.client
    state: dict[str, Any] = {}

    def fetch(callback: Callable[[int], None]) -> None:
        info = head(client, bucket, obj.key)
        if info is None:
            raise S3TransferError(f"s3://{bucket}/{obj.key} disappeared while copying")
        size = int(info["ContentLength"])
        sha256 = (info.get("Metadata") or {}).get(SHA256_METADATA)
        etag = str(info.get("ETag", "")).strip('"')
        if matches(target, size, sha256, etag):
            state["skipped"] = size
            return
        if target.is_dir():
            raise TransferError(f"cannot copy s3://{bucket}/{obj.key} over directory {target}")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = open_partial(target)
        try:
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), mode)
                client.download_fileobj(bucket, obj.key, handle, Config=sync.config, Callback=callback)
                handle.flush()
                os.fsync(handle.fileno())
            if tmp.stat().st_size != size:
                raise IntegrityError(f"got {tmp.stat().st_size} bytes, expected {size}")
            if sha256 and sha256_of(tmp) != sha256:
                raise IntegrityError("content does not match the object's sha256")
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(target.parent)
        state["copied"] = size

    sync.with_retries(obj.key, fetch)
    _remove_stale_partials(target)
    if "skipped" in state:
        sync.count(copied=False, size=state["skipped"])
    else:
        sync.count(copied=True, size=state["copied"], path=target)


# --- upload ---------------------------------------------------------------------------------------


def upload(src: Path, dst: S3Location, *, options: TransferOptions, progress: Progress) -> SyncResult:
    files = _upload_files(src, dst)
    started = time.time()
    sync = _Sync(options, progress)
    existing = {obj.key: obj.size for obj in list_objects(sync.client, dst)} if src.is_dir() else None
    keys = {key for _, key in files}
    abort_stale_uploads(sync.client, dst.bucket, keys, started=started, max_age_s=options.stale_upload_age_s)
    progress.set_total(len(files), sum(path.stat().st_size for path, _ in files))

    def job(path: Path, key: str) -> Callable[[], None]:
        return lambda: _upload_one(sync, path, dst.bucket, key, existing)

    with UploadJournal(sync.client.meta.endpoint_url) as journal:
        journal.watch(sync.client)
        sync.run_all([(f"s3://{dst.bucket}/{key}", job(path, key)) for path, key in files])
    return sync.result


def _upload_files(src: Path, dst: S3Location) -> list[tuple[Path, str]]:
    """(local file, object key) for everything an upload of src to dst writes."""
    if src.is_dir():
        files = [(src / relative, dst.child(relative.as_posix()).key) for relative in _source_files(src)]
    elif src.is_file():
        files = [(src, dst.child(src.name).key if dst.is_prefix else dst.key)]
    elif src.exists():
        raise TransferError(f"source {src} is neither a file nor a directory")
    else:
        raise TransferError(f"source {src} does not exist")
    if any(not key for _, key in files):
        raise TransferError(f"destination {dst} names no object key")
    return files


def _upload_one(sync: _Sync, path: Path, bucket: str, key: str, existing: dict[str, int] | None) -> None:
    client = sync.client
    size = path.stat().st_size
    # A listing tells sizes; only a same-size object is worth a HEAD for its checksum.
    if existing is None or existing.get(key) == size:
        info = head(client, bucket, key)
        if info is not None and int(info["ContentLength"]) == size:
            sha256 = (info.get("Metadata") or {}).get(SHA256_METADATA)
            if matches(path, size, sha256, str(info.get("ETag", "")).strip('"')):
                sync.count(copied=False, size=size)
                return
    digest = sha256_of(path)

    def put(callback: Callable[[int], None]) -> None:
        client.upload_file(
            str(path), bucket, key, ExtraArgs={"Metadata": {SHA256_METADATA: digest}}, Config=sync.config,
            Callback=callback,
        )

    sync.with_retries(key, put)
    sync.count(copied=True, size=size)


def common_prefix(keys: set[str]) -> str:
    """The longest prefix of every key, cut back to a '/' so the listing stays inside one 'folder'."""
    first, last = min(keys), max(keys)  # the common prefix of all keys is that of the two extremes
    pairs = zip(first, last, strict=False)
    same = next((index for index, (a, b) in enumerate(pairs) if a != b), min(len(first), len(last)))
    prefix = first[:same]
    return prefix if len(keys) == 1 else prefix[: prefix.rfind("/") + 1]


def abort_upload(client: Any, bucket: str, key: str, upload_id: str) -> bool:
    """Abort one unfinished multipart upload; whether it is gone now (one completed or aborted meanwhile
    answers NoSuchUpload)."""
    try:
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
    except ClientError as error:
        return error_code(error) == "NoSuchUpload"
    return True


def abort_stale_uploads(client: Any, bucket: str, keys: set[str], *, started: float, max_age_s: float) -> None:
    """Abort the provably stale unfinished multipart uploads (see the module's docstring): those that dead
    transfers' journals list, and those of these keys begun more than max_age_s before started (a
    time.time() value) that no running transfer's journal lists."""
    if not keys:
        return

    def reap(upload: JournaledUpload) -> bool:
        return abort_upload(client, upload.bucket, upload.key, upload.upload_id)

    try:
        live = reap_dead_journals(client.meta.endpoint_url, reap, max_age_s=max_age_s)
        paginator = client.get_paginator("list_multipart_uploads")
        for page in paginator.paginate(Bucket=bucket, Prefix=common_prefix(keys)):
            for upload in page.get("Uploads", ()):
                initiated = upload.get("Initiated")
                old = initiated is not None and initiated.timestamp() < started - max_age_s
                if upload.get("Key") in keys and old and upload["UploadId"] not in live:
                    abort_upload(client, bucket, upload["Key"], upload["UploadId"])
    except ClientError:
        pass
    except BotoCoreError as error:
        if is_unreachable(error):
            raise s3_error(f"cannot list unfinished uploads in s3://{bucket}", error) from None
