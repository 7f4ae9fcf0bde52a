"""The keeper's own start-up (engines/local/keeper.py), which every local run and every search trial waits for
before its first node starts (#41 item 4): it imports neither json nor re, tempfile, pathlib, hashlib or
typing (together about 20 ms of a start that is about 10 ms without them), and the names it writes into
procs.jsonl are quoted exactly as json.dumps quotes them."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import dagflow.engines.local.keeper as keeper_module

KEEPER = Path(keeper_module.__file__)
HEAVY = ("json", "re", "tempfile", "pathlib", "hashlib", "typing")


def keeper_imports(tmp_path: Path) -> set[str]:
    """The modules a keeper imports, started as procs.start_keeper starts it, until it exits (its request pipe
    closed at once)."""
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    argv = [sys.executable, "-I", "-S", "-X", "importtime", str(KEEPER), str(run_dir)]
    stderr = tmp_path / "stderr"
    workdir = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    requests, no_requests = os.pipe()
    os.close(no_requests)  # the runner has gone at once: the keeper exits once it has started
    err = os.open(stderr, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        actions = [(os.POSIX_SPAWN_DUP2, requests, 0), (os.POSIX_SPAWN_DUP2, err, 2), (os.POSIX_SPAWN_DUP2, workdir, 3)]
        pid = os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=actions)
    finally:
        for fd in (workdir, requests, err):
            os.close(fd)
    _, status = os.waitpid(pid, 0)
    said = stderr.read_text()
    assert os.waitstatus_to_exitcode(status) == 0, said
    return {line.rsplit("|", 1)[1].strip() for line in said.splitlines() if line.startswith("import time:")}


def test_the_keeper_starts_without_the_heavy_standard_modules(tmp_path: Path) -> None:
    imported = keeper_imports(tmp_path)
    assert "signal" in imported  # the parse found the keeper's imports at all
    assert sorted(imported & set(HEAVY)) == []


def load_keeper_script() -> object:
    spec = importlib.util.spec_from_file_location("_keeper_under_test", KEEPER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


KEEPER_SCRIPT = load_keeper_script()


@given(st.text())
def test_node_names_are_quoted_as_json_dumps_quotes_them(name: str) -> None:
    assert KEEPER_SCRIPT.json_string(name) == json.dumps(name)  # type: ignore[attr-defined]
