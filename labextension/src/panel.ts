/**
 * The "Prime runs" sidebar: the runs/traces list with status badges and live reward
 * sparklines, a detail view (config, metrics chart, samples) and actions. Every string that
 * comes from a run (names, completions, errors, config) is set with `textContent`, never HTML.
 */
import { Clipboard, Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';
import { Message } from '@lumino/messaging';

import { api, ApiError } from './api';
import { button, el } from './dom';
import { ago, EVAL_HEADER, evalCells, evalsOf, IEvalItem, noSamplesText, trackerLinks } from './extras';
import { ServersSection } from './serversview';
import {
  addAnswer,
  curveOf,
  emptySeries,
  fmtNumber,
  harnessApplyCell,
  healthText,
  isLive,
  ISeries,
  ITraceItem,
  nextDelay,
  overrideProblem,
  PAGE_SIZE,
  PANEL_KEYS,
  parseOverrides,
  RunsModel,
  shownKey,
  SPARK_KEYS,
  sparklinePoints,
  stateOf,
  stepLabel,
  summaryLine,
  UnsafeCellError
} from './model';

/** The height of one list row (px): the list is virtualised, so every row has this height. */
export const ROW_HEIGHT = 36;
/** Rows rendered above and below the visible ones. */
const OVERSCAN = 8;
/**
 * Errors stay as a toast until dismissed. JupyterLab's default `autoClose` is 0, which files a
 * notification silently under the bell: every notification here says how long it shows.
 */
const SHOWN_ERROR = { autoClose: false as const };
/** The most metric pages (5000 rows each) the detail view reads when it opens. */
const MAX_DETAIL_PAGES = 20;
const STATUS_FILTERS: ReadonlyArray<[string, string]> = [
  ['', 'all'],
  ['queued,running', 'live'],
  ['completed', 'completed'],
  ['failed', 'failed'],
  ['stopped', 'stopped']
];

const SVG = 'http://www.w3.org/2000/svg';

export interface IPanelActions {
  /** Insert a cell with this text below the active cell of the current notebook; false when none. */
  insertCell(text: string): boolean;
  /** Show text read-only in the main area. */
  showText(title: string, text: string): void;
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

/** The latest `%prime_eval` per environment: a small table (the model id and time on hover). */
function evalsSection(evals: ReadonlyArray<IEvalItem>): HTMLElement[] {
  if (!evals.length) {
    return [];
  }
  const table = el('table', 'primenb-evals');
  const head = el('tr');
  head.append(...EVAL_HEADER.map(h => el('th', '', h)));
  table.appendChild(head);
  for (const e of evals) {
    const when = typeof e.created === 'number' ? new Date(e.created * 1000).toLocaleString() : 'unknown time';
    const tr = el('tr', 'primenb-eval', undefined, { title: `${e.model ?? 'model unknown'} · ${when}` });
    const cells = evalCells(e).map(c => el('td', '', c));
    if (typeof e.created === 'number') {
      cells[cells.length - 1].dataset.created = String(e.created); // counted on by refreshAgo
    }
    tr.append(...cells);
    table.appendChild(tr);
  }
  return [el('div', 'primenb-section', 'Evaluations (latest per environment)'), table];
}

/** Count each "… ago" cell on: the detail is rebuilt only when its data change ("33 s ago" stood still). */
function refreshAgo(root: HTMLElement, nowMs: number = Date.now()): void {
  root.querySelectorAll<HTMLElement>('[data-created]').forEach(cell => {
    cell.textContent = ago(Number(cell.dataset.created), nowMs);
  });
}

function errorText(error: unknown): string {
  return error instanceof ApiError || error instanceof Error ? error.message : String(error);
}

/** Several nodes as one keyed section of the detail. */
function wrap(nodes: HTMLElement[]): HTMLElement {
  const box = el('div', 'primenb-detail-part');
  box.append(...nodes);
  return box;
}

function headlineTable(headline: Record<string, unknown>): HTMLElement {
  const table = el('table', 'primenb-kv');
  for (const [k, v] of Object.entries(headline)) {
    const tr = el('tr');
    tr.append(el('th', '', k), el('td', '', typeof v === 'number' ? fmtNumber(v, 4) : String(v)));
    table.appendChild(tr);
  }
  return table;
}

/** Where the run is in W&B, trackio, MLflow, TensorBoard: a link only for an http(s) URL. */
function trackersSection(detail: unknown): HTMLElement[] {
  const links = trackerLinks(detail);
  if (!links.length) {
    return [];
  }
  const table = el('table', 'primenb-kv primenb-trackers');
  for (const t of links) {
    const td = el('td');
    const attrs = { href: t.href ?? '', target: '_blank', rel: 'noopener noreferrer' };
    td.append(t.href ? el('a', 'primenb-tracker-link', t.text, attrs) : el('span', '', t.text));
    const tr = el('tr');
    tr.append(el('th', '', t.kind), td);
    table.appendChild(tr);
  }
  return [el('div', 'primenb-section', 'Trackers'), table];
}

function samplesSection(s: any, live: boolean): HTMLElement[] {
  const parts: HTMLElement[] = [el('div', 'primenb-section', 'Samples')];
  const none = noSamplesText(!!s.withheld, (s.samples ?? []).length, live);
  if (none) {
    parts.push(el('div', 'primenb-muted', none));
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
  return parts;
}

function logSection(d: any, state: string): HTMLElement[] {
  if (d.log_tail && d.log_tail.length && (state === 'failed' || state === 'running')) {
    return [el('div', 'primenb-section', 'Log (tail)'), el('pre', 'primenb-log', d.log_tail.join('\n'))];
  }
  return [];
}

/** The apply dialog's body: steps and one override per line. */
class ApplyForm extends Widget {
  constructor(defaultSteps: number | null) {
    super({ node: el('div', 'primenb-apply-form') });
    this.steps = el('input', 'jp-mod-styled primenb-apply-steps', undefined, {
      type: 'number',
      min: '1',
      // short enough to show whole in the dialog (the label above says what it is)
      placeholder: 'as many as the parent trained',
      title: 'Steps to train (default: as many as the parent trained)'
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
      placeholder: 'name or id', // whole at the sidebar's default width (the title says more)
      title: 'Filter the runs by name or trace id'
    });
    this.search.addEventListener('input', () => this.restart());
    this.statusFilter = el('select', 'jp-mod-styled primenb-status-filter', undefined, { title: 'Show runs by status' });
    for (const [value, label] of STATUS_FILTERS) {
      this.statusFilter.appendChild(el('option', '', label, { value }));
    }
    this.statusFilter.addEventListener('change', () => this.restart());
    header.appendChild(button('↻', 'refresh', 'Refresh now', () => this.poke()));
    const filters = el('div', 'primenb-filters');
    filters.append(this.search, this.statusFilter);
    this.status = el('div', 'primenb-status');
    this.count = el('div', 'primenb-count');
    this.list = el('div', 'primenb-list');
    this.sizer = el('div', 'primenb-sizer');
    this.list.appendChild(this.sizer);
    this.list.addEventListener('scroll', this.onScroll, { passive: true });
    this.empty = el('div', 'primenb-empty', 'No runs yet: every run launched with %prime_train or primenb train appears here.');
    this.empty.hidden = true;
    this.detail = el('div', 'primenb-detail');
    this.detail.hidden = true;
    this.node.append(header, this.servers.node, filters, this.status, this.count, this.empty, this.list, this.detail);
    document.addEventListener('visibilitychange', this.onVisibility);
  }

  dispose(): void {
    this.stopPolling();
    window.clearInterval(this.agoTimer);
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

  /** A new filter: forget the cached pages and start from the top. */
  private restart(): void {
    this.model.clear();
    this.list.scrollTop = 0;
    this.generation += 1;
    this.poke();
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
      this.again = true;
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
        const delay = this.again ? 0 : nextDelay(this.seen, live, this.failures);
        this.again = false;
        this.timer = window.setTimeout(() => void this.tick(), delay);
      }
    }
  }

  private query(page: number): Record<string, string> {
    const q: Record<string, string> = { offset: String(page * PAGE_SIZE), limit: String(PAGE_SIZE) };
    const text = this.search.value.trim();
    if (text) {
      q.q = text;
    }
    if (this.statusFilter.value) {
      q.status = this.statusFilter.value;
    }
    return q;
  }

  /** Fetch one page of the list (for the current filter) into the model. */
  private async fetchPage(page: number): Promise<void> {
    const generation = this.generation;
    const answer = await api.traces(this.query(page));
    if (generation === this.generation) {
      this.model.setPage(answer);
    }
  }

  /** The rows in (or near) view: first..last, by list index. */
  private visibleRange(): [number, number] {
    const height = this.list.clientHeight || 800;
    const first = Math.floor(this.list.scrollTop / ROW_HEIGHT);
    return [Math.max(0, first - OVERSCAN), first + Math.ceil(height / ROW_HEIGHT) + OVERSCAN];
  }

  private async refresh(): Promise<void> {
    await this.servers.refresh();
    // the pages in view, again (states change, runs are added); then any a changed total dropped
    const [first, last] = this.visibleRange();
    for (const page of this.model.pagesFor(first, last)) {
      await this.fetchPage(page);
    }
    for (const page of this.model.missingPages(first, last)) {
      await this.fetchPage(page);
    }
    // the sparklines of live runs in view grow from where they were (metrics?cursor=N); a run that
    // was live at the last poll and has ended since is read once more, so its row ends with its
    // last rows, not the numbers of the poll before it ended
    const live = this.model.liveIn(first, last);
    const ended = Array.from(this.wasLive).filter(id => !live.includes(id) && this.model.find(id));
    this.wasLive = new Set(live);
    await Promise.all(
      [...live, ...ended].map(async id => {
        const answer = await api.metrics(id, this.model.series.get(id)?.cursor ?? 0, PANEL_KEYS);
        this.model.addMetrics(answer);
      })
    );
    this.renderList();
    if (this.selected !== null && this.detailLive) {
      await this.refreshDetailMetrics();
    }
  }

  private onScroll = (): void => {
    if (this.scrollPending) {
      return;
    }
    this.scrollPending = true;
    window.requestAnimationFrame(() => {
      this.scrollPending = false;
      this.renderList();
      void this.fetchMissing();
    });
  };

  /** Pages scrolled into view that are not fetched yet (each fetched once at a time). */
  private async fetchMissing(): Promise<void> {
    const [first, last] = this.visibleRange();
    const wanted = this.model.missingPages(first, last).filter(p => !this.fetching.has(p));
    if (!wanted.length) {
      return;
    }
    wanted.forEach(p => this.fetching.add(p));
    try {
      await Promise.all(wanted.map(p => this.fetchPage(p)));
      this.renderList();
    } catch (error) {
      this.status.textContent = errorText(error);
      this.status.classList.add('primenb-error');
    } finally {
      wanted.forEach(p => this.fetching.delete(p));
    }
  }

  // -- the list (virtualised: only the rows in view exist in the DOM) ----------------------------
  private renderList(): void {
    const total = this.model.total;
    this.sizer.style.height = `${total * ROW_HEIGHT}px`;
    this.empty.hidden = total > 0;
    const filtered = this.search.value.trim() !== '' || this.statusFilter.value !== '';
    if (!total && filtered) {
      this.empty.textContent = 'No run matches the filter.';
    }
    this.count.textContent = total ? `${total} run${total === 1 ? '' : 's'}${filtered ? ' (filtered)' : ''}` : '';
    const [first, last] = this.visibleRange();
    const rows: HTMLElement[] = [];
    const kept = new Map<string, { sig: string; node: HTMLElement }>();
    for (let i = first; i <= Math.min(last, total - 1); i++) {
      const item = this.model.itemAt(i);
      let node: HTMLElement;
      if (item) {
        // a row is rebuilt only when what it shows changed: a node replaced under the pointer
        // loses its hover and can swallow a click (live runs re-render every 2 s)
        const sig = this.signature(item);
        const old = this.rendered.get(item.trace);
        node = old && old.sig === sig ? old.node : this.row(item);
        kept.set(item.trace, { sig, node });
      } else {
        node = el('div', 'primenb-run primenb-placeholder', '…');
      }
      node.style.top = `${i * ROW_HEIGHT}px`;
      node.setAttribute('data-index', String(i));
      rows.push(node);
    }
    this.rendered = kept;
    // rows are placed absolutely, so DOM order does not matter: touch only what changed
    const wanted = new Set<Element>(rows);
    for (const child of Array.from(this.sizer.children)) {
      if (!wanted.has(child)) {
        child.remove();
      }
    }
    for (const node of rows) {
      if (node.parentElement !== this.sizer) {
        this.sizer.appendChild(node);
      }
    }
  }

  private signature(item: ITraceItem): string {
    const series = this.model.series.get(item.trace);
    return JSON.stringify([item, series?.cursor ?? -1]);
  }

  private row(item: ITraceItem): HTMLElement {
    const state = stateOf(item.status);
    const row = el('div', `primenb-run primenb-state-${state}`, undefined, {
      'data-trace': item.trace,
      'data-state': state,
      title: `${item.name ?? item.trace} (${item.trace})`
    });
    const top = el('div', 'primenb-run-top');
    top.append(el('span', `primenb-badge primenb-badge-${state}`, state), el('span', 'primenb-name', item.name ?? item.trace));
    const series = this.model.series.get(item.trace);
    const curve = curveOf(series, shownKey(series));
    // a sparkline while the run runs only: an ended run's row says its final reward or loss in
    // words, the same whether this page watched it (it kept one) or was reloaded (it had none)
    if (isLive(item.status)) {
      top.appendChild(sparkline(curve ? curve.values : [], 64, 14));
    }
    row.appendChild(top);
    const last = this.model.lastValue(item.trace);
    const meta = el('div', 'primenb-meta', summaryLine(item, last?.value, last?.key ?? null));
    const health = series ? healthText(series.health) : null;
    if (health) {
      meta.textContent = `⚠ ${health} · ${meta.textContent}`;
      meta.classList.add('primenb-health');
    }
    // the second line: the run's numbers, and on hover (or keyboard focus) its actions beside them,
    // the numbers' ellipsis moving left to make room (never text under a button)
    const bottom = el('div', 'primenb-run-bottom');
    bottom.append(meta, this.actionsFor(item.trace, item.status, 'primenb-actions primenb-row-actions'));
    row.appendChild(bottom);
    row.addEventListener('click', () => void this.openDetail(item.trace));
    return row;
  }

  private actionsFor(trace: string, status: string | null, cls = 'primenb-actions'): HTMLElement {
    const bar = el('div', cls);
    if (isLive(status)) {
      bar.appendChild(button('Stop', 'stop', 'Ask the run to checkpoint and stop', () => void this.stop(trace)));
    } else {
      bar.appendChild(button('Apply…', 'apply', 'Continue this trace from its final checkpoint', () => void this.apply(trace)));
    }
    bar.appendChild(button('Copy id', 'copy', 'Copy the trace id', () => this.copy(trace)));
    bar.appendChild(
      button('Insert cell', 'insert', 'Insert a %prime_harness apply cell in the active notebook', () =>
        this.insert(trace)
      )
    );
    bar.appendChild(button('Config', 'config', "Show the run's stored config (read-only)", () => void this.openConfig(trace)));
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
      Notification.error(`Could not stop ${trace}: ${errorText(error)}`, SHOWN_ERROR);
    }
    this.poke();
  }

  /**
   * Ask for steps and overrides, then start the refinement. While the server answers, the panel's
   * status line says so; the outcome is one new toast (success, or the refusal with its reason),
   * never an update of an earlier "in progress" toast: JupyterLab updates a toast only once it is
   * rendered (else files it anew), and such a toast was seen left spinning while the refusal
   * landed only under the bell.
   */
  async apply(trace: string): Promise<void> {
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
      Notification.error(String(bad[0]), SHOWN_ERROR);
      return;
    }
    this.status.textContent = `Starting a refinement of ${trace}…`;
    this.status.classList.remove('primenb-error');
    try {
      const answer = await api.apply(trace, value);
      Notification.success(`Started ${answer.name} (trace ${answer.trace ?? '?'}) from ${trace}`, { autoClose: 5000 });
      for (const w of answer.warnings) {
        Notification.warning(w, { autoClose: 10000 });
      }
    } catch (error) {
      Notification.error(`Apply refused: ${errorText(error)}`, SHOWN_ERROR);
    } finally {
      this.status.textContent = '';
    }
    this.poke();
  }

  copy(trace: string): void {
    Clipboard.copyToSystem(trace);
    Notification.info(`Copied ${trace}`, { autoClose: 2000 });
  }

  insert(trace: string): void {
    let text: string;
    try {
      text = harnessApplyCell(trace);
    } catch (error) {
      if (error instanceof UnsafeCellError) {
        Notification.error(error.message, SHOWN_ERROR);
        return;
      }
      throw error;
    }
    if (!this.actions.insertCell(text)) {
      Notification.warning('Open a notebook first: the cell goes below its active cell.', { autoClose: 5000 });
    }
  }

  /** The run's stored config, shown read-only: it records what the run trained, so it is not edited in place. */
  async openConfig(trace: string): Promise<void> {
    try {
      const c = await api.config(trace);
      const name = this.model.find(trace)?.name ?? trace;
      const source = c.path ? `# ${c.path} (read-only: what run ${name} trained)\n` : `# the resolved config of ${name} (read-only)\n`;
      this.actions.showText(`config ${name}`, source + c.toml);
    } catch (error) {
      Notification.error(`No config for ${trace}: ${errorText(error)}`, SHOWN_ERROR);
    }
  }

  // -- the detail view -------------------------------------------------------------------------
  async openDetail(trace: string): Promise<void> {
    if (this.selected !== trace) {
      this.sections.clear(); // another run: every section is built anew
      this.detail.replaceChildren(el('div', 'primenb-loading', 'Loading…'));
    }
    this.selected = trace;
    this.detailSeries = emptySeries();
    this.list.hidden = true;
    this.count.hidden = true;
    this.detail.hidden = false;
    try {
      const [d, s] = await Promise.all([api.trace(trace), api.samples(trace, 6)]);
      const series = emptySeries();
      for (let i = 0; i < MAX_DETAIL_PAGES; i++) {
        const m = await api.metrics(trace, series.cursor, DETAIL_KEYS);
        addAnswer(series, m, DETAIL_KEYS);
        if (!m.more) {
          break;
        }
      }
      if (this.selected !== trace) {
        return;
      }
      this.detailSeries = series;
      this.detailLive = !!d.live;
      this.renderDetail(d, s);
      this.renderCharts();
    } catch (error) {
      this.sections.clear();
      this.detail.replaceChildren(this.backButton(), el('div', 'primenb-error', errorText(error)));
    }
  }

  closeDetail(): void {
    this.selected = null;
    this.detailLive = false;
    this.sections.clear();
    this.detail.hidden = true;
    this.list.hidden = false;
    this.count.hidden = false;
    this.poke();
  }

  private backButton(): HTMLElement {
    return button('← All runs', 'back', 'Back to the list', () => this.closeDetail());
  }

  /**
   * The detail, section by section, each keyed by what it shows: a section whose data did not
   * change keeps its node. A live run's detail is read again at every poll, and rebuilding it
   * all replaced the Stop button under the pointer, so a normal click never landed.
   */
  private renderDetail(d: any, s: any): void {
    const state = stateOf(d.status);
    const live = isLive(d.status);
    const wanted: Array<[string, unknown, () => HTMLElement]> = [
      ['back', 0, () => this.backButton()],
      [
        'head',
        [state, d.name, d.trace],
        () => {
          const head = el('div', 'primenb-detail-head');
          head.append(
            el('span', `primenb-badge primenb-badge-${state}`, state),
            el('span', 'primenb-name', String(d.name ?? d.trace)),
            el('span', 'primenb-trace-id', String(d.trace))
          );
          return head;
        }
      ],
      ['actions', [d.trace, live], () => this.actionsFor(d.trace, d.status)],
      ['error', d.error ?? null, () => (d.error ? el('pre', 'primenb-error', String(d.error)) : el('div'))],
      ['health', 0, () => (this.health = el('div', 'primenb-health'))],
      ['headline', d.headline ?? {}, () => headlineTable(d.headline ?? {})],
      ['evals', evalsOf(d), () => wrap(evalsSection(evalsOf(d)))],
      ['trackers', trackerLinks(d), () => wrap(trackersSection(d))],
      [
        'metrics',
        0,
        () => {
          this.charts = el('div', 'primenb-charts');
          this.chartBlocks.clear();
          return wrap([el('div', 'primenb-section', 'Metrics'), this.charts]);
        }
      ],
      ['samples', [!!s.withheld, s.samples ?? [], live], () => wrap(samplesSection(s, live))],
      ['log', [state, d.log_tail ?? []], () => wrap(logSection(d, state))],
      [
        'config',
        d.config ?? {},
        () =>
          wrap([
            el('div', 'primenb-section', 'Config (resolved)'),
            el('pre', 'primenb-config', JSON.stringify(d.config ?? {}, null, 2))
          ])
      ]
    ];
    const kept = new Map<string, { sig: string; node: HTMLElement }>();
    const nodes: HTMLElement[] = [];
    for (const [key, data, build] of wanted) {
      const sig = JSON.stringify(data);
      const old = this.sections.get(key);
      const node = old && old.sig === sig ? old.node : build();
      node.setAttribute('data-section', key);
      kept.set(key, { sig, node });
      nodes.push(node);
    }
    this.sections = kept;
    const keep = new Set<Element>(nodes);
    for (const child of Array.from(this.detail.children)) {
      if (!keep.has(child)) {
        child.remove();
      }
    }
    nodes.forEach((node, i) => {
      if (this.detail.children[i] !== node) {
        this.detail.insertBefore(node, this.detail.children[i] ?? null);
      }
    });
  }

  /** One chart per drawn metric (reward, loss, the warm-up's loss) with 2 points or more, each
   * updated in place. */
  private renderCharts(): void {
    if (!this.charts) {
      return;
    }
    const blocks: HTMLElement[] = [];
    for (const key of SPARK_KEYS) {
      const curve = this.detailSeries.curves[key];
      if (!curve || curve.values.length < 2) {
        continue;
      }
      let block = this.chartBlocks.get(key);
      if (!block) {
        block = el('div', 'primenb-chart');
        block.append(
          el('div', 'primenb-muted'),
          sparkline([], 260, 60, `primenb-chart-svg primenb-chart-${key.replace(/[^A-Za-z0-9_-]/g, '-')}`)
        );
        this.chartBlocks.set(key, block);
      }
      const last = curve.values[curve.values.length - 1];
      (block.firstChild as HTMLElement).textContent = `${key}: ${fmtNumber(last, 4)} at ${stepLabel(curve)}`;
      const svg = block.lastChild as SVGSVGElement;
      svg.setAttribute('data-points', String(curve.values.length));
      svg.querySelector('polyline')?.setAttribute('points', sparklinePoints(curve.values, 260, 60));
      blocks.push(block);
    }
    const shown = blocks.length ? blocks : [this.noMetrics];
    if (shown.length !== this.charts.children.length || shown.some((b, i) => this.charts?.children[i] !== b)) {
      this.charts.replaceChildren(...shown);
    }
    if (this.health) {
      const text = healthText(this.detailSeries.health) ?? '';
      if (this.health.textContent !== text) {
        this.health.textContent = text;
      }
      this.health.hidden = !text;
    }
  }

  /** A live detail at each poll: its metrics from where they were, then its facts (steps, state,
   * samples, log), each section replaced only when it changed; once the run ended, its final state. */
  private async refreshDetailMetrics(): Promise<void> {
    const trace = this.selected;
    if (trace === null) {
      return;
    }
    const m = await api.metrics(trace, this.detailSeries.cursor, DETAIL_KEYS);
    if (this.selected !== trace) {
      return;
    }
    addAnswer(this.detailSeries, m, DETAIL_KEYS);
    this.renderCharts();
    const [d, s] = await Promise.all([api.trace(trace), api.samples(trace, 6)]);
    if (this.selected !== trace) {
      return;
    }
    this.detailLive = !!d.live;
    this.renderDetail(d, s);
    this.renderCharts();
  }

  readonly model = new RunsModel();
  private readonly servers = new ServersSection(errorText);
  private readonly search: HTMLInputElement;
  private readonly statusFilter: HTMLSelectElement;
  private readonly status: HTMLElement;
  private readonly count: HTMLElement;
  private readonly list: HTMLElement;
  private readonly sizer: HTMLElement;
  private readonly empty: HTMLElement;
  private readonly detail: HTMLElement;
  private charts: HTMLElement | null = null;
  private readonly chartBlocks = new Map<string, HTMLElement>();
  private readonly noMetrics = el('div', 'primenb-muted', 'no metrics yet');
  private sections = new Map<string, { sig: string; node: HTMLElement }>();
  private health: HTMLElement | null = null;
  private selected: string | null = null;
  private detailLive = false;
  private detailSeries: ISeries = emptySeries();
  private timer: number | null = null;
  private readonly agoTimer = window.setInterval(() => refreshAgo(this.node), 5000);
  private busy = false;
  private again = false;
  private failures = 0;
  private generation = 0;
  private scrollPending = false;
  private readonly fetching = new Set<number>();
  private rendered = new Map<string, { sig: string; node: HTMLElement }>();
  private wasLive = new Set<string>();
}

/** What the detail view reads: the drawn metrics and the reward-health counts. */
const DETAIL_KEYS: ReadonlyArray<string> = PANEL_KEYS;
