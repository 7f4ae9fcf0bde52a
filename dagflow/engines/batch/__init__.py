"""What the batch engines (Slurm, Grid Engine) share: the engine base (engine.py), the run records
(records.py), submitting units in dependency order (submission.py), running the scheduler's client commands
(client.py), reading the queue into the journal (observe.py, outcome.py), and the node wrapper every batch
job runs (node.py) with the lines of a batch script that start it (script.py)."""
