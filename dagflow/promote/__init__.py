"""Model artifacts: publishing a train step's outputs, and promoting a model by moving a `latest`
pointer only when an evaluate step's metric shows it is better than the current one."""
