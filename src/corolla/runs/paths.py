"""Every name in a run folder: the run-folder format, in one place.

    runs/<model>-<YYYYmmdd-HHMMSS>/
        config.toml  plan.json  classes.txt      what the run is (written first)
        time_plan.json                           --time: what the plan decided beyond the
                                                 schedule (its line, shortened epochs)
        backup/ (state.json, epoch files)        the state of a run in training; gone once trained
        history.csv  logs/                       one row per epoch; TensorBoard's events
        model.keras  last.keras                  the best epoch's model (marks the run trained),
                                                 the last epoch's
        refit.keras  refit.json  refit-history.csv   --refit: the model trained again on
                                                 train + val, which predicts the test split;
                                                 its plan; its epochs (refit-backup/ meanwhile)
        linear_head.json                         a timed run's linear head: its val macro F1,
                                                 its C, whether the run kept it
        linear_head.npz                          ... fit again on train + val: refit.keras
                                                 where the run keeps it
        metrics.json  *.png  report.html        scores on val, pictures, the offline page
        data_check.json                          the check of the data before training
        lr_find.json  lr_find.png                the range test of `--lr find`: the rate found
        label_review.csv  label_review.png       labels the model doubts, for a person to review
        predictions/{val,test}.npz  submission.csv
        eval-<data>/                             scores on other data (the same files)
        bias.json                                offsets fitted for macro F1 (--fit-bias)
        export-<format>[-<quantize>]/            the model for deployment (corolla export)
        fold-1/ ... folds.csv predictions/oof.npz    a k-fold parent's
        tracking.json                            the experiment tracker's run (--track)
        FINISHED                                 written last
    runs/ensemble-<YYYYmmdd-HHMMSS>/             a blend of runs (the scored files)

Changing a name here changes the format: runs written before would no longer be read.
"""

from __future__ import annotations

from pathlib import Path

CONFIG = "config.toml"
PLAN = "plan.json"  # what ran: the hardware plan and library versions of every session
CLASSES = "classes.txt"  # the class names the model's outputs stand for
MODEL = "model.keras"  # the best epoch's model by val macro F1
LAST = "last.keras"  # the last epoch's model, beside model.keras
HISTORY = "history.csv"
LINEAR_HEAD = "linear_head.json"  # a timed run's linear head (training.linear_head), its fate
LINEAR_HEAD_ALL = "linear_head.npz"  # ... its weights fit on train + val (kernel, bias)
LOGS = "logs"  # TensorBoard's event files
METRICS = "metrics.json"
SUBMISSION = "submission.csv"
REPORT = "report.html"
CONFUSION = "confusion_matrix.png"
CURVES = "training_curves.png"
SAMPLES = "sample_predictions.png"
MISTAKES = "confident_mistakes.png"  # the wrong predictions the model was surest of
EXPLANATIONS = "explanations.png"  # Grad-CAM over samples and confident mistakes
EXPLAIN = "explain"  # RUN/explain/: `corolla explain`'s heatmaps, one PNG per image
EXPLAIN_MARK = ".corolla-explain"  # in explain's folder: its PNGs are heatmaps, not photos
PREDICTIONS = "predictions"  # the folder of saved predictions, one <split>.npz each
BACKUP = "backup"  # the state of a run in training (train.checkpoint); gone once trained
STATE = "state.json"  # inside backup/: what the backup holds
FINISHED = "FINISHED"  # written last, when evaluation and the submission are written too
LOCK = ".lock"  # held (flock) by the one process that trains the run
DATA_CHECK = "data_check.json"  # duplicates, classes, sizes of the run's data (data.audit.survey)
LABEL_REVIEW = "label_review.csv"  # the images whose given label the model doubts most
LABEL_REVIEW_PICTURE = "label_review.png"  # ... their thumbnails
FOLDS = "folds.csv"  # a k-fold parent's assignment of train+val ids to folds
OOF = "oof"  # a k-fold parent's out-of-fold predictions: predictions/oof.npz
EVAL_PREFIX = "eval-"  # RUN/eval-<data>/: scores on other data than the run's own
BIAS = "bias.json"  # per-class offsets fitted for macro F1 (corolla evaluate --fit-bias)
EXPORT_PREFIX = "export-"  # RUN/export-<format>[-<quantize>]/: `corolla export`'s folders
ENSEMBLE_PREFIX = "ensemble"  # runs/ensemble-<timestamp>/
LR_FIND = "lr_find.json"  # the range test (`--lr find`): rates, losses, the rate suggested
LR_FIND_PICTURE = "lr_find.png"  # ... its loss against the rate
REFIT = "refit.keras"  # --refit: the model trained again on train + val (predicts the test split)
TIME_PLAN = "time_plan.json"  # a timed run's plan: its line, shortened epochs (training.timing)
REFIT_PLAN = "refit.json"  # ... its epochs and steps, decided once (a resumed refit keeps them)
REFIT_HISTORY = "refit-history.csv"  # ... one row per epoch
REFIT_BACKUP = "refit-backup"  # ... its backup while it trains
TRACKING = "tracking.json"  # the tracker (mlflow, wandb) and its run's id: a resume continues it
MLFLOW_DB = "mlflow.db"  # <runs_dir>/mlflow.db: MLflow's store when MLFLOW_TRACKING_URI is unset
MLFLOW_ARTIFACTS = "mlartifacts"  # <runs_dir>/mlartifacts/: that store's artefacts


def fold_name(k: int) -> str:
    """A k-fold parent's folder of fold k (1..K)."""
    return f"fold-{k}"


def predictions_file(folder: str | Path, split: str) -> Path:
    """Where the saved predictions of `split` live in a run, eval-* or ensemble folder."""
    return Path(folder) / PREDICTIONS / f"{split}.npz"
