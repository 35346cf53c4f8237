// What one step of the block loop reads and mutates. Python twin: s2d2/decoding/context.py (StepContext).

import { makePolicy } from "../policies/index.js";
import { blockPlan } from "./layout.js";

/** What every loop (block loop, editing loop) starts from: the prompt length, the block plan, the sequence (prompt
 * then masks) and a fresh step context with its policy and empty cache. */
export function startDecode(model, cfg, prompt, rec, stream) {
  const P = prompt.length;
  const plan = blockPlan(cfg, P);
  const x = new Int32Array(plan.total).fill(model.spec.mask_id);
  x.set(prompt);
  const policy = cfg.method === "s2d2" ? makePolicy(cfg) : null;
  return { P, plan, x, ctx: stepContext(model, cfg, rec, stream, x, model.newCache(), policy, P) };
}

export function stepContext(model, cfg, rec, stream, x, cache, policy, promptLen) {
  return {
    model, cfg, rec, stream, x, cache, policy, promptLen,
    maskId: model.spec.mask_id,
    stopSet: new Set(model.spec.stop_ids),
    blockLength: null, // the current block's length (varies with adaptive_block)
    cached: 0, // leading positions of the block whose KV is already cached (kv_reuse)
    carried: null, // {rows, offset} draft logits from a fused forward, unconsumed
    tail: null, // [start, end) of the finished block still to cache (fused_commit)
    seenEnd: null, // kv_reuse: verifier rows [cached, seenEnd) wait in the cache to settle
    masks: [], // block-relative positions of the current block still masked
    stopHits: [], // positions known to hold a stop id
    get B() {
      return this.blockLength ?? this.cfg.block_length;
    },
  };
}

/** The decoded text of one token (the model's table), so viewers never need a tokenizer. */
export function tokenText(ctx, token) {
  return ctx.rec.detailed ? ctx.model.text(token) : "";
}
