/**
 * The kernel-restart notice on a run's live monitor (JupyterLab and Notebook 7).
 *
 * Kernel -> Restart (or a kernel that dies, or a kernel change) ends the thread that fed a run's
 * monitor, and the page drops the old kernel's last messages, so the monitor's own switch to its
 * summary never arrives: the view would stay at "running" with a Stop button that does nothing.
 * When a notebook's kernel goes, every primenb monitor in that notebook gets a notice saying how
 * to follow the run again, and its Stop button is disabled.
 *
 * The monitor's DOM (primenb/notebook/monitor.py): `.primenb-monitor` around the view,
 * `[data-primenb-run]` carrying the run's name, `.primenb-stop` on the Stop button,
 * `.primenb-reattach` on the line the notice supersedes.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { Gone, goneForKernelChange, goneForStatus, noticePieces, noticeText } from './kernelNotice';

export const MONITOR = '.primenb-monitor';
const NOTICE_CLASS = 'primenb-kernel-notice';

/** Show the notice in one monitor view and disable its Stop button; false if it already has one. */
export function orphanMonitor(monitor: HTMLElement, gone: Gone): boolean {
  if (monitor.querySelector(`.${NOTICE_CLASS}`)) {
    return false;
  }
  const run = monitor.querySelector('[data-primenb-run]')?.getAttribute('data-primenb-run') ?? null;
  const notice = document.createElement('div');
  notice.className = NOTICE_CLASS;
  notice.setAttribute('role', 'status');
  // a translucent orange over whatever the theme puts behind it, and the theme's text colour: the
  // theme's own `--jp-warn-color3` is light peach in the dark theme too, under near-white text (1.2:1)
  notice.style.cssText =
    'margin:4px 0;padding:4px 8px;border-left:3px solid var(--jp-warn-color1, #f57c00);' +
    'background:rgba(255,152,0,0.14);color:var(--jp-content-font-color1, rgba(0,0,0,0.87));';
  for (const piece of noticePieces(gone, run)) {
    const part = document.createElement(piece.code ? 'code' : 'span');
    part.textContent = piece.text; // text, never markup: the run name comes from the kernel's output
    notice.appendChild(part);
  }
  const header = monitor.firstElementChild;
  monitor.insertBefore(notice, header ? header.nextSibling : null);
  monitor.classList.add('primenb-orphaned');
  monitor.querySelectorAll<HTMLElement>('.primenb-reattach').forEach(line => {
    line.style.display = 'none';
  });
  monitor.querySelectorAll<HTMLButtonElement>('button.primenb-stop, .primenb-stop button').forEach(button => {
    button.disabled = true;
    button.title = noticeText(gone, run);
  });
  return true;
}

/** Every monitor of one notebook, also in cells the windowed notebook keeps detached. */
export function orphanMonitors(panel: NotebookPanel, gone: Gone): number {
  let n = 0;
  for (const cell of panel.content.widgets) {
    cell.node.querySelectorAll<HTMLElement>(MONITOR).forEach(monitor => {
      n += orphanMonitor(monitor, gone) ? 1 : 0;
    });
  }
  return n;
}

function watch(panel: NotebookPanel): void {
  const session = panel.sessionContext;
  session.statusChanged.connect((_, status) => {
    const gone = goneForStatus(status);
    if (gone) {
      orphanMonitors(panel, gone);
    }
  });
  session.kernelChanged.connect((_, change) => {
    const gone = goneForKernelChange(!!change.oldValue, !!change.newValue);
    if (gone) {
      orphanMonitors(panel, gone);
    }
  });
}

export const kernelRestartNotice: JupyterFrontEndPlugin<void> = {
  id: 'primenb:kernel-restart-notice',
  description: "Marks a run's live monitor as no longer updating when its notebook's kernel restarts.",
  autoStart: true,
  optional: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, notebooks: INotebookTracker | null) => {
    if (!notebooks) {
      return; // a page without notebooks (Notebook 7's file browser)
    }
    notebooks.forEach(watch);
    notebooks.widgetAdded.connect((_, panel) => watch(panel));
  }
};
