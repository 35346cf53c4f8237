// The counter generator, page side: the same draws as s2d2/counter_rng.py, bit for bit.
//
// The specification lives in that module's docstring (and docs/random-stream.md); this file mirrors it function by
// function. 64-bit words are BigInts masked to 64 bits, so every multiply and shift is exact (a Number holds only
// 53 bits). Float64 arithmetic (the uniform, the running sum, the target) is plain Number arithmetic, which is
// IEEE-754 double precision with round-to-nearest, as numpy's is: the same operations in the same order give the
// same bits.

const MASK64 = (1n << 64n) - 1n;
const GOLDEN = 0x9E3779B97F4A7C15n;
const MUL1 = 0xBF58476D1CE4E5B9n;
const MUL2 = 0x94D049BB133111EBn;
const WORD_MAX = (1n << 32n) - 1n;
const TWO_M53 = 2 ** -53;

/** Which draw site asks (the key's `kind` word); equal to s2d2.counter_rng.KINDS. */
export const KINDS = Object.freeze({ draft: 1, accept: 2, residual: 3, ar: 4 });

/** SplitMix64's finaliser on a 64-bit word (BigInt in, BigInt in [0, 2^64) out). */
export function mix(z) {
  z &= MASK64;
  z = ((z ^ (z >> 30n)) * MUL1) & MASK64;
  z = ((z ^ (z >> 27n)) * MUL2) & MASK64;
  return z ^ (z >> 31n);
}

function word(name, value, top) {
  // A key word as a BigInt: an integer Number (safe) or a BigInt in [0, top]; anything else is refused.
  let v;
  if (typeof value === "bigint") v = value;
  else if (Number.isSafeInteger(value)) v = BigInt(value);
  else throw new RangeError(`${name}: an integer in [0, ${top}] for the counter generator, got ${String(value)}`);
  if (v < 0n || v > top) throw new RangeError(`${name}: an integer in [0, ${top}] for the counter generator, got ${v}`);
  return v;
}

/** The 64 random bits (a BigInt) at the key (seed, kind, call, index). */
export function bits(seed, kind, call, index) {
  const words = [
    word("seed", seed, MASK64),
    (word("kind", kind, WORD_MAX) << 32n) | word("call", call, WORD_MAX),
    word("index", index, WORD_MAX),
  ];
  let h = 0n;
  for (const w of words) h = mix(((h + GOLDEN) & MASK64) ^ w);
  return h;
}

/** The float64 uniform in [0, 1) at the key: the top 53 bits times 2^-53 (exact). */
export function uniform(seed, kind, call, index) {
  return Number(bits(seed, kind, call, index) >> 11n) * TWO_M53;
}

/** The index one uniform `u` draws from `weights` (an array or Float32Array/Float64Array; float64 throughout):
 * the first index whose left-to-right running sum exceeds u * total; the last positive weight if rounding leaves
 * none. Throws a RangeError on an empty array, a negative or non-finite weight, or a total that is not > 0. */
export function categorical(weights, u) {
  const n = weights.length;
  if (n === 0) throw new RangeError("categorical: no weights");
  let total = 0;
  let last = -1;
  for (let i = 0; i < n; i++) {
    const w = Number(weights[i]);
    if (!Number.isFinite(w) || w < 0) throw new RangeError("categorical: every weight must be finite and >= 0");
    if (w > 0) last = i;
    total += w;
  }
  if (!(total > 0 && Number.isFinite(total))) {
    throw new RangeError(`categorical: the weights must have a positive finite total, got ${total}`);
  }
  const target = u * total;
  let c = 0;
  for (let i = 0; i < n; i++) {
    c += Number(weights[i]); // the same running sum as the first pass, so the same partial sums
    if (c > target) return i;
  }
  return last;
}

/** One categorical draw per row (an array of weight arrays); row i uses the uniform at index i of the call. */
export function categoricalRows(rows, seed, kind, call) {
  return rows.map((row, i) => categorical(row, uniform(seed, kind, call, i)));
}
