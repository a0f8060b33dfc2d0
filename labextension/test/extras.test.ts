// The detail view's evaluations and the servers section (src/extras.ts): `jlpm test`.
import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import {
  ago,
  evalCells,
  evalsOf,
  fmtDuration,
  httpUrl,
  IEvalItem,
  noSamplesText,
  serverLine,
  trackerLinks
} from '../src/extras';

const NOW = 1_790_000_000_000; // ms

function evalItem(extra: Partial<IEvalItem> = {}): IEvalItem {
  return {
    env: 'reverse-text',
    mean: 0.4123,
    std: 0.1,
    ci95_low: 0.3623,
    ci95_high: 0.4623,
    n: 20,
    temperature: 0,
    created: NOW / 1000 - 300,
    model: 'tiny-adapter-run',
    ...extra
  };
}

test('an eval row: mean ± half the interval, n, temperature, when', () => {
  assert.deepEqual(evalCells(evalItem(), NOW), ['reverse-text', '0.412 ± 0.05', '20', '0', '5 min ago']);
  // unknown fields (a corrupt file read tolerantly) show as dashes, never NaN or "null"
  const unknown = evalItem({ mean: null, ci95_high: null, n: null, temperature: null, created: null });
  assert.deepEqual(evalCells(unknown, NOW), ['reverse-text', '–', '–', '–', '–']);
  assert.equal(evalCells(evalItem({ created: NOW / 1000 + 50 }), NOW)[4], 'just now'); // a clock ahead
});

test('evals are read from a detail answer only when shaped like evals', () => {
  assert.deepEqual(evalsOf({ evals: [evalItem()] }).length, 1);
  assert.deepEqual(evalsOf({ evals: 'x' }), []);
  assert.deepEqual(evalsOf({}), []);
  assert.deepEqual(evalsOf(null), []);
  assert.deepEqual(evalsOf({ evals: [null, 3, { env: 5 }, evalItem({ env: 'gsm8k' })] }).map(e => e.env), ['gsm8k']);
});

test('durations and ages', () => {
  assert.equal(fmtDuration(42.7), '42 s');
  assert.equal(fmtDuration(3600 * 3 + 20 * 60), '3 h 20 min');
  assert.equal(fmtDuration(3600), '1 h');
  assert.equal(fmtDuration(86400 * 2 + 3600 * 4), '2 d 4 h');
  assert.equal(fmtDuration(null), '–');
  assert.equal(fmtDuration(-5), '–');
  assert.equal(ago(NOW / 1000 - 7200, NOW), '2 h ago');
});

test('a server line: its model ids and uptime', () => {
  const s = { url: 'http://127.0.0.1:8000/v1', pid: 7, models: ['tiny', 'tiny-adapter-a'], uptime_s: 125, where: 'this machine' };
  // uptime first: a long model list hides behind the ellipsis, not the uptime
  assert.equal(serverLine(s), 'up 2 min · tiny, tiny-adapter-a');
  assert.equal(serverLine({ ...s, models: [], uptime_s: null }), 'up – · no models');
  assert.equal(serverLine({ ...s, where: 'gpu-box (port 8000 there)' }), 'up 2 min · tiny, tiny-adapter-a · on gpu-box (port 8000 there)');
});

test('tracker locations: a link only for an http(s) URL, everything else as text', () => {
  const detail = {
    trackers: {
      wandb: { url: 'https://wandb.ai/me/p/runs/abc', run_id: 'abc', folder: '/runs/x/trackers/wandb/files' },
      mlflow: { uri: 'file:///runs/x/trackers/mlflow', run_id: 'r1' },
      evil: { url: 'javascript:alert(1)', uri: 'JaVaScRiPt:alert(2)' },
      data: { url: 'data:text/html,<script>alert(1)</script>' },
      tb: { folder: '/runs/x/trackers/tensorboard' },
      odd: 'not an object'
    }
  };
  const links = trackerLinks(detail);
  assert.deepEqual(
    links.map(l => [l.kind, l.href]),
    [
      ['wandb', 'https://wandb.ai/me/p/runs/abc'],
      ['mlflow', null],
      ['evil', null],
      ['data', null],
      ['tb', null],
      ['odd', null]
    ]
  );
  assert.equal(links[1].text, 'uri file:///runs/x/trackers/mlflow · run_id r1'); // offline: shown as text
  assert.equal(links[4].text, 'folder /runs/x/trackers/tensorboard');
  assert.equal(links[5].text, '(no location recorded)');
  assert.equal(links[3].text, 'data:text/html,<script>alert(1)</script>'); // text, set as textContent
  assert.equal(trackerLinks({ trackers: ['x'] }).length, 0);
  assert.equal(trackerLinks(null).length, 0);
  assert.equal(httpUrl('http://127.0.0.1:5000/#/experiments/1'), 'http://127.0.0.1:5000/#/experiments/1');
  assert.equal(httpUrl('https://'), null); // malformed
  assert.equal(httpUrl(' https://x'), null); // not at the start
});

test('an ended run with no samples has none, not "none yet"', () => {
  assert.equal(noSamplesText(false, 0, true), 'no samples yet'); // still running: some may come
  assert.equal(noSamplesText(false, 0, false), 'no samples'); // ended (it said "no samples yet")
  assert.equal(noSamplesText(false, 3, false), null);
  assert.equal(noSamplesText(true, 0, false), 'withheld: data_collection = "deny"');
});
