"""Default policies shipped in policies/: GPU placement classes (name -> ClassAd expression)."""

from __future__ import annotations

from functools import cache

import yaml

from dagflow.data import data_dir


@cache
def gpu_classes() -> dict[str, str]:
    with (data_dir("policies") / "gpu-classes.yaml").open(encoding="utf-8") as handle:
        document = yaml.safe_load(handle)
    return {str(name): str(entry["requirements"]) for name, entry in document["classes"].items()}
