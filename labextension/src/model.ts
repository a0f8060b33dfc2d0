/**
 * The panel's data handling, free of DOM and JupyterLab imports so it is unit-tested in node:
 * the paged list of runs/traces, each live run's metric curves (grown incrementally from
 * `metrics?cursor=N`), the polling cadence, sparkline geometry and the harness cell text.
 */

import {
  FINAL_FIELDS,
  HEALTH_KEYS as METRIC_HEALTH_KEYS,
  IIndexRow,
  LIVE_STATES as RUN_LIVE_STATES,
  MAIN_KEYS,
  RUN_STATES,
  RunState,
  SPARK_KEYS as METRIC_SPARK_KEYS,
  UNKNOWN_STATE
} from './documents';

export type State = RunState | typeof UNKNOWN_STATE;

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

/** One answer of `GET traces/ID/metrics?cursor=N`: the rows after the first `start` of the file. */
export interface IMetricsAnswer {
  trace: string;
  rows: Array<Record<string, unknown>>;
  /** The row count the answer starts at (0 for a non-zero request: the file was rewritten). */
  start: number;
  /** What to send as `cursor` next. */
  cursor: number;
  more: boolean;
  /** The run's state, named as a list row's `status` column (`state`: the same, kept for old clients). */
  status?: RunState | null;
  state: RunState | null;
  step: number | null;
  max_steps: number | null;
}

/** One metric's points, each with its phase and the step counted within that phase. */
export interface ICurve {
  phases: string[];
  steps: number[];
  values: number[];
}

/**
 * A run's metrics as the panel keeps them: a curve per key, and the cursor (rows of
 * metrics.jsonl folded in). A row is identified by its position, never by its step: an RL run's
 * SFT warm-up counts steps 0..N, then GRPO restarts at 1, and an eval row shares its step with
 * a train row.
 */
export interface ISeries {
  cursor: number;
  curves: Record<string, ICurve>;
  /** Reward-function failures summed over the rows seen: calls, errors, errors by function. */
  health: IRewardHealth;
}

export interface IRewardHealth {
  calls: number;
  errors: number;
  byFunction: Record<string, number>;
}

/**
 * What a run's sparkline draws, in order of preference: reward (RL), loss (SFT), the warm-up's
 * loss (the metrics table's sidebar metrics, generated into documents.ts).
 */
export const SPARK_KEYS: ReadonlyArray<string> = METRIC_SPARK_KEYS;
/**
 * The reward-health keys the engine writes in RL rows: completions scored, calls that raised, and
 * those by function (`reward_errors/<function>`, asked for as `reward_errors/*`).
 */
export const HEALTH_KEYS: ReadonlyArray<string> = METRIC_HEALTH_KEYS;
const [CALLS_KEY, ERRORS_KEY, BY_FUNCTION_KEY] = HEALTH_KEYS;
const BY_FUNCTION_PREFIX = BY_FUNCTION_KEY.replace(/\*$/, '');
/** The keys the panel asks for. */
export const PANEL_KEYS: ReadonlyArray<string> = [...SPARK_KEYS, ...HEALTH_KEYS];

/** The most points a curve keeps (older points are thinned, never the newest). */
export const MAX_POINTS = 400;

/** A state name safe to use in a CSS class (anything unexpected becomes `unknown`). */
export function stateOf(status: string | null | undefined): State {
  return (status && KNOWN_STATES.includes(status) ? status : UNKNOWN_STATE) as State;
}

export function isLive(status: string | null | undefined): boolean {
  return !!status && LIVE_STATES.includes(status);
}

export function emptySeries(): ISeries {
  return { cursor: 0, curves: {}, health: { calls: 0, errors: 0, byFunction: {} } };
}

