"""A sandbox for model-written programs (code benchmarks): see run.py for what it does and does not guarantee."""
from .run import (ACCEPT_LESS_ENV, ALLOW_ENV, REFUSAL, CodeEvalRefused, SandboxLimits, SandboxResult,
                  allow_code_eval, code_eval_allowed, isolation_refusal, require_code_eval, run_program)

__all__ = ["ACCEPT_LESS_ENV", "ALLOW_ENV", "REFUSAL", "CodeEvalRefused", "SandboxLimits", "SandboxResult",
           "allow_code_eval", "code_eval_allowed", "isolation_refusal", "require_code_eval", "run_program"]
