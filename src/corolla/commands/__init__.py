"""The commands: one module per `corolla` command, plus `run` (one run end to end: train,
evaluate on val, predict the test split) and `kfold` (the fold loop). The only layer that
combines stages and logs; `errors` turns library errors into the one-line messages that both
the CLI and the Python API give.

A command module declares its command line: HELP, `add_arguments(parser)` (with the flag
groups of `arguments`) and `main(args)`, the CLI's entry, which calls the same function the
Python API calls. The CLI imports every command module to build its parser, before the flags
pick the Keras backend and before TensorFlow's start-up lines are quieted: what imports
TensorFlow, Keras or JAX is imported inside the functions that use it."""
