/**
 * The stepper: what the Replay views show for a scrubber value, decided in the browser.
 *
 * app.py wires the slider's change event to `stepOutputs` with no server function: the views of a step inside the
 * bundle are drawn from it (frames.js). Two cases still need Python, and for them the stepper hands the step to the
 * server through the hidden "server step" number (its change event runs the server's step_views): a pinned token
 * (its details, residual draw and mask outline are the pin's, at this step) and a step past the bundle's last
 * frame (a trace too long to send whole). Otherwise "server step" stays -1, so no event reaches the server.
 * Pure: the same function runs under node in the tests.
 */
import {clampStep, frameViews} from './frames.js';

/** The views that follow the scrubber, in the order of the event's outputs (app.py STEPPED). */
export const STEPPED = ['canvas', 'strip', 'step_words', 'summary', 'routing', 'detail', 'residual', 'mask'];
const PINNED = ['detail', 'residual', 'mask'];  // what a pinned token's views replace

/** True when the detail box holds a pinned token (token_detail.detail_html marks it with data-pinned). */
export function isPinned(detail) {
  return typeof detail === 'string' && detail.includes('data-pinned="');
}

/**
 * The outputs for scrubber value `value`: the STEPPED views, then the "server step" (-1: nothing for the server).
 * `shown` holds the views on screen now, in STEPPED order: what the server will redraw is left as it is.
 */
export function stepOutputs(value, bundle, shown) {
  const keep = [...shown];
  if (!bundle || !Array.isArray(bundle.frames) || bundle.frames.length === 0) return [...keep, -1];
  const s = clampStep(value, bundle.total);
  if (s === null) return [...keep, -1];
  if (s > bundle.last) return [...keep, s];  // past the bundle: the server draws this step
  const views = frameViews(bundle, s);
  const pinned = isPinned(shown[STEPPED.indexOf('detail')]);
  const out = STEPPED.map((name, i) => (pinned && PINNED.includes(name) ? keep[i] : views[name]));
  return [...out, pinned ? s : -1];
}
