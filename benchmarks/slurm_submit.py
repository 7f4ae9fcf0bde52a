"""Slurm engine submission speed: how fast a 4,921-node plan becomes sbatch jobs, and how long it runs.

Shape: 41 regions x 40 trials x a 3-step chain (a -> b -> c), plus one aggregate over all of them;
every node runs `true`, so the times are orchestration only. Modes:

  arrays    what the engine does: one job array per step, chained with aftercorr, the aggregate afterok
            on the last array (4 sbatch calls)
  per-node  one sbatch per node with an explicit afterok list (the fallback for wiring an array cannot
            express); the baseline the ratio column divides by

Needs a running cluster (SLURM_CONF set, or scripts/slurm-cluster.sh up, which this starts if nothing
answers and stops again at the end). Time to completion depends on how fast slurmd launches batch jobs
on this machine, not on dagflow.

    python benchmarks/slurm_submit.py                      # both modes, full shape
    python benchmarks/slurm_submit.py --modes arrays --regions 4 --trials 5
    python benchmarks/slurm_submit.py --no-wait            # submission only (cancels the run after)
"""

from __future__ import annotations

from batch_submit_common import BatchBench, main  # first: it puts the repository on sys.path

from dagflow.engines.slurm.engine import SlurmEngine

if __name__ == "__main__":
    raise SystemExit(main(BatchBench(SlurmEngine(), poll_s=0.5, waits_by_default=True), __doc__))
