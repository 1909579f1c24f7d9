"""`corolla info`: the hardware and what Corolla would do on it; the registered models; the
shipped recipes (`flows.info`)."""

from __future__ import annotations

from corolla.commands import arguments
from corolla.flows import info

HELP = "hardware, backend, strategy, replicas, global batch"
DESCRIPTION = ("The hardware as the frameworks see it, and what Corolla would do on it: backend, "
               "strategy, replicas, global batch, precision. Seeing the devices as training "
               "will means importing TensorFlow (and JAX, where it may matter): seconds on a "
               "CPU, most of this command's time; --models and --recipes import neither.")


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--models", action="store_true", help="list the registered models")
    p.add_argument("--recipes", action="store_true", help="list the shipped training recipes")
    arguments.runtime(p)
    arguments.batch(p)


def main(args) -> int:
    if args.recipes:
        info.recipe_table()
    elif args.models:
        info.model_table()
    else:
        info.hardware(arguments.settings(args), as_json=args.json)
    return 0
