"""Two transfers writing the same key at once, and which unfinished multipart uploads a transfer may abort
(issue #26 item 10): only a dead transfer's own, or one begun longer ago than the stale age. Real
`dagflow transfer` processes against SeaweedFS on loopback, through the fault proxy of test_s3_transfer."""

from __future__ import annotations

import hashlib
import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest
import test_s3_transfer as base

from dagflow.transfer import transfer
from dagflow.transfer.s3client import MB, TransferOptions

BUCKET = base.BUCKET
proxy = base.proxy  # the fault proxy fixture (with a state directory of the test's own for upload journals)
KEY = "models/model.bin"
PARTS = ("--multipart-threshold", "5MB", "--part-size", "5MB")
CENTURY_S = 100 * 365 * 24 * 3600.0  # older than any upload the tests begin: the age rule aborts nothing


def write(path: Path, size: int) -> bytes:
    content = os.urandom(size)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return content


def unfinished(s3_endpoint: str) -> list[tuple[str, str]]:
    listing = base.s3(s3_endpoint).list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
    return sorted((upload["Key"], upload["UploadId"]) for upload in listing)


def paused_at_part_2(request: base.Request) -> str | None:
    return "pause" if request.key == KEY and "partNumber=2" in request.query else None


def is_abort(request: base.Request) -> bool:
    return request.method == "DELETE" and "uploadId=" in request.query


def is_multipart_start(request: base.Request) -> bool:
    return request.method == "POST" and request.query == "uploads"


def wait_until_paused(proxy: base.FaultProxy) -> None:
    base.wait_for(lambda: (KEY, "paused") in proxy.outcomes(lambda r: r.is_object_write), "the upload of part 2")


@pytest.mark.slow
def test_a_second_transfer_leaves_the_first_ones_live_multipart_upload_alone(
    proxy: base.FaultProxy, s3_endpoint: str, tmp_path: Path
) -> None:
    first_content = write(tmp_path / "first" / "model.bin", 11 * MB)  # three 5 MB parts
    second_content = write(tmp_path / "second" / "model.bin", 6 * MB)  # one PUT at the default threshold
    proxy.rules.append(paused_at_part_2)
    first = base.run_cli(str(tmp_path / "first" / "model.bin"), f"s3://{BUCKET}/{KEY}", *PARTS)
    wait_until_paused(proxy)

    second = base.run_cli(str(tmp_path / "second" / "model.bin"), f"s3://{BUCKET}/{KEY}")
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    proxy.release.set()
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    # A part of an aborted upload is answered NoSuchUpload, which a whole-file retry could hide. So what is
    # checked is the cause: the live upload is never aborted, nor begun again.
    assert proxy.outcomes(is_abort) == [], "the second transfer aborted the first one's live upload"
    assert len(proxy.outcomes(is_multipart_start)) == 1, "the first transfer had to begin its upload again"

    stored = base.s3(s3_endpoint).get_object(Bucket=BUCKET, Key=KEY)
    body = stored["Body"].read()
    assert body in (first_content, second_content), "the object is one of the two complete versions"
    assert stored["Metadata"]["dagflow-sha256"] == hashlib.sha256(body).hexdigest()
    assert unfinished(s3_endpoint) == []


def test_an_upload_begun_long_ago_is_aborted_and_the_age_is_a_setting(
    proxy: base.FaultProxy, s3_endpoint: str, tmp_path: Path
) -> None:
    source = tmp_path / "model.bin"
    write(source, 1000)
    client = base.s3(s3_endpoint)
    stale = client.create_multipart_upload(Bucket=BUCKET, Key=KEY)["UploadId"]
    other = client.create_multipart_upload(Bucket=BUCKET, Key="models/other.bin")["UploadId"]
    initiated = client.list_multipart_uploads(Bucket=BUCKET)["Uploads"][0]["Initiated"]
    age_s = (datetime.now(UTC) - initiated).total_seconds()
    assert -60 < age_s < 3600, f"the server reports when the upload began ({initiated}), not a fixed date"

    transfer(str(source), f"s3://{BUCKET}/{KEY}")  # the default age (days): an upload begun just now is kept
    assert unfinished(s3_endpoint) == sorted([(KEY, stale), ("models/other.bin", other)]), "young: kept"

    base.wait_for(lambda: (datetime.now(UTC) - initiated).total_seconds() > 2, "the uploads to be 2 s old")
    transfer(str(source), f"s3://{BUCKET}/{KEY}", options=TransferOptions(stale_upload_age_s=1.0))
    assert unfinished(s3_endpoint) == [("models/other.bin", other)], "only uploads of the keys the transfer writes"


@pytest.mark.slow
def test_a_killed_transfers_own_upload_is_aborted_at_once_however_young(
    proxy: base.FaultProxy, s3_endpoint: str, tmp_path: Path
) -> None:
    source = tmp_path / "model.bin"
    content = write(source, 11 * MB)
    proxy.rules.append(paused_at_part_2)
    killed = base.run_cli(str(source), f"s3://{BUCKET}/{KEY}", *PARTS)
    wait_until_paused(proxy)
    foreign = base.s3(s3_endpoint).create_multipart_upload(Bucket=BUCKET, Key=KEY)["UploadId"]  # another host's, say
    killed.send_signal(signal.SIGKILL)
    killed.communicate()
    left = [upload for upload in unfinished(s3_endpoint) if upload[1] != foreign]
    assert len(left) == 1, "the killed transfer left its multipart upload"

    proxy.reset()
    proxy.release.set()
    result = transfer(str(source), f"s3://{BUCKET}/{KEY}", options=TransferOptions(stale_upload_age_s=CENTURY_S))
    assert result.copied == 1
    assert base.s3(s3_endpoint).get_object(Bucket=BUCKET, Key=KEY)["Body"].read() == content
    assert unfinished(s3_endpoint) == [(KEY, foreign)], (
        "the dead transfer's own upload is aborted; the foreign one is kept"
    )
