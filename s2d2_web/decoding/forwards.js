// Runs every forward for the decoder and records it: the one place NFE, query tokens and timing are counted.
// Python twin: s2d2/decoding/forwards.py (Recorder).
//
// The model is anything with `forward(cache, ids, positions, attention, keep)` -> Float32Array [q * V] (every row's
// logits) that appends the first `keep` rows' KV to `cache` (an object with `length` and `crop(n)`); see
// models/onnx_model.js. `attention`: "causal", "full" or a query pattern of models/masks.js.

export class Recorder {
  constructor(model, detailed) {
    this.model = model;
    this.detailed = detailed;
    this.forwards = [];
  }

  get lastIndex() {
    return this.forwards.length - 1;
  }

  /** One forward; returns the logits rows asked for (Float32Array views): the last `last` rows, then `rows` of
   * those (indices), else every row. */
  async forward(kind, block, step, cache, ids, positions, attention, keep, { last = null, rows = null } = {}) {
    const cacheLen = cache.length;
    const t0 = performance.now();
    const flat = await this.model.forward(cache, ids, positions, attention, keep);
    const wall = (performance.now() - t0) / 1000;
    const q = ids.length;
    const V = flat.length / q;
    if (!Number.isInteger(V) || cache.length !== cacheLen + keep) {
      throw new Error(`model: a ${kind} forward of ${q} queries gave ${flat.length} logits and a cache of ${cache.length}`);
    }
    let all = Array.from({ length: q }, (_, i) => flat.subarray(i * V, (i + 1) * V));
    if (last !== null) all = all.slice(q - last);
    const index = this.forwards.length;
    this.forwards.push({ index, kind, block, step, cache_len: cacheLen, input_len: q, query_tokens: q,
      nfe_after: index + 1, wall_s: wall });
    return rows === null ? all : rows.map((r) => all[r]);
  }
}

/** Block-relative range helper: [a, b) as an array. */
export function range(a, b) {
  return Array.from({ length: Math.max(0, b - a) }, (_, i) => a + i);
}
