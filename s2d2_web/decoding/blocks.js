// Block-level forwards: prefill, commit and the fused commit+draft, and the block's masks and stop ids.
// Python twin: s2d2/decoding/blocks.py (position-aligned models).
import { blockCausalPattern, fusedDraftPattern } from "../models/masks.js";
import { range } from "./forwards.js";
import { keptPrefixRows } from "./kv.js";

/** Store the prompt's full blocks [0, n): block-causal, or causal with cache_ver. */
export async function prefill(ctx, n) {
  if (n === 0) return;
  const attention = ctx.cfg.cache_ver ? "causal" : blockCausalPattern(n, ctx.cfg.block_length);
  await ctx.rec.forward("prefill", -1, -1, ctx.cache, ctx.x.slice(0, n), range(0, n), attention, n, { last: 1 });
}

/** Store the block's uncached positions (nothing when everything is cached). */
export async function commitBlock(ctx, blk) {
  const lo = blk.start + ctx.cached;
  const end = blk.start + blk.length;
  ctx.cached = 0;
  if (lo >= end) return;
  await ctx.rec.forward("commit", blk.index, -1, ctx.cache, ctx.x.slice(lo, end), range(lo, end),
    ctx.cfg.cache_ver ? "causal" : "full", end - lo, { last: 1 });
}

/** The fused commit+draft forward that opens `blk`: caches the previous block's tail and leaves this block's draft
 * logits in ctx.carried (block position i is row t + i). `ctx.masks` must already hold the block's masks. */
export async function carryTail(ctx, blk) {
  const [t0, t1] = ctx.tail;
  ctx.tail = null;
  const t = t1 - t0;
  const B = blk.length;
  const firstMask = ctx.masks.length ? ctx.masks[0] : B;
  const prefix = ctx.cfg.draft_ver ? firstMask : 0;
  const keep = keptPrefixRows(ctx, prefix);
  const pattern = fusedDraftPattern(t, B, ctx.cfg.cache_ver, prefix);
  const ids = [...ctx.x.slice(t0, t1), ...ctx.x.slice(blk.start, blk.start + B)];
  const rows = await ctx.rec.forward("commit+draft", blk.index, 0, ctx.cache, ids, range(t0, blk.start + B), pattern,
    t + keep);
  ctx.cached = keep;
  ctx.carried = { rows, offset: -t };
}

/** The block's masks when it begins (block-relative): every position past the prompt. */
export function blockMasks(ctx, blk) {
  return range(Math.max(0, ctx.promptLen - blk.start), blk.length);
}

/** The first known stop id in positions [lo, end), or null. */
export function stoppedIn(ctx, lo, end) {
  const hits = ctx.stopHits.filter((h) => lo <= h && h < end);
  return hits.length ? Math.min(...hits) : null;
}
