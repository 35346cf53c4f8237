// The page decoder's Web Worker: the thin binding of decode_job.js to a worker's messages. Start it as a module
// worker (new Worker(url, {type: "module"})) and post one request with `ortUrl`, the ES module build of
// onnxruntime-web to load; the worker answers as decodeJob says.
//
// The app's Run (components/run/js/page_run.js) also sends the packed files the app serves (web_files.js):
// `wasmGzUrl` (the runtime's WASM binary), `modelGzUrl` (the graph, checked against the manifest), and
// `manifestUrl` / `tokenizerUrl` instead of the parsed files; and it may post {type: "stop"} (the Run's Stop) while
// the decode runs: the decode ends after the block in flight. Every forward is preceded by one macrotask turn, so
// that message is read (a forward's own awaits yield only microtasks, which never let a message in).
import { decodeJob } from "./decode_job.js";
import { checkFile, fetchBytes, gunzip, startRuntime } from "./web_files.js";

let stopAsked = false;

/** One macrotask turn (a MessageChannel round trip: no timer clamping). */
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

/** Fetch what the request names by URL: the parsed manifest and tokenizer, the unpacked and checked graph. */
async function fetchFiles(request, ort) {
  const json = async (url) => JSON.parse(new TextDecoder().decode(await fetchBytes(url)));
  if (request.manifestUrl) request.manifest = await json(request.manifestUrl);
  if (request.tokenizerUrl) request.tokenizer = await json(request.tokenizerUrl);
  if (request.wasmGzUrl) await startRuntime(ort, request.wasmGzUrl);
  if (request.modelGzUrl) {
    const graph = request.manifest.graph.file;
    request.modelUrl = await checkFile(request.manifest, graph, await gunzip(await fetchBytes(request.modelGzUrl)));
  }
  if (request.decodedIn) request.decodedIn.runtime_version = String(ort.env?.versions?.web ?? request.decodedIn.runtime_version);
}

self.onmessage = async (event) => {
  const request = event.data;
  if (request && request.type === "stop") {
    stopAsked = true;
    return;
  }
  request.startedAt = performance.now();
  let ort;
  try {
    ort = await import(request.ortUrl);
  } catch (err) {
    self.postMessage({ type: "error", message: `the page could not load ONNX Runtime: ${String((err && err.message) || err)}` });
    return;
  }
  try {
    await fetchFiles(request, ort);
  } catch (err) {
    self.postMessage({ type: "error", message: String((err && err.message) || err) });
    return;
  }
  await decodeJob(request, (message) => self.postMessage(message), ort,
    { shouldStop: () => stopAsked, beforeForward: turn });
};
