/**
 * The "Prime runs" sidebar: the runs/traces list with status badges and live reward
 * sparklines, a detail view (config, metrics chart, samples) and actions. Every string that
 * comes from a run (names, completions, errors, config) is set with `textContent`, never HTML.
 */
import { Clipboard, Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';
import { Message } from '@lumino/messaging';

import { api, ApiError } from './api';
import {
  fmtNumber,
  harnessApplyCell,
  isLive,
  ITraceItem,
  nextDelay,
  overrideProblem,
  parseOverrides,
  RunsModel,
  sinceOf,
  sparklinePoints,
  stateOf,
  summaryLine,
  appendRows,
  emptySeries,
  ISeries
} from './model';

const SVG = 'http://www.w3.org/2000/svg';

export interface IPanelActions {
  /** Insert a cell with this text below the active cell of the current notebook; false when none. */
  insertCell(text: string): boolean;
  /** Open a file (path relative to the Jupyter root) in the editor. */
  openFile(path: string): void;
  /** Show text read-only in the main area. */
  showText(title: string, text: string): void;
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls?: string,
  text?: string,
  attrs: Record<string, string> = {}
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (cls) {
    node.className = cls;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  for (const [k, v] of Object.entries(attrs)) {
    node.setAttribute(k, v);
  }
  return node;
}

function button(label: string, action: string, title: string, onClick: () => void): HTMLButtonElement {
  const b = el('button', `jp-Button primenb-action primenb-act-${action}`, label, { title, 'data-action': action });
  b.addEventListener('click', event => {
    event.stopPropagation();
    onClick();
  });
  return b;
}

/** An SVG sparkline (a polyline), built with DOM calls. */
export function sparkline(values: ReadonlyArray<number>, width = 120, height = 24, cls = 'primenb-spark'): SVGSVGElement {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', cls);
  svg.setAttribute('width', String(width));
  svg.setAttribute('height', String(height));
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('data-points', String(values.length));
  const line = document.createElementNS(SVG, 'polyline');
  line.setAttribute('points', sparklinePoints(values, width, height));
  line.setAttribute('fill', 'none');
  svg.appendChild(line);
  return svg;
}

function errorText(error: unknown): string {
  return error instanceof ApiError || error instanceof Error ? error.message : String(error);
}

/** The apply dialog's body: steps and one override per line. */
class ApplyForm extends Widget {
  constructor(defaultSteps: number | null) {
    super({ node: el('div', 'primenb-apply-form') });
    this.steps = el('input', 'jp-mod-styled primenb-apply-steps', undefined, {
      type: 'number',
      min: '1',
      placeholder: 'steps (default: as many as the parent trained)'
    });
    if (defaultSteps) {
      this.steps.value = String(defaultSteps);
    }
    this.overrides = el('textarea', 'jp-mod-styled primenb-apply-overrides', undefined, {
      rows: '4',
      placeholder: 'key=value, one per line (e.g. trainer.optim.lr=1e-5)'
    });
    this.node.append(el('label', '', 'Steps'), this.steps, el('label', '', 'Overrides'), this.overrides);
  }

  getValue(): { steps?: number; overrides: string[] } {
    const n = parseInt(this.steps.value, 10);
    return { steps: Number.isFinite(n) && n > 0 ? n : undefined, overrides: parseOverrides(this.overrides.value) };
  }

  readonly steps: HTMLInputElement;
  readonly overrides: HTMLTextAreaElement;
}

export class RunsPanel extends Widget {
  constructor(private readonly actions: IPanelActions) {
    super();
    this.id = 'primenb-runs';
    this.addClass('primenb-panel');
    this.title.caption = 'Prime runs';
    const header = el('div', 'primenb-header');
    header.appendChild(el('div', 'primenb-title', 'Prime runs'));
    this.search = el('input', 'jp-mod-styled primenb-search', undefined, {
      type: 'search',
      placeholder: 'filter by name or trace id'
    });
    this.search.addEventListener('input', () => this.poke());
    header.appendChild(this.search);
    header.appendChild(button('↻', 'refresh', 'Refresh now', () => this.poke()));
    this.status = el('div', 'primenb-status');
    this.list = el('div', 'primenb-list');
    this.detail = el('div', 'primenb-detail');
    this.detail.hidden = true;
    this.node.append(header, this.status, this.list, this.detail);
    document.addEventListener('visibilitychange', this.onVisibility);
  }

  dispose(): void {
    this.stopPolling();
    document.removeEventListener('visibilitychange', this.onVisibility);
    super.dispose();
  }

  // -- polling ---------------------------------------------------------------------------------
  private get seen(): boolean {
    return this.isVisible && document.visibilityState !== 'hidden';
  }

  private onVisibility = (): void => {
    if (this.seen) {
      this.poke();
    }
  };

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.poke();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.poke();
  }

  /** Poll now (and then at the usual cadence). */
  poke(): void {
    this.stopPolling();
    this.timer = window.setTimeout(() => void this.tick(), 0);
  }

  private stopPolling(): void {
    if (this.timer !== null) {
      window.clearTimeout(this.timer);
      this.timer = null;
    }
  }

  private async tick(): Promise<void> {
    this.timer = null;
    if (this.busy) {
      return;
    }
    this.busy = true;
    try {
      await this.refresh();
      this.failures = 0;
      this.status.textContent = '';
      this.status.classList.remove('primenb-error');
    } catch (error) {
      this.failures += 1;
      this.status.textContent = errorText(error);
      this.status.classList.add('primenb-error');
    } finally {
      this.busy = false;
      if (!this.isDisposed && this.timer === null) {
        const live = this.model.anyLive || (this.selected !== null && this.detailLive);
        this.timer = window.setTimeout(() => void this.tick(), nextDelay(this.seen, live, this.failures));
      }
    }
  }

  private async refresh(): Promise<void> {
    const q = this.search.value.trim();
    const page = await api.traces(q ? { limit: '50', q } : { limit: '50' });
    this.model.setPage(page);
    // the sparklines of live runs grow from where they were (metrics?since=N)
    await Promise.all(
      this.model.liveIds.map(async id => {
        const answer = await api.metrics(id, sinceOf(this.model.series.get(id)), ['reward', 'loss']);
        this.model.addMetrics(answer);
      })
    );
    this.renderList();
    if (this.selected !== null && this.detailLive) {
      await this.refreshDetailMetrics();
    }
  }

  // -- the list --------------------------------------------------------------------------------
  private renderList(): void {
    const rows = this.model.items.map(item => this.row(item));
    this.list.replaceChildren(...rows);
    if (!rows.length) {
      this.list.appendChild(
        el('div', 'primenb-empty', 'No runs yet: every run launched with %prime_train or primenb train appears here.')
      );
    } else if (this.model.total > this.model.items.length) {
      this.list.appendChild(
        el('div', 'primenb-more', `${this.model.items.length} of ${this.model.total} shown; filter to find others`)
      );
    }
  }

  private row(item: ITraceItem): HTMLElement {
    const state = stateOf(item.status);
    const row = el('div', `primenb-run primenb-state-${state}`, undefined, {
      'data-trace': item.trace,
      'data-state': state
    });
    const top = el('div', 'primenb-run-top');
    top.append(el('span', `primenb-badge primenb-badge-${state}`, state), el('span', 'primenb-name', item.name ?? item.trace));
    row.appendChild(top);
    const key = this.model.series.get(item.trace)?.key ?? null;
    row.appendChild(el('div', 'primenb-meta', summaryLine(item, this.model.lastReward(item.trace), key)));
    const series = this.model.series.get(item.trace);
    if (isLive(item.status) || (series && series.values.length > 1)) {
      row.appendChild(sparkline(series ? series.values : []));
    }
    row.appendChild(this.actionsFor(item.trace, item.status, item.steps));
    row.addEventListener('click', () => void this.openDetail(item.trace));
    return row;
  }

  private actionsFor(trace: string, status: string | null, steps: number | null): HTMLElement {
    const bar = el('div', 'primenb-actions');
    if (isLive(status)) {
      bar.appendChild(button('Stop', 'stop', 'Ask the run to checkpoint and stop', () => void this.stop(trace)));
    } else {
      bar.appendChild(
        button('Apply…', 'apply', 'Continue this trace from its final checkpoint', () => void this.apply(trace, steps))
      );
    }
    bar.appendChild(button('Copy id', 'copy', 'Copy the trace id', () => this.copy(trace)));
    bar.appendChild(
      button('Insert cell', 'insert', 'Insert a %prime_harness apply cell in the active notebook', () =>
        this.insert(trace)
      )
    );
    bar.appendChild(button('Config', 'config', 'Open the config (TOML)', () => void this.openConfig(trace)));
    return bar;
  }

  // -- actions ---------------------------------------------------------------------------------
  async stop(trace: string): Promise<void> {
    try {
      const answer = await api.stop(trace);
      Notification.info(`Stop requested for ${trace} (${answer.state}): it checkpoints and stops at its next step.`, {
        autoClose: 4000
      });
    } catch (error) {
      Notification.error(`Could not stop ${trace}: ${errorText(error)}`);
    }
    this.poke();
  }

  async apply(trace: string, steps: number | null): Promise<void> {
    const result = await showDialog({
      title: `Apply trace ${trace}`,
      body: new ApplyForm(null),
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Apply' })]
    });
    if (!result.button.accept || !result.value) {
      return;
    }
    const value = result.value;
    const bad = value.overrides.map(overrideProblem).filter(p => p !== null);
    if (bad.length) {
      Notification.error(String(bad[0]));
      return;
    }
    const id = Notification.emit(`Starting a refinement of ${trace}…`, 'in-progress', { autoClose: false });
    try {
      const answer = await api.apply(trace, value);
      Notification.update({
        id,
        message: `Started ${answer.name} (trace ${answer.trace ?? '?'}) from ${trace}`,
        type: 'success',
        autoClose: 5000
      });
      for (const w of answer.warnings) {
        Notification.warning(w);
      }
    } catch (error) {
      Notification.update({ id, message: `Apply refused: ${errorText(error)}`, type: 'error', autoClose: false });
    }
    this.poke();
  }

  copy(trace: string): void {
    Clipboard.copyToSystem(trace);
    Notification.info(`Copied ${trace}`, { autoClose: 2000 });
  }

  insert(trace: string): void {
    if (!this.actions.insertCell(harnessApplyCell(trace))) {
      Notification.warning('Open a notebook first: the cell goes below its active cell.');
    }
  }

  async openConfig(trace: string): Promise<void> {
    try {
      const c = await api.config(trace);
      if (c.contents_path !== null) {
        this.actions.openFile(c.contents_path);
      } else {
        this.actions.showText(`config ${trace}`, c.toml);
      }
    } catch (error) {
      Notification.error(`No config for ${trace}: ${errorText(error)}`);
    }
  }

  // -- the detail view -------------------------------------------------------------------------
  async openDetail(trace: string): Promise<void> {
    this.selected = trace;
    this.detailSeries = { reward: emptySeries(), loss: emptySeries() };
    this.detail.replaceChildren(el('div', 'primenb-loading', 'Loading…'));
    this.list.hidden = true;
    this.detail.hidden = false;
    try {
      const [d, m, s] = await Promise.all([api.trace(trace), api.metrics(trace, undefined, ['reward', 'loss']), api.samples(trace, 6)]);
      if (this.selected !== trace) {
        return;
      }
      this.detailLive = !!d.live;
      this.renderDetail(d, s);
      this.addDetailRows(m.rows);
    } catch (error) {
      this.detail.replaceChildren(this.backButton(), el('div', 'primenb-error', errorText(error)));
    }
  }

  closeDetail(): void {
    this.selected = null;
    this.detailLive = false;
    this.detail.hidden = true;
    this.list.hidden = false;
    this.poke();
  }

  private backButton(): HTMLElement {
    return button('← All runs', 'back', 'Back to the list', () => this.closeDetail());
  }

  private renderDetail(d: any, s: any): void {
    const state = stateOf(d.status);
    const head = el('div', 'primenb-detail-head');
    head.append(
      el('span', `primenb-badge primenb-badge-${state}`, state),
      el('span', 'primenb-name', String(d.name ?? d.trace)),
      el('span', 'primenb-trace-id', String(d.trace))
    );
    const parts: HTMLElement[] = [this.backButton(), head, this.actionsFor(d.trace, d.status, d.step)];
    if (d.error) {
      parts.push(el('pre', 'primenb-error', String(d.error)));
    }
    const table = el('table', 'primenb-kv');
    for (const [k, v] of Object.entries(d.headline ?? {})) {
      const tr = el('tr');
      tr.append(el('th', '', k), el('td', '', typeof v === 'number' ? fmtNumber(v, 4) : String(v)));
      table.appendChild(tr);
    }
    parts.push(table);
    this.charts = el('div', 'primenb-charts');
    parts.push(el('div', 'primenb-section', 'Metrics'), this.charts);
    parts.push(el('div', 'primenb-section', 'Samples'));
    if (s.withheld) {
      parts.push(el('div', 'primenb-muted', 'withheld: data_collection = "deny"'));
    } else if (!s.samples.length) {
      parts.push(el('div', 'primenb-muted', 'no samples yet'));
    }
    for (const sample of s.samples ?? []) {
      const box = el('div', 'primenb-sample');
      box.append(
        el('div', 'primenb-muted', `step ${sample.step ?? '?'} · reward ${fmtNumber(sample.reward)}`),
        el('pre', 'primenb-prompt', String(sample.prompt ?? '')),
        el('pre', 'primenb-completion', String(sample.completion ?? ''))
      );
      parts.push(box);
    }
    if (d.log_tail && d.log_tail.length && (state === 'failed' || state === 'running')) {
      parts.push(el('div', 'primenb-section', 'Log (tail)'), el('pre', 'primenb-log', d.log_tail.join('\n')));
    }
    parts.push(el('div', 'primenb-section', 'Config (resolved)'));
    parts.push(el('pre', 'primenb-config', JSON.stringify(d.config ?? {}, null, 2)));
    this.detail.replaceChildren(...parts);
  }

  private addDetailRows(rows: Array<Record<string, number>>): void {
    appendRows(this.detailSeries.reward, rows, 'reward');
    // loss has its own series: feed it the same rows (its lastStep is tracked separately)
    appendRows(this.detailSeries.loss, rows, 'loss');
    if (!this.charts) {
      return;
    }
    const blocks: HTMLElement[] = [];
    for (const key of ['reward', 'loss'] as const) {
      const series = this.detailSeries[key];
      if (series.values.length < 2) {
        continue;
      }
      const block = el('div', 'primenb-chart');
      const last = series.values[series.values.length - 1];
      block.appendChild(el('div', 'primenb-muted', `${key}: ${fmtNumber(last, 4)} at step ${series.steps[series.steps.length - 1]}`));
      block.appendChild(sparkline(series.values, 260, 60, `primenb-chart-svg primenb-chart-${key}`));
      blocks.push(block);
    }
    this.charts.replaceChildren(...(blocks.length ? blocks : [el('div', 'primenb-muted', 'no metrics yet')]));
  }

  private async refreshDetailMetrics(): Promise<void> {
    const trace = this.selected;
    if (trace === null) {
      return;
    }
    const since = Math.max(this.detailSeries.reward.lastStep ?? -1, this.detailSeries.loss.lastStep ?? -1);
    const m = await api.metrics(trace, since >= 0 ? since : undefined, ['reward', 'loss']);
    if (this.selected !== trace) {
      return;
    }
    this.addDetailRows(m.rows);
    if (!isLive(m.state)) {
      void this.openDetail(trace); // it ended: show its final state, samples and error
    }
  }

  readonly model = new RunsModel();
  private readonly search: HTMLInputElement;
  private readonly status: HTMLElement;
  private readonly list: HTMLElement;
  private readonly detail: HTMLElement;
  private charts: HTMLElement | null = null;
  private selected: string | null = null;
  private detailLive = false;
  private detailSeries: { reward: ISeries; loss: ISeries } = { reward: emptySeries(), loss: emptySeries() };
  private timer: number | null = null;
  private busy = false;
  private failures = 0;
}
