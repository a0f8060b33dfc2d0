/**
 * What the kernel-restart notice says, as plain data (no DOM, so node's test runner checks it).
 *
 * A run's live monitor is a widget followed by a thread of the kernel that showed it. When that
 * kernel restarts, dies or is swapped for another, the page keeps the view as it was ("running",
 * a Stop button wired to a dead comm); the run itself goes on in its own process. The notice says
 * so and how to follow the run again (see kernelRestartNotice.ts for where it is shown).
 */

/** Why a monitor's kernel is gone. */
export type Gone = 'restarted' | 'stopped' | 'changed';

/** The kernel statuses after which a monitor's follower thread is gone. */
export function goneForStatus(status: string): Gone | null {
  if (status === 'restarting' || status === 'autorestarting') {
    return 'restarted';
  }
  return status === 'dead' ? 'stopped' : null;
}

/** A notebook's kernel was swapped (`oldKernel` is gone; `newKernel` null: none now). */
export function goneForKernelChange(hadKernel: boolean, hasKernel: boolean): Gone | null {
  if (!hadKernel) {
    return null; // the notebook's first kernel: nothing was following anything
  }
  return hasKernel ? 'changed' : 'stopped';
}

/**
 * A run name that can be shown inside a command as it is: what `%prime_train --attach` takes
 * on one line (no spaces, quotes, markup or path pieces). Anything else is left out of the text.
 */
export function isPlainId(name: string | null | undefined): name is string {
  return typeof name === 'string' && /^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$/.test(name);
}

/** One piece of the notice: text, or a command shown as code. */
export interface IPiece {
  text: string;
  code?: boolean;
}

const OPENING: Record<Gone, string> = {
  restarted: 'The kernel restarted',
  stopped: 'The kernel stopped',
  changed: "The notebook's kernel changed"
};

/** The notice, in pieces that a view sets as text (never as markup). */
export function noticePieces(gone: Gone, run: string | null | undefined): IPiece[] {
  const head: IPiece = { text: `${OPENING[gone]}; this view no longer updates. The run continues: ` };
  if (isPlainId(run)) {
    return [head, { text: `%prime_train --attach ${run}`, code: true }, { text: ' in a new cell shows it again.' }];
  }
  return [head, { text: '%prime_train --attach', code: true }, { text: " with the run's name in a new cell shows it again." }];
}

/** The notice as one line of plain text (a tooltip, a test). */
export function noticeText(gone: Gone, run: string | null | undefined): string {
  return noticePieces(gone, run)
    .map(p => p.text)
    .join('');
}
