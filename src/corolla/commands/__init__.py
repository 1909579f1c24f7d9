"""The commands: one module per `corolla` command, plus `run` (one run end to end: train,
evaluate on val, predict the test split) and `kfold` (the fold loop). The only layer that
combines stages and logs; `errors` turns library errors into the one-line messages that both
the CLI and the Python API give."""
