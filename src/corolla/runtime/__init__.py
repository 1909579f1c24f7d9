"""Hardware detection and the distribution plan (see `plan.detect`)."""

from corolla.runtime.decide import Decision, decide
from corolla.runtime.hardware import Cluster, Hardware
from corolla.runtime.plan import Plan, detect, detect_for, global_batch

__all__ = ["Cluster", "Decision", "Hardware", "Plan", "decide", "detect", "detect_for",
           "global_batch"]
