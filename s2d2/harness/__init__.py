"""S2D2 as an lm-evaluation-harness backend (`python -m s2d2 lm-eval ...`, or `--model s2d2` once registered).

- `model_args`: the backend's arguments (preset + any DecodeConfig field), parsed and checked without lm-eval.
- `loglik`: log-likelihoods in the model's AR mode (block size 1), for multiple-choice and perplexity tasks.
- `stops`: stop sequences (`until`) that end a decode at the block where they appear.
- `records`: per-request NFE / acceptance records and the run's summary.
- `backend`: the lm-eval `LM` subclass (the only module here that imports lm_eval), registered as "s2d2".
- `cli`: the launcher subcommand.
"""
