"""`corolla explain RUN IMAGE...`: where the run's model found its evidence, a Grad-CAM picture
per image (`flows.explain`)."""

from __future__ import annotations

from corolla.commands import arguments
from corolla.flows.explain import explain


HELP = "why a run's model decided: a Grad-CAM heatmap per image (RUN/explain/IMAGE.png)"


def add_arguments(p) -> None:
    p.add_argument("run", help="a run directory")
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files, folders of them "
                   "(searched recursively) or CSVs of paths")
    p.add_argument("--out", help="the folder for the pictures (default: RUN/explain/)")
    p.add_argument("--force", action="store_true", help="replace pictures already there")
    arguments.runtime(p)


def main(args) -> int:
    explain(args.run, args.images, arguments.settings(args), out=args.out, force=args.force)
    return 0
