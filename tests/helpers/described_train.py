"""Runs the `corolla` command on a machine described as other hardware: `runtime.plan.described`
makes every decision (backend, precision, recipe auto's batch) for the `Hardware` fields given
as JSON, while models train on this machine's CPU.

    python described_train.py '{"gpus": 1, "gpu_compute_capability": [8, 0], ...}' corolla-args...

"offline": true among them (not a Hardware field) also makes every download host unreachable
and kagglehub's cache empty, whatever the machine has.
"""

import json
import sys

from corolla.runtime import plan

fields = json.loads(sys.argv[1])
fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
if fields.pop("offline", False):
    from corolla.models import hub

    hub.reachable = lambda *a, **k: False
    hub.cached = lambda named: False

from corolla.cli import main  # noqa: E402

with plan.described(**fields):
    sys.exit(main(sys.argv[2:]))
