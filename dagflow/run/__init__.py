"""Run directories: layout, run ids, the durable journal of node states, and status reading.

Every engine's run lives in `.dagflow/runs/<run-id>/`; nothing else is state.
"""
