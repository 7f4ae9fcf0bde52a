"""Where the shipped data folders (submit/, policies/, deploy/) are: in the wheel, or in a source
checkout. An environment variable (DAGFLOW_SUBMIT_TEMPLATES, DAGFLOW_POLICIES) points at a user's edited
copy instead; deploy/ (the EC2 boot files, copied out by the boot script) has none.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# The directory a child Python needs on sys.path to import this very dagflow (an editable checkout
# or site-packages): nodes that run `python -m dagflow` must get the code their runner is running.
IMPORT_ROOT = str(_PACKAGE.parent)


def with_import_root(pythonpath: str | None) -> str:
    """A PYTHONPATH value with IMPORT_ROOT first."""
    return os.pathsep.join(filter(None, [IMPORT_ROOT, pythonpath]))


# folder -> the environment variables that override it, first match wins (DAGFLOW_SUBMIT: the old name).
OVERRIDES = {
    "submit": ("DAGFLOW_SUBMIT_TEMPLATES", "DAGFLOW_SUBMIT"),
    "policies": ("DAGFLOW_POLICIES",),
    "deploy": (),
}


def data_dir(name: str) -> Path:
    """The folder `name` (a key of OVERRIDES): the override, the wheel's copy, or the checkout's."""
    override = next((os.environ[var] for var in OVERRIDES[name] if os.environ.get(var)), None)
    candidates = [Path(override)] if override else [_PACKAGE / "_data" / name, _PACKAGE.parent / name]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"dagflow's {name}/ folder is missing (looked in {', '.join(map(str, candidates))})")
