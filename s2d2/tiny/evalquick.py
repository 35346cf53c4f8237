"""A minimal batched greedy decoder for quick accuracy checks during training (no KV cache; recompute).

`mode="causal"`: the logit at the last token predicts the next one (a stage-1 causal model).
`mode="aligned"`: AR mode of a position-aligned (SDAR) model, i.e. block size 1: a MASK is placed at the next
position, seeing the clean causal prefix and itself, and its own logit is read.
"""
from __future__ import annotations

import torch


@torch.inference_mode()
def greedy_batch(model, tokenizer, prompts: list[str], mode: str = "aligned", max_new: int = 96,
                 mask_id: int | None = None, stop_ids: tuple[int, ...] | None = None, batch_size: int = 64
                 ) -> list[str]:
    if mask_id is None:
        mask_id = tokenizer.mask_token_id
    if stop_ids is None:
        stop_ids = (tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id)
    outs: list[str] = []
    for s in range(0, len(prompts), batch_size):
        chunk = prompts[s: s + batch_size]
        seqs = [tokenizer.encode(p, add_special_tokens=False) for p in chunk]
        gens: list[list[int]] = [[] for _ in chunk]
        done = [False] * len(chunk)
        for _ in range(max_new):
            live = [i for i in range(len(chunk)) if not done[i]]
            if not live:
                break
            rows = [seqs[i] + gens[i] + ([mask_id] if mode == "aligned" else []) for i in live]
            T = max(len(r) for r in rows)
            ids = torch.full((len(rows), T), int(tokenizer.pad_token_id), dtype=torch.long)
            for j, r in enumerate(rows):
                ids[j, : len(r)] = torch.tensor(r)
            hidden = model.model(input_ids=ids).last_hidden_state  # causal attention; padding is on the right
            idx = torch.tensor([len(r) - 1 for r in rows])
            logits = model.lm_head(hidden[torch.arange(len(rows)), idx]).float()
            logits[:, mask_id] = float("-inf")
            nxt = logits.argmax(-1).tolist()
            for j, i in enumerate(live):
                t = int(nxt[j])
                if t in stop_ids:
                    done[i] = True
                else:
                    gens[i].append(t)
        outs.extend(tokenizer.decode(g, skip_special_tokens=False) for g in gens)
    return outs


def arithmetic_accuracy(model, tokenizer, n: int = 50, mode: str = "aligned", return_texts: bool = False):
    from s2d2.tasks.arithmetic import heldout, prompt_for, score

    probs = heldout(n)
    texts = greedy_batch(model, tokenizer, [prompt_for(p) for p in probs], mode=mode)
    acc = sum(score(t, p) for t, p in zip(texts, probs)) / max(1, len(probs))
    return (acc, texts) if return_texts else acc
