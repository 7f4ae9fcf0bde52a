"""The node agent: registers an execute node (an EC2 GPU instance, or any host) into the pool.

`configure` detects GPUs and EC2 identity and writes one HTCondor config file; `watch` drains the
node when EC2 announces a spot interruption or a rebalance recommendation.
"""
