"""Resources learned from history: what past runs of a pipeline used, and the requests that follows."""
