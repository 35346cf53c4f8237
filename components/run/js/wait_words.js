/**
 * The Run's place in the queue, in words. Gradio writes a queued event's progress as "queue: P/N | T s" (P its
 * place counting from 1, N the queue's length, T the seconds waited, or "W/E" with E its estimate) into the line
 * under the Run button (app.py points the Run's progress there); a learner cannot read "queue: 3/3". This module
 * puts a sentence beside it: how many runs are ahead and about how long, and leaves Gradio's own text in place
 * (hidden from sight, kept for screen readers) so nothing Gradio draws is fought over.
 */

const QUEUED = /queue:\s*(\d+)\s*\/\s*(\d+)\s*\|\s*(?:([\d.]+)\s*\/\s*)?([\d.]+)\s*s/;

/** The sentence for Gradio's progress text, or null when the text is not a queued place ("processing", empty). */
export function waitWords(text) {
  const m = QUEUED.exec(String(text || ''));
  if (!m) return null;
  const ahead = Math.max(0, Number(m[1]) - 1);
  const waited = m[3] === undefined ? Number(m[4]) : Number(m[3]);
  const estimate = m[3] === undefined ? null : Number(m[4]);
  const runs = ahead === 1 ? '1 run is' : `${ahead} runs are`;
  let line = ahead === 0 ? 'Your run is next in line for a free place' : `${runs} ahead of yours in line`;
  if (estimate !== null && isFinite(estimate) && estimate > waited) {
    line += `: about ${Math.max(1, Math.round(estimate - waited))} s to go`;
  }
  return `${line}. It starts by itself; keep this page open (Stop takes it out of the line).`;
}

/** Draw (or remove) the sentence in `root` (the #run-wait line) from the progress text Gradio wrote there. */
export function draw(root) {
  let words = null;
  for (const el of root.querySelectorAll('.progress-text')) words = waitWords(el.textContent) || words;
  let out = root.querySelector('.s2d2-wait-words');
  if (!words) {
    if (out) out.remove();
    return;
  }
  if (!out) {
    out = document.createElement('p');
    out.className = 's2d2-wait-words';
    out.setAttribute('aria-live', 'polite');
    root.prepend(out);
  }
  if (out.textContent !== words) out.textContent = words;
}

/** Keep the sentence beside the wait line's progress text as Gradio rewrites it. The page is watched, not the line:
 * the Run tab's line may be mounted only once the tab is first shown, after this runs. */
export function watch(doc) {
  if (!doc || !doc.body || doc.body.dataset.waitWords) return;
  doc.body.dataset.waitWords = '1';
  const tick = () => {
    const root = doc.querySelector('#run-wait');
    if (root) draw(root);
  };
  new MutationObserver(tick).observe(doc.body, {subtree: true, childList: true, characterData: true});
  tick();
}
