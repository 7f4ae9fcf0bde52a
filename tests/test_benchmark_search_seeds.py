"""benchmarks/search.py compares rows on the seeds both ran (#29 item 9).

The scheduler rows run on the first --scheduler-seeds seeds only; their medians must be set against the
in-process rows' medians over those same seeds, not over every seed. The benchmark runs as a command,
its results read from its --cache folder, which holds each (row, problem, seed) result as JSON: seeded
here with known values, so no engine runs and the expected ratios are exact.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BRANIN_MINIMUM = 0.397887
BUDGET = 4
# final regret per (row, seed): b4's median over seeds 0 and 1 is 0.0505, over seed 0 alone 1e-3
REGRET = {("dagflow gp b4", 0): 1e-3, ("dagflow gp b4", 1): 1e-1, ("scheduler p4", 0): 1e-3}


def cache_result(cache: Path, label: str, seed: int, regret: float) -> None:
    """What benchmarks/search.py's cached_map keeps for one _job: (label, problem, seed, values, seconds)."""
    name = f"_job-{label}-branin-{seed}-{BUDGET}".replace(" ", "_")
    values = [BRANIN_MINIMUM + 1.0] * (BUDGET - 1) + [BRANIN_MINIMUM + regret]
    (cache / f"{name}.json").write_text(json.dumps([label, "branin", seed, values, 1.0]))


@pytest.mark.slow
def test_scheduler_rows_are_compared_on_their_own_seeds(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    for (label, seed), regret in REGRET.items():
        cache_result(cache, label, seed, regret)
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "search.py"), "--seeds", "2", "--scheduler-seeds", "1",
         "--budget", str(BUDGET), "--only", "gp,scheduler", "--rows", "dagflow gp b4,scheduler p4",
         "--problems", "branin", "--jobs", "1", "--cache", str(cache)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    ratios = out[out.index("as a multiple of in-process batches of 4") :]
    ratio = re.search(r"^scheduler p4\s+branin\s+(\S+)", ratios, re.MULTILINE)
    assert ratio is not None, out
    assert float(ratio.group(1)) == 1.0, out  # 1e-3 / 1e-3 on seed 0; 1e-3 / 0.0505 over unequal seeds
    target = re.search(r"^scheduler p4\s+branin\s+1\s.*<= 2x b4 \((\S+)\)\s+(\S+)", out, re.MULTILINE)
    assert target is not None, out
    assert (float(target.group(1)), target.group(2)) == (2e-3, "yes"), out
