"""The runner's link to its keeper (keeper.py): starting it, writing the requests queued for it, reading
its replies, signalling the nodes it started, and ending it when the run ends."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
from pathlib import Path

from dagflow.engines.local.keeper import read_replies, request
from dagflow.engines.local.procs import Child, kill_group, start_keeper
from dagflow.engines.local.running_node import RunningNode
from dagflow.errors import DagflowError

KEEPER = 1  # selector data of the keeper's reply pipe (None: the runner's wake pipe; a RunningNode: a pidfd)


class KeeperLostError(DagflowError):
    pass


class KeeperLink:
    """One run's keeper, seen from the runner. `outbox` holds the requests not yet written: the runner
    appends to it (by its own name for the list, on the hot path) and `send()` writes them at once."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.keeper: Child | None = None
        self.outbox: list[bytes] = []  # requests not yet written to the keeper
        self.replies = bytearray()  # the keeper's replies read but not yet complete
        self.requests_w = -1
        self.replies_r = -1
        self.selector: selectors.BaseSelector | None = None

    def start(self, run_dir: Path, workdir: str, env: dict[str, str], selector: selectors.BaseSelector) -> int:
        """Start the keeper (procs.start_keeper) and watch its replies in selector; its pid."""
        self.keeper, self.requests_w, self.replies_r = start_keeper(run_dir, workdir, env)
        self.selector = selector
        selector.register(self.replies_r, selectors.EVENT_READ, KEEPER)
        return self.keeper.pid

    def send(self) -> None:
        """Write the requests in the outbox."""
        data = b"".join(self.outbox)
        self.outbox.clear()
        while data:
            try:
                data = data[os.write(self.requests_w, data) :]
            except BrokenPipeError:
                raise KeeperLostError(f"the keeper of run {self.run_id} died; resume the run") from None

    def read(self) -> list[tuple]:
        """The complete replies the keeper has sent, as keeper.read_replies gives them."""
        buffer = self.replies
        while True:
            try:
                chunk = os.read(self.replies_r, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                assert self.selector is not None
                self.selector.unregister(self.replies_r)
                raise KeeperLostError(f"the keeper of run {self.run_id} died; resume the run")
            buffer += chunk
        return read_replies(buffer)

    def signal(self, running: RunningNode, sig: int) -> None:
        """Send sig to a node's process group, or, before the keeper has said it started, as soon as it does
        (a follower still waiting for its leader is dropped from the keeper's queue instead)."""
        if running.pid is None:
            running.pending_signal = sig  # for when the keeper's news of its start comes
            if running.leader is not None:  # still waiting for its leader: the keeper drops it
                self.outbox.append(request("d", running.name, running.attempt))
        else:
            kill_group(running.pid, sig)

    def close(self, leave_running: bool) -> None:
        """Close the link: the keeper exits once its nodes have. Unless nodes are left running (a full
        disk), wait for it, killing the nodes whose start had not been read yet."""
        if self.keeper is None:
            return
        os.close(self.requests_w)
        if leave_running:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.keeper.pid, os.WNOHANG)
        else:
            self._kill_unseen_starts()
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.keeper.pid, 0)
        os.close(self.replies_r)

    def _kill_unseen_starts(self) -> None:
        """Read the keeper's last replies until it exits, killing nodes whose start was not seen yet."""
        os.set_blocking(self.replies_r, True)
        with contextlib.suppress(OSError):
            while chunk := os.read(self.replies_r, 1 << 16):
                self.replies += chunk
                for kind, _, _, value in read_replies(self.replies):
                    if kind == "s":
                        kill_group(value, signal.SIGKILL)
