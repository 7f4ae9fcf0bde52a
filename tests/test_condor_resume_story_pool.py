"""`dagflow run --engine condor --resume` tells what this submission did, not the earlier one's story
(#43 item 4), on the real pool: a node with retries that DAGMan does not retry (UNLESS-EXIT 2) fails with
exit 2; fixed, the resume shows it start and succeed once, no `retrying` that never happened, and the counter
ends on N/N. Plain output (not a terminal): PlainReporter's lines."""

from __future__ import annotations

import re
import sys

import pytest

from tests.condor_pool import Pool

pytestmark = pytest.mark.condor_pool

RUN_TIMEOUT = 1200  # a whole DAG on a loaded 2-core machine: only stops a hang

PIPELINE = """\
name: story
steps:
  prep:
    command: {py} -c "open('prep.txt', 'w').write('ok')"
    outputs: [prep.txt]
    resources: {{memory: 64MB, disk: 10MB}}
  flaky:
    command: {py} -c "import os, sys; sys.exit(0 if os.path.exists('fixed') else 2)"
    needs: [prep]
    retries: {{count: 2, unless_exit: [2]}}
    resources: {{memory: 64MB, disk: 10MB}}
  last:
    command: {py} -c "print('done')"
    needs: [flaky]
    resources: {{memory: 64MB, disk: 10MB}}
"""


def test_a_resume_tells_only_what_this_submission_did(condor_pool: Pool) -> None:
    pool = condor_pool
    work = pool.workdir("resume-story")
    (work / "pipeline.yaml").write_text(PIPELINE.format(py=sys.executable))
    pool.give(work)
    first = pool.dagflow(["run", "pipeline.yaml", "--engine", "condor", "--data-mode", "shared"], cwd=work,
                         check=False, timeout=RUN_TIMEOUT)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "retrying flaky" not in first.stdout, first.stdout  # UNLESS-EXIT 2: DAGMan did not retry it

    (work / "fixed").write_text("")
    pool.give(work)
    again = pool.dagflow(["run", "--resume", "latest", "--engine", "condor"], cwd=work, check=False,
                         timeout=RUN_TIMEOUT)
    out = again.stdout
    assert again.returncode == 0, out + again.stderr
    assert "retrying" not in out, out
    assert "exit code 2" not in out, out
    counters = [(int(done), int(total)) for done, total in re.findall(r"\[(\d+)/(\d+)\]", out)]
    assert counters, out
    assert all(done <= total for done, total in counters), out
    assert counters[-1][0] == counters[-1][1], out
    assert len(re.findall(r"succeeded flaky\b", out)) == 1, out
    assert len(re.findall(r"succeeded last\b", out)) == 1, out
    assert "succeeded prep" not in out, out  # finished before this submission
