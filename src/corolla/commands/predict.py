"""`corolla predict RUN`: the run's checked submission.csv (`flows.predict`); `corolla predict
RUN PATH...`: the top classes of anyone's photos (`flows.photos`)."""

from __future__ import annotations

from corolla.commands import arguments
from corolla.errors import UserError
from corolla.flows.photos import TOP_K, predict_photos
from corolla.flows.predict import BIAS_CHOICES, predict


HELP = ("the top classes of any photos by name (RUN PATH...), or a run's submission.csv for its "
        "data's test split (RUN alone)")
DESCRIPTION = ("corolla predict RUN PATH...: the likeliest classes of each photo (image files, "
               "folders searched recursively, CSVs of paths; any size, format and mode), by "
               "name with their probabilities: a table for a few photos, a CSV (path,class_1,"
               "class_index_1,probability_1,...) for more. corolla predict RUN: the checked "
               "submission.csv (id,label) for the test split of the run's data.")


def add_arguments(p) -> None:
    arguments.scored_run(p)
    arguments.photos(p, TOP_K)
    p.add_argument("--out", help="with PATHs, the CSV of their predictions (default for more "
                   "than 20 photos or --json: ./RUN_NAME-predictions.csv); without, the "
                   "submission file (default: RUN/submission.csv); never a file of the run")
    p.add_argument("--force", action="store_true", help="let --out replace an existing file")
    p.add_argument("--bias", choices=BIAS_CHOICES, default="none",
                   help="fitted: decide with the per-class offsets of `corolla evaluate RUN "
                        "--fit-bias` (for macro F1); default none (argmax)")
    arguments.tta(p)
    arguments.runtime(p)
    arguments.batch(p, " for inference")


def main(args) -> int:
    if args.photos:
        if args.data:
            raise UserError("--data names a data set's test split; with photo PATHs, leave it "
                            "out")
        predict_photos(args.run, args.photos, arguments.settings(args), top=args.top_k,
                       out=args.out, as_json=args.json, strict=args.strict, force=args.force,
                       tta=args.tta, bias=args.bias)
        return 0
    photo_only = [flag for flag, given in (("--json", args.json), ("--strict", args.strict),
                                           ("--top-k", args.top_k != TOP_K)) if given]
    if photo_only:
        raise UserError(f"{photo_only[0]} is for predictions on photos: pass their PATHs after "
                        f"the run (corolla predict RUN photos/)")
    predict(args.run, arguments.settings(args), data=args.data, out=args.out, force=args.force,
            tta=args.tta, bias=args.bias)
    return 0
