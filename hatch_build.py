"""Build hook: compiles the native keeper (dagflow/engines/local/keeper.c) with the system C compiler.

Without a compiler, or if the compile fails, the build goes on and dagflow runs keeper.py, the Python
keeper it replaces (procs.keeper_command). A wheel that carries the binary is tagged for this platform.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("dagflow/engines/local/keeper.c")
BINARY = Path("dagflow/engines/local/dagflow-keeper")


class NativeKeeperHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        root = Path(self.root)
        compiler = shlex.split(os.environ.get("CC", "")) or [shutil.which("cc") or shutil.which("gcc") or ""]
        if not compiler[0]:
            print("dagflow: no C compiler: the local engine uses its Python keeper", file=sys.stderr)
            return
        (root / BINARY).unlink(missing_ok=True)  # never leave one built from an older keeper.c
        command = [*compiler, "-O2", "-std=gnu11", "-Wall", "-o", str(root / BINARY), str(root / SOURCE)]
        try:
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            built = result.returncode == 0 and (root / BINARY).exists()
            failure = "" if built else result.stderr.strip() or f"{compiler[0]} exited with {result.returncode}"
        except OSError as error:
            failure = str(error)
        if failure:
            print(f"dagflow: the native keeper did not compile; the local engine uses its Python keeper:\n"
                  f"{failure}", file=sys.stderr)
            return
        if version != "editable":  # an editable install runs it where it was built, in the source tree
            build_data["force_include"][str(root / BINARY)] = str(BINARY)
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
