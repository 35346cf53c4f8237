// One step of the D2F pipeline: one forward over [blocks to cache | blocks in flight] that stores the finished
// blocks' KV and drafts every mask in flight; the per-block D2F rule; with S2D2, the route and the verifier
// (pipeline_verify_branch.js); the writes and the step's record.
// Python twin: s2d2/decoding/pipeline_step.py (pipeline_step, _cache_forward_bounds, _forward_and_draft, _cached,
// _block_rules, _apply), position-aligned models.
import { normalizedEntropy } from "../estimators.js";
import { segmentsPattern } from "../models/masks.js";
import { draftRows } from "./detail_rows.js";
import { range } from "./forwards.js";
import { confidenceScores, d2fRule, referenceRule } from "./pipeline_rules.js";
import { verifySpan } from "./pipeline_verify_branch.js";
import { drawWithProbs, tokenDistribution } from "./sampling.js";
import { firstMaskSpan, policyInputs } from "./step.js";

/** One step of the pipeline state `st` (pipeline.js); `events` already holds this step's added/complete events.
 * Returns its StepRecord. */
export async function pipelineStep(ctx, st, events) {
  const active = st.blocks.filter((b) => b.state === "active");
  const first = active[0];
  const firstForward = ctx.rec.lastIndex + 1;
  const [lo, hi, end] = cacheForwardBounds(ctx, st);
  const masks = active.flatMap((b) => b.masks);
  const { probs, tokens, p } = await forwardAndDraft(ctx, st, active, lo, hi, end, masks, events);
  const [chosen, top1Used] = blockRules(ctx, active, probs, p);
  const spanLen = firstMaskSpan(masks);
  const h = normalizedEntropy(probs);
  let inputs = null;
  let decision = null;
  let verified = null;
  if (ctx.policy !== null) {
    inputs = policyInputs(ctx, probs, p, h, spanLen, masks.length, end - hi, 0);
    decision = ctx.policy.decide(inputs);
  }
  if (decision !== null && decision.verify) {
    verified = await verifySpan(ctx, st, first, hi, masks, spanLen, probs, tokens, p);
  }
  const { commits, decoded, fallbacks } = apply(ctx, st, active, masks, tokens, chosen, top1Used, verified);
  const total = [...decoded.values()].reduce((a, b) => a + b, 0);
  const reward = ctx.policy !== null ? ctx.policy.update(decision, total) : null;
  const record = {
    index: -1, block: first.index, step: st.step - first.addedStep, window: [hi, end],
    forwards: range(firstForward, ctx.rec.lastIndex + 1), masks_before: masks,
    drafts: draftRows(ctx, probs, tokens, p, masks, 0, h), span: [masks[0], spanLen], policy_inputs: inputs, decision,
    verification: verified !== null ? verified.record : null, fallback_k: fallbacks, commits, reward,
    in_flight: active.map((b) => ({ block: b.index, complete: b.complete, masks: b.masks.length + decoded.get(b.index),
      decoded: decoded.get(b.index) })),
    events,
  };
  return record;
}

/** [lo, hi): what this step's forward stores (the prompt, or the finished blocks waiting); [hi, end): the blocks
 * in flight. */
function cacheForwardBounds(ctx, st) {
  const lo = st.cacheEnd;
  let hi = lo;
  if (st.promptPending) {
    hi = ctx.promptLen;
  } else {
    const waiting = st.blocks.filter((b) => b.state === "to_cache");
    if (waiting.length) hi = waiting.at(-1).start + waiting.at(-1).length;
  }
  const last = st.blocks.at(-1);
  return [lo, hi, last.start + last.length];
}

/** The step's forward: KV of [lo, hi) kept, the masks of [hi, end) drafted (one draw over every mask in flight, in
 * block order). Returns {probs, tokens, p}. */
async function forwardAndDraft(ctx, st, active, lo, hi, end, masks, events) {
  const B = ctx.cfg.block_length;
  const waiting = st.blocks.filter((b) => b.state === "to_cache").length;
  const stored = st.promptPending ? [hi - lo] : new Array(waiting).fill(B); // the prompt is one segment
  const segments = [...stored, ...new Array(active.length).fill(B)];
  const kind = st.promptPending ? "prefill+draft" : (hi > lo ? "commit+draft" : "draft");
  const logits = await ctx.rec.forward(kind, active[0].index, st.step - active[0].addedStep, ctx.cache,
    ctx.x.slice(lo, end), range(lo, end), segmentsPattern(segments), hi - lo, { rows: masks.map((m) => m - lo) });
  for (const b of st.blocks) {
    if (b.state === "to_cache") {
      b.state = "cached";
      events.push({ block: b.index, event: "cached" });
    }
  }
  st.promptPending = false;
  st.cacheEnd = hi;
  const probs = tokenDistribution(logits, ctx.cfg, ctx.maskId);
  const [tokens, p] = drawWithProbs(probs, ctx.cfg, ctx.stream);
  return { probs, tokens, p };
}

/** Every block's rule: [chosen (bool per mask in flight), took its top-1 (bool per active block)]. */
function blockRules(ctx, active, probs, p) {
  const { cfg } = ctx;
  const scores = confidenceScores(cfg.confidence_score, probs, p);
  const reference = cfg.method === "s2d2" && cfg.pipeline_fallback === "reference";
  const chosen = [];
  const top1 = [];
  let at = 0;
  for (const b of active) {
    const n = b.masks.length;
    const sc = scores.slice(at, at + n);
    const [c, t] = n === 0 ? [[], false]
      : (reference ? referenceRule(sc, cfg.confidence_threshold, b.complete)
        : d2fRule(p.slice(at, at + n), sc, cfg.confidence_threshold, b.complete));
    chosen.push(...c);
    top1.push(t);
    at += n;
  }
  return [chosen, top1];
}

/** Write the step's decodes: the verified prefix (already written by verifySpan), then every block the verifier
 * decoded nothing in by its rule. Returns {commits in that order, decoded per block index, top-1 picks}. */
function apply(ctx, st, active, masks, tokens, chosen, top1Used, verified) {
  const text = (t) => (ctx.rec.detailed ? ctx.model.text(t) : "");
  const commits = verified !== null ? [...verified.commits] : [];
  const byVerify = new Set(commits.map((c) => c.position));
  let fallbacks = 0;
  let at = 0;
  active.forEach((b, k) => {
    const n = b.masks.length;
    if (!b.masks.some((m) => byVerify.has(m))) { // the verifier decoded nothing here: the block's rule runs
      const how = top1Used[k] ? "fallback" : "threshold";
      const picked = range(at, at + n).filter((i) => chosen[i]);
      if (top1Used[k] && picked.length) fallbacks += 1;
      for (const i of picked) {
        ctx.x[masks[i]] = tokens[i];
        commits.push({ position: masks[i], token: tokens[i], text: text(tokens[i]), how });
      }
    }
    at += n;
  });
  const done = new Set(commits.map((c) => c.position));
  const decoded = new Map(active.map((b) => [b.index, b.masks.filter((m) => done.has(m)).length]));
  for (const b of active) b.masks = b.masks.filter((m) => !done.has(m));
  if (commits.some((c) => ctx.stopSet.has(c.token))) st.eos = true;
  return { commits, decoded, fallbacks };
}
