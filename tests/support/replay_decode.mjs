// Decode with the page decoder over a ReplayModel: argv[2] = the recording folder; stdin: {config, prompt_ids,
// seed, prompt_text}; stdout: the trace JSON (or {"error": message}).
import { readFileSync } from "node:fs";
import { generate } from "../../s2d2_web/decoding/api.js";
import { ReplayModel } from "./replay_model.js";

const input = JSON.parse(readFileSync(0, "utf8"));
const model = new ReplayModel(process.argv[2]);
try {
  const trace = await generate(model, input.prompt_ids, input.config, { seed: input.seed, promptText: input.prompt_text });
  if (model.next !== model.recorded.length) throw new Error(`the page made ${model.next} forwards, Python ${model.recorded.length}`);
  process.stdout.write(JSON.stringify(trace));
} catch (err) {
  process.stdout.write(JSON.stringify({ error: String(err && err.stack || err) }));
}
