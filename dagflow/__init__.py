"""dagflow: run ML pipelines as workflow DAGs, locally or on HTCondor-style batch pools."""

__version__ = "0.1.0"
