// The kernel-restart notice's wording and triggers (src/kernelNotice.ts): `jlpm test`.
import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import { goneForKernelChange, goneForStatus, isPlainId, noticePieces, noticeText } from '../src/kernelNotice';

test('a restart, an automatic restart and a dead kernel orphan the monitors; busy/idle do not', () => {
  assert.equal(goneForStatus('restarting'), 'restarted');
  assert.equal(goneForStatus('autorestarting'), 'restarted');
  assert.equal(goneForStatus('dead'), 'stopped');
  for (const status of ['idle', 'busy', 'starting', 'unknown', 'terminating']) {
    assert.equal(goneForStatus(status), null, status);
  }
});

test("a notebook's first kernel orphans nothing; a swapped or removed kernel does", () => {
  assert.equal(goneForKernelChange(false, true), null);
  assert.equal(goneForKernelChange(true, true), 'changed');
  assert.equal(goneForKernelChange(true, false), 'stopped');
});

test('the notice names the command that follows the run again, with a plain run name', () => {
  assert.equal(
    noticeText('restarted', 'qs-2.b_1'),
    'The kernel restarted; this view no longer updates. The run continues: ' +
      '%prime_train --attach qs-2.b_1 in a new cell shows it again.'
  );
  const code = noticePieces('restarted', 'qs').filter(p => p.code);
  assert.deepEqual(code, [{ text: '%prime_train --attach qs', code: true }]);
});

test('a run name that is not a plain id is left out of the command (never shown as markup)', () => {
  const hostile = ['<img src=x onerror=alert(1)>', 'a b', '../x', '-x', '', 'a"b', 'x'.repeat(300), 'a\nb', 'é'];
  for (const name of hostile) {
    assert.equal(isPlainId(name), false, name);
    const text = noticeText('changed', name);
    assert.ok(!text.includes(name) || name === '', name);
    assert.ok(text.includes("%prime_train --attach with the run's name"), text);
  }
  assert.equal(isPlainId(null), false);
  assert.equal(isPlainId(undefined), false);
  assert.ok(noticeText('stopped', null).startsWith('The kernel stopped;'));
});
