"""Demand-driven GPU autoscaler: sizes EC2 Auto Scaling groups from the jobs waiting in the schedd.

One loop: read idle jobs (demand.py) and the pool's nodes (pool.py) and groups (cloud.py), decide
(decide.py: classad2 matchmaking in matching.py, bin-packing in packing.py), act (loop.py), log the
decision as a table (report.py). State that must survive a restart lives in state.py's file.
"""
