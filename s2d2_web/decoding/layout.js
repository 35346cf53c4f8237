// Where a block run's blocks lie. Python twin: s2d2/decoding/layout.py (block_plan), position-aligned models.

/** @returns {{firstStart: number, end: number, total: number}} */
export function blockPlan(cfg, promptLen) {
  const B = cfg.block_length;
  const first = Math.floor(promptLen / B) * B;
  const end = promptLen + cfg.gen_length;
  const grid = cfg.adaptive_block ? cfg.adaptive_max_block : B;
  return { firstStart: first, end, total: Math.ceil(end / grid) * grid };
}
