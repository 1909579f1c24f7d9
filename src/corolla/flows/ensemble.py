"""`corolla ensemble`: several runs' saved probabilities blended (`evaluation.blend`), with
the weights chosen on val, into a new folder that `report.scored` writes like a run's."""

from __future__ import annotations

from pathlib import Path

from corolla.errors import UserError
from corolla.runs import paths, rundir, tracking


def ensemble_run(folders, weights="auto", out: str | Path | None = None,
                 runs_dir: str | Path = "runs", log=print) -> Path:
    """`corolla ensemble`: blends, then writes a new folder (`out`, or
    runs/ensemble-<timestamp>), never over an existing one: predictions/val.npz (and
    test.npz), metrics.json, the confusion matrix, with test predictions a checked
    submission.csv, and report.html. Everything is checked and the weights are chosen before the
    folder is made, so a refusal leaves nothing behind."""
    from corolla.evaluation import blend
    from corolla.scoring import metrics

    ensemble = blend.build(folders, weights)
    from corolla.report import scored  # loads TensorFlow: after the members are checked

    if out is not None and (Path(out).exists() or Path(out).is_symlink()):
        raise UserError(f"--out {out} already exists; an ensemble writes a new folder: choose "
                        f"another name")
    out_dir = (rundir.create(Path(out).parent, Path(out).name, paths.ENSEMBLE_PREFIX)
               if out is not None else rundir.create(runs_dir, "", paths.ENSEMBLE_PREFIX))
    m = blend.metrics(ensemble)
    for member in m["members"]:
        log(f"member {member['folder']}: val {metrics.f1_text(member)}, weight "
            f"{member['weight']:.3f}")
    log(f"weights: {ensemble.search}")
    written = scored.write(out_dir, m, ensemble.val, test=ensemble.test, write_submission=True,
                           title="Ensemble, val (rows: true class, normalised)")
    log(f"blend: val accuracy {m['accuracy']:.4f}  {metrics.f1_text(m)}  "
        f"({m['num_examples']} images"
        f"{'; weights chosen on val, so optimistic' if 'note' in m else ''})")
    if ensemble.test is None:
        log("no test predictions in the members: no submission.csv written")
    for path in written.values():
        log(f"wrote {path}")
    for member in folders:  # a tracked member run gets the blend's scores as ensemble-<time>/
        tracking.send_scored(member, out_dir, m, log)
        tracking.finish(member, log)
    return out_dir
