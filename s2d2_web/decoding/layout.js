// Where a block run's blocks lie. Python twin: s2d2/decoding/layout.py (block_plan), position-aligned models: the
// block loop, the editing loop and the D2F pipeline.

/** @returns {{firstStart: number, end: number, total: number}} The D2F pipeline (loop "pipeline") appends
 * floor(G / B) blocks of B right after the prompt (not aligned to multiples of B), as the D2F reference. */
export function blockPlan(cfg, promptLen) {
  const B = cfg.block_length;
  if (cfg.loop === "pipeline") {
    const end = promptLen + Math.floor(cfg.gen_length / B) * B;
    return { firstStart: promptLen, end, total: end };
  }
  const first = Math.floor(promptLen / B) * B;
  const end = promptLen + cfg.gen_length;
  const grid = cfg.adaptive_block ? cfg.adaptive_max_block : B;
  return { firstStart: first, end, total: Math.ceil(end / grid) * grid };
}
