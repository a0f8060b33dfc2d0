// The panel's data handling (src/model.ts), run with node's test runner: `jlpm test`.
import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import {
  appendRows,
  emptySeries,
  fmtSteps,
  harnessApplyCell,
  IMetricsAnswer,
  ITraceItem,
  nextDelay,
  overrideProblem,
  parseOverrides,
  POLL,
  RunsModel,
  sinceOf,
  sparklinePoints,
  stateOf,
  summaryLine
} from '../src/model';

function item(trace: string, status: string, extra: Partial<ITraceItem> = {}): ITraceItem {
  return {
    trace,
    parent: null,
    name: `run-${trace}`,
    created: 0,
    status,
    mode: 'rl',
    model: 'primenb/tiny-byte',
    env: 'reverse-text',
    steps: null,
    max_steps: 10,
    lr: 1e-4,
    final_reward: null,
    best_eval: null,
    duration: null,
    backend: 'local',
    batch: null,
    group_size: null,
    lora_rank: null,
    best_eval_step: null,
    final_eval: null,
    final_loss: null,
    metrics_match: null,
    fingerprint: null,
    data_hash: null,
    seed: null,
    revision: 1,
    host: null,
    reproduces: null,
    run_dir: null,
    live: status === 'running' || status === 'queued',
    ...extra
  };
}

test('appendRows grows a series incrementally and ignores repeats', () => {
  const s = emptySeries();
  assert.equal(sinceOf(s), undefined);
  appendRows(s, [
    { step: 1, reward: 0.1 },
    { step: 2, reward: 0.2 }
  ]);
  assert.deepEqual(s.steps, [1, 2]);
  assert.equal(sinceOf(s), 2);
  // an overlapping answer (the server answered twice): nothing is added twice
  appendRows(s, [
    { step: 2, reward: 0.2 },
    { step: 3, reward: 0.3 }
  ]);
  assert.deepEqual(s.steps, [1, 2, 3]);
  assert.deepEqual(s.values, [0.1, 0.2, 0.3]);
});

test('appendRows skips rows without the key but advances past them', () => {
  const s = emptySeries();
  appendRows(s, [{ step: 1, loss: 2 }, { step: 2, reward: Number.NaN }, { step: 3, reward: 0.5 }, { reward: 9 }]);
  assert.equal(s.key, 'reward');
  assert.deepEqual(s.steps, [3]);
  assert.equal(s.lastStep, 3);
});

test('an SFT run (no reward) draws its loss', () => {
  const s = emptySeries();
  appendRows(s, [{ step: 1, loss: 2 }, { step: 2, loss: 1.5 }]);
  appendRows(s, [{ step: 3, loss: 1.2, reward: 0.1 }]);
  assert.equal(s.key, 'loss');
  assert.deepEqual(s.values, [2, 1.5, 1.2]);
});

test('appendRows thins old points and keeps the newest', () => {
  const s = emptySeries();
  const rows = Array.from({ length: 1000 }, (_, i) => ({ step: i + 1, reward: i }));
  appendRows(s, rows, 'reward', 100);
  assert.ok(s.values.length <= 100);
  assert.equal(s.steps[s.steps.length - 1], 1000);
  assert.equal(s.steps[0], 1);
  for (let i = 1; i < s.steps.length; i++) {
    assert.ok(s.steps[i] > s.steps[i - 1]);
  }
});

test('sparklinePoints scales into the box; flat and short series', () => {
  assert.equal(sparklinePoints([], 100, 20), '');
  assert.equal(sparklinePoints([1], 100, 20), '');
  assert.equal(sparklinePoints([0, 1], 102, 22), '1.0,21.0 101.0,1.0');
  assert.equal(sparklinePoints([5, 5, 5], 102, 22), '1.0,11.0 51.0,11.0 101.0,11.0');
});

test('nextDelay: fast when live and visible, slow when hidden, backs off on errors', () => {
  assert.equal(nextDelay(true, true, 0), POLL.liveMs);
  assert.equal(nextDelay(true, false, 0), POLL.idleMs);
  assert.equal(nextDelay(false, true, 0), POLL.hiddenMs);
  assert.equal(nextDelay(true, true, 1), POLL.liveMs * 2);
  assert.equal(nextDelay(true, true, 50), POLL.maxMs);
});

test('stateOf never lets an unexpected status into a class name', () => {
  assert.equal(stateOf('running'), 'running');
  assert.equal(stateOf('x" onload="y'), 'unknown');
  assert.equal(stateOf(null), 'unknown');
});

test('summary line and steps', () => {
  assert.equal(fmtSteps(null, 10), '0/10');
  assert.equal(fmtSteps(3, null), '3');
  const line = summaryLine(item('a1b2c3', 'running', { steps: 3, final_reward: null }), 0.25);
  assert.equal(line, 'primenb/tiny-byte · reverse-text · local · steps 3/10 · reward 0.250');
});

test('overrides: parsed by line, checked for key=value', () => {
  assert.deepEqual(parseOverrides('trainer.optim.lr=1e-5\n\n# note\n max_steps = 3 '), [
    'trainer.optim.lr=1e-5',
    'max_steps = 3'
  ]);
  assert.equal(overrideProblem('a.b[0].c=1'), null);
  assert.notEqual(overrideProblem('no equals'), null);
});

test('harnessApplyCell quotes what the magic would split', () => {
  assert.equal(harnessApplyCell('3fa9c0d1e2'), '%prime_harness apply 3fa9c0d1e2');
  assert.equal(
    harnessApplyCell('3fa9c0d1e2', 20, ['trainer.optim.lr=1e-5', 'run.name=my run', "x='y'"]),
    "%prime_harness apply 3fa9c0d1e2 --steps 20 --set trainer.optim.lr=1e-5 'run.name=my run' 'x='\\''y'\\'''"
  );
});

test('RunsModel folds pages and metric answers together', () => {
  const m = new RunsModel();
  m.setPage({ items: [item('aaaa', 'running'), item('bbbb', 'completed')], total: 2, offset: 0, limit: 50 });
  assert.deepEqual(m.liveIds, ['aaaa']);
  const answer: IMetricsAnswer = {
    trace: 'aaaa',
    rows: [
      { step: 1, reward: 0.1 },
      { step: 2, reward: 0.3 }
    ],
    last_step: 2,
    more: false,
    status: 'running',
    state: 'running',
    step: 2,
    max_steps: 10
  };
  m.addMetrics(answer);
  assert.equal(m.lastReward('aaaa'), 0.3);
  assert.equal(m.find('aaaa')!.steps, 2);
  m.addMetrics({ ...answer, rows: [{ step: 3, reward: 0.4 }], status: 'stopped', state: 'stopped', step: 3 });
  assert.equal(m.find('aaaa')!.status, 'stopped');
  assert.equal(m.anyLive, false);
  assert.deepEqual(m.seriesOf('aaaa').steps, [1, 2, 3]);
  // a run no longer listed loses its series
  m.setPage({ items: [item('bbbb', 'completed')], total: 1, offset: 0, limit: 50 });
  assert.equal(m.series.has('aaaa'), false);
});
