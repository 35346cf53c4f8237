// The page's side of components/serve/browser_files.py: fetch the gzip-packed runtime and model the app serves,
// unpack them with the browser's DecompressionStream, check each model file against the sha256 its manifest.json
// gives, and start an onnxruntime-web session on the WASM backend, one thread (docs/browser-decoding.md).
//
// Every function takes `get(url) -> Promise<Uint8Array>` (default: fetch), so the same code runs in the page and in
// Node (tests/lib/test_web_runtime_node.py reads files instead of URLs). Nothing here decodes: the decoder feeds
// the session by the names the manifest lists.

/** The bytes at `url`, by fetch; a failed response throws one readable line. */
export async function fetchBytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`could not fetch ${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

/** Gunzip `bytes` (a packed `.gz` the app serves) with DecompressionStream. */
export async function gunzip(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** Lower-case hex sha256 of `bytes` (Web Crypto). */
export async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** Check `bytes` against the manifest's record of file `name` (size and sha256); throws one line when they differ. */
export async function checkFile(manifest, name, bytes) {
  const want = manifest.files[name];
  if (!want) throw new Error(`manifest.json lists no file ${name}`);
  const got = await sha256Hex(bytes);
  if (bytes.length !== want.bytes || got !== want.sha256) {
    throw new Error(`${name}: ${bytes.length} bytes with sha256 ${got.slice(0, 12)}…, the manifest says ` +
                    `${want.bytes} bytes with sha256 ${want.sha256.slice(0, 12)}…`);
  }
  return bytes;
}

/** Point onnxruntime-web (the module `ort`) at the unpacked WASM binary from `wasmGzUrl`: one thread, no proxy. */
export async function startRuntime(ort, wasmGzUrl, get = fetchBytes) {
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.proxy = false;
  ort.env.wasm.wasmBinary = await gunzip(await get(wasmGzUrl));
  return ort;
}

/** The manifest at `manifestUrl` and a session of the model it names, fetched packed from `modelGzUrl` and
 * checked against the manifest. The runtime must be started first (`startRuntime`). */
export async function loadModel(ort, manifestUrl, modelGzUrl, get = fetchBytes) {
  const manifest = JSON.parse(new TextDecoder().decode(await get(manifestUrl)));
  if (manifest.format !== 's2d2-web-model/1') throw new Error(`${manifestUrl}: not an s2d2-web-model/1 manifest`);
  const model = await checkFile(manifest, manifest.graph.file, await gunzip(await get(modelGzUrl)));
  const session = await ort.InferenceSession.create(model, { executionProviders: ['wasm'] });
  return { manifest, session };
}
