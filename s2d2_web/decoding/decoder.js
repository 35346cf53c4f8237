// The block loop: prefill, then per block the steps of each window, then the end of the block.
// Python twin: s2d2/decoding/decoder.py (block_loop; position-aligned models, the SDAR stop rule: every block is
// finished and committed, and the run ends after a block whose generated region holds a stop id).
import { decideBlock } from "../policies/adaptive_block.js";
import { blockMasks, carryTail, commitBlock, prefill, stoppedIn } from "./blocks.js";
import { startDecode } from "./context.js";
import { runStep } from "./step.js";

/** k_s per step: floor(B/S), the first B mod S steps one more. */
export function transferSchedule(cfg) {
  const b = cfg.block_length;
  const s = cfg.denoising_steps ?? b;
  const base = Math.floor(b / s);
  return Array.from({ length: s }, (_, i) => base + (i < b % s ? 1 : 0));
}

function windows(cfg, blk) {
  const sb = cfg.sub_block_length || blk.length;
  const out = [];
  for (let k = 0; k < blk.length; k += sb) out.push([blk.start + k, blk.start + k + sb]);
  return out;
}

/** Decode; `check(steps)` runs after every block and returns a finish reason to stop early, or null.
 * Returns {x, blocks, steps, finishReason}. */
export async function blockLoop(model, cfg, prompt, rec, stream, check) {
  const { P, plan, x, ctx } = startDecode(model, cfg, prompt, rec, stream);
  const steps = [];
  const blocks = [];
  await prefill(ctx, plan.firstStart);
  let start = plan.firstStart;
  let length = cfg.block_length;
  let why = "";
  let index = Math.floor(start / length);
  let finish = "length";
  while (start < plan.end) {
    const blk = { index, start, length, prompt_tail: Math.max(0, Math.min(P - start, length)) };
    if (why) blk.length_reason = why;
    blocks.push(blk);
    const firstStep = steps.length;
    await decodeBlock(ctx, blk, steps);
    const stop = await endBlock(ctx, blk, start + length >= plan.end);
    const reason = stop ?? check(numberSteps(steps));
    if (reason !== null) {
      finish = reason;
      break;
    }
    start += length;
    index += 1;
    [length, why] = nextLength(cfg, blk, steps.slice(firstStep), start);
  }
  const end = cfg.adaptive_block && blocks.length ? blocks.at(-1).start + blocks.at(-1).length : x.length;
  return { x: x.slice(0, end), blocks, steps: numberSteps(steps), finishReason: finish };
}

async function decodeBlock(ctx, blk, steps) {
  ctx.blockLength = blk.length;
  ctx.cached = 0;
  ctx.masks = blockMasks(ctx, blk);
  if (ctx.tail !== null) await carryTail(ctx, blk);
  const schedule = ctx.cfg.adaptive_block ? [1] : transferSchedule(ctx.cfg);
  let step = 0;
  for (const [ws, we] of windows(ctx.cfg, blk)) {
    while (ctx.masks.some((m) => ws <= blk.start + m && blk.start + m < we)) {
      const kS = schedule[Math.min(step, schedule.length - 1)];
      steps.push(await runStep(ctx, blk.index, blk.start, [ws, we], step, kS));
      step += 1;
    }
  }
  ctx.carried = null; // a fused forward whose block needed no draft step
}

/** Commit the block (or hand its tail to the next draft); "stop_token" when the output has stopped. */
async function endBlock(ctx, blk, last) {
  const end = blk.start + blk.length;
  const stopped = stoppedIn(ctx, ctx.promptLen, end) !== null;
  if (ctx.cfg.fused_commit) {
    if (!(last || stopped) && blk.start + ctx.cached < end) ctx.tail = [blk.start + ctx.cached, end];
    ctx.cached = 0;
  } else {
    await commitBlock(ctx, blk);
  }
  return stopped ? "stop_token" : null;
}

function nextLength(cfg, blk, blockSteps, nextStart) {
  if (!cfg.adaptive_block) return [cfg.block_length, ""];
  const verified = blockSteps.filter((s) => s.verification !== null);
  const choice = decideBlock(cfg, { length: blk.length, accepted: verified.map((s) => s.verification.accepted_len),
    spans: verified.map((s) => s.span[1]) }, nextStart);
  return [choice.length, choice.reason];
}

export function numberSteps(steps) {
  steps.forEach((s, i) => { s.index = i; });
  return steps;
}