function finite(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/**
 * Fold one metrics answer into a series: every row once, in file order, each value of `keys`
 * into its curve. An answer for another cursor (a late or repeated one) changes nothing and
 * returns false; an answer that starts over (`start` 0) replaces the series.
 */
export function addAnswer(
  series: ISeries,
  answer: Pick<IMetricsAnswer, 'rows' | 'start' | 'cursor'>,
  keys: ReadonlyArray<string> = SPARK_KEYS,
  maxPoints = MAX_POINTS
): boolean {
  if (answer.start !== series.cursor) {
    if (answer.start !== 0) {
      return false;
    }
    Object.assign(series, emptySeries());
  }
  for (const row of answer.rows) {
    const step = row['step'];
    const phase = typeof row['phase'] === 'string' ? (row['phase'] as string) : '';
    for (const key of keys) {
      const value = row[key];
      if (finite(value)) {
        const curve = (series.curves[key] ??= { phases: [], steps: [], values: [] });
        curve.phases.push(phase);
        curve.steps.push(finite(step) ? step : NaN);
        curve.values.push(value);
      }
    }
    addHealth(series.health, row);
  }
  series.cursor = answer.cursor;
  for (const curve of Object.values(series.curves)) {
    if (curve.values.length > maxPoints) {
      thin(curve, maxPoints);
    }
  }
  return true;
}

function addHealth(health: IRewardHealth, row: Record<string, unknown>): void {
  const calls = row[CALLS_KEY];
  if (finite(calls)) {
    health.calls += calls;
  }
  const errors = row[ERRORS_KEY];
  if (finite(errors)) {
    health.errors += errors;
  }
  for (const [key, value] of Object.entries(row)) {
    if (key.startsWith(BY_FUNCTION_PREFIX) && finite(value)) {
      const name = key.slice(BY_FUNCTION_PREFIX.length);
      health.byFunction[name] = (health.byFunction[name] ?? 0) + value;
    }
  }
}

/**
 * "reward function X failed on N of M completions" for the function that failed most (null when
 * none failed). M counts the completions scored (`reward_calls`).
 */
export function healthText(health: IRewardHealth): string | null {
  const named = Object.entries(health.byFunction).filter(([, n]) => n > 0);
  if (!named.length && health.errors <= 0) {
    return null;
  }
  const [name, failed] = named.length ? named.sort((a, b) => b[1] - a[1])[0] : ['?', health.errors];
  const of = health.calls > 0 ? ` of ${health.calls}` : '';
  const more = named.length > 1 ? ` (and ${named.length - 1} other function${named.length > 2 ? 's' : ''})` : '';
  return `reward function ${name} failed on ${failed}${of} completions${more}`;
}

/** The key a sparkline draws: the first of `keys` with a point (reward over loss over warm-up loss). */
export function shownKey(series: ISeries | undefined, keys: ReadonlyArray<string> = SPARK_KEYS): string | null {
  if (!series) {
    return null;
  }
  return keys.find(k => (series.curves[k]?.values.length ?? 0) > 0) ?? null;
}

export function curveOf(series: ISeries | undefined, key: string | null): ICurve | undefined {
  return series && key !== null ? series.curves[key] : undefined;
}

/** Keep every other old point until the curve fits, always keeping the newest half intact. */
function thin(curve: ICurve, maxPoints: number): void {
  while (curve.values.length > maxPoints) {
    const keepTail = Math.floor(maxPoints / 2);
    const head = curve.values.length - keepTail;
    const pick = <T>(xs: T[]): T[] => xs.filter((_, i) => i >= head || i % 2 === 0);
    curve.phases = pick(curve.phases);
    curve.steps = pick(curve.steps);
    curve.values = pick(curve.values);
  }
}

/** "step 12" for one phase, "rl step 12" when the run has several (warm-up then GRPO). */
export function stepLabel(curve: ICurve, i = curve.steps.length - 1): string {
  const phase = curve.phases[i];
  const several = new Set(curve.phases).size > 1 || (phase !== '' && phase !== 'rl' && phase !== 'sft');
  return several && phase ? `${phase} step ${curve.steps[i]}` : `step ${curve.steps[i]}`;
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

/** The line under a run's name: model · env · backend · steps · reward (RL) or loss (SFT). */
export function summaryLine(item: ITraceItem, last?: number, key: string | null = null): string {
  const shown = key ?? MAIN_KEYS[item.mode === 'sft' ? 'sft' : 'rl'];
  const field = FINAL_FIELDS[shown];
  const final = field === undefined ? undefined : item[field];
  const stored = typeof final === 'number' ? final : undefined;
  // an ended run's stored final value is the truth; the sparkline's last point may be from the
  // poll before it ended
  const ended = !isLive(item.status) && typeof stored === 'number';
  const value = ended ? stored : last ?? stored;
  // what changes first: at the default sidebar width the tail hides behind the ellipsis
  const parts = [
    `steps ${fmtSteps(item.steps, item.max_steps)}`,
    `${shown} ${fmtNumber(value)}`,
    item.model ?? '',
    item.env ?? '',
    item.backend ?? ''
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

/** What the server accepts as a trace id (primenb/server/validate.py TRACE_ID): nothing to quote. */
const PLAIN_ID = /^[A-Za-z0-9_-]{4,64}$/;
/** An override the magic reads as one word: no quote, no shell or IPython expansion character. */
const PLAIN_WORD = /^[A-Za-z0-9_.,:/=+@%[\]-]+$/;

export class UnsafeCellError extends Error {}

/**
 * The `%prime_harness apply` line that continues a trace (what the panel inserts in a notebook).
 *
 * IPython expands `$name` and `{expression}` in a magic line before the magic sees it, so shell
 * quoting is no protection: a trace id or override that is not a plain word is refused
 * (`UnsafeCellError`), never quoted into code.
 */
export function harnessApplyCell(traceId: string, steps?: number | null, overrides: ReadonlyArray<string> = []): string {
  if (!PLAIN_ID.test(traceId)) {
    throw new UnsafeCellError(
      `trace id ${JSON.stringify(traceId.slice(0, 40))} is not a plain id (4 to 64 letters, digits, '_' or '-'): ` +
        'no cell inserted; use Apply… in the panel'
    );
  }
  const parts = ['%prime_harness apply', traceId];
  if (typeof steps === 'number' && Number.isInteger(steps) && steps > 0) {
    parts.push('--steps', String(steps));
  }
  const bad = overrides.find(o => !PLAIN_WORD.test(o));
  if (bad !== undefined) {
    throw new UnsafeCellError(
      `override ${JSON.stringify(bad.slice(0, 60))} has characters a magic line would expand or split: no cell inserted`
    );
  }
  if (overrides.length) {
    parts.push('--set', ...overrides);
  }
  return parts.join(' ');
}

/** How many list rows the panel asks the server for at once. */
export const PAGE_SIZE = 100;

/**
 * The list's state for a virtualised view of any number of runs: the pages fetched so far (by
 * page number), the total the server reported for the current filter, and each run's metrics.
 * A page with a different total (a run was added or removed) drops the other cached pages,
 * since their offsets moved.
 */
export class RunsModel {
  total = 0;
  readonly pages = new Map<number, ITraceItem[]>();
  readonly series = new Map<string, ISeries>();

  constructor(readonly pageSize = PAGE_SIZE) {}

  clear(): void {
    this.pages.clear();
    this.total = 0;
    this.series.clear();
  }

  setPage(page: ITracePage): void {
    const n = Math.floor(page.offset / this.pageSize);
    if (page.total !== this.total) {
      this.pages.clear();
    }
    this.total = page.total;
    this.pages.set(n, page.items);
    const listed = new Set(this.items.map(i => i.trace));
    for (const id of Array.from(this.series.keys())) {
      if (!listed.has(id)) {
        this.series.delete(id);
      }
    }
  }

  /** Every cached item (in no particular order across pages). */
  get items(): ITraceItem[] {
    return Array.from(this.pages.values()).flat();
  }

  itemAt(i: number): ITraceItem | undefined {
    return this.pages.get(Math.floor(i / this.pageSize))?.[i % this.pageSize];
  }

  /** The page numbers that hold rows first..last (inclusive, clipped to the total). */
  pagesFor(first: number, last: number): number[] {
    const hi = Math.min(last, this.total - 1);
    const out: number[] = [];
    for (let p = Math.floor(Math.max(0, first) / this.pageSize); p * this.pageSize <= hi; p++) {
      out.push(p);
    }
    return out.length ? out : [0];
  }

  missingPages(first: number, last: number): number[] {
    return this.pagesFor(first, last).filter(p => !this.pages.has(p));
  }

  /** Live runs among rows first..last. */
  liveIn(first: number, last: number): string[] {
    const out: string[] = [];
    for (let i = Math.max(0, first); i <= Math.min(last, this.total - 1); i++) {
      const item = this.itemAt(i);
      if (item && isLive(item.status)) {
        out.push(item.trace);
      }
    }
    return out;
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
    const s = this.seriesOf(answer.trace);
    addAnswer(s, answer, PANEL_KEYS);
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

  /** The sparkline's key and latest value for a run (undefined before any point). */
  lastValue(traceId: string): { key: string; value: number } | undefined {
    const s = this.series.get(traceId);
    const key = shownKey(s);
    const curve = curveOf(s, key);
    return key !== null && curve && curve.values.length
      ? { key, value: curve.values[curve.values.length - 1] }
      : undefined;
  }
}
