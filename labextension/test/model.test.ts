// The panel's data handling (src/model.ts), run with node's test runner: `jlpm test`.
import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import {
  addAnswer,
  emptySeries,
  fmtSteps,
  harnessApplyCell,
  healthText,
  IMetricsAnswer,
  ITraceItem,
  nextDelay,
  overrideProblem,
  PANEL_KEYS,
  parseOverrides,
  POLL,
  RunsModel,
  shownKey,
  sparklinePoints,
  stateOf,
  stepLabel,
  summaryLine,
  UnsafeCellError
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
    trackers: null,
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

/** The rows of an RL run with an SFT warm-up, in the engine's order (see tests/server/synth_runs.py). */
function warmupRows(warmup = 200, rl = 4): Array<Record<string, unknown>> {
  const rows: Array<Record<string, unknown>> = [{ step: 0, phase: 'sft warmup', 'warmup/eval/reward': 0 }];
  for (let s = 1; s <= warmup; s++) {
    rows.push({ step: s, phase: 'sft warmup', 'warmup/loss': 3 - s / 100 });
  }
  rows.push({ step: 0, phase: 'rl', 'eval/reward': 0.5 });
  for (let s = 1; s <= rl; s++) {
    if (s % 2 === 0) {
      rows.push({ step: s, phase: 'rl', 'eval/reward': 0.6 }); // an eval row before the train row of its step
    }
    rows.push({ step: s, phase: 'rl', reward: s / 10, loss: 1 / s });
  }
  return rows;
}

function answerOf(rows: Array<Record<string, unknown>>, start: number, cursor = start + rows.length) {
  return { rows, start, cursor };
}

test('a warm-up run keeps every GRPO reward: steps restart, eval and train rows share a step', () => {
  const rows = warmupRows(200, 4);
  const s = emptySeries();
  // polled in three answers: the warm-up, then GRPO's first rows, then the rest
  assert.ok(addAnswer(s, answerOf(rows.slice(0, 150), 0)));
  assert.equal(shownKey(s), 'warmup/loss'); // during the warm-up the sparkline shows its loss
  assert.ok(addAnswer(s, answerOf(rows.slice(150, 203), 150)));
  assert.ok(addAnswer(s, answerOf(rows.slice(203), 203)));
  assert.equal(s.cursor, rows.length);
  assert.equal(shownKey(s), 'reward'); // then GRPO's reward
  assert.deepEqual(s.curves['reward'].values, [0.1, 0.2, 0.3, 0.4]); // all 4, none dropped
  assert.deepEqual(s.curves['reward'].steps, [1, 2, 3, 4]);
  assert.equal(s.curves['warmup/loss'].values.length, 200);
  assert.equal(stepLabel(s.curves['reward']), 'step 4');
  // the same rows in one answer (the detail view of the finished run)
  const all = emptySeries();
  addAnswer(all, answerOf(rows, 0));
  assert.deepEqual(all.curves['reward'].values, [0.1, 0.2, 0.3, 0.4]);
});

test('addAnswer ignores a late or repeated answer and starts over when the file was rewritten', () => {
  const s = emptySeries();
  addAnswer(s, answerOf([{ step: 1, reward: 0.1 }, { step: 2, reward: 0.2 }], 0));
  assert.equal(addAnswer(s, answerOf([{ step: 2, reward: 0.2 }], 1)), false); // overlapping: nothing added
  assert.deepEqual(s.curves['reward'].values, [0.1, 0.2]);
  assert.ok(addAnswer(s, answerOf([{ step: 1, reward: 0.9 }], 0))); // start 0 for cursor 2: rewritten
  assert.deepEqual(s.curves['reward'].values, [0.9]);
  assert.equal(s.cursor, 1);
});

test('rows without a key, non-finite values and rows without a step', () => {
  const s = emptySeries();
  addAnswer(s, answerOf([{ step: 1, loss: 2 }, { step: 2, reward: Number.NaN }, { step: 3, reward: 0.5 }, { reward: 9 }], 0));
  assert.deepEqual(s.curves['reward'].values, [0.5, 9]);
  assert.equal(shownKey(s), 'reward');
});

test('an SFT run (no reward) draws its loss', () => {
  const s = emptySeries();
  addAnswer(s, answerOf([{ step: 1, loss: 2, phase: 'sft' }, { step: 2, loss: 1.5, phase: 'sft' }], 0));
  assert.equal(shownKey(s), 'loss');
  assert.deepEqual(s.curves['loss'].values, [2, 1.5]);
});

test('curves thin old points and keep the newest', () => {
  const s = emptySeries();
  const rows = Array.from({ length: 1000 }, (_, i) => ({ step: i + 1, reward: i }));
  addAnswer(s, answerOf(rows, 0), ['reward'], 100);
  const c = s.curves['reward'];
  assert.ok(c.values.length <= 100);
  assert.equal(c.steps[c.steps.length - 1], 1000);
  assert.equal(c.steps[0], 1);
  for (let i = 1; i < c.steps.length; i++) {
    assert.ok(c.steps[i] > c.steps[i - 1]);
  }
});

test('reward failures are summed by function and named', () => {
  const s = emptySeries();
  const row = { step: 1, phase: 'rl', reward: 0, reward_calls: 8, reward_errors: 8, 'reward_errors/exact_match': 8 };
  addAnswer(s, answerOf([row, { ...row, step: 2 }], 0), PANEL_KEYS);
  assert.equal(healthText(s.health), 'reward function exact_match failed on 16 of 16 completions');
  const ok = emptySeries();
  addAnswer(ok, answerOf([{ step: 1, reward: 1, reward_calls: 8, reward_errors: 0 }], 0), PANEL_KEYS);
  assert.equal(healthText(ok.health), null);
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
  const line = summaryLine(item('a1b2c3', 'running', { steps: 3, final_reward: null }), 0.25, 'reward');
  // steps and the value first: at the default sidebar width the tail hides behind the ellipsis
  assert.equal(line, 'steps 3/10 · reward 0.250 · primenb/tiny-byte · reverse-text · local');
  // a finished SFT run, listed after a reload (no metrics fetched): its stored loss, not "reward –"
  const sft = summaryLine(item('d4e5f6', 'completed', { mode: 'sft', steps: 10, final_loss: 0.25 }));
  assert.equal(sft, 'steps 10/10 · loss 0.250 · primenb/tiny-byte · reverse-text · local');
  assert.ok(summaryLine(item('d4e5f6', 'completed', { final_reward: 0.5 })).includes(' · reward 0.500 · '));
  // an ended run: its stored final reward, not the sparkline's point from the poll before it ended
  const ended = summaryLine(item('d4e5f6', 'completed', { steps: 20, final_reward: 0.097 }), 0.064, 'reward');
  assert.ok(ended.startsWith('steps 20/10 · reward 0.097'), ended);
  assert.ok(summaryLine(item('a1b2c3', 'running', { final_reward: 0.097 }), 0.064, 'reward').includes('reward 0.064'));
});

test('overrides: parsed by line, checked for key=value', () => {
  assert.deepEqual(parseOverrides('trainer.optim.lr=1e-5\n\n# note\n max_steps = 3 '), [
    'trainer.optim.lr=1e-5',
    'max_steps = 3'
  ]);
  assert.equal(overrideProblem('a.b[0].c=1'), null);
  assert.notEqual(overrideProblem('no equals'), null);
});

test('harnessApplyCell: plain ids and overrides only, never quoted into code', () => {
  assert.equal(harnessApplyCell('3fa9c0d1e2'), '%prime_harness apply 3fa9c0d1e2');
  assert.equal(
    harnessApplyCell('3fa9c0d1e2', 20, ['trainer.optim.lr=1e-5']),
    '%prime_harness apply 3fa9c0d1e2 --steps 20 --set trainer.optim.lr=1e-5'
  );
  // IPython expands $name and {expression} in a magic line: shell quoting would run them
  const hostile = [
    '{__import__("os").system("touch pwned")}',
    '$(touch pwned)',
    "x'; import os; os.system('id') #",
    'a b',
    'abc\n%system id',
    '$HOME0000',
    '..',
    'ab',
    'x'.repeat(65),
    '\u202eabcd'
  ];
  for (const id of hostile) {
    assert.throws(() => harnessApplyCell(id), UnsafeCellError, id);
  }
  for (const o of ['run.name=my run', "x='y'", 'a={b}', 'a=$HOME', 'a=1\nb=2']) {
    assert.throws(() => harnessApplyCell('3fa9c0d1e2', null, [o]), UnsafeCellError, o);
  }
});

test('RunsModel folds pages and metric answers together', () => {
  const m = new RunsModel(2);
  m.setPage({ items: [item('aaaa', 'running'), item('bbbb', 'completed')], total: 3, offset: 0, limit: 2 });
  assert.deepEqual(m.liveIds, ['aaaa']);
  assert.deepEqual(m.missingPages(0, 10), [1]);
  m.setPage({ items: [item('cccc', 'failed')], total: 3, offset: 2, limit: 2 });
  assert.equal(m.itemAt(2)!.trace, 'cccc');
  assert.deepEqual(m.missingPages(0, 10), []);
  const answer: IMetricsAnswer = {
    trace: 'aaaa',
    rows: [
      { step: 1, reward: 0.1 },
      { step: 2, reward: 0.3 }
    ],
    start: 0,
    cursor: 2,
    more: false,
    status: 'running',
    state: 'running',
    step: 2,
    max_steps: 10
  };
  m.addMetrics(answer);
  assert.deepEqual(m.lastValue('aaaa'), { key: 'reward', value: 0.3 });
  assert.equal(m.find('aaaa')!.steps, 2);
  m.addMetrics({ ...answer, rows: [{ step: 3, reward: 0.4 }], start: 2, cursor: 3, status: 'stopped', state: 'stopped', step: 3 });
  assert.equal(m.find('aaaa')!.status, 'stopped');
  assert.equal(m.anyLive, false);
  assert.deepEqual(m.seriesOf('aaaa').curves['reward'].steps, [1, 2, 3]);
  // a new total (a run was added): the other pages' offsets moved, so they are dropped
  m.setPage({ items: [item('bbbb', 'completed')], total: 4, offset: 0, limit: 2 });
  assert.equal(m.series.has('aaaa'), false);
  assert.equal(m.itemAt(2), undefined);
  assert.deepEqual(m.missingPages(0, 10), [1]);
});
