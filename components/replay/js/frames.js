/**
 * Frame decoding: the views of step N from a frame bundle (components/replay/frame_bundle.py builds it).
 *
 * Pure functions, no DOM: the same module runs in the page and under node in the tests, which check that every
 * view it decodes equals the server's rendering (components/views/step_views.py) for every step.
 * Invariant: joining a view's fragment ids gives back the server's HTML byte for byte; plot values are Gradio's
 * own Plot value ({type: 'plotly', plot: JSON text}), so the page's Plot component draws them as it draws the
 * server's.
 */

/** The HTML of fragment ids `ids` (a negative entry -k continues the previous id with its k successors). */
export function join(pieces, ids) {
  let out = '';
  let prev = 0;
  for (const x of ids) {
    if (x >= 0) {
      out += pieces[x];
      prev = x;
      continue;
    }
    for (let j = 1; j <= -x; j++) out += pieces[prev + j];
    prev -= x;
  }
  return out;
}

/** The scrubber value `value` as the server reads it (trace_index.clamp_step): halves up, within 0..total;
 * null for a blank or non-numeric value (the server ignores those too). */
export function clampStep(value, total) {
  if (value === null || value === undefined || value === '') return null;
  const x = Number(value);
  if (!Number.isFinite(x)) return null;
  return Math.max(0, Math.min(total, Math.floor(x + 0.5)));
}

/** A figure (its JSON without the template) with the bundle's shared template, as Gradio's Plot value. */
export function plotValue(figure, template) {
  const layout = template === null || template === undefined ? figure.layout : {...figure.layout, template};
  return {type: 'plotly', plot: JSON.stringify({...figure, layout})};
}

/** The routing figure at step `s`: the step-0 figure plus, past step 0, the current-step marker at x = s. */
export function routingFigure(bundle, s) {
  const fig = bundle.routing;
  if (!bundle.marker || s <= 0) return fig;
  const shapes = [...((fig.layout && fig.layout.shapes) || []), {...bundle.marker, x0: s, x1: s}];
  return {...fig, layout: {...fig.layout, shapes}};
}

/** Every per-step view of step `s` (a whole step in 0..bundle.last), keyed like the server's STEP_VIEWS;
 * the mask and routing as Plot values. */
export function frameViews(bundle, s) {
  const f = bundle.frames[s];
  const p = bundle.pieces;
  return {
    canvas: join(p, f[0]),
    strip: join(p, f[1]),
    detail: join(p, f[2]),
    residual: join(p, f[3]),
    step_words: f[4],
    summary: f[5],
    mask: plotValue(bundle.masks[f[6]], bundle.template),
    routing: plotValue(routingFigure(bundle, s), bundle.template),
  };
}
