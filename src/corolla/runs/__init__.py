"""The run folder: `paths` (every file and folder name a run holds: its format), `rundir`
(create, lock, status, record, open), `kfold` (the rule of a k-fold parent, which holds fold
runs, not a model), `outputs` (where evaluate and predict may write, checked before the work).
"""
