/**
 * One status at a time in the Run's status box (#run-status). The server writes the Run's status there (a Gradio
 * Markdown); the page writes a line of its own only while it knows more than the server has said: Record pressed and
 * the run not started yet (`untilServer`, from the Run's click), the page loading the model and decoding (`say`,
 * page_run.js), the page's trace on its way to the server (`untilServer`). While the page's line is up, Gradio's
 * text is hidden (never removed or rewritten: Gradio owns it), so the box never shows two statuses at once.
 *
 * Invariants: at most one page line; Gradio's text is hidden exactly while it is there. A line put up `untilServer`
 * goes as soon as the server writes a status other than the one it covered, or, with a test, when that says the
 * event ended without writing one (failed; or refused at the door, whose reason then takes the line: `recordEnded`).
 * Browser test: tests/browser/test_run_status_line.py.
 */

const LINE = 's2d2-page-progress';
const OWNED = 'data-page-line';
const RULE = `#run-status[${OWNED}] [data-testid="markdown-wrapper"] { display: none; }`;

let watcher = null; // the MutationObserver of the line put up `untilServer`, if any

/** Gradio's own status text (what the server wrote last). */
export function serverText(root) {
  const wrapper = root.querySelector('[data-testid="markdown-wrapper"]');
  return wrapper ? wrapper.textContent.trim() : '';
}

function unwatch() {
  if (watcher) watcher.disconnect();
  watcher = null;
}

/** The page's line in the status box (Gradio's text hidden under it); null when there is no status box. */
export function say(doc, text) {
  const root = doc.querySelector('#run-status');
  if (!root) return null;
  unwatch();
  if (!doc.getElementById('s2d2-status-line-rule')) {
    const style = doc.createElement('style');
    style.id = 's2d2-status-line-rule';
    style.textContent = RULE;
    doc.head.append(style);
  }
  let out = root.querySelector(`.${LINE}`);
  if (!out) {
    out = doc.createElement('p');
    out.className = LINE;
    out.setAttribute('aria-live', 'polite');
    root.prepend(out);
  }
  out.textContent = text;
  root.setAttribute(OWNED, '');
  return root;
}

/** The page's line gone, Gradio's status shown again. */
export function clear(doc) {
  unwatch();
  const root = doc.querySelector('#run-status');
  if (!root) return;
  const out = root.querySelector(`.${LINE}`);
  if (out) out.remove();
  root.removeAttribute(OWNED);
}

/** The page's line until the server writes a new status, or the test `endedTest(doc)` makes (at once: it sees the page
 * as it is now) says the event is over (see the module): a string from it is the reason the event ended, shown in the
 * line's place until the server writes. */
export function untilServer(doc, text, endedTest = null) {
  const root = say(doc, text);
  if (!root) return;
  const before = serverText(root);
  const ended = endedTest ? endedTest(doc) : null;
  const check = () => {
    if (serverText(root) !== before) {
      clear(doc);
      return;
    }
    const why = ended ? ended() : false;
    if (typeof why === 'string') untilServer(doc, why);
    else if (why) clear(doc);
  };
  watcher = new MutationObserver(check);
  watcher.observe(doc.body, { subtree: true, childList: true, characterData: true, attributes: true,
    attributeFilter: ['class'] });
}

const REFUSAL = 'div.validation-error'; // Gradio's line under an event's first input when its validator refuses it

/** A test of Record's event having ended without writing a new status. Refused at the door (the server's validator:
 * this page already has a run, or its stopped runs are still leaving the queue): Gradio writes the reason under the
 * prompt box, which may be off the screen, so the test returns it ("⚠ … (Record pressed at 14:03:09)": the line stays
 * until the next press, also after the other run has ended, so it says when it was true) for the status line.
 * Failed: a toast (true).
 * Either is told by an element that was not there when Record was pressed (Gradio removes the last refusal's line at
 * the next press and writes a new one). Or the event ran and ended having written the very status it covered (the
 * same refusal twice: "Type a prompt first"): the status box's tracker seen with its timer, then without (true). Not the
 * event streaming: its first status can be painted a frame after the tracker says so, and clearing the line then
 * showed the stale status in between. */
export function recordEnded(doc) {
  const toasts = new Set(doc.querySelectorAll('.toast-body'));
  const refusals = new Set(doc.querySelectorAll(REFUSAL));
  const pressed = new Date().toTimeString().slice(0, 8); // the line stays until the next press: it says when it was true
  let ran = false;
  return () => {
    const refusal = [...doc.querySelectorAll(REFUSAL)].find((e) => !refusals.has(e) && e.textContent.trim());
    if (refusal) return `⚠ ${refusal.textContent.trim()} (Record pressed at ${pressed})`;
    if ([...doc.querySelectorAll('.toast-body')].some((toast) => !toasts.has(toast))) return true;
    const tracker = doc.querySelector('#run-status [data-testid="status-tracker"]');
    const running = !!tracker && tracker.textContent.trim() !== ''; // (its timer: "queue: 1/1", "processing | 0.2s")
    ran = ran || running;
    return ran && !running;
  };
}

export const WAITING = 'Record pressed: waiting for the server to start this run…';

/** Record's click: say at once that the run is on its way, until the server says more. */
export function recordPressed(doc = document) {
  untilServer(doc, WAITING, recordEnded);
}
