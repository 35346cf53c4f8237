// Runs the page's frame modules under node for tests/app/test_frame_bundle.py: reads {bundle, values, shown}
// as JSON on stdin, writes {views: frameViews for steps 0..last, outputs: stepOutputs for each value} to stdout.
import {frameViews} from '../../components/replay/js/frames.js';
import {STEPPED, stepOutputs} from '../../components/replay/js/stepper.js';
import {interval} from '../../components/replay/js/play.js';

let text = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { text += chunk; });
process.stdin.on('end', () => {
  const {bundle, values, shown, speeds} = JSON.parse(text);
  const views = [];
  for (let s = 0; s <= bundle.last; s++) views.push(frameViews(bundle, s));
  const outputs = values.map((v) => stepOutputs(v, bundle, shown));
  process.stdout.write(JSON.stringify({views, outputs, stepped: STEPPED, intervals: speeds.map(interval)}));
});
