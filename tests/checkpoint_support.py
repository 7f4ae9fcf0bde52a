"""A self-checkpointing train script for the checkpoint tests, and how to read what it did.

`python train.py EPOCHS SECONDS` runs one epoch per process: it resumes from `ckpt/state.json`, works
SECONDS, appends the epoch to `ckpt/epochs.log` and writes the state (each file replaced atomically), then
exits 85 (checkpoint written, run me again) or 0 after the last epoch. So `ckpt/epochs.log` lists the
epochs whose work survived. Test instrumentation, not part of the idiom: with EPOCH_WITNESS set, it also
appends every epoch it *starts* to that file (absolute path), so epochs repeated after an eviction are
counted too; with EPOCH_PAUSE_AT=N it writes `paused` after checkpointing epoch N and waits for `go`.
"""

from __future__ import annotations

from pathlib import Path

CHECKPOINT_EXIT = 85

TRAIN = """\
import json, os, sys, time

epochs, seconds = int(sys.argv[1]), float(sys.argv[2])
os.makedirs("ckpt", exist_ok=True)
state = "ckpt/state.json"
epoch = (json.load(open(state))["epoch"] if os.path.exists(state) else 0) + 1
witness = os.environ.get("EPOCH_WITNESS")
if witness:
    with open(witness, "a") as handle:
        handle.write(f"{epoch}\\n")
time.sleep(seconds)


def replace(path, text):
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)


done = open("ckpt/epochs.log").read() if os.path.exists("ckpt/epochs.log") else ""
replace("ckpt/epochs.log", done + f"{epoch}\\n")
replace(state, json.dumps({"epoch": epoch}))
if os.environ.get("EPOCH_PAUSE_AT") == str(epoch):
    open("paused", "w").close()
    while not os.path.exists("go"):
        time.sleep(0.05)
sys.exit(0 if epoch >= epochs else 85)
"""


def write_train(directory: Path) -> Path:
    path = directory / "train.py"
    path.write_text(TRAIN, encoding="utf-8")
    return path


def epochs(path: Path) -> list[int]:
    """The epochs a log lists, in order ([] when there is no log)."""
    return [int(word) for word in path.read_text().split()] if path.exists() else []
