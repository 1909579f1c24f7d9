"""`corolla lr-find --data D [the train flags]`: the learning-rate range test of the run those
flags describe, without a run (`flows.lr_find`): the suggested rate, lr_find.png and
lr_find.json in --out."""

from __future__ import annotations

from corolla.commands import arguments
from corolla.config import range_test
from corolla.config.range_test import RangeSettings
from corolla.flows.lr_find import lr_find

HELP = "learning-rate range test: the loss as the rate grows from 1e-7 to 10; suggests a rate"


def add_arguments(p) -> None:
    g = p.add_argument_group("range test")
    g.add_argument("--start", type=float, default=range_test.START,
                   help=f"the first rate (default {range_test.START:g})")
    g.add_argument("--end", type=float, default=range_test.END,
                   help=f"the last rate (default {range_test.END:g})")
    g.add_argument("--steps", type=int, default=range_test.STEPS,
                   help=f"rates tried, growing exponentially from --start to --end, one "
                        f"training step each (default {range_test.STEPS}; at least "
                        f"{range_test.MIN_STEPS}, at most {range_test.MAX_STEPS}); the test "
                        f"stops early once the smoothed loss is over {range_test.DIVERGED:g}x "
                        f"its best")
    g.add_argument("--rule", choices=list(range_test.RULES), default="steepest",
                   help="how the rate is read from the curve: steepest (default; the steepest "
                        "descent of the smoothed loss) or minimum (the smoothed loss's "
                        "minimum / 10)")
    g.add_argument("--out", metavar="FOLDER", help="where lr_find.png and lr_find.json go "
                   "(default: the current folder; an earlier test's are replaced)")
    # The run's settings: the same flags as corolla train (those about how long to train and
    # the rate do not change the test).
    arguments.train_settings(p, lr_find=True)


def main(args) -> int:
    given = arguments.settings(args).with_names(
        {key: f"--{key}" for key in ("start", "end", "steps", "rule", "out")})
    lr_find(args.config, given,
            RangeSettings(args.start, args.end, args.steps, args.rule), out=args.out)
    return 0
