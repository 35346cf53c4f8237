"""Command line: `python -m s2d2 {generate,presets,models,train-tiny,eval-task,bench,lm-eval,export-web}`.

Every user error ends in one readable line on stderr and exit status 2, never a traceback. `generate` checks its
arguments against the same limits as the app (s2d2/limits.py: prompt characters and tokens, generation length,
block length, seed) before any model loads.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from .overrides import parse_overrides
from .cli_args import add_dtype
from .cli_checks import writable_file, written_line
from .config import DecodeConfig, preset, presets
from .limits import check_lengths, check_prompt_chars, check_prompt_tokens, check_seed


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (and exit status 2), like every other error here."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see --help)\n")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m s2d2", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    _add_generate(sub.add_parser("generate", help="decode one prompt and print text + metrics"))
    sub.add_parser("presets", help="list the named paper configurations")
    sub.add_parser("models", help="list the known checkpoints")
    _add_optional(sub, "train-tiny", "s2d2.tiny.cli", "add_train_tiny_args", "train the bundled tiny model")
    _add_optional(sub, "eval-task", "s2d2.tiny.cli", "add_eval_task_args", "accuracy of a config on a task")
    _add_optional(sub, "bench", "s2d2.sweeps.bench", "add_bench_args", "sweep a grid of configs over a task")
    _add_optional(sub, "lm-eval", "s2d2.harness.cli", "add_lm_eval_args",
                  "lm-evaluation-harness tasks with the s2d2 backend (needs requirements-eval.txt)")
    _add_optional(sub, "export-web", "s2d2.web.cli", "add_export_web_args",
                  "export a small model to ONNX for decoding in the browser (needs requirements-web.txt)")
    args = parser.parse_args(argv)
    try:
        return _dispatch(args)
    except ImportError as exc:  # an optional extra a check did not foresee: still one line, naming its own file
        print(f"error: {args.command} needs the optional module {exc.name or exc}: pip install -r "
              f"{REQUIREMENTS.get(args.command, 'requirements.txt')}", file=sys.stderr)
        return 2
    except RecursionError:
        print("error: a value is nested too deeply to read", file=sys.stderr)
        return 2
    except (ValueError, OSError, KeyError, OverflowError) as exc:
        print(f"error: {bounded(' '.join(str(exc).split()))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


# each optional command's extras (the other commands need only requirements.txt)
REQUIREMENTS = {"train-tiny": "requirements-train.txt", "lm-eval": "requirements-eval.txt",
                "export-web": "requirements-web.txt"}
MESSAGE_CHARS = 2000  # an error line's bound: every list of allowed names fits; a hostile value does not


def bounded(text: str) -> str:
    """An error message on one line, cut at MESSAGE_CHARS with a visible mark (never silently)."""
    if len(text) <= MESSAGE_CHARS:
        return text
    return f"{text[:MESSAGE_CHARS]} … ({len(text) - MESSAGE_CHARS} more characters cut)"


def _add_optional(sub: Any, name: str, module: str, adder: str, help_text: str) -> None:
    """Subcommands whose modules may be absent in a trimmed install register only when importable."""
    try:
        mod = __import__(module, fromlist=[adder])
        add = getattr(mod, adder)
    except (ImportError, AttributeError):
        return
    p = sub.add_parser(name, help=help_text)
    add(p)
    p.set_defaults(_module=module)


def _add_generate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="tiny", help="registry name, Hub id or local folder (default: tiny)")
    p.add_argument("--prompt", required=True, help="prompt text (goes through the chat template)")
    p.add_argument("--preset", default="sdar-config-a", help=f"one of: {', '.join(presets())} (default: sdar-config-a)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a DecodeConfig option, e.g. --set gen_length=64 (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="in [0, 2**31 - 1]")
    p.add_argument("--trace", help="write the trace JSON to this file")
    p.add_argument("--device", default=None,
                   help="cpu, cuda, cuda:1, mps, ... (default: cuda if there is one, else cpu)")
    add_dtype(p)
    p.add_argument("--no-chat", action="store_true", help="do not apply the chat template")


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "presets":
        width = max(map(len, presets()))  # (every description starts in one column, the longest name's)
        for name, line in presets().items():
            print(f"{name:{width}s}  {line}")
        return 0
    if args.command == "models":
        from .models.registry import known_models

        print("\n".join(known_models()))
        return 0
    if args.command == "generate":
        return _generate(args)
    module = __import__(args._module, fromlist=["x"])
    runner = {"train-tiny": "run_train_tiny", "eval-task": "run_eval_task", "bench": "run_bench",
              "lm-eval": "run_lm_eval", "export-web": "run_export_web"}[args.command]
    return int(getattr(module, runner)(args) or 0)


def check_generate_args(args: argparse.Namespace) -> DecodeConfig:
    """Every `generate` argument checked before a model loads (ValueError naming the argument and its bound)."""
    if not args.prompt.strip():
        raise ValueError("--prompt: empty; give a question or some text to continue")
    check_seed(args.seed, "--seed")
    try:
        check_prompt_chars(args.prompt)
        cfg: DecodeConfig = preset(args.preset, **parse_overrides(args.set))
        check_lengths(cfg.gen_length, cfg.block_length)
    except ValueError as exc:
        text = str(exc)
        if text.startswith("prompt: "):  # (the limit's own name for it: said once, as the flag)
            raise ValueError(f"--prompt: {text[len('prompt: '):]}") from None
        raise ValueError(f"--preset/--set: {text}") from None
    writable_file(args.trace, "--trace")
    if args.device is not None:
        import torch

        try:
            torch.device(args.device)
        except (RuntimeError, ValueError):
            raise ValueError(f"--device: {args.device!r} is not a device (cpu, cuda, cuda:1, mps, ...)") from None
    return cfg


def _generate(args: argparse.Namespace) -> int:
    cfg = check_generate_args(args)
    import torch

    from .api import encode_prompt, generate
    from .models.loading import load_model

    dtype = getattr(torch, args.dtype) if args.dtype else None
    model = load_model(args.model, device=args.device, dtype=dtype)
    chat = False if args.no_chat else None
    check_prompt_tokens(len(encode_prompt(model, args.prompt, chat)[0]))
    result = generate(model, args.prompt, cfg, seed=args.seed, chat=chat)
    print(result.text)
    print()
    print(format_metrics(result.metrics))
    if args.trace:
        existed = os.path.exists(args.trace)
        with open(args.trace, "w", encoding="utf-8") as fh:
            fh.write(result.trace.to_json())
        print("\n" + written_line("trace", args.trace, existed))
    return 0


def format_metrics(m: dict[str, Any]) -> str:
    """The run's numbers, one per line, each with what it counts in words (a newcomer reads them without the
    paper; metrics.py has the exact definitions)."""
    rows = [
        ("NFE (forwards)", m["nfe"], "calls of the model (forward passes)"),
        ("  by kind", ", ".join(f"{k} {v}" for k, v in m["nfe_by_kind"].items()),
         "prefill: the prompt; draft: guess a block; verify_*: check the guesses; commit: store a block"),
        ("query tokens", m["query_tokens"], "positions the forwards computed, all together"),
        ("generated tokens", m["generated_tokens"], "the answer's length, up to its stop token"),
        ("tokens per forward", m["tokens_per_forward"], "generated tokens / NFE (one-at-a-time decoding: 1)"),
        ("steps per block", m["steps_per_block"], "denoising steps per block, on average"),
        ("verify rate", m["verify_rate"], "share of steps the routing policy sent to the verifier"),
        ("mean acceptance length (vLLM)", m["mean_acceptance_length"],
         "1 + drafts kept per verify (past the stop token too)"),
        ("draft acceptance rate", m["draft_acceptance_rate"], "share of checked drafts the verifier kept"),
        ("edits (self-correction)", m.get("edits", 0), "decoded tokens the model replaced later (LLaDA2.1)"),
        ("wall seconds", m["wall_seconds"], "the whole decode on this machine"),
        ("finish reason", m["finish_reason"], "stop_token: the answer ended; length: gen_length ran out"),
    ]
    width = max(len(r[0]) for r in rows)
    values = [_fmt(v) for _, v, _ in rows]
    vwidth = min(12, max(len(v) for v in values))  # (the kinds' list is long: its gloss goes after it)
    return "\n".join(f"{k:<{width}}  {v:<{vwidth}}  {gloss}" for (k, _, gloss), v in zip(rows, values))


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


if __name__ == "__main__":
    sys.exit(main())
