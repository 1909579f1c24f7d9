"""The run-folder format, pinned: the name of every file and folder of a run, as
`corolla.runs.paths` gives it. A run written before a change here would no longer be read, so
a change must be deliberate, and this test changes with it. It is the one test that writes the
names out: every other test names a run's files through `paths`."""

from pathlib import Path

from corolla.runs import paths

FORMAT = {
    "CONFIG": "config.toml", "PLAN": "plan.json", "CLASSES": "classes.txt",
    "MODEL": "model.keras", "LAST": "last.keras", "HISTORY": "history.csv", "LOGS": "logs",
    "METRICS": "metrics.json", "SUBMISSION": "submission.csv", "REPORT": "report.html",
    "CONFUSION": "confusion_matrix.png", "CURVES": "training_curves.png",
    "SAMPLES": "sample_predictions.png", "MISTAKES": "confident_mistakes.png",
    "EXPLANATIONS": "explanations.png", "EXPLAIN": "explain", "EXPLAIN_MARK": ".corolla-explain",
    "PREDICTIONS": "predictions", "BACKUP": "backup", "STATE": "state.json",
    "FINISHED": "FINISHED", "LOCK": ".lock", "DATA_CHECK": "data_check.json",
    "LABEL_REVIEW": "label_review.csv", "LABEL_REVIEW_PICTURE": "label_review.png",
    "FOLDS": "folds.csv", "OOF": "oof", "EVAL_PREFIX": "eval-", "BIAS": "bias.json",
    "EXPORT_PREFIX": "export-", "ENSEMBLE_PREFIX": "ensemble", "LR_FIND": "lr_find.json",
    "LR_FIND_PICTURE": "lr_find.png", "TRACKING": "tracking.json",
    "MLFLOW_DB": "mlflow.db", "MLFLOW_ARTIFACTS": "mlartifacts", "REFIT": "refit.keras",
    "REFIT_PLAN": "refit.json", "TIME_PLAN": "time_plan.json", "REFIT_HISTORY": "refit-history.csv",
    "LINEAR_HEAD": "linear_head.json", "LINEAR_HEAD_ALL": "linear_head.npz",
    "REFIT_BACKUP": "refit-backup",
}


def test_every_name_of_a_run_folder_is_the_formats():
    names = {key: value for key, value in vars(paths).items() if key.isupper()}
    assert names == FORMAT


def test_folds_and_saved_predictions_are_named_by_number_and_split():
    assert [paths.fold_name(k) for k in (1, 2, 10)] == ["fold-1", "fold-2", "fold-10"]
    assert paths.predictions_file("runs/r", "val") == Path("runs/r/predictions/val.npz")
    assert paths.predictions_file(Path("e"), "oof") == Path("e/predictions/oof.npz")
