/**
 * Decode in my browser, the page's half (the server's: components/run/page_decode.py). Given the server's plan, a
 * Web Worker (s2d2_web/worker.js) loads the model and decodes, off the main thread; every committed block is drawn
 * into the Run's live output (live_tokens.js, the same HTML as the server's), and the Run's status says how far it
 * is (status_line.js: the page's line stands in for the server's, never beside it, until the server's verdict). The
 * finished trace's JSON text is what `decodeInPage` resolves to: the Run's hand-off event sends
 * it to the server, which checks it as an upload before Replay opens it. `stop` is the Run's Stop.
 *
 * The hand-off (`handOff`): the trace is uploaded as a file through Gradio's upload route (the front door's upload
 * limit and disk allowance apply, as to any upload) and the event gets [note, file]: note '' and the uploaded
 * file's record; or note {"page_error": why} when the page could not decode (the server says so in one line),
 * {"page_too_big": bytes, "limit": bytes} when the finished trace is more than the server takes (nothing is sent),
 * {"page_upload_refused": HTTP status} when the upload route refused it for another reason (a busy server),
 * or {"page_stopped": true} when Stop came before the model was loaded, and no file; ['', null] for a server Run.
 */
import { liveInner } from './live_tokens.js';
import { recordEnded, say, untilServer } from './status_line.js';

let current = null; // the Run decoding in this page: {worker, loaded, stop()}

/** Draw the committed rows into the live output's canvas (its children only: Gradio owns the canvas element). */
function drawRows(doc, rows, live) {
  const canvas = doc.querySelector('#live .s2d2-canvas');
  if (canvas) canvas.innerHTML = liveInner(rows, live);
}

/** "1 step", "3 steps". */
function count(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** The plan's URLs made absolute (a worker resolves relative URLs against its own script, not the page). */
function absolute(files, base) {
  return Object.fromEntries(Object.entries(files).map(([k, v]) => [k, new URL(v, base).href]));
}

/** The worker's request (s2d2_web/decode_job.js) for the plan: the packed files by URL, the settings, and the
 * trace header's record of where it is decoded. */
export function request(plan) {
  const f = plan.files;
  return { ortUrl: f.runtime, wasmGzUrl: f.wasm_gz, modelGzUrl: f.model_gz, manifestUrl: f.manifest,
    tokenizerUrl: f.tokenizer, promptIds: plan.prompt_ids, promptText: plan.prompt_text, config: plan.config,
    seed: plan.seed, libraryVersion: plan.library_version, announceLoad: true,
    decodedIn: { where: 'browser', runtime: 'onnxruntime-web', runtime_version: plan.runtime_version,
      backend: 'wasm', dtype: plan.dtype } };
}

/** What this browser lacks to decode in the page ('' when it has everything). */
export function pageAbility(scope = globalThis) {
  if (typeof scope.WebAssembly !== 'object') return 'this browser has no WebAssembly';
  if (typeof scope.Worker !== 'function') return 'this browser cannot run a background worker';
  if (typeof scope.DecompressionStream !== 'function') return 'this browser cannot unpack the model';
  return '';
}

/** Decode the plan's Run in a worker; resolves to the hand-off text (see the module's comment). */
export function decodeInPage(planText, doc = document) {
  if (!planText) return Promise.resolve('');
  const plan = JSON.parse(planText);
  plan.files = absolute(plan.files, doc.baseURI);
  if (current) current.stop();
  const started = performance.now();
  const seconds = () => ((performance.now() - started) / 1000).toFixed(1);
  return new Promise((resolve) => {
    const worker = new Worker(plan.files.worker, { type: 'module' });
    const run = { worker, loaded: false };
    const finish = (text) => {
      worker.terminate();
      if (current === run) current = null;
      // until the server's verdict, or a toast: a hand-off event that failed writes no status
      untilServer(doc, text.startsWith('{"page_') ? 'Ending this run…'
        : 'Decoded in your browser; the server is checking the trace before Replay opens it…', recordEnded);
      resolve(text);
    };
    run.stop = () => {
      if (run.loaded) {
        say(doc, 'Stopping at the end of this block…');
        worker.postMessage({ type: 'stop' });
      } else {
        finish(JSON.stringify({ page_stopped: true }));
      }
    };
    current = run;
    say(doc, 'Loading the model into this page (the first Run downloads about 9 MB; later ones reuse it)… '
      + 'Stop ends it.');
    worker.onmessage = ({ data }) => {
      if (data.type === 'loaded') {
        run.loaded = true;
        say(doc, `Model loaded in ${data.session_s.toFixed(1)} s; decoding in your browser…`);
      } else if (data.type === 'block') {
        drawRows(doc, data.rows, plan.live);
        say(doc, `Decoding in your browser… ${count(data.steps, 'step')}, ${count(data.rows.length, 'token')} ` +
          `committed (${seconds()} s). Stop keeps the partial trace.`);
      } else if (data.type === 'done') {
        finish(JSON.stringify(data.trace));
      } else if (data.type === 'error') {
        finish(JSON.stringify({ page_error: data.message }));
      }
    };
    worker.onerror = (e) => {
      e.preventDefault();
      finish(JSON.stringify({ page_error: String(e.message || 'the worker could not start') }));
    };
    worker.postMessage(request(plan));
  });
}

/** Upload the trace text as a file (Gradio's upload route); the FileData record an event's file input takes. */
async function upload(text, doc) {
  const form = new FormData();
  form.append('files', new Blob([text], { type: 'application/json' }), 'page-trace.json');
  const response = await fetch(new URL('gradio_api/upload', doc.baseURI), { method: 'POST', body: form });
  if (!response.ok) {
    const err = new Error(`the server refused the trace's upload (HTTP ${response.status})`);
    err.status = response.status;
    throw err;
  }
  const [path] = await response.json();
  return { path, orig_name: 'page-trace.json', size: new Blob([text]).size, mime_type: 'application/json',
    meta: { _type: 'gradio.FileData' } };
}

/** The hand-off event's two values for a plan: decode it in the page, upload the trace (see the module's comment). */
export async function handOff(planText, doc = document) {
  if (!planText) return ['', null];
  const limit = JSON.parse(planText).handoff_bytes;
  const text = await decodeInPage(planText, doc);
  if (text.startsWith('{"page_')) return [text, null];
  const size = new Blob([text]).size;
  if (size > limit) return [JSON.stringify({ page_too_big: size, limit }), null]; // the server says it in one line
  try {
    return ['', await upload(text, doc)];
  } catch (err) {
    if (err.status === 413) return [JSON.stringify({ page_too_big: size, limit }), null]; // the route's own cap
    if (err.status) return [JSON.stringify({ page_upload_refused: err.status }), null];
    return [JSON.stringify({ page_error: String(err.message ?? err) }), null];
  }
}

/** The Run's Stop: ends the page's decode (a partial trace is kept once a block is complete). */
export function stop() {
  if (current) current.stop();
}
