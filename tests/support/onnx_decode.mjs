// Decode with the page decoder on an exported model under onnxruntime-node: argv[2] = the export folder
// (manifest.json, model.onnx, tokenizer.json); stdin: a list of {config, prompt_ids, seed, prompt_text}; stdout: the
// list of traces (or {"error": message} in a job's place).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { generate } from "../../s2d2_web/decoding/api.js";
import { OnnxModel } from "../../s2d2_web/models/onnx_model.js";
import { tokenTexts } from "../../s2d2_web/tokens.js";

const require = createRequire(new URL("../../s2d2_web/package.json", import.meta.url));
const ort = require("onnxruntime-node");
const dir = process.argv[2];
const manifest = JSON.parse(readFileSync(`${dir}/manifest.json`, "utf8"));
const texts = tokenTexts(JSON.parse(readFileSync(`${dir}/${manifest.tokenizer.file}`, "utf8")), manifest.decoding.vocab_size);
const model = await OnnxModel.load(ort, manifest, `${dir}/${manifest.graph.file}`, texts,
  { sessionOptions: { intraOpNumThreads: 1, interOpNumThreads: 1 } });
const jobs = JSON.parse(readFileSync(0, "utf8"));
const out = [];
for (const job of jobs) {
  try {
    out.push(await generate(model, job.prompt_ids, job.config, { seed: job.seed, promptText: job.prompt_text }));
  } catch (err) {
    out.push({ error: String((err && err.stack) || err) });
  }
}
process.stdout.write(JSON.stringify(out));
