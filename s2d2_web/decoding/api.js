// generate(): one decode in the page, recorded as the trace the server writes (schema s2d2/trace/records.py).
// Python twin: s2d2/api.py (run_prepared, run_loop) and s2d2/output.py (trim_output).
//
// What the page runs: the block loop, honest AR and the LLaDA2.x editing loop on position-aligned models (the
// bundled `tiny` and `tiny-llada2`); every remasking rule, the policies of policies/index.js, the six estimators,
// the three acceptance modes, KV reuse, the fused commit, adaptive blocks and the trimmed verifier. Draws come from
// the counter stream (rng="counter"): a config that draws with torch's generator is refused before any work,
// since the page cannot reproduce it.
import { CounterStream } from "../draws.js";
import { arLoop } from "./ar.js";
import { blockLoop } from "./decoder.js";
import { editingLoop } from "./editing.js";
import { pipelineLoop } from "./pipeline.js";
import { Recorder } from "./forwards.js";
import { doSample } from "./sampling.js";

export const SCHEMA_VERSION = 1;
// Options a server config dict leaves out at their defaults (s2d2/config.py LATER_DEFAULTS).
const LATER_DEFAULTS = { cost_threshold: 0.0, cost_verify_scale: 1.0, cost_skip_value: "prefix", trim_verify: false,
  rng: "torch" };

// The D2F pipeline's options at their defaults (s2d2/policies/pipeline.py DEFAULTS): a config dict names them only
// with loop "pipeline".
const PIPELINE_DEFAULTS = { block_add_threshold: 0.5, decoded_token_threshold: 0.8, confidence_score: "probability",
  draft_confidence_threshold: null, verify_confidence_threshold: null, pipeline_fallback: "d2f" };
const PIPELINE_CHOICES = { confidence_score: ["probability", "margin", "neg_entropy"],
  pipeline_fallback: ["d2f", "reference"] };

/** Whether a decode with `cfg` draws random numbers (a sampled token, or an acceptance test's u). */
export function draws(cfg) {
  return doSample(cfg) || (cfg.method === "s2d2" && cfg.acceptance !== "greedy_exact");
}

// The choices a config names (s2d2/config.py); anything else is refused before any work.
const CHOICES = {
  method: ["ar", "diffusion", "s2d2"],
  acceptance: ["paper", "sampled", "greedy_exact"],
  remasking: ["low_confidence_static", "low_confidence_dynamic", "sequential", "entropy_bounded"],
  estimator: ["hard_margin_threshold", "hard_entropy_threshold", "soft_confidence_power", "soft_clipped_linear_margin",
    "soft_entropy_negexp", "soft_renyi_2_entropy"],
  score_type: ["difference_static", "difference_dynamic"],
};

/** The reason the page cannot decode `cfg` on `model`, or null when it can. */
export function unsupported(cfg, model) {
  for (const [field, allowed] of Object.entries(CHOICES)) {
    if (!allowed.includes(cfg[field])) return `${field}: one of ${allowed.join(", ")}`;
  }
  if (cfg.loop === "pipeline") {
    for (const [field, allowed] of Object.entries(PIPELINE_CHOICES)) {
      const value = cfg[field] ?? PIPELINE_DEFAULTS[field];
      if (!allowed.includes(value)) return `${field}: one of ${allowed.join(", ")}`;
    }
  }
  if (model.spec.alignment !== "aligned") return "the page decodes position-aligned models only";
  if (!["block", "editing", "pipeline"].includes(cfg.loop ?? "block")) return `loop ${JSON.stringify(cfg.loop)} is decoded on the server only`;
  if (cfg.method === "ar" && cfg.ar_accounting !== "fused") return "ar_accounting 'reference' is decoded on the server only";
  if (cfg.method === "s2d2" && cfg.policy === "cost_aware") {
    return `policy ${JSON.stringify(cfg.policy)} is decoded on the server only`;
  }
  if (draws(cfg) && cfg.rng !== "counter") return "this configuration draws random numbers: the page needs rng='counter'";
  return null;
}

// Bounds on the work one decode may ask for (s2d2/config.py MAX_GEN_LENGTH, MAX_BLOCK_LENGTH).
export const MAX_GEN_LENGTH = 4096;
export const MAX_BLOCK_LENGTH = 256;

function intIn(value, lo, hi) {
  return Number.isInteger(value) && value >= lo && value <= hi;
}

