"""A sandbox for model-written programs (code benchmarks): see run.py for what it does and does not guarantee."""
from .run import (ALLOW_ENV, REFUSAL, CodeEvalRefused, SandboxLimits, SandboxResult, allow_code_eval,
                  code_eval_allowed, require_code_eval, run_program)

__all__ = ["ALLOW_ENV", "REFUSAL", "CodeEvalRefused", "SandboxLimits", "SandboxResult", "allow_code_eval",
           "code_eval_allowed", "require_code_eval", "run_program"]
