// KV reuse (beyond the paper): keep the causal rows whose tokens are final. Python twin: s2d2/decoding/kv.py
// (position-aligned models).

/** How many of a draft's leading causal rows (decoded, final tokens) to keep in the cache. */
export function keptPrefixRows(ctx, prefix) {
  return ctx.cfg.kv_reuse ? prefix : 0;
}

/** The verifier read the block's [0, end); its rows [cached, end) stay in the cache until settled. */
export function rememberVerified(ctx, end) {
  if (ctx.cfg.kv_reuse) ctx.seenEnd = end;
}

/** Keep the verifier rows of the prefix [0, j) that still equals what it read; crop the rest. */
export function settleVerifiedRows(ctx, j) {
  if (ctx.seenEnd === null) return;
  const end = ctx.seenEnd;
  const k = ctx.cached;
  ctx.seenEnd = null;
  const keep = Math.max(k, Math.min(j, end));
  if (end - keep > 0) ctx.cache.crop(end - keep);
  ctx.cached = keep;
}
