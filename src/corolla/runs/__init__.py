"""The run folder: `paths` (every file and folder name a run holds: its format), `rundir`
(create, lock, status, record, open), `kfold` (the rule of a k-fold parent, which holds fold
runs, not a model), `outputs` (where evaluate and predict may write, checked before the work).

    identity: which run a saved model is: its run's id and input size, inside its .keras file
    kfold: the k-fold parent: a run folder that holds K fold runs and their pooled scores
    outputs: where evaluate and predict may write, decided before a model is loaded
    paths: every name in a run folder: the run-folder format, in one place
    rundir: run directories, never silently overwritten: made, locked, recorded, opened
    time_plan_file: time_plan.json, what a time budget's plan decided, checked when read back
    tracking: experiment tracking (MLflow, W&B), one module a tracker; a tracked run's end
"""
