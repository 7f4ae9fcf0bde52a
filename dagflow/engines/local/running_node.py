"""One node attempt the runner has launched or adopted, and what it holds: the record the runner's
parts (runner.py and the modules it is split into) share."""

from __future__ import annotations

from dataclasses import dataclass

from dagflow.engines.local.resources import Gpu
from dagflow.engines.local.usage_recorder import Measured
from dagflow.plan import Resources, StepInfo


@dataclass(slots=True)
class RunningNode:
    name: str
    step: StepInfo
    attempt: int
    started: float  # monotonic
    gpus: tuple[Gpu, ...]
    res: Resources | None = None  # what it holds (or will, as a follower); None: an adopted node holding nothing
    pid: int | None = None  # None until the keeper says it started
    kill_reason: str | None = None  # "timeout" or "interrupt" once the runner has sent SIGTERM
    pending_signal: int | None = None  # a signal to send as soon as the pid is known
    holds: bool = True  # holds its resources in the pool
    adopted: bool = False  # started by a runner that died; its keeper is not ours
    keeper: int | None = None  # an adopted node's keeper pid
    pidfd: int | None = None  # an adopted node's pidfd
    measured: Measured | None = None  # what its keeper measured at its exit
    # A follower waits in the keeper for its leader to exit and then starts in the leader's slot, on the
    # leader's resources (keeper.py); it holds nothing of its own until the runner hears the leader ended.
    leader: RunningNode | None = None
    follower: RunningNode | None = None
