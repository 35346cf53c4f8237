// An exported model (python -m s2d2 export-web: model.onnx + manifest.json) behind the page decoder's forward.
// Python twin: s2d2/web/onnx_model.py (OnnxModel), which drives the same graph the same way.
//
// `ort` is the ONNX Runtime module the caller has: onnxruntime-web in the page, onnxruntime-node in the conformance
// test. A forward widens the query's mask behind all-attending cache columns, feeds the past, and keeps the first
// past + keep positions of every present tensor.
import { widen } from "./masks.js";

/** The first `m` positions of a [1, heads, length, dim] float32 tensor's data. */
function firstPositions(data, heads, length, dim, m) {
  if (m === length) return data;
  const out = new Float32Array(heads * m * dim);
  for (let h = 0; h < heads; h++) out.set(data.subarray(h * length * dim, (h * length + m) * dim), h * m * dim);
  return out;
}

class OnnxCache {
  constructor(layers, heads, dim) {
    this.heads = heads;
    this.dim = dim;
    this.length = 0;
    this.data = Array.from({ length: 2 * layers }, () => new Float32Array(0));
  }

  /** Drop the last n positions. */
  crop(n) {
    const m = this.length - n;
    this.data = this.data.map((d) => firstPositions(d, this.heads, this.length, this.dim, m));
    this.length = m;
  }
}

export class OnnxModel {
  /** @param ort the runtime module; manifest: manifest.json parsed; model: the model.onnx bytes (Uint8Array) or a
   * path/URL the runtime opens; texts: each token's text (tokens.js tokenTexts); options: {device, sessionOptions} */
  static async load(ort, manifest, model, texts, options = {}) {
    const session = await ort.InferenceSession.create(model, options.sessionOptions ?? {});
    return new OnnxModel(ort, session, manifest, texts, options.device ?? "cpu");
  }

  constructor(ort, session, manifest, texts, device) {
    const d = manifest.decoding;
    const a = manifest.architecture;
    if (manifest.format !== "s2d2-web-model/1") throw new RangeError(`manifest: unknown format ${JSON.stringify(manifest.format)}`);
    this.ort = ort;
    this.session = session;
    this.texts = texts;
    this.shape = [a.layers, a.kv_heads, a.head_dim];
    this.spec = { name: manifest.model, alignment: d.alignment, mask_id: d.mask_id, stop_ids: d.stop_ids,
      vocab_size: d.vocab_size, max_positions: d.max_positions };
    this.info = { name: manifest.model, alignment: d.alignment, verifier: d.verifier, mask_id: d.mask_id,
      stop_ids: d.stop_ids, vocab_size: d.vocab_size, dtype: manifest.graph.compute_dtype, device,
      attn_implementation: "onnxruntime", revision: "" };
    this.inputs = session.inputNames;
    this.outputs = session.outputNames;
  }

  text(token) {
    return this.texts[token] ?? `<${token}>`;
  }

  newCache() {
    return new OnnxCache(...this.shape);
  }

  /** Logits [q * V] of every query row; the cache keeps the first `keep` new positions. */
  async forward(cache, ids, positions, attention, keep) {
    const { Tensor } = this.ort;
    const q = ids.length;
    const past = cache.length;
    const [, heads, dim] = this.shape;
    const feeds = {
      [this.inputs[0]]: new Tensor("int64", BigInt64Array.from(ids, BigInt), [1, q]),
      [this.inputs[1]]: new Tensor("int64", BigInt64Array.from(positions, BigInt), [1, q]),
      [this.inputs[2]]: new Tensor("bool", widen(attention, q, past), [1, 1, q, past + q]),
    };
    this.inputs.slice(3).forEach((name, i) => {
      feeds[name] = new Tensor("float32", cache.data[i], [1, heads, past, dim]);
    });
    const out = await this.session.run(feeds);
    const total = past + q;
    cache.data = this.outputs.slice(1).map((name) => firstPositions(out[name].data, heads, total, dim, past + keep));
    cache.length = past + keep;
    return out[this.outputs[0]].data;
  }
}
