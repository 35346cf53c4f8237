/**
 * Play / Pause, in the browser: a timer that presses ▶ once per interval, so each step is drawn by the stepper
 * (stepper.js) like a press of ▶ and no tick reaches the server. At the last step it stops itself.
 *
 * The interval follows the "Play speed" box at every tick, bounded like the server's old timer: 0.2-5 s.
 */
let timer = null;

/** Seconds between steps for `stepsPerSecond`: 1 s for a blank, zero or negative speed; within 0.2-5 s. */
export function interval(stepsPerSecond) {
  const x = Number(stepsPerSecond);
  if (!Number.isFinite(x) || x <= 0) return 1.0;
  return Math.max(0.2, Math.min(5.0, 1.0 / x));
}

export const PLAY = '▶ Play';
export const PAUSE = '❚❚ Pause';

function range() {
  return document.querySelector('#step-slider input[type=range]');
}

function speed() {
  const box = document.querySelector('#play-speed input[type=number]');
  return box ? box.value : 1;
}

function tick() {
  const r = range();
  const next = document.querySelector('#next-btn');
  if (!r || !next || Number(r.value) >= Number(r.max)) {
    const play = document.querySelector('#play');
    timer = null;
    if (play) play.click();  // the Play button's own event turns it back to "▶ Play"
    return;
  }
  next.click();
  timer = setTimeout(tick, interval(speed()) * 1000);
}

/** The Play button's event: [its new label, the scrubber value] (at the end, Play starts again from 0). */
export function togglePlay(label, stepsPerSecond, step) {
  if (timer !== null || label === PAUSE) {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    return [PLAY, step];
  }
  const r = range();
  const atEnd = r && Number(step) >= Number(r.max);
  timer = setTimeout(tick, interval(stepsPerSecond) * 1000);
  return [PAUSE, atEnd ? 0 : step];
}
