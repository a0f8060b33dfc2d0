/** The "Prime runs" left-sidebar plugin. */
import { ILabShell, ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { MainAreaWidget } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookActions } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { kernelRestartNotice } from './kernelRestartNotice';
import { IPanelActions, RunsPanel } from './panel';

const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24"><path class="jp-icon3" fill="#616161" ' +
  'd="M3 17l5-6 4 4 6-8 3 3v2l-3-3-6 8-4-4-5 6z M3 20h18v1H3z"/></svg>';

export const runsIcon = new LabIcon({ name: 'primenb:runs', svgstr: ICON_SVG });

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'primenb:runs',
  description: 'A left-sidebar panel listing every primenb run and trace, with live reward and actions.',
  autoStart: true,
  optional: [ILabShell, ILayoutRestorer, INotebookTracker],
  activate: (
    app: JupyterFrontEnd,
    labShell: ILabShell | null,
    restorer: ILayoutRestorer | null,
    notebooks: INotebookTracker | null
  ) => {
    const actions: IPanelActions = {
      insertCell(text: string): boolean {
        const current = notebooks?.currentWidget;
        if (!current) {
          return false;
        }
        const notebook = current.content;
        NotebookActions.insertBelow(notebook);
        const cell = notebook.activeCell;
        if (!cell) {
          return false;
        }
        cell.model.sharedModel.setSource(text);
        app.shell.activateById(current.id);
        return true;
      },
      showText(title: string, text: string): void {
        const content = new Widget({ node: document.createElement('pre') });
        content.node.textContent = text;
        content.addClass('primenb-text-view');
        const widget = new MainAreaWidget({ content });
        widget.title.label = title;
        app.shell.add(widget, 'main');
      }
    };
    const panel = new RunsPanel(actions);
    panel.title.icon = runsIcon;
    app.shell.add(panel, 'left', { rank: 600 });
    if (restorer) {
      restorer.add(panel, 'primenb-runs');
    }
    app.commands.addCommand('primenb:open-runs', {
      label: 'Prime runs',
      execute: () => app.shell.activateById(panel.id)
    });
    void labShell;
  }
};

export default [plugin, kernelRestartNotice];
