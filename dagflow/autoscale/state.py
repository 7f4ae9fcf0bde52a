"""What the autoscaler must remember across restarts, in one small JSON file written atomically.

`removing`: nodes it decided to remove, recorded *before* the drain request is sent, so a restart at
any point finds every node it may have drained. `capacity_timeouts`: groups skipped until a time.
`idle_since`: when each node was first seen idle (the startd's own timestamp resets on reconfig).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dagflow.files import write_atomic

VERSION = 1


@dataclass
class Removal:
    instance_id: str
    group: str
    since: float
    drain_sent: bool = False


@dataclass
class State:
    removing: dict[str, Removal] = field(default_factory=dict)  # node name -> removal in progress
    capacity_timeouts: dict[str, float] = field(default_factory=dict)  # group -> skipped until (epoch)
    capacity_reasons: dict[str, str] = field(default_factory=dict)
    idle_since: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> str:
        data = asdict(self)
        data["version"] = VERSION
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> State:
        data = json.loads(text)
        if data.get("version") != VERSION:
            raise ValueError(f"unsupported state file version {data.get('version')!r}")
        return cls(
            removing={name: Removal(**value) for name, value in data.get("removing", {}).items()},
            capacity_timeouts={k: float(v) for k, v in data.get("capacity_timeouts", {}).items()},
            capacity_reasons=dict(data.get("capacity_reasons", {})),
            idle_since={k: float(v) for k, v in data.get("idle_since", {}).items()},
        )


class StateFile:
    def __init__(self, path: Path | None) -> None:
        self.path = Path(path) if path is not None else None

    def load(self) -> State:
        if self.path is None or not self.path.exists():
            return State()
        try:
            return State.from_json(self.path.read_text(encoding="utf-8"))
        except (ValueError, TypeError, KeyError) as error:
            # Refuse to guess: a lost `removing` entry could strand a drained node forever.
            raise ValueError(f"state file {self.path} is unreadable ({error}); fix or move it aside") from None

    def save(self, state: State) -> None:
        if self.path is not None:
            write_atomic(self.path, state.to_json().encode("utf-8"), mode=0o600)
