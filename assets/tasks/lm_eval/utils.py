"""Loaders for the local lm-eval tasks in this folder (read by lm-eval through `!function utils.<name>`).

They read ../gsm8k_style_sample.jsonl relative to this file, so the tasks work from any working directory.
lm-eval passes the run's metadata (the model_args among it) as keyword arguments; the loaders ignore them.
"""
import json
from pathlib import Path

import datasets

SAMPLE = Path(__file__).resolve().parent.parent / "gsm8k_style_sample.jsonl"


def _rows():
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_sample(**_):
    """The 20 problems as lm-eval's test split: id, question, answer (a GSM8K-style solution)."""
    return {"test": datasets.Dataset.from_list(_rows())}


def load_choices(**_):
    """Multiple choice over the same problems: the context is the ChatML prompt and the solution up to its
    '####', the choices are the gold number and three near misses (order rotated per problem)."""
    docs = []
    for k, row in enumerate(_rows()):
        cot, gold = row["answer"].rsplit("####", 1)
        gold = int(gold.strip())
        options = [gold, gold + 1, gold - 1, gold + 10]
        shift = k % 4
        options = options[shift:] + options[:shift]
        prompt = f"<|im_start|>user\n{row['question']}<|im_end|>\n<|im_start|>assistant\n{cot}####"
        docs.append({"id": row["id"], "prompt": prompt, "choices": [str(o) for o in options],
                     "label": options.index(gold)})
    return {"test": datasets.Dataset.from_list(docs)}
