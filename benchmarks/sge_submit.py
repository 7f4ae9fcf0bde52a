"""Grid Engine engine submission speed: how fast a 4,921-node plan becomes qsub jobs, and how long it runs.

The shape of benchmarks/slurm_submit.py: 41 regions x 40 trials x a 3-step chain (a -> b -> c), plus one
aggregate over all of them; every node runs `true`, so the times are orchestration only. Modes:

  arrays    what the engine does: one job array per step (`-t 1-1640`), chained with -hold_jid_ad, the
            aggregate -hold_jid on the last array (4 qsub calls)
  per-node  one qsub per node with a -hold_jid list (the fallback for wiring an array cannot express);
            the baseline the ratio column divides by

Needs a running cluster (SGE_ROOT etc. set, or scripts/sge-cluster.sh up, which this starts if nothing
answers and stops again at the end). Time to completion depends on how fast sge_execd starts jobs on this
machine (and its slots), not on dagflow.

    python benchmarks/sge_submit.py                      # both modes, full shape, submission only
    python benchmarks/sge_submit.py --wait --modes arrays --regions 4 --trials 5
"""

from __future__ import annotations

from batch_submit_common import BatchBench, main  # first: it puts the repository on sys.path

from dagflow.engines.sge.engine import SgeEngine

if __name__ == "__main__":
    raise SystemExit(main(BatchBench(SgeEngine(), poll_s=1.0, waits_by_default=False), __doc__))
