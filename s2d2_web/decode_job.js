// One decode request as the page's Web Worker serves it (worker.js is the thin binding to `self`): load the
// exported model, decode, post the output tokens after every block and the finished trace.
// Python twin: what s2d2.generate's `on_block` streams and returns (s2d2/api.py), for the server's Run.
//
// Request: {manifest, modelUrl, tokenizer (tokenizer.json parsed), promptIds, promptText, config, seed}.
// Posted: {type: "block", tokens} (the output so far: decoded ids, MASK where undecided, as the server streams),
// then {type: "done", trace} — or one {type: "error", message} and nothing more.
import { generate } from "./decoding/api.js";
import { OnnxModel } from "./models/onnx_model.js";
import { tokenTexts } from "./tokens.js";

/** The generated region after `steps` (commits and edits applied in order): one id per position, MASK where none. */
export function committedTokens(steps, promptLen, genLength, maskId) {
  const out = new Array(genLength).fill(maskId);
  const put = (position, token) => {
    if (position >= promptLen && position < promptLen + genLength) out[position - promptLen] = token;
  };
  for (const s of steps) {
    for (const c of s.commits) put(c.position, c.token);
    for (const e of s.edits ?? []) put(e.position, e.new);
  }
  return out;
}

/** Serve one request: `post(message)` sends to the page; `ort` is the ONNX Runtime module to run the model with. */
export async function decodeJob(request, post, ort) {
  try {
    const { manifest } = request;
    const texts = tokenTexts(request.tokenizer, manifest.decoding.vocab_size);
    const model = await OnnxModel.load(ort, manifest, request.modelUrl, texts, { device: request.device ?? "browser" });
    const genLength = request.config.gen_length;
    const onBlock = (steps) => post({ type: "block", tokens: committedTokens(steps, request.promptIds.length,
      genLength, manifest.decoding.mask_id) });
    const trace = await generate(model, request.promptIds, request.config,
      { seed: request.seed ?? 0, promptText: request.promptText ?? "", onBlock });
    post({ type: "done", trace });
  } catch (err) {
    post({ type: "error", message: String((err && err.message) || err) });
  }
}
