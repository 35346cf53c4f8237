// The page decoder's random source: the counter path of s2d2/decoding/draws.py, call for call.
//
// A decode makes draw calls in order; this object numbers them 0, 1, 2, ... whatever their kind, exactly as
// CounterStream does in Python, so the page's k-th call draws what the server's k-th call draws. One stream per
// decoded sequence, seeded with that sequence's seed.

import { KINDS, categorical, uniform } from "./counter_rng.js";

const WORD_MAX = 2 ** 32 - 1;

export class CounterStream {
  /** @param {bigint|number} seed the decode's seed, in [0, 2^64) */
  constructor(seed) {
    uniform(seed, 0, 0, 0); // refuses a seed out of range with the same message as Python
    this.seed = BigInt(seed);
    this.calls = 0;
  }

  nextCall() {
    if (this.calls > WORD_MAX) throw new RangeError(`rng: more than ${WORD_MAX + 1} draw calls in one decode`);
    return this.calls++;
  }

  /** n acceptance uniforms (kind "accept", the next call, indices 0..n-1), as a Float64Array. */
  uniforms(n) {
    const call = this.nextCall();
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) out[i] = uniform(this.seed, KINDS.accept, call, i);
    return out;
  }

  /** One token per row of probabilities (kind "draft", "residual" or "ar"; the next call; row i at index i). */
  categorical(rows, kind) {
    if (!(kind in KINDS)) throw new RangeError(`rng: unknown draw kind ${String(kind)}`);
    const call = this.nextCall();
    return rows.map((row, i) => categorical(row, uniform(this.seed, KINDS[kind], call, i)));
  }
}
