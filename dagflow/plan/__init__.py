from dagflow.plan.model import DAGFLOW_LAUNCHER, Node, Plan, Resources, StepInfo

__all__ = ["DAGFLOW_LAUNCHER", "Node", "Plan", "Resources", "StepInfo"]
