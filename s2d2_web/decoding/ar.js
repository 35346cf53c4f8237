// An honest autoregressive decoder: one forward per token, each committing token i-1 and querying token i (a MASK
// at position i, the position-aligned model's block-size-1 mode). Python twin: s2d2/decoding/ar.py (ar_loop).
import { normalizedEntropy, top2Margin } from "../estimators.js";
import { numberSteps } from "./decoder.js";
import { drawTokens, tokenDistribution, topK } from "./sampling.js";

const CHECK_EVERY = 8; // tokens between progress callbacks

export async function arLoop(model, cfg, prompt, rec, stream, check) {
  const P = prompt.length;
  const G = cfg.gen_length;
  const maskId = model.spec.mask_id;
  const stops = new Set(model.spec.stop_ids);
  const x = new Int32Array(P + G).fill(maskId);
  x.set(prompt);
  const cache = model.newCache();
  const blocks = [];
  const steps = [];
  for (let i = P; i < P + G; i++) {
    const logits = i === P
      ? await rec.forward("prefill", i, 0, cache, [...prompt, maskId], Array.from({ length: P + 1 }, (_, j) => j),
        "causal", P, { last: 1 })
      : await rec.forward("ar", i, 0, cache, [x[i - 1], maskId], [i - 1, i], "causal", 1, { last: 1 });
    const probs = tokenDistribution(logits, cfg, maskId);
    const [token] = drawTokens(probs, cfg, stream, "ar");
    x[i] = token;
    blocks.push({ index: i, start: i, length: 1, prompt_tail: 0 });
    steps.push(arStep(rec, model, probs[0], token, i));
    if (stops.has(token)) return { x, blocks, steps: numberSteps(steps), finishReason: "stop_token" };
    if ((i - P + 1) % CHECK_EVERY === 0) {
      const reason = check(numberSteps(steps));
      if (reason !== null) return { x, blocks, steps, finishReason: reason };
    }
  }
  return { x, blocks, steps: numberSteps(steps), finishReason: "length" };
}

function arStep(rec, model, probs, token, position) {
  const text = rec.detailed ? model.text(token) : "";
  const drafts = rec.detailed ? [{ position, token, text, p: probs[token], entropy: normalizedEntropy([probs])[0],
    margin: top2Margin([probs])[0], top: topK(probs).map((c) => ({ token: c.token, text: model.text(c.token), prob: c.prob })) }] : [];
  return { index: -1, block: position, step: 0, window: [position, position + 1], forwards: [rec.lastIndex],
    masks_before: [position], drafts, span: [position, 1], policy_inputs: null, decision: null, verification: null,
    fallback_k: 0, commits: [{ position, token, text, how: "ar" }], reward: null };
}
