/**
 * The sidebar's "Servers" section: each running `primenb serve` server (its URL, model ids,
 * uptime and where it runs) with a Stop button. Hidden while none runs; read at each poll.
 */
import { Notification } from '@jupyterlab/apputils';

import { api } from './api';
import { button, el } from './dom';
import { IServerItem, serverLine } from './extras';

export class ServersSection {
  readonly node: HTMLElement;

  constructor(private readonly onError: (error: unknown) => string) {
    this.node = el('div', 'primenb-servers');
    this.node.hidden = true;
  }

  /** Read the running servers and show them (an extension without the route: the section stays hidden). */
  async refresh(): Promise<void> {
    let items: IServerItem[];
    try {
      items = (await api.servers()).servers ?? [];
    } catch {
      items = [];
    }
    this.render(items);
  }

  /** Rows are rebuilt when the servers change; the line under each (its uptime) is updated in place
   * at every poll, so "up 8 s" counts on without a rebuild under the pointer. */
  render(items: ReadonlyArray<IServerItem>): void {
    const sig = JSON.stringify(items.map(s => [s.pid, s.url, s.models, s.where]));
    if (sig !== this.shown) {
      this.shown = sig;
      this.node.hidden = !items.length;
      this.lines.clear();
      const rows = items.map(s => this.row(s));
      this.node.replaceChildren(el('div', 'primenb-section primenb-servers-title', `Servers (${items.length})`), ...rows);
    }
    for (const s of items) {
      const line = this.lines.get(s.pid);
      const text = serverLine(s);
      if (line && line.textContent !== text) {
        line.textContent = text;
      }
    }
  }

  private row(s: IServerItem): HTMLElement {
    const row = el('div', 'primenb-server', undefined, { 'data-pid': String(s.pid) });
    const top = el('div', 'primenb-server-top');
    top.append(el('code', 'primenb-server-url', s.url, { title: `pid ${s.pid} · ${s.where}` }));
    top.appendChild(
      button('Stop', 'stop-server', `Stop the server at ${s.url}`, () => void this.stop(s))
    );
    const line = el('div', 'primenb-meta primenb-server-models', serverLine(s), { title: s.models.join('\n') });
    this.lines.set(s.pid, line);
    row.append(top, line);
    return row;
  }

  private async stop(s: IServerItem): Promise<void> {
    try {
      await api.stopServer(s.pid);
      Notification.info(`Stopped the server at ${s.url}.`, { autoClose: 4000 });
    } catch (error) {
      Notification.error(`Could not stop the server at ${s.url}: ${this.onError(error)}`, { autoClose: false });
    }
    await this.refresh();
  }

  private shown = '';
  private readonly lines = new Map<number, HTMLElement>();
}
