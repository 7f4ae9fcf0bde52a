"""dagflow's own DAG scheduler and the job-executor tier it drives.

A job executor runs single nodes (executor.py: `run_job`, `check_active`, `cancel_jobs`); the scheduler
(scheduler.py) owns the DAG: the ready queue, retries, timeouts, checkpoint restarts, the cache
(cache.py), the journal and exactly-once after a kill -9. graph.py and release.py are the parts the local
engine's event loop shares with it."""
