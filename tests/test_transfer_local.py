"""`dagflow transfer` on real local files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dagflow.transfer import TransferError, parse_location, transfer
from dagflow.transfer.local import PARTIAL_SUFFIX, partial_name, sha256_of


def make_tree(root: Path) -> dict[str, bytes]:
    files = {
        "data.csv": b"x,y\n1,2\n3,4\n",
        "nested/a.bin": os.urandom(300_000),
        "nested/deeper/b.txt": b"hello\n",
    }
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return files


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_copies_everything_under_source(tmp_path: Path) -> None:
    files = make_tree(tmp_path / "src")
    result = transfer(str(tmp_path / "src") + "/", str(tmp_path / "dst") + "/")
    assert (result.copied, result.skipped) == (3, 0)
    assert result.bytes_copied == sum(len(c) for c in files.values())
    assert tree(tmp_path / "dst") == files


def test_rerun_skips_unchanged_files(tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    transfer(str(tmp_path / "src"), str(tmp_path / "dst"))
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "dst").rglob("*") if p.is_file()}
    result = transfer(str(tmp_path / "src"), str(tmp_path / "dst"))
    assert (result.copied, result.skipped, result.bytes_copied) == (0, 3, 0)
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "dst").rglob("*") if p.is_file()}
    assert before == after


def test_changed_file_is_recopied_even_with_same_size(tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    transfer(str(tmp_path / "src"), str(tmp_path / "dst"))
    (tmp_path / "src/nested/deeper/b.txt").write_bytes(b"HELLO\n")  # same size, new content
    (tmp_path / "src/data.csv").write_bytes(b"x,y\n1,2\n")  # new size
    result = transfer(str(tmp_path / "src"), str(tmp_path / "dst"))
    assert (result.copied, result.skipped) == (2, 1)
    assert tree(tmp_path / "dst") == tree(tmp_path / "src")


def test_corrupt_destination_is_repaired(tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    transfer(str(tmp_path / "src"), str(tmp_path / "dst"))
    (tmp_path / "dst/nested/a.bin").write_bytes(b"\0" * 300_000)
    result = transfer(str(tmp_path / "src"), str(tmp_path / "dst"))
    assert result.copied == 1
    assert sha256_of(tmp_path / "dst/nested/a.bin") == sha256_of(tmp_path / "src/nested/a.bin")


def test_interrupted_partial_is_not_complete_and_rerun_resumes(tmp_path: Path) -> None:
    files = make_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    # What a transfer killed mid-copy leaves: one finished file and a half-written partial.
    (dst / "nested").mkdir(parents=True)
    (dst / "data.csv").write_bytes(files["data.csv"])
    partial = dst / "nested" / partial_name("a.bin", "k3x9")
    partial.write_bytes(files["nested/a.bin"][:1000])
    assert not (dst / "nested/a.bin").exists()  # the final name never holds a short file

    result = transfer(str(tmp_path / "src"), str(dst))
    assert (result.copied, result.skipped) == (2, 1)
    assert tree(dst) == files  # the stale partial is gone, everything is complete
    assert not list(dst.rglob(f"*{PARTIAL_SUFFIX}"))


def test_partial_files_in_source_are_not_copied(tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    (tmp_path / "src" / partial_name("x", "1")).write_bytes(b"half")
    result = transfer(str(tmp_path / "src"), str(tmp_path / "dst"))
    assert result.copied == 3
    assert not list((tmp_path / "dst").rglob(f"*{PARTIAL_SUFFIX}"))


def test_user_files_named_like_partials_are_copied_and_never_deleted(tmp_path: Path) -> None:
    files = make_tree(tmp_path / "src")
    lookalikes = {
        f".data.csv.backup{PARTIAL_SUFFIX}": b"mine 1",
        f".data.csv.k3x9-0123456789abcdef{PARTIAL_SUFFIX}": b"mine 2",
        f"nested/keep{PARTIAL_SUFFIX}": b"mine 3",
    }
    for name, content in lookalikes.items():
        (tmp_path / "src" / name).write_bytes(content)
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / f".data.csv.old{PARTIAL_SUFFIX}").write_bytes(b"already in the destination")
    result = transfer(str(tmp_path / "src"), str(dst))
    assert result.copied == len(files) + len(lookalikes), "no user file is skipped for its name"
    expected = {**files, **lookalikes, f".data.csv.old{PARTIAL_SUFFIX}": b"already in the destination"}
    assert tree(dst) == expected, "a copy of data.csv removes no user file that merely looks like a partial"
    assert transfer(str(tmp_path / "src"), str(dst)).skipped == len(files) + len(lookalikes)
    assert tree(dst) == expected


def test_killed_copy_leaves_no_file_under_final_name(tmp_path: Path, monkeypatch) -> None:
    make_tree(tmp_path / "src")
    from dagflow.transfer import local

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(local.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        transfer(str(tmp_path / "src"), str(tmp_path / "dst"))
    assert not [p for p in (tmp_path / "dst").rglob("*") if p.is_file()]


def test_extra_destination_files_are_kept(tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst/mine.txt").write_text("keep me")
    transfer(str(tmp_path / "src"), str(tmp_path / "dst"))
    assert (tmp_path / "dst/mine.txt").read_text() == "keep me"


def test_single_file_source(tmp_path: Path) -> None:
    (tmp_path / "one.csv").write_text("a\n")
    transfer(str(tmp_path / "one.csv"), str(tmp_path / "into") + "/")
    assert (tmp_path / "into/one.csv").read_text() == "a\n"
    transfer(str(tmp_path / "one.csv"), str(tmp_path / "renamed.csv"))
    assert (tmp_path / "renamed.csv").read_text() == "a\n"


def test_file_urls(tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    result = transfer(f"file://{tmp_path}/src/", f"file://localhost{tmp_path}/dst/")
    assert result.copied == 3


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("s3:///key/", "has no bucket"),
        ("s3://Not_A_Bucket/key", "not a valid S3 bucket name"),
        ("gs://bucket/key", "unsupported transfer location scheme"),
        ("file://otherhost/x", "remote host"),
    ],
)
def test_bad_locations(location: str, message: str) -> None:
    with pytest.raises(TransferError, match=message):
        parse_location(location)


def test_destination_inside_source_is_refused(tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    with pytest.raises(TransferError, match="inside source"):
        transfer(str(tmp_path / "src"), str(tmp_path / "src/copy"))


def test_missing_source(tmp_path: Path) -> None:
    with pytest.raises(TransferError, match="does not exist"):
        transfer(str(tmp_path / "nope"), str(tmp_path / "dst"))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", "transfer", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.slow
def test_cli_summary_and_s3_error(tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    first = run_cli(str(tmp_path / "src"), str(tmp_path / "dst"))
    assert first.returncode == 0, first.stderr
    assert "copied 3, skipped 0" in first.stdout
    second = run_cli(str(tmp_path / "src"), str(tmp_path / "dst"))
    assert "copied 0, skipped 3" in second.stdout
    s3 = run_cli("s3://Bad_Bucket/data/", str(tmp_path / "dst"))
    assert s3.returncode == 2
    assert "not a valid S3 bucket name" in s3.stderr
