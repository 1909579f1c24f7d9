"""A run's time budget (`train.time_budget`, `--time`), in one home: the arithmetic of a plan
(`budget`), the probe that measures its costs (`probe`), the plan made and made again
(`time_plan`) and the deadline that keeps a run to it (`pacing`), all on the clock the run is
handed (`runtime.clock`). The Keras callback that stops a run in time is
`training.callbacks.StopInTime`; a refit's plan in the time left, `training.refit`.

Importing this package imports nothing (the backend is chosen first).

    budget: the arithmetic of a plan: the recipe's schedule fitted to the time, its one search
    pacing: a timed run kept to its plan: its deadline, the plan made again from its pace
    probe: the time probe of a time budget: a few timed steps of each kind of epoch
    time_plan: a run fitted to its time budget: measured, planned, recorded, planned again
"""
