"""An engine from outside dagflow, installed as a third-party engine would be: a package with a
`dagflow.engines` entry point, built and installed (pip, into a directory of its own) by the test session.
It is the local engine under another name, so the engine-contract tests hold it to the same outcomes; what
they prove is the plugin path: discovery, `--engine tiny` on every command, its options as flags, its runs
recorded as its own and continued by it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

NAME = "tiny"


def pyproject(distribution: str, engines: dict[str, str], packages: tuple[str, ...] = ()) -> str:
    """A plugin distribution's pyproject.toml: engines, its dagflow.engines entry points (name -> target);
    packages, where they are not the one package hatchling finds by the distribution's name."""
    points = "".join(f'{name} = "{target}"\n' for name, target in engines.items())
    wheel = f"\n[tool.hatch.build.targets.wheel]\npackages = {list(packages)!r}\n".replace("'", '"') if packages else ""
    return f"""\
[build-system]
requires = ["hatchling>=1.21"]
build-backend = "hatchling.build"

[project]
name = "{distribution}"
version = "0.1.0"

[project.entry-points."dagflow.engines"]
{points}{wheel}"""


PYPROJECT = pyproject("dagflow-tiny-engine", {"tiny": "dagflow_tiny_engine:ENGINE"})

MODULE = '''\
"""A third-party dagflow engine: the local one under another name."""

from typing import ClassVar

from dagflow.engines.base import Capabilities, EngineDeclaration
from dagflow.engines.local.engine import LocalEngine
from dagflow.engines.local.settings import LOCAL_OPTIONS


class TinyEngine(LocalEngine):
    name: ClassVar[str] = "tiny"
    summary: ClassVar[str] = "a plugin engine: nodes run on this machine"


ENGINE = EngineDeclaration(
    "dagflow_tiny_engine:TinyEngine",
    LOCAL_OPTIONS,
    Capabilities(streams_progress=True),
)
'''


def install_plugin(root: Path, pyproject: str = PYPROJECT, modules: dict[str, str] | None = None) -> Path:
    """Build and install a plugin package under root (by default the tiny engine's; modules: package name ->
    its __init__.py); the directory to put on PYTHONPATH."""
    source, site = root / "src", root / "site"
    source.mkdir(parents=True)
    (source / "pyproject.toml").write_text(pyproject)
    for package, text in (modules or {"dagflow_tiny_engine": MODULE}).items():
        (source / package).mkdir()
        (source / package / "__init__.py").write_text(textwrap.dedent(text))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target",
         str(site), str(source)],
        check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return site


HTJOBS = "htjobs"  # the job executor of tests/plugins/htjobs: each node one HTCondor job, no DAGMan
HTJOBS_SOURCE = Path(__file__).resolve().parent / "plugins" / "htjobs"
PROCJOBS = "procjobs"  # the job executor of tests/plugins/procjobs: each node a detached process here
PROCJOBS_SOURCE = Path(__file__).resolve().parent / "plugins" / "procjobs"


def install_source(source: Path, site: Path) -> Path:
    """Build and install the plugin package in source into site (made readable to every user); site."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target",
         str(site), str(source)],
        check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    subprocess.run(["chmod", "-R", "a+rX", str(site)], check=True)
    return site


def plugin_env(site: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env
