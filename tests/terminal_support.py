"""Running the CLI on a real pseudo-terminal of a given size, as a person at a terminal would."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

from test_local_support import cli_env

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def in_a_terminal(args: list[str], cwd: Path, columns: int = 80, env: dict[str, str] | None = None) -> str:
    """What `dagflow ARGS` shows on a terminal `columns` wide (its size set on the pty, no COLUMNS), with
    colours and styles taken out."""
    return ESCAPES.sub("", raw_terminal_output(args, cwd, columns, env))


def raw_terminal_output(args: list[str], cwd: Path, columns: int = 80, env: dict[str, str] | None = None) -> str:
    """Every byte `dagflow ARGS` writes to that terminal, escape sequences included."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    environment = {k: v for k, v in {**cli_env(), **(env or {})}.items() if k not in ("COLUMNS", "LINES")}
    command = [sys.executable, "-m", "dagflow", *args]
    with subprocess.Popen(command, cwd=cwd, env={**environment, "TERM": "xterm"}, stdin=subprocess.DEVNULL,
                          stdout=follower, stderr=follower) as child:  # fmt: skip
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        child.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", errors="replace").replace("\r\n", "\n")
