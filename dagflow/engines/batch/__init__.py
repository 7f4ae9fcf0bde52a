"""What the batch engines (Slurm, Grid Engine) share: the node wrapper every batch job runs (node.py) and
the lines of a batch script that start it (script.py)."""
