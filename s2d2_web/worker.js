// The page decoder's Web Worker: the thin binding of decode_job.js to a worker's messages. Start it as a module
// worker (new Worker(url, {type: "module"})) and post one request with `ortUrl`, the ES module build of
// onnxruntime-web to load; the worker answers as decodeJob says.
import { decodeJob } from "./decode_job.js";

self.onmessage = async (event) => {
  const request = event.data;
  let ort;
  try {
    ort = await import(request.ortUrl);
  } catch (err) {
    self.postMessage({ type: "error", message: `the page could not load ONNX Runtime: ${String((err && err.message) || err)}` });
    return;
  }
  await decodeJob(request, (message) => self.postMessage(message), ort);
};
