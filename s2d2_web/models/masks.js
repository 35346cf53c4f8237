// Attention query patterns. Python twin: s2d2/models/masks.py (the `*_pattern` functions).
//
// Every mask the decoder builds sees the whole cache, so a forward is given its query block alone: a pattern
// {q, bits} with bits a Uint8Array of q*q (row-major, 1 = attend) behind all-attending cache columns, or the words
// "causal" / "full". A model binding widens it to [q, cacheLen + q] (onnx_model.js).

/** @returns {{q: number, bits: Uint8Array}} */
function build(q, rule) {
  const bits = new Uint8Array(q * q);
  for (let i = 0; i < q; i++) for (let j = 0; j < q; j++) bits[i * q + j] = rule(i, j) ? 1 : 0;
  return { q, bits };
}

/** Block-bidirectional, except the first `causalPrefix` rows (draft_ver) are causal. */
export function draftPattern(block, causalPrefix) {
  return build(block, (i, j) => j <= i || i >= causalPrefix);
}

/** The 2L layout over [first half | second half]: first-half row i sees j <= i; second-half row L+i sees
 * first-half j < i and itself. */
export function verify2lPattern(length) {
  const L = length;
  return build(2 * L, (i, j) => (i < L ? j < L && j <= i : (j < L ? j < i - L : j === i)));
}

/** The trimmed 2L layout (trim_verify) over [first half (`first`) | `span` MASKs]. */
export function verify2lSpanPattern(first, span) {
  return build(first + span, (i, j) => {
    if (i < first) return j < first && j <= i;
    const t = i - first;
    return j < first ? j < first - span + t : j === i;
  });
}

/** A commit fused into the next draft, over [tail | block]: tail rows see the tail (causally with cache_ver),
 * block rows see the whole tail and the block as draft rows. */
export function fusedDraftPattern(tail, block, causalTail, causalPrefix) {
  return build(tail + block, (i, j) => {
    if (i < tail) return j < tail && (!causalTail || j <= i);
    if (j < tail) return true;
    const bi = i - tail;
    const bj = j - tail;
    return bj <= bi || bi >= causalPrefix;
  });
}

/** Block-causal prefill of q tokens from position 0: row i sees j iff floor(i/B) >= floor(j/B). */
export function blockCausalPattern(q, block) {
  return build(q, (i, j) => Math.floor(i / block) >= Math.floor(j / block));
}

/** Block-causal over consecutive segments of the given lengths: a row sees every column of its own segment and of
 * the segments before it (the D2F pipeline's forward over [blocks to cache | blocks in flight]; its first forward
 * over [prompt | first block], the prompt one bidirectional segment). */
export function segmentsPattern(segments) {
  const ids = segments.flatMap((n, s) => new Array(n).fill(s));
  return build(ids.length, (i, j) => ids[i] >= ids[j]);
}

/** The [q, cacheLen + q] mask of a pattern or word as a Uint8Array (1 = attend), for a model binding. */
export function widen(attention, q, cacheLen) {
  const width = cacheLen + q;
  const out = new Uint8Array(q * width);
  for (let i = 0; i < q; i++) {
    out.fill(1, i * width, i * width + cacheLen);
    for (let j = 0; j < q; j++) {
      let on;
      if (attention === "causal") on = j <= i;
      else if (attention === "full") on = true;
      else on = attention.bits[i * q + j] === 1;
      out[i * width + cacheLen + j] = on ? 1 : 0;
    }
  }
  return out;
}
