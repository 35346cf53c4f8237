/**
 * The Run's live output drawn in the page while the page decodes (components/run/js/page_run.js): the committed
 * tokens by position, greyed after the first stop token and past the generation length. Python twin:
 * components/views/canvas.py render_live (and token_state.visible_text); tests/app/test_page_live.py checks the
 * two give the same HTML. The glyphs and labels come from the server with the plan (token_state.STATES), so the
 * words live in one place.
 */

const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cs}]/u;

/** Python's html.escape(text, quote=True). */
export function escapeHtml(text) {
  return String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;').replace(/'/g, '&#x27;');
}

/** token_state.visible_text: newlines as ⏎, tabs as ⇥, other control/format characters as \uXXXX, cut at `limit`
 * characters (code points) with …; a whitespace-only token shows ␣; an empty one ∅. */
export function visibleText(text, limit = 40) {
  const chars = Array.from(String(text));
  const out = [];
  for (const ch of chars.slice(0, limit)) {
    if (ch === '\n') out.push('⏎');
    else if (ch === '\t') out.push('⇥');
    else if (HIDDEN.test(ch)) out.push(`\\u${ch.codePointAt(0).toString(16).padStart(4, '0')}`);
    else out.push(ch);
  }
  if (chars.length > limit) out.push('…');
  let shown = out.join('');
  if (shown && !shown.trim()) shown = shown.replace(/ /g, '␣');
  return shown || '∅';
}

/** The spans of render_live for `rows` ([position, text, how, token id]); `live`: {states, after_end, past_length,
 * stop_ids, keep} from the plan. */
export function liveInner(rows, live) {
  const sorted = rows.map((r) => [Number(r[0]), String(r[1]), String(r[2]), r.length > 3 ? Number(r[3]) : null])
    .sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  const stops = new Set(live.stop_ids || []);
  let end = null;
  for (const [pos, , , tok] of sorted) if (tok !== null && stops.has(tok) && (end === null || pos < end)) end = pos;
  return sorted.map(([pos, text, how]) => {
    const [glyph, known] = live.states[how] || ['', how];
    let label = known;
    const g = glyph ? `<span class="g" aria-hidden="true">${escapeHtml(glyph)}</span>` : '';
    let classes = `tok st-${escapeHtml(how)}`;
    if (end !== null && pos > end) {
      classes += ' after-end';
      label = live.after_end;
    } else if (live.keep !== null && live.keep !== undefined && pos >= live.keep) {
      classes += ' after-end past-length';
      label = live.past_length;
    } else if (pos === end) {
      classes += ' end-tok';
      label += ' · the stop token: the answer ends here';
    }
    return `<span class="${classes}" data-pos="${pos}" aria-label="${escapeHtml(label)}" ` +
      `title="position ${pos}: ${escapeHtml(label)}">${g}${escapeHtml(visibleText(text))}</span>`;
  }).join('');
}

/** render_live's whole HTML (what the server draws), for the test that binds the two. */
export function renderLive(rows, live) {
  return `<div class="s2d2-canvas" role="group" aria-label="live output">${liveInner(rows, live)}</div>`;
}
