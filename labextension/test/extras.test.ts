// The detail view's evaluations and the servers section (src/extras.ts): `jlpm test`.
import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { ago, evalCells, evalsOf, fmtDuration, IEvalItem, serverLine } from '../src/extras';

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
