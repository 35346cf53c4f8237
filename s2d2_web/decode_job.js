// One decode request as the page's Web Worker serves it (worker.js is the thin binding to `self`): load the
// exported model, decode, post the output tokens after every block and the finished trace.
// Python twin: what s2d2.generate's `on_block` streams and returns (s2d2/api.py), for the server's Run.
//
// Request: {manifest, modelUrl (a URL, or the model's bytes), tokenizer (tokenizer.json parsed), promptIds,
// promptText, config, seed}; the app's Run adds {libraryVersion, decodedIn (the trace header's decoded_in record),
// announceLoad (post {type: "loaded", session_s} once the model is loaded)}.
// Posted: {type: "block", tokens, rows, steps} (the output so far: decoded ids, MASK where undecided, as the server
// streams; rows: [position, text, how, token] of every decided position, components/views/canvas.py live_rows;
// steps: how many), then {type: "done", trace} — or one {type: "error", message} and nothing more.
// Hooks (not cloneable, so beside the request): shouldStop() ends the decode after the block in flight (the
// trace keeps its blocks, finish_reason "cancelled"); beforeForward() is awaited before every forward.
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

/** [position, text, how, token] of every position decided by `steps`, an edit showing its new token as "edited"
 * (components/views/canvas.py live_rows, what the Run's live output draws). */
export function liveRows(steps) {
  const rows = new Map();
  for (const s of steps) {
    for (const c of s.commits) rows.set(c.position, [c.position, c.text, c.how, c.token]);
    for (const e of s.edits ?? []) rows.set(e.position, [e.position, e.new_text, "edited", e.new]);
  }
  return Array.from(rows.values());
}

/** Serve one request: `post(message)` sends to the page; `ort` is the ONNX Runtime module to run the model with;
 * `hooks`: {shouldStop, beforeForward} (see the module's comment). */
export async function decodeJob(request, post, ort, hooks = {}) {
  try {
    const t0 = request.startedAt ?? performance.now(); // the worker's clock: its files' fetch counts too
    const { manifest } = request;
    const texts = tokenTexts(request.tokenizer, manifest.decoding.vocab_size);
    const model = await OnnxModel.load(ort, manifest, request.modelUrl, texts, { device: request.device ?? "browser" });
    if (hooks.beforeForward) {
      const forward = model.forward.bind(model);
      model.forward = async (...args) => {
        await hooks.beforeForward();
        return forward(...args);
      };
    }
    if (request.announceLoad) post({ type: "loaded", session_s: (performance.now() - t0) / 1000 });
    const genLength = request.config.gen_length;
    const onBlock = (steps) => post({ type: "block", tokens: committedTokens(steps, request.promptIds.length,
      genLength, manifest.decoding.mask_id), rows: liveRows(steps), steps: steps.length });
    const trace = await generate(model, request.promptIds, request.config,
      { seed: request.seed ?? 0, promptText: request.promptText ?? "", onBlock, shouldStop: hooks.shouldStop ?? null,
        libraryVersion: request.libraryVersion });
    if (request.decodedIn) trace.header.decoded_in = request.decodedIn;
    post({ type: "done", trace });
  } catch (err) {
    post({ type: "error", message: String((err && err.message) || err) });
  }
}
