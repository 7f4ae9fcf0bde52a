"""`dagflow transfer` and `dagflow promote` against S3 settings that cannot work, objects named like partial
downloads, and multipart uploads left behind by a killed transfer (SeaweedFS on loopback)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import test_s3_transfer as base
from aws_fixtures import free_port

from dagflow.transfer import transfer
from dagflow.transfer.local import PARTIAL_SUFFIX, partial_name

BUCKET = base.BUCKET
proxy = base.proxy  # the fault proxy fixture: an empty bucket, AWS_ENDPOINT_URL pointing at the proxy
PASSWORD = "hunter2-secret"


def cli(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dagflow", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120, check=False)


def clean_env(**overrides: str) -> dict[str, str]:
    """Dummy credentials and nothing else from this machine's AWS setup (no files, no instance metadata)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
               AWS_CONFIG_FILE="/nonexistent/config", AWS_SHARED_CREDENTIALS_FILE="/nonexistent/credentials",
               AWS_EC2_METADATA_DISABLED="true")
    env.update(overrides)
    return {k: v for k, v in env.items() if v != ""}


def assert_one_clean_line(result: subprocess.CompletedProcess[str], code: int, *expected: str) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    assert PASSWORD not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("settings", "code", "expected"),
    [
        ({"AWS_ENDPOINT_URL": f"http://user:{PASSWORD}@bad host"}, 2, ["bad S3 endpoint", "http://***@bad host"]),
        ({"AWS_ENDPOINT_URL": "not-a-url"}, 2, ["bad S3 endpoint", "not-a-url"]),
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:99999"}, 2, ["bad S3 endpoint", "http://127.0.0.1:99999"]),
        ({"AWS_SECRET_ACCESS_KEY": ""}, 2, ["bad AWS settings", "missing: AWS_SECRET_ACCESS_KEY"]),
        ({"AWS_DEFAULT_REGION": "us east 1"}, 2, ["bad AWS settings", "us east 1"]),
        ({"AWS_PROFILE": "no-such-profile"}, 2, ["bad AWS settings", "no-such-profile"]),
    ],
    ids=["password-in-bad-endpoint", "not-a-url", "port-out-of-range", "partial-credentials", "bad-region",
         "missing-profile"],
)
@pytest.mark.slow
def test_bad_s3_settings_give_one_line_and_exit_2(
    tmp_path: Path, settings: dict[str, str], code: int, expected: list[str]
) -> None:
    (tmp_path / "a.txt").write_text("a")
    env = clean_env(**settings)
    up = cli("transfer", str(tmp_path / "a.txt"), "s3://bucket-x/a/", env=env)
    assert_one_clean_line(up, code, *expected)
    down = cli("transfer", "s3://bucket-x/a/", str(tmp_path / "down"), env=env)
    assert_one_clean_line(down, code, *expected)


@pytest.mark.slow
def test_unreachable_endpoint_exits_3_with_the_password_redacted(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    endpoint = f"http://user:{PASSWORD}@127.0.0.1:{free_port()}"  # nothing listens there
    env = clean_env(AWS_ENDPOINT_URL=endpoint)
    up = cli("transfer", str(tmp_path / "a.txt"), "s3://bucket-x/a/", "--quiet", env=env)
    assert_one_clean_line(up, 3, "S3 is unreachable", "http://***@127.0.0.1")
    down = cli("transfer", "s3://bucket-x/a/", str(tmp_path / "down"), env=env)
    assert_one_clean_line(down, 3, "S3 is unreachable", "Could not connect", "http://***@127.0.0.1")


def test_promote_with_bad_s3_settings_is_bad_input_and_redacted(tmp_path: Path) -> None:
    (tmp_path / "metrics.json").write_text('{"auc": 0.9}')
    env = clean_env(AWS_ENDPOINT_URL=f"http://user:{PASSWORD}@bad host")
    result = cli("promote", "--metrics", "metrics.json", "--metric", "auc", "--better", "higher", "--than",
                 "s3://bucket-x/latest", "--model", "s3://bucket-x/m/", "--run-id", "r", "--node", "e.promote",
                 env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and PASSWORD not in result.stderr
    assert "e.promote: failed: bad S3 endpoint" in result.stderr and "http://***@bad host" in result.stderr


@pytest.mark.slow
def test_objects_named_like_partial_downloads_are_user_data(
    proxy: base.FaultProxy, s3_endpoint: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    lookalikes = {  # what a user may call their files: each ends in the partial suffix
        f".model.bin.v2{PARTIAL_SUFFIX}": b"user data 1",
        f".model.bin.k3x9-0123456789abcdef{PARTIAL_SUFFIX}": b"user data 2",
        f"notes{PARTIAL_SUFFIX}": b"user data 3",
    }
    files = {"model.bin": b"the model", **lookalikes}
    for name, content in files.items():
        (src / name).write_bytes(content)
    up = transfer(str(src), f"s3://{BUCKET}/data/")
    assert up.copied == len(files), "no user file is skipped for its name"
    assert base.remote_tree(s3_endpoint, "data/") == files

    dst = tmp_path / "dst"
    own = dst / partial_name("model.bin", "0badc0ffee00")  # what a killed dagflow download leaves
    own.parent.mkdir()
    own.write_bytes(b"half")
    down = transfer(f"s3://{BUCKET}/data/", str(dst))
    assert down.copied == len(files)
    assert base.local_tree(dst) == files, "user objects are kept; only the transfer's own partial file is gone"
    again = transfer(f"s3://{BUCKET}/data/", str(dst))
    assert (again.copied, again.skipped) == (0, len(files))
    assert base.local_tree(dst) == files


def uploads(s3_endpoint: str) -> list[tuple[str, str]]:
    listing = base.s3(s3_endpoint).list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
    return sorted((upload["Key"], upload["UploadId"]) for upload in listing)


@pytest.mark.slow
def test_killed_multipart_upload_is_aborted_by_the_next_transfer(
    proxy: base.FaultProxy, s3_endpoint: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(6 * base.MB))
    other = base.s3(s3_endpoint).create_multipart_upload(Bucket=BUCKET, Key="data/other-writer.bin")["UploadId"]
    proxy.rules.append(lambda r: "hold" if r.key == "data/big.bin" and "partNumber=2" in r.query else None)
    first = base.run_cli(str(src), f"s3://{BUCKET}/data/", "--multipart-threshold", "5MB", "--part-size", "5MB")
    base.wait_for(lambda: any(o == "held" for _, o in proxy.outcomes(lambda r: r.is_object_write)), "part 2")
    first.send_signal(signal.SIGKILL)
    first.communicate()
    stale = [upload for upload in uploads(s3_endpoint) if upload[0] == "data/big.bin"]
    assert len(stale) == 1, "the killed transfer left its multipart upload"

    proxy.reset()  # the next transfer: default sizes, so this 6 MB file now goes up in a single PUT
    second = base.run_cli(str(src), f"s3://{BUCKET}/data/")
    _, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert base.remote_tree(s3_endpoint, "data/") == {"big.bin": (src / "big.bin").read_bytes()}
    assert uploads(s3_endpoint) == [("data/other-writer.bin", other)], "the stale upload is aborted; others' are not"

    third = base.run_cli(str(src), f"s3://{BUCKET}/data/")  # nothing to copy: still nothing of others aborted
    assert third.wait(timeout=60) == 0
    assert uploads(s3_endpoint) == [("data/other-writer.bin", other)]
