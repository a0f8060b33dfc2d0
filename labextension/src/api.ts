/** Calls to the primenb server extension (`/primenb/api/...`), with Jupyter's auth and XSRF. */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { IServersAnswer } from './extras';
import { IMetricsAnswer, ITracePage } from './model';

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
  }
}

export async function requestAPI<T>(path: string, init: RequestInit = {}, query: Record<string, string> = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const params = new URLSearchParams(query).toString();
  const url = URLExt.join(settings.baseUrl, 'primenb', 'api', path) + (params ? `?${params}` : '');
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ApiError(`the Jupyter server cannot be reached: ${String(error)}`, 0);
  }
  const text = await response.text();
  let data: any = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = data && typeof data.message === 'string' ? data.message : `${response.status} ${response.statusText}`;
    throw new ApiError(message, response.status);
  }
  return data as T;
}

const enc = encodeURIComponent;

export interface IConfigAnswer {
  trace: string;
  toml: string;
  path: string | null;
  contents_path: string | null;
}

export interface IApplyAnswer {
  trace: string | null;
  parent: string;
  name: string;
  run_dir: string;
  state: string;
  warnings: string[];
}

export const api = {
  traces: (query: Record<string, string>) => requestAPI<ITracePage>('traces', {}, query),
  trace: (id: string) => requestAPI<any>(`traces/${enc(id)}`),
  /** The metric rows after the first `cursor` rows of the run's metrics.jsonl. */
  metrics: (id: string, cursor = 0, keys?: ReadonlyArray<string>) => {
    const q: Record<string, string> = { cursor: String(cursor) };
    if (keys && keys.length) {
      q.keys = keys.join(',');
    }
    return requestAPI<IMetricsAnswer>(`traces/${enc(id)}/metrics`, {}, q);
  },
  samples: (id: string, limit = 10) => requestAPI<any>(`traces/${enc(id)}/samples`, {}, { limit: String(limit) }),
  config: (id: string) => requestAPI<IConfigAnswer>(`traces/${enc(id)}/config`),
  stop: (id: string) => requestAPI<any>(`traces/${enc(id)}/stop`, { method: 'POST', body: '{}' }),
  apply: (id: string, body: { steps?: number; overrides?: string[] }) =>
    requestAPI<IApplyAnswer>(`traces/${enc(id)}/apply`, { method: 'POST', body: JSON.stringify(body) }),
  /** The running `primenb serve` servers. */
  servers: () => requestAPI<IServersAnswer>('servers'),
  stopServer: (pid: number) => requestAPI<any>('servers/stop', { method: 'POST', body: JSON.stringify({ pid }) })
};
