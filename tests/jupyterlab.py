"""A real JupyterLab (on 127.0.0.1) and a real headless Chromium, for the browser tests.

One place for what every browser test needs: the requirement check (skip outside CI, fail under
``PRIMENB_REQUIRE_UI=1``), a JupyterLab started from the built wheel's extension and server config
with token auth and its own ``PRIME_HOME``, a Playwright page, notebooks written to the server's
root and run there, and screenshots saved as test artifacts (``$PRIMENB_TEST_ARTIFACTS``, default
``test-artifacts/``).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.polling import wait_for
from tests.ports import free_port
from tests.server.packaging import ROOT, build_wheel, extract_data

CHROMIUM = os.environ.get("PRIMENB_CHROMIUM", "/usr/bin/chromium")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"  # what "model not found" comes from
REQUIRE = os.environ.get("PRIMENB_REQUIRE_UI") == "1"
ARTIFACTS = Path(os.environ.get("PRIMENB_TEST_ARTIFACTS") or ROOT / "test-artifacts")


def need(ok: bool, why: str) -> None:
    """Skip when a UI prerequisite is missing, except in CI (PRIMENB_REQUIRE_UI=1) where it fails."""
    if not ok:
        if REQUIRE:
            pytest.fail(f"PRIMENB_REQUIRE_UI=1 but {why}")
        pytest.skip(why)  # off CI only: under PRIMENB_REQUIRE_UI=1 the line above fails instead


def require_ui() -> None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        need(False, "playwright (Python) is not installed")
    need(Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    built = (ROOT / "primenb" / "labextension" / "static" / "style.js").exists()
    need(built or shutil.which("node") is not None, "the labextension is not built and node is missing")


@dataclass
class Lab:
    base: str
    token: str
    root: Path  # the server's root_dir: notebooks go here
    home: Path  # PRIME_HOME of the server and its kernels
    tmp: Path
    env: dict[str, str]
    app: str = "jupyterlab"  # or "notebook" (Notebook 7, the same frontend pieces without the lab shell)

    def api(self, path: str) -> Any:
        """GET a primenb REST route (``/primenb/api/<path>``) as JSON."""
        return self.get(f"primenb/api/{path}")

    def get(self, path: str) -> Any:
        req = urllib.request.Request(f"{self.base}/{path}", headers={"Authorization": f"token {self.token}"})
        return json.loads(urllib.request.urlopen(req, timeout=10).read())

    def url(self, path: str = "lab") -> str:
        return f"{self.base}/{path}?token={self.token}"

    def log(self) -> str:
        return (self.tmp / "lab.log").read_text(errors="replace")


def lab_env(tmp: Path, home: Path) -> dict[str, str]:
    """The environment of the JupyterLab server (and so of its kernels): the wheel's extension and
    server config, throwaway Jupyter folders, no network, one thread per process, this source tree."""
    data = extract_data(build_wheel(tmp / "wheel"), tmp / "wheel-data")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(
        PRIME_HOME=str(home),
        JUPYTER_PATH=str(data / "share" / "jupyter"),
        JUPYTER_CONFIG_PATH=str(data / "etc" / "jupyter"),
        JUPYTER_CONFIG_DIR=str(tmp / "jupyter-config"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
        PYTHONPATH=str(ROOT),
    )
    return env


# what each frontend needs besides the common server options: the app exposed in the page
# (``window.jupyterapp``) so tests can run commands such as "run all cells", and no news/update calls
APP_OPTIONS = {
    "jupyterlab": [
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.expose_app_in_browser=True",
    ],
    "notebook": ["--JupyterNotebookApp.expose_app_in_browser=True"],
}


@contextmanager
def jupyterlab(tmp: Path, home: Path, env: dict[str, str] | None = None, app: str = "jupyterlab") -> Iterator[Lab]:
    """A JupyterLab (or, with ``app="notebook"``, a Notebook 7) server on 127.0.0.1 (random port,
    token auth), stopped on exit."""
    root = tmp / "root"
    root.mkdir(parents=True, exist_ok=True)
    env = env or lab_env(tmp, home)
    token, port = secrets.token_hex(16), free_port()
    log = open(tmp / "lab.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            app,
            "--no-browser",
            "--allow-root",  # CI containers run as root
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            *APP_OPTIONS[app],
        ],
        cwd=tmp,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    lab = Lab(f"http://127.0.0.1:{port}", token, root, home, tmp, env, app)

    def up() -> bool:
        try:
            return lab.get("api/status") is not None
        except OSError:
            return proc.poll() is not None  # exited: reported below

    try:
        wait_for(up, 120, "JupyterLab to answer")
        assert proc.poll() is None, lab.log()
        yield lab
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@contextmanager
def chromium_page(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A Playwright page in the system Chromium (headless; never a downloaded browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def write_notebook(path: Path, cells: list[str]) -> Path:
    """A notebook of code cells (a cell starting with ``#md`` becomes markdown) at ``path``."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell(c[3:].lstrip()) if c.startswith("#md") else nbformat.v4.new_code_cell(c)
        for c in cells
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def open_notebook(page: Any, lab: Lab, relpath: str, timeout_s: float = 120) -> None:
    """Open ``relpath`` (under the server root) and wait until it is the notebook in front (the
    workspace may reopen an earlier page's notebook first) and its kernel is idle."""
    page.goto(lab.url(f"notebooks/{relpath}" if lab.app == "notebook" else f"lab/tree/{relpath}"))
    page.locator(".jp-Notebook").first.wait_for(timeout=timeout_s * 1000)
    wait_for(lambda: current_path(page) == relpath, timeout_s, f"{relpath} to be the notebook in front")
    wait_for(lambda: kernel_idle(page), timeout_s, "the notebook's kernel to be idle")


def current_path(page: Any) -> str | None:
    return page.evaluate("() => window.jupyterapp?.shell?.currentWidget?.context?.path ?? null")


def kernel_idle(page: Any) -> bool:
    status = page.evaluate(
        "() => { const w = window.jupyterapp?.shell?.currentWidget;"
        " return w?.sessionContext?.session?.kernel?.status ?? null; }"
    )
    return status == "idle"


# Every cell's outputs have their rendered views, and no widget view still waits for its model.
# A widget view shows "Loading widget..." from the moment it renders until the kernel's widget
# manager has restored, then either the widget or "Error displaying widget: model not found":
# once this holds, no view is left that could still fail.
OUTPUTS_SETTLED = """() => {
  const panel = window.jupyterapp?.shell?.currentWidget;
  const cells = panel?.content?.widgets;
  if (!cells || !cells.length) return false;
  const rendered = cells.every(c => !c.outputArea || c.outputArea.widgets.length === c.model.outputs.length);
  return rendered && !panel.node.textContent.includes('Loading widget...');
}"""


def wait_outputs_settled(page: Any, timeout_s: float = 120) -> None:
    """Wait until the open notebook's outputs are all rendered in their final state (see
    `OUTPUTS_SETTLED`), so that asserting the absence of a widget error means something."""
    wait_for(lambda: page.evaluate(OUTPUTS_SETTLED), timeout_s, "every output rendered, no widget view still loading")


def lab_command(page: Any, command: str, args: dict[str, Any] | None = None, *, wait: bool = True) -> None:
    """Run a JupyterLab command (e.g. ``notebook:run-all-cells``, ``docmanager:save``). With
    ``wait`` it returns when the command's promise resolves (run-all: when every cell has run)."""
    if wait:
        page.evaluate("([c, a]) => window.jupyterapp.commands.execute(c, a)", [command, args or {}])
    else:
        page.evaluate("([c, a]) => { window.jupyterapp.commands.execute(c, a); }", [command, args or {}])


def saved_outputs(path: Path) -> list[dict[str, Any]]:
    """Every output of every cell of the notebook as saved on disk."""
    return [o for cell in json.loads(path.read_text())["cells"] for o in cell.get("outputs", [])]


def stop_runs(root: Path) -> None:
    """Stop every run a notebook under ``root`` started (a run outlives its kernel by design)."""
    from primenb.run import Run

    for run_dir in (root / "outputs").glob("*"):
        Run(run_dir).stop(timeout=60)


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


# an element's text colour and the colour behind it (each background composited over its
# ancestors'), as RGB, for every element ``selector`` matches
COLORS = """(selector) => [...document.querySelectorAll(selector)].map(el => {
  const rgba = s => { const p = s.match(/rgba?\\(([^)]+)\\)/)[1].split(',').map(Number);
                      return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const chain = []; for (let n = el; n; n = n.parentElement) chain.push(n);
  let bg = [255, 255, 255];
  for (const n of chain.reverse()) {
    const c = rgba(getComputedStyle(n).backgroundColor);
    bg = [0, 1, 2].map(i => c[i] * c[3] + bg[i] * (1 - c[3]));
  }
  const f = rgba(getComputedStyle(el).color);
  return {fg: [0, 1, 2].map(i => f[i] * f[3] + bg[i] * (1 - f[3])), bg};
})"""


def contrast(fg: list[float], bg: list[float]) -> float:
    """WCAG contrast ratio of two RGB colours (AA asks 4.5 for normal text)."""

    def lum(rgb: list[float]) -> float:
        c = [v / 255 for v in rgb]
        c = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

    hi, lo = sorted((lum(fg), lum(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_contrasts(page: Any, selector: str) -> list[float]:
    """The contrast of each element ``selector`` matches against what is behind it."""
    return [contrast(c["fg"], c["bg"]) for c in page.evaluate(COLORS, selector)]


def set_theme(page: Any, theme: str, light: bool) -> None:
    """Switch JupyterLab's theme ("JupyterLab Light" / "JupyterLab Dark") and wait for it."""
    lab_command(page, "apputils:change-theme", {"theme": theme})
    wait_for(
        lambda: page.evaluate("() => document.body.dataset.jpThemeLight") == ("true" if light else "false"),
        60,
        f"the {theme} theme",
    )
    time.sleep(1)  # the theme's stylesheet applies after the flag
