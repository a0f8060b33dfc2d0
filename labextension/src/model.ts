/**
 * The panel's data handling, free of DOM and JupyterLab imports so it is unit-tested in node:
 * the list of runs/traces, each live run's reward series (grown incrementally from
 * `metrics?since=N`), the polling cadence, sparkline geometry and the harness cell text.
 */

import { IIndexRow, LIVE_STATES as RUN_LIVE_STATES, RUN_STATES, RunState } from './documents';

export type State = RunState | 'unknown';

export const LIVE_STATES: ReadonlyArray<string> = RUN_LIVE_STATES;
const KNOWN_STATES: ReadonlyArray<string> = RUN_STATES;

/** One row of `GET /primenb/api/traces`: every index column (generated `IIndexRow`) and `live`. */
export interface ITraceItem extends IIndexRow {
  live: boolean;
}

export interface ITracePage {
  items: ITraceItem[];
  total: number;
  offset: number;
  limit: number;
}

export interface IMetricsAnswer {
  trace: string;
  rows: Array<Record<string, number>>;
  last_step: number | null;
  more: boolean;
  /** The run's state, named as a list row's `status` column (`state`: the same, kept for old clients). */
  status?: RunState | null;
  state: RunState | null;
  step: number | null;
  max_steps: number | null;
}

/** A metric curve: steps and values, in step order, without duplicates. */
export interface ISeries {
  steps: number[];
  values: number[];
  lastStep: number | null;
  /** The metric drawn: fixed by the first rows that carry one of the preferred keys. */
  key: string | null;
}

/** What a run's sparkline draws: reward (RL), else loss (SFT). */
export const SPARK_KEYS: ReadonlyArray<string> = ['reward', 'loss'];

/** The most points a series keeps (older points are thinned, never the newest). */
export const MAX_POINTS = 400;

/** A state name safe to use in a CSS class (anything unexpected becomes `unknown`). */
export function stateOf(status: string | null | undefined): State {
  return (status && KNOWN_STATES.includes(status) ? status : 'unknown') as State;
}

export function isLive(status: string | null | undefined): boolean {
  return !!status && LIVE_STATES.includes(status);
}

export function emptySeries(): ISeries {
  return { steps: [], values: [], lastStep: null, key: null };
}

/**
 * Add the rows of one incremental metrics answer to a series (only `key`, only steps after
 * the last one seen: a repeated or overlapping answer adds nothing). Returns the series.
 */
export function appendRows(
  series: ISeries,
  rows: ReadonlyArray<Record<string, unknown>>,
  key: string | ReadonlyArray<string> = SPARK_KEYS,
  maxPoints = MAX_POINTS
): ISeries {
  if (series.key === null) {
    const wanted = typeof key === 'string' ? [key] : key;
    series.key = wanted.find(k => rows.some(r => typeof r[k] === 'number')) ?? null;
  }
  const chosen = series.key;
  for (const row of rows) {
    const step = row['step'];
    if (typeof step !== 'number' || !Number.isFinite(step)) {
      continue;
    }
    if (series.lastStep !== null && step <= series.lastStep) {
      continue;
    }
    series.lastStep = step;
    const value = chosen === null ? undefined : row[chosen];
    if (typeof value === 'number' && Number.isFinite(value)) {
      series.steps.push(step);
      series.values.push(value);
    }
  }
  if (series.values.length > maxPoints) {
    thin(series, maxPoints);
  }
  return series;
}

/** Keep every other old point until the series fits, always keeping the newest half intact. */
function thin(series: ISeries, maxPoints: number): void {
  while (series.values.length > maxPoints) {
    const keepTail = Math.floor(maxPoints / 2);
    const head = series.values.length - keepTail;
    const steps: number[] = [];
    const values: number[] = [];
    for (let i = 0; i < head; i += 2) {
      steps.push(series.steps[i]);
      values.push(series.values[i]);
    }
    series.steps = steps.concat(series.steps.slice(head));
    series.values = values.concat(series.values.slice(head));
  }
}

/** The `since` query value for the next poll of a series (undefined: everything). */
export function sinceOf(series: ISeries | undefined): number | undefined {
  return series && series.lastStep !== null ? series.lastStep : undefined;
}

/**
 * SVG polyline points for a sparkline of `values` in a `width` x `height` box (1px padding).
 * A flat series is drawn mid-height; fewer than two points draw nothing.
 */
export function sparklinePoints(values: ReadonlyArray<number>, width: number, height: number): string {
  const finite = values.filter(v => Number.isFinite(v));
  if (finite.length < 2) {
    return '';
  }
  const lo = Math.min(...finite);
  const hi = Math.max(...finite);
  const pad = 1;
  const w = width - 2 * pad;
  const h = height - 2 * pad;
  return finite
    .map((v, i) => {
      const x = pad + (w * i) / (finite.length - 1);
      const y = hi === lo ? pad + h / 2 : pad + h - ((v - lo) / (hi - lo)) * h;
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    })
    .join(' ');
}

