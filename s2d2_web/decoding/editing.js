// The LLaDA2.x block loop with self-correction (editing), and S2D2 on top of it.
// Python twin: s2d2/decoding/editing.py (editing_loop, editing_step, edit_positions).
//
// Per block, each step drafts the whole block (no KV stored), edits decoded non-prompt positions whose draft
// differs with p > τ_edit, routes and verifies the first mask span on the edited block, lets the remasking rule
// pick the rest of k_s, and writes edits and fills at once. A block ends after a step that started with no masks
// and edited nothing, or after max_post_steps mask-free steps; then EOS early stop, else the commit (none after
// the last block).
import { normalizedEntropy } from "../estimators.js";
import { commitBlock, prefill } from "./blocks.js";
import { startDecode } from "./context.js";
import { numberSteps, transferSchedule } from "./decoder.js";
import { draftRows } from "./detail_rows.js";
import { range } from "./forwards.js";
import { doSample, drawWithProbs, entropy, tokenDistribution } from "./sampling.js";
import { fallbackPicks } from "./selection.js";
import { draftForward, firstMaskSpan, policyInputs } from "./step.js";
import { verifySpan } from "./verify_branch.js";

export async function editingLoop(model, cfg, prompt, rec, stream, check) {
  const { P, plan, x, ctx } = startDecode(model, cfg, prompt, rec, stream);
  const B = cfg.block_length;
  const schedule = transferSchedule(cfg);
  const blocks = [];
  const steps = [];
  await prefill(ctx, plan.firstStart);
  let reason = "length";
  for (let start = plan.firstStart; start < plan.end; start += B) {
    const blk = { index: start / B, start, length: B, prompt_tail: Math.max(0, Math.min(P - start, B)) };
    blocks.push(blk);
    await decodeBlock(ctx, blk, steps, schedule);
    if (x.slice(P, start + B).some((t) => ctx.stopSet.has(t))) { // EOS early stop: the block is final, no commit
      reason = "stop_token";
      break;
    }
    if (start + B < plan.end) await commitBlock(ctx, blk); // nothing reads the last block's KV
    const why = check(numberSteps(steps));
    if (why !== null) {
      reason = why;
      break;
    }
  }
  return { x, blocks, steps: numberSteps(steps), finishReason: reason };
}

async function decodeBlock(ctx, blk, steps, schedule) {
  let step = 0;
  let post = 0;
  for (;;) {
    const hadMasks = ctx.x.slice(blk.start, blk.start + blk.length).includes(ctx.maskId);
    if (!hadMasks && ++post > ctx.cfg.max_post_steps) return;
    const record = await editingStep(ctx, blk.index, blk.start, step, schedule[Math.min(step, schedule.length - 1)]);
    steps.push(record);
    step += 1;
    if (!hadMasks && !record.edits) return;
  }
}

/** Block-relative positions to edit (ascending): decoded, not prompt, the draft differs, p > τ_edit. */
export function editPositions(blockIds, maskId, promptTail, drafts, p, threshold) {
  if (threshold === null) return [];
  return range(promptTail, blockIds.length).filter((i) => blockIds[i] !== maskId && drafts[i] !== blockIds[i]
    && p[i] > threshold);
}

async function editingStep(ctx, block, start, step, kS) {
  const { cfg, rec } = ctx;
  const B = ctx.B;
  const firstForward = rec.lastIndex + 1;
  const blockIds = ctx.x.slice(start, start + B);
  const masks = range(0, B).filter((i) => blockIds[i] === ctx.maskId);
  const n = masks.length;
  const promptTail = Math.max(0, Math.min(B, ctx.promptLen - start));
  // greedy with editing off, the draft reads the masks' rows alone (editing.py masks_only)
  const masksOnly = cfg.editing_threshold === null && n > 0 && !doSample(cfg);
  const logits = await draftForward(ctx, block, step, start, masksOnly ? masks : range(0, B), n ? masks[0] : B);
  const probs = tokenDistribution(logits, cfg, ctx.maskId);
  const [drafts, p] = drawWithProbs(probs, cfg, ctx.stream);
  const editIdx = editPositions(blockIds, ctx.maskId, promptTail, drafts, p, cfg.editing_threshold);
  const edited = Int32Array.from(blockIds);
  for (const i of editIdx) edited[i] = drafts[i];
  const [mProbs, mDrafts, mP] = masksOnly ? [probs, drafts, p]
    : [masks.map((m) => probs[m]), masks.map((m) => drafts[m]), masks.map((m) => p[m])];
  const spanLen = n ? firstMaskSpan(masks) : 0;
  let chosen = [];
  let [inputs, decision, verification, reward, fallbackK] = [null, null, null, null, 0];
  if (n) {
    if (ctx.policy !== null) {
      inputs = policyInputs(ctx, mProbs, mP, normalizedEntropy(mProbs), spanLen, n, B, promptTail);
      decision = ctx.policy.decide(inputs);
    }
    if (decision !== null && decision.verify) {
      ({ verification, chosen } = await verifySpan(ctx, block, step, start, edited, masks, mProbs, mDrafts, mP, spanLen));
    }
    fallbackK = Math.max(0, Math.min(kS, n) - chosen.length);
    if (fallbackK > 0) {
      const taken = new Set(chosen.map(([i]) => i));
      const ent = () => entropy(mProbs);
      chosen = chosen.concat(fallbackPicks(cfg, mP, ent, taken, fallbackK, verification !== null)
        .map(([i, how]) => [i, mDrafts[i], how]));
    }
    if (decision !== null) reward = ctx.policy.update(decision, chosen.length);
  }
  const text = (t) => (rec.detailed ? ctx.model.text(t) : "");
  const edits = editIdx.map((i) => ({ position: start + i, old: blockIds[i], old_text: text(blockIds[i]), new: drafts[i],
    new_text: text(drafts[i]), p: p[i] }));
  for (const i of editIdx) ctx.x[start + i] = drafts[i];
  for (const [i, t] of chosen) ctx.x[start + masks[i]] = t;
  const record = {
    index: -1, block, step, window: [start, start + B], forwards: range(firstForward, rec.lastIndex + 1),
    masks_before: masks.map((m) => start + m), drafts: draftRows(ctx, mProbs, mDrafts, mP, masks, start),
    span: [n ? start + masks[0] : start, spanLen], policy_inputs: inputs, decision, verification,
    fallback_k: fallbackK, commits: chosen.map(([i, t, how]) => ({ position: start + masks[i], token: t, text: text(t), how })),
    reward,
  };
  if (edits.length) record.edits = edits; // the trace file leaves an empty list out
  return record;
}
