// A stand-in model for the page decoder's conformance test: it answers each forward with the logits the Python
// decoder's model gave for that forward (recorded by tests/support/web_decoder.py), after checking that the page
// asked for the same forward (ids, positions, attention pattern, cache length, rows kept). So the test binds the
// JavaScript decoder (s2d2_web/decoding/) to s2d2.generate given identical logits, decision for decision.
import { readFileSync } from "node:fs";
import { widen } from "../../s2d2_web/models/masks.js";

function same(a, b) {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

export class ReplayModel {
  /** @param {string} dir a folder with forwards.json (spec, info, texts, forwards) and logits.f32 */
  constructor(dir) {
    const meta = JSON.parse(readFileSync(`${dir}/forwards.json`, "utf8"));
    const buf = readFileSync(`${dir}/logits.f32`);
    this.logits = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    this.spec = meta.spec;
    this.info = meta.info;
    this.texts = meta.texts;
    this.recorded = meta.forwards;
    this.next = 0;
  }

  text(token) {
    return this.texts[token];
  }

  newCache() {
    return { length: 0, crop(n) { this.length -= n; } };
  }

  async forward(cache, ids, positions, attention, keep) {
    const i = this.next++;
    const want = this.recorded[i];
    if (want === undefined) throw new Error(`forward ${i}: Python made only ${this.recorded.length} forwards`);
    const q = ids.length;
    const mask = Array.from(widen(attention, q, cache.length)).join("");
    const got = { ids: Array.from(ids), positions: Array.from(positions), cache_len: cache.length, keep, mask };
    for (const key of Object.keys(got)) {
      const a = got[key];
      const b = want[key];
      if (Array.isArray(a) ? !same(a, b) : a !== b) {
        throw new Error(`forward ${i}: ${key} differs: page ${JSON.stringify(a).slice(0, 300)} vs Python ${JSON.stringify(b).slice(0, 300)}`);
      }
    }
    cache.length += keep;
    return this.logits.subarray(want.offset, want.offset + q * this.spec.vocab_size);
  }
}
