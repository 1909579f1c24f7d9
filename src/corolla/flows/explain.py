"""`corolla explain RUN IMAGE...`: one Grad-CAM picture per photo (`evaluation.gradcam`): the
photo, then where the evidence for the predicted class lies, titled with the top classes."""

from __future__ import annotations

from pathlib import Path

from corolla.config.flags import Given
from corolla.data.prepare import image_files
from corolla.errors import UserError
from corolla.stopping import check_stop
from corolla.evaluation import gradcam
from corolla.files import check_folder, make_folder
from corolla.report import photo_table
from corolla.runs import paths, rundir
from corolla.runs.outputs import inside, refuse_foreign


def explain(run, images, given: Given = Given(),
            out: str | Path | None = None, force: bool = False, log=print) -> list[Path]:
    """Writes OUT/<image name>.png for each photo named by `images` (files, folders, CSVs of
    paths, as `corolla predict RUN PATH...` takes them; default OUT: RUN/explain/); returns the
    files written. A file that does not decode is skipped and listed."""
    images = image_files.as_paths(images, "images")
    # The run, the images and the output folder are checked before Keras is imported.
    run_dir, config = rundir.load(run)
    files = image_files.list_photos(images)
    if not files:
        raise UserError("no images given; pass image files, folders of them, or a CSV of paths")
    folder = explain_folder(run_dir, out, images)
    targets = _targets(files, folder)
    taken = [t for t in targets if t.exists()]
    if taken and not force:
        raise UserError(f"{taken[0]} already exists; pass --force to replace it, or --out with "
                        f"another folder")
    class_names = rundir.class_names(run_dir)
    from corolla.evaluation.inference import input_size, load_model, open_run
    from corolla.report import plots

    plan = open_run(run_dir, given, with_data=False, config=config).plan
    model = load_model(run_dir, plan, len(class_names), config)
    explain_images = gradcam.explainer(model)
    size = input_size(model, config.model.input_size or config.data.image_size)
    fit = image_files.fit_of(config.data.converted or config.data.path)
    make_folder(folder)
    (folder / paths.EXPLAIN_MARK).touch()  # before any picture: see runs.outputs
    written, skipped = [], {}
    for path, target in zip(files, targets):
        check_stop()
        images, failed = image_files.read_many([path], size, fit)
        if failed:
            skipped.update(failed)
            continue
        maps, probabilities, _ = explain_images(images)
        top = photo_table.records([path], probabilities, class_names, 3)[0]["top"]
        title = ", ".join(f"{t['class'].strip()} {t['probability']:.0%}" for t in top)
        written.append(plots.plot_explanations(images, maps, [title], target, columns=2,
                                               title=f"Grad-CAM of {top[0]['class'].strip()}"))
        log(f"{target}: {title}")
    for line in photo_table.skipped_lines(skipped):
        log(line)
    if not written:
        raise UserError(f"none of the {len(files)} image(s) given could be read (listed "
                        f"above); nothing was explained")
    return written


def explain_folder(run_dir: Path, out, inputs) -> Path:
    """Where the pictures go: RUN/explain/ by default; inside the run nowhere else (its own
    pictures are its record), and elsewhere never into another run, the inputs or a data set
    (`runs.outputs.refuse_foreign`)."""
    default = run_dir / paths.EXPLAIN
    folder = Path(out) if out is not None else default
    resolved, run = folder.resolve(), run_dir.resolve()
    if inside(resolved, run):
        if resolved != default.resolve():
            raise UserError(f"--out {out} is inside the run folder {run_dir}, where explain "
                            f"writes only into {default}; choose that or a folder outside the "
                            f"run")
    else:
        refuse_foreign(folder, run_dir, inputs=inputs, images=True, mark=paths.EXPLAIN_MARK)
    check_folder(folder.parent, "--out")
    return folder


def _targets(files: list[str], folder: Path) -> list[Path]:
    """OUT/<stem>.png per photo; photos of the same name in different folders get -2, -3..."""
    seen: dict[str, int] = {}
    targets = []
    for path in files:
        stem = Path(path).stem
        seen[stem] = seen.get(stem, 0) + 1
        targets.append(folder / (f"{stem}.png" if seen[stem] == 1 else
                                 f"{stem}-{seen[stem]}.png"))
    return targets
