// The Web Worker that decodes one Run in the page, off the page's main thread (components/run/js/page_run.js
// starts it). It loads the runtime and the exported model the app serves (web_files.js), decodes with the page
// decoder (decoding/api.js), posts the committed tokens after every block, and posts the finished trace with the
// header's `decoded_in` record saying where it was decoded. Python twin of the trace: s2d2/api.py run_prepared.
//
// Messages in:  {type: "start", plan} (the server's plan, URLs absolute: components/run/page_decode.py plan),
//               {type: "stop"} (the Run's Stop: the decode ends with the block in flight, keeping its blocks).
// Messages out: {type: "loaded", session_s}, {type: "rows", rows, steps}, {type: "done", trace (JSON text)},
//               {type: "error", message}.
import { generate } from "./decoding/api.js";
import { OnnxModel } from "./models/onnx_model.js";
import { tokenTexts } from "./tokens.js";
import { fetchBytes, loadModel, startRuntime } from "./web_files.js";

let stopAsked = false;

/** One macrotask turn: a Stop posted to this worker is read between two forwards (a forward's await alone yields
 * only microtasks, which never let a message in). */
function turn() {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(0);
  });
}

/** [position, text, how, token] of every position decided by `steps` (components/views/canvas.py live_rows). */
export function liveRows(steps) {
  const rows = new Map();
  for (const s of steps) {
    for (const c of s.commits) rows.set(c.position, [c.position, c.text, c.how, c.token]);
    for (const e of s.edits ?? []) rows.set(e.position, [e.position, e.new_text, "edited", e.new]);
  }
  return Array.from(rows.values());
}

/** The exported model behind the decoder's forward, every forward preceded by one turn (so Stop is heard). */
async function openModel(plan) {
  const ort = await import(plan.files.runtime);
  await startRuntime(ort, plan.files.wasm_gz);
  const { manifest, session } = await loadModel(ort, plan.files.manifest, plan.files.model_gz);
  const tokenizer = JSON.parse(new TextDecoder().decode(await fetchBytes(plan.files.tokenizer)));
  const model = new OnnxModel(ort, session, manifest, tokenTexts(tokenizer, manifest.decoding.vocab_size), "cpu");
  const forward = model.forward.bind(model);
  model.forward = async (...args) => {
    await turn();
    return forward(...args);
  };
  return { ort, manifest, model };
}

async function decode(plan) {
  const t0 = performance.now();
  const { ort, manifest, model } = await openModel(plan);
  postMessage({ type: "loaded", session_s: (performance.now() - t0) / 1000 });
  const trace = await generate(model, plan.prompt_ids, plan.config, {
    seed: plan.seed, promptText: plan.prompt_text, libraryVersion: plan.library_version,
    onBlock: (steps) => postMessage({ type: "rows", rows: liveRows(steps), steps: steps.length }),
    shouldStop: () => stopAsked,
  });
  trace.header.decoded_in = { where: "browser", runtime: "onnxruntime-web",
    runtime_version: String(ort.env?.versions?.web ?? plan.runtime_version), backend: "wasm",
    dtype: String(manifest.graph.compute_dtype) };
  return JSON.stringify(trace);
}

self.onmessage = (event) => {
  const msg = event.data ?? {};
  if (msg.type === "stop") {
    stopAsked = true;
  } else if (msg.type === "start") {
    decode(msg.plan).then((trace) => postMessage({ type: "done", trace }),
      (err) => postMessage({ type: "error", message: String(err?.message ?? err).slice(0, 300) }));
  }
};