/** The polling cadence: fast while something trains and the panel is seen, slow otherwise. */
export interface IPollTimes {
  liveMs: number;
  idleMs: number;
  hiddenMs: number;
  maxMs: number;
}

export const POLL: IPollTimes = { liveMs: 2000, idleMs: 10000, hiddenMs: 30000, maxMs: 60000 };

export function nextDelay(visible: boolean, anyLive: boolean, failures: number, times: IPollTimes = POLL): number {
  const base = !visible ? times.hiddenMs : anyLive ? times.liveMs : times.idleMs;
  if (failures <= 0) {
    return base;
  }
  return Math.min(times.maxMs, base * 2 ** Math.min(failures, 10));
}

/** Number formatting for the list: rewards with 3 decimals, missing values as an en dash. */
export function fmtNumber(value: number | null | undefined, digits = 3): string {
  return typeof value === 'number' && Number.isFinite(value) ? value.toFixed(digits) : '–';
}

export function fmtSteps(steps: number | null | undefined, max: number | null | undefined): string {
  if (typeof steps !== 'number') {
    return typeof max === 'number' ? `0/${max}` : '–';
  }
  return typeof max === 'number' ? `${steps}/${max}` : `${steps}`;
}

/** The line under a run's name: model · env · backend · steps · reward. */
export function summaryLine(item: ITraceItem, last?: number, key: string | null = 'reward'): string {
  const shown = key === 'loss' ? 'loss' : 'reward';
  const value = last ?? (shown === 'reward' ? item.final_reward : undefined);
  const parts = [
    item.model ?? '',
    item.env ?? '',
    item.backend ?? '',
    `steps ${fmtSteps(item.steps, item.max_steps)}`,
    `${shown} ${fmtNumber(value)}`
  ];
  return parts.filter(p => p !== '').join(' · ');
}

/** Overrides typed in the apply dialog: one `key=value` per line; blank lines and `#` comments skipped. */
export function parseOverrides(text: string): string[] {
  return text
    .split('\n')
    .map(l => l.trim())
    .filter(l => l !== '' && !l.startsWith('#'));
}

/** A problem with an override line (the server checks again), or null when it reads as key=value. */
export function overrideProblem(line: string): string | null {
  return /^[A-Za-z0-9_-]+(\[\d+\])?(\.[A-Za-z0-9_-]+(\[\d+\])?)*=/.test(line)
    ? null
    : `not key=value: ${line}`;
}

function shellQuote(word: string): string {
  return /^[A-Za-z0-9_.,:/=+@%[\]-]+$/.test(word) ? word : `'${word.replace(/'/g, "'\\''")}'`;
}

/** The `%prime_harness apply` line that continues a trace (what the panel inserts in a notebook). */
export function harnessApplyCell(traceId: string, steps?: number | null, overrides: ReadonlyArray<string> = []): string {
  const parts = ['%prime_harness apply', shellQuote(traceId)];
  if (typeof steps === 'number') {
    parts.push('--steps', String(steps));
  }
  if (overrides.length) {
    parts.push('--set', ...overrides.map(shellQuote));
  }
  return parts.join(' ');
}

/**
 * The list's state: items by trace id in server order, and each live run's reward series.
 * `setPage` keeps the series of runs still listed and drops the rest.
 */
export class RunsModel {
  items: ITraceItem[] = [];
  total = 0;
  readonly series = new Map<string, ISeries>();

  setPage(page: ITracePage): void {
    this.items = page.items;
    this.total = page.total;
    const listed = new Set(page.items.map(i => i.trace));
    for (const id of Array.from(this.series.keys())) {
      if (!listed.has(id)) {
        this.series.delete(id);
      }
    }
  }

  get liveIds(): string[] {
    return this.items.filter(i => isLive(i.status)).map(i => i.trace);
  }

  get anyLive(): boolean {
    return this.liveIds.length > 0;
  }

  find(traceId: string): ITraceItem | undefined {
    return this.items.find(i => i.trace === traceId);
  }

  seriesOf(traceId: string): ISeries {
    let s = this.series.get(traceId);
    if (!s) {
      s = emptySeries();
      this.series.set(traceId, s);
    }
    return s;
  }

  /** Fold one metrics answer in: the series grows, the row's state and step follow the run. */
  addMetrics(answer: IMetricsAnswer): ISeries {
    const s = appendRows(this.seriesOf(answer.trace), answer.rows);
    const item = this.find(answer.trace);
    if (item) {
      const status = answer.status ?? answer.state;
      if (status) {
        item.status = status;
        item.live = isLive(status);
      }
      if (typeof answer.step === 'number') {
        item.steps = answer.step;
      }
      if (typeof answer.max_steps === 'number') {
        item.max_steps = answer.max_steps;
      }
    }
    return s;
  }

  lastReward(traceId: string): number | undefined {
    const s = this.series.get(traceId);
    return s && s.values.length ? s.values[s.values.length - 1] : undefined;
  }
}
