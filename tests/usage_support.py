"""A node program for the usage tests, shared by every engine's: alloc.py N S allocates and touches N MB,
then burns at least S seconds of CPU time (not wall time: a loaded box gives a process less CPU per
second, and the recorded cpu_s must still reach S)."""

from __future__ import annotations

from pathlib import Path

ALLOC = """
import sys, time
block = bytearray(int(sys.argv[1]) * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
x = 0
while time.process_time() < float(sys.argv[2]):
    x += 1
"""


def write_alloc(directory: Path) -> None:
    (directory / "alloc.py").write_text(ALLOC)
