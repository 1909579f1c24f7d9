"""A run's time budget (`train.time_budget`, `--time`), in one home: one object that plans,
plans again, keeps the deadline and gives the refit its room (`plan.TimePlan`), on the pure
arithmetic of a plan (`budget`) and of a plan made again and its deadline (`pacing`), the probe
that measures its costs (`probe`) and the callback that stops a run in time (`stop`), all on
the clock the run is handed (`runtime.clock`). What the plan decided is the run's
time_plan.json (`runs.time_plan_file`).

Importing this package imports nothing (the backend is chosen first).

    budget: the arithmetic of a plan: the recipe's schedule fitted to the time, its one search
    pacing: a timed run kept to its plan: its deadline, the plan made again from its pace
    plan: a run fitted to its time budget, in one object: measured, planned, recorded, planned again
    probe: the time probe of a time budget: a few timed steps of each kind of epoch
    stop: the Keras callback that stops a timed run before an epoch that would end past it
"""