/** The reason a decode of `promptLen` prompt tokens with `cfg` exceeds its bounds, or null. */
export function outOfBounds(cfg, promptLen, spec) {
  if (!intIn(cfg.gen_length, 1, MAX_GEN_LENGTH)) return `gen_length: must be an integer in [1, ${MAX_GEN_LENGTH}]`;
  if (!intIn(cfg.block_length, 1, MAX_BLOCK_LENGTH)) return `block_length: must be an integer in [1, ${MAX_BLOCK_LENGTH}]`;
  if (cfg.denoising_steps != null && !intIn(cfg.denoising_steps, 1, cfg.block_length)) {
    return "denoising_steps: must be an integer in [1, block_length]";
  }
  if (cfg.sub_block_length != null && !(intIn(cfg.sub_block_length, 1, cfg.block_length)
    && cfg.block_length % cfg.sub_block_length === 0)) return "sub_block_length: must divide block_length";
  if (cfg.loop === "pipeline" && cfg.gen_length < cfg.block_length) { // as s2d2/policies/pipeline.py check()
    return `gen_length: the pipeline decodes gen_length // block_length blocks; ${cfg.gen_length} < block_length `
      + `${cfg.block_length} gives none`;
  }
  const most = cfg.adaptive_block ? cfg.adaptive_max_block : cfg.block_length;
  if (!intIn(most, 1, MAX_BLOCK_LENGTH)) return `adaptive_max_block: must be an integer in [1, ${MAX_BLOCK_LENGTH}]`;
  const total = Math.ceil((promptLen + cfg.gen_length) / most) * most;
  if (spec.max_positions !== undefined && total > spec.max_positions) {
    return `the prompt (${promptLen} tokens) and gen_length ${cfg.gen_length} need ${total} positions; this model has ${spec.max_positions}`;
  }
  return null;
}

/** Keep at most genLength tokens, up to the last non-mask, then cut before the first stop id. */
export function trimOutput(generated, genLength, maskId, stopIds) {
  const ids = Array.from(generated.slice(0, genLength));
  while (ids.length && ids.at(-1) === maskId) ids.pop();
  const at = ids.findIndex((t) => stopIds.includes(t));
  return at < 0 ? [ids, null] : [ids.slice(0, at), at];
}

/** Encode as the server's trace file does: non-finite floats as strings. */
function encode(value) {
  if (typeof value === "number" && !Number.isFinite(value)) return Number.isNaN(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  if (Array.isArray(value)) return value.map(encode);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, encode(v)]));
  }
  return value;
}

/**
 * Decode `promptIds` with `config` (the server's config dict) and return the trace object.
 * model: {spec: {name, alignment, mask_id, stop_ids, vocab_size}, info (the header's ModelInfo), text(id),
 *         newCache(), forward(...)} (models/onnx_model.js).
 * options: {seed, promptText, detailed, onBlock(steps), shouldStop(), libraryVersion}.
 */
export async function generate(model, promptIds, config, options = {}) {
  const cfg = { ...LATER_DEFAULTS, ...PIPELINE_DEFAULTS, ...config };
  const why = unsupported(cfg, model) ?? outOfBounds(cfg, promptIds.length, model.spec);
  if (why !== null) throw new RangeError(`browser decode: ${why}`);
  const { seed = 0, promptText = "", detailed = true, onBlock = null, shouldStop = null } = options;
  const stream = cfg.rng === "counter" ? new CounterStream(BigInt(seed)) : null;
  const rec = new Recorder(model, detailed);
  const check = (steps) => {
    if (onBlock !== null) onBlock(steps);
    return shouldStop !== null && shouldStop() ? "cancelled" : null;
  };
  const t0 = performance.now();
  const prompt = Int32Array.from(promptIds);
  const loops = { editing: editingLoop, pipeline: pipelineLoop };
  const run = loops[cfg.loop] ?? (cfg.method === "ar" ? arLoop : blockLoop);
  const loop = await run(model, cfg, prompt, rec, stream, check);
  const wall = (performance.now() - t0) / 1000;
  const { mask_id: maskId, stop_ids: stopIds } = model.spec;
  const [out, stopPos] = trimOutput(loop.x.slice(prompt.length), cfg.gen_length, maskId, stopIds);
  const texts = (ids) => (detailed ? ids.map((t) => model.text(t)) : []);
  const header = {
    schema_version: SCHEMA_VERSION, library_version: options.libraryVersion ?? "0.1.0", provenance: "measured",
    model: model.info, config, seed, prompt_text: promptText, prompt_ids: Array.from(promptIds),
    prompt_tokens: texts(promptIds), gen_length: cfg.gen_length, total_length: loop.x.length,
    created: new Date().toISOString().replace(/\.\d+Z$/, "+00:00"),
  };
  const footer = {
    output_ids: out, output_text: model.decode ? model.decode(out) : out.map((t) => model.text(t)).join(""),
    output_tokens: texts(out), generated_length: out.length, stop_position: stopPos, wall_s: wall,
    forward_wall_s: rec.forwards.reduce((a, f) => a + f.wall_s, 0),
    finish_reason: stopPos !== null ? "stop_token" : loop.finishReason,
  };
  return encode({ header, blocks: loop.blocks, forwards: rec.forwards, steps: loop.steps, footer, detailed });
}
