/** Pure helpers of the detail view's evaluations and the servers section (no DOM: tested with node). */

/** One environment's latest `%prime_eval` of a trace, as `GET traces/ID` sends it (`evals`). */
export interface IEvalItem {
  env: string;
  mean: number | null;
  std: number | null;
  ci95_low: number | null;
  ci95_high: number | null;
  n: number | null;
  temperature: number | null;
  /** seconds since the epoch */
  created: number | null;
  model: string | null;
}

/** A running `primenb serve` server, as `GET servers` sends it. */
export interface IServerItem {
  url: string;
  pid: number;
  models: string[];
  /** seconds since it started (null when its record has no start time) */
  uptime_s: number | null;
  /** "this machine", or the host it runs on (reached through a forwarded port) */
  where: string;
}

export interface IServersAnswer {
  servers: IServerItem[];
}

function finite(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** A duration in words: `42 s`, `5 min`, `3 h 20 min`, `2 d 4 h`. */
export function fmtDuration(seconds: number | null | undefined): string {
  if (!finite(seconds) || seconds < 0) {
    return '–';
  }
  const s = Math.floor(seconds);
  if (s < 60) {
    return `${s} s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)} min`;
  }
  if (s < 86400) {
    const m = Math.floor((s % 3600) / 60);
    return `${Math.floor(s / 3600)} h` + (m ? ` ${m} min` : '');
  }
  const h = Math.floor((s % 86400) / 3600);
  return `${Math.floor(s / 86400)} d` + (h ? ` ${h} h` : '');
}

/** How long ago an epoch time was (`5 min ago`); `–` when unknown, `just now` for the future. */
export function ago(epochSeconds: number | null | undefined, nowMs: number = Date.now()): string {
  if (!finite(epochSeconds)) {
    return '–';
  }
  const delta = nowMs / 1000 - epochSeconds;
  return delta < 1 ? 'just now' : `${fmtDuration(delta)} ago`;
}

function num(value: number | null | undefined, digits = 3): string {
  return finite(value) ? value.toFixed(digits) : '–';
}

/** The cells of one eval row: environment, mean ± half the 95 % interval, n, temperature, when. */
export function evalCells(e: IEvalItem, nowMs: number = Date.now()): string[] {
  const half = finite(e.mean) && finite(e.ci95_high) ? ` ± ${num(e.ci95_high - e.mean, 2)}` : '';
  return [
    String(e.env),
    `${num(e.mean)}${half}`,
    finite(e.n) ? String(e.n) : '–',
    finite(e.temperature) ? String(e.temperature) : '–',
    ago(e.created, nowMs)
  ];
}

/** What the detail's Samples section says when it shows none: "yet" only while the run can still write some. */
export function noSamplesText(withheld: boolean, count: number, live: boolean): string | null {
  if (withheld) {
    return 'withheld: data_collection = "deny"';
  }
  return count ? null : live ? 'no samples yet' : 'no samples';
}

export const EVAL_HEADER: ReadonlyArray<string> = ['environment', 'mean', 'n', 'T', 'when'];

/** The evals of a detail answer, kept only when shaped like one (the answer is data, not trusted code). */
export function evalsOf(detail: unknown): IEvalItem[] {
  const list = (detail as { evals?: unknown } | null)?.evals;
  if (!Array.isArray(list)) {
    return [];
  }
  return list.filter((e): e is IEvalItem => !!e && typeof e === 'object' && typeof (e as IEvalItem).env === 'string');
}

/** The line under a server's URL: its model ids, uptime, and where it runs when not here. */
export function serverLine(s: IServerItem): string {
  const models = s.models.length ? s.models.join(', ') : 'no models';
  const where = s.where && s.where !== 'this machine' ? ` · on ${s.where}` : '';
  return `up ${fmtDuration(s.uptime_s)} · ${models}${where}`; // uptime first: the models may be long
}

/** One tracker run of a trace, as the detail shows it: a link only for an http(s) URL. */
export interface ITrackerLink {
  kind: string;
  text: string;
  href: string | null;
}

const TRACKER_FIELDS = ['url', 'uri', 'folder', 'project', 'run_id'];

/** An http(s) URL as a link target, or null (javascript:, data:, file:, relative, malformed). */
export function httpUrl(value: unknown): string | null {
  if (typeof value !== 'string' || value.length > 2000 || !/^https?:\/\//i.test(value)) {
    return null;
  }
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch {
    return null;
  }
}

/** Where each tracker run of a detail answer lives (the trace's `trackers`, read as hostile data):
 * W&B's URL when online, else offline folders, file stores and run ids, shown as text. */
export function trackerLinks(detail: unknown): ITrackerLink[] {
  const where = (detail as { trackers?: unknown } | null)?.trackers;
  if (!where || typeof where !== 'object' || Array.isArray(where)) {
    return [];
  }
  const out: ITrackerLink[] = [];
  for (const [kind, loc] of Object.entries(where as Record<string, unknown>).slice(0, 8)) {
    const fields = loc && typeof loc === 'object' ? (loc as Record<string, unknown>) : {};
    const parts = TRACKER_FIELDS.filter(k => typeof fields[k] === 'string' && fields[k]).map(
      k => `${k === 'url' ? '' : k + ' '}${String(fields[k]).slice(0, 500)}`
    );
    const href = httpUrl(fields.url) ?? httpUrl(fields.uri);
    out.push({ kind: kind.slice(0, 40), text: parts.join(' · ') || '(no location recorded)', href });
  }
  return out;
}
