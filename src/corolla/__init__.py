"""Corolla: the Kaggle "Petals to the Metal" workflow as a library and a command-line tool.

Importing `corolla` is cheap and does not import Keras: the Keras backend has to be chosen (by
`corolla.runtime.detect`) before Keras is first imported.

    import corolla
    plan = corolla.runtime.detect()          # hardware, backend, strategy, replicas, batch
    with plan.scope():
        model = corolla.models.create_model("small_cnn", num_classes=104, image_size=192)

The workflow in a few lines (`corolla.api`; pictures show inline in Jupyter):

    run = corolla.train(data="/data/petals", epochs=12)   # train, evaluate on val, submission
    run.predict(tta=4); run.report()
    run = corolla.open_run("runs/<run>")

    api: the workflow from Python in a few lines (`train`, `open_run`, `Run`), for notebooks
    cli: the `corolla` command: its parser built from the command modules, and the dispatch
    commands: one module per `corolla` command: its flags parsed, one flow called
    config: what a run is asked to do, as data (schema, flags, recipes), checked before it runs
    credentials: secrets scrubbed out of what is printed and logged (a URL's password, tokens)
    data: the competition layout -> parsed records -> `tf.data` pipelines -> augmentation
    errors: `UserError`, for what the user asked that cannot work, and its one-line wording
    evaluation: a trained run's model applied to data: scores, predictions, TTA, ensembles
    files: atomic file writes, folders checked before work, a run's JSON and CSV records read
    flows: the workflows (train, run, k-fold, evaluate, predict...) the CLI and the API call
    models: the model registry, the factory behind one generic head, keras-hub presets
    report: writers, data -> files: metrics, pictures, report.html, submission.csv, exports
    runs: the run folder: its format, its life (made, locked, recorded, opened), k-fold parents
    runtime: hardware detection and the distribution plan (backend, strategy, batch, precision)
    scoring: what outputs are scored by (metrics, TTA views, batched prediction), below training
    stopping: a stop asked for by a signal, recorded for the long loops to raise again
    training: a run's settings resolved once, then its model trained, checkpointed and saved
"""

import importlib

__version__ = "0.1.0"

# The layers, lowest first (each imports only from those before it; tests/test_layers.py holds
# this): errors, files, credentials, stopping -> config -> runtime -> data -> models ->
# scoring -> runs -> training -> evaluation -> report -> flows -> commands -> api, cli. They
# load on first attribute access, so that `import corolla` stays light.
_SUBMODULES = ("errors", "files", "credentials", "stopping", "config", "runtime", "data",
               "models", "scoring", "runs", "training", "evaluation", "report", "flows",
               "commands", "api", "cli")
# The notebook API, loaded on first use too.
_API = ("train", "lr_find", "open_run", "Run", "check_data")  # corolla.train() is the workflow

__all__ = [*_API, *_SUBMODULES]


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"corolla.{name}")
    if name in _API:
        return getattr(importlib.import_module("corolla.api"), name)
    raise AttributeError(f"module 'corolla' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
