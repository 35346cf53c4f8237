// The pipeline loop (loop "pipeline"): D2F's pipelined block decoding, and S2D2 on top of it.
// Python twin: s2d2/decoding/pipeline.py (pipeline_loop, _add_block, _mark_complete, _finish_blocks) and
// s2d2/decoding/pipeline_state.py (PipeBlock, PipeState), position-aligned models.
//
// Several blocks are in flight. The prompt is a block of its own, and floor(G / B) blocks of B masks join after it,
// each attending block-causally to the blocks before it. A step: add a block when the last one is
// block_add_threshold decoded (the prompt counts as fully decoded), unless a stop id was decoded or every block is
// in; mark the next block complete once its predecessor is decoded_token_threshold decoded (for good); one forward
// (pipeline_step.js) caches the finished blocks and drafts every mask in flight; each block decodes by the D2F rule,
// after S2D2's verifier when the policy routes the first span to it. A block whose last mask is decoded is cached
// by the next forward once every earlier block is finished. The run ends when no block is in flight.
import { startDecode } from "./context.js";
import { numberSteps } from "./decoder.js";
import { range } from "./forwards.js";
import { pipelineStep } from "./pipeline_step.js";

/** One block as the loop tracks it: masks (absolute, ascending), flags and state (active | to_cache | cached). */
function pipeBlock(index, start, length, addedStep) {
  return { index, start, length, addedStep, masks: range(start, start + length), complete: false, finished: false,
    state: "active" };
}

const decodedRatio = (b) => (b.length - b.masks.length) / b.length;

/** Decode; `check(steps)` runs after every step that finished a block and returns a finish reason to stop early,
 * or null. Returns {x, blocks, steps, finishReason}. */
export async function pipelineLoop(model, cfg, prompt, rec, stream, check) {
  const { P, plan, x, ctx } = startDecode(model, cfg, prompt, rec, stream);
  const st = { blocks: [], cacheEnd: 0, promptPending: true, eos: false, step: 0 };
  const steps = [];
  const blocks = [];
  const nBlocks = (plan.end - P) / cfg.block_length;
  for (;;) {
    const events = [];
    addBlock(ctx, st, blocks, nBlocks, events);
    markComplete(st, cfg.decoded_token_threshold, events);
    if (!st.blocks.some((b) => b.state === "active")) break;
    const record = await pipelineStep(ctx, st, events);
    const finished = finishBlocks(st, record.events);
    if (!record.events.length) delete record.events; // as the server's trace file: only steps with events write them
    steps.push(record);
    st.step += 1;
    const reason = finished ? check(numberSteps(steps)) : null;
    if (reason !== null) return { x, blocks, steps: numberSteps(steps), finishReason: reason };
  }
  return { x, blocks, steps: numberSteps(steps), finishReason: "length" };
}

/** Append a block of masks when the last block (the prompt at first) is block_add_threshold decoded. */
function addBlock(ctx, st, blocks, nBlocks, events) {
  if (st.blocks.length >= nBlocks || st.eos) return;
  const progress = st.blocks.length ? decodedRatio(st.blocks.at(-1)) : 1.0;
  if (progress < ctx.cfg.block_add_threshold) return;
  const B = ctx.cfg.block_length;
  const start = ctx.promptLen + st.blocks.length * B;
  const index = st.blocks.length + 1;
  st.blocks.push(pipeBlock(index, start, B, st.step));
  blocks.push({ index, start, length: B, prompt_tail: 0 });
  events.push({ block: index, event: "added" });
}

/** A block whose predecessor (the prompt for the first) is `threshold` decoded counts as complete, for good. */
function markComplete(st, threshold, events) {
  let previous = 1.0;
  for (const b of st.blocks) {
    if (!b.complete && previous >= threshold) {
      b.complete = true;
      events.push({ block: b.index, event: "complete" });
    }
    previous = decodedRatio(b);
  }
}

/** End of a step: blocks with no mask left are finished; a finished block is cached by the next forward once no
 * earlier block is in flight. True when a block finished at this step. */
function finishBlocks(st, events) {
  let finished = false;
  for (const b of st.blocks) {
    if (b.state === "active" && !b.masks.length && !b.finished) {
      b.finished = true;
      finished = true;
      events.push({ block: b.index, event: "finished" });
    }
  }
  let earlierActive = false;
  for (const b of st.blocks) {
    if (b.state === "active" && b.finished && !earlierActive) b.state = "to_cache";
    earlierActive = earlierActive || b.state === "active";
  }
  return finished;
}
