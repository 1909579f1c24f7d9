"""`corolla check-data --data D`: what the data holds, before training (`flows.check_data`)."""

from __future__ import annotations

from corolla.flows.check_data import check_data


HELP = ("know the data before training: exact and near duplicates within and across splits, "
        "class counts and imbalance, image sizes, files that do not decode")


def add_arguments(p) -> None:
    p.add_argument("--data", required=True, help="a TFRecord layout, an image folder or a CSV "
                   "of path,label (as --data of train)")
    p.add_argument("--out", metavar="FILE.json", help="write everything found (every group of "
                   "duplicates with ids and paths) into this new JSON file")
    p.add_argument("--strict", action="store_true", help="exit with an error when images have "
                   "copies in another split")


def main(args) -> int:
    check_data(args.data, out=args.out, strict=args.strict)
    return 0
