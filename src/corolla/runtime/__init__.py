"""Hardware detection and the distribution plan (see `plan.detect`).

    clock: the clock a time budget reads: the host's monotonic seconds, or a test's own
    collective: agreements between a multi-host job's processes outside training
    compile_cache: Corolla's cache folder, and JAX's persistent compilation cache inside it
    decide: the decision table: hardware, cluster and what was asked -> backend, strategy, XLA
    hardware: what this machine has: every probe of devices and the environment
    multiworker: narrow fixes that make Keras 3 `fit` work under MultiWorkerMirroredStrategy
    plan: the distribution plan, made once by `detect()` and used by every other layer
    signals: signal handlers set for a block and put back: the CLI's stops, a block held whole
    tflog: TensorFlow's C++ start-up lines kept off the terminal, without hiding what matters
"""

from corolla.runtime.decide import Decision, decide
from corolla.runtime.hardware import Cluster, Hardware
from corolla.runtime.plan import Plan, detect, detect_for, global_batch

__all__ = ["Cluster", "Decision", "Hardware", "Plan", "decide", "detect", "detect_for",
           "global_batch"]
