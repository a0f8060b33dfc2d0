"""The wheel ships the prebuilt sidebar and the config that enables the server extension: a fresh
venv (no system site-packages) with JupyterLab from the registry and the wheel, and no node on
the PATH, lists both as enabled."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.server.packaging import build_wheel

pytestmark = pytest.mark.slow  # builds the wheel and a fresh venv

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_wheel_contents(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    data = "primenb-0.1.0.data/data/"
    assert f"{data}share/jupyter/labextensions/primenb/package.json" in names
    assert f"{data}share/jupyter/labextensions/primenb/static/style.js" in names
    assert any(
        re.fullmatch(rf"{data}share/jupyter/labextensions/primenb/static/remoteEntry\.\w+\.js", n) for n in names
    )
    assert f"{data}etc/jupyter/jupyter_server_config.d/primenb.json" in names
    assert "primenb/server/handlers.py" in names
    assert not any(n.startswith("primenb/labextension/") for n in names)  # only under share/


def test_fresh_venv_lists_both_extensions_enabled_without_node(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    bin_dir = env_dir / "bin"
    py = str(bin_dir / "python")
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "jupyterlab>=4.6,<5"], check=True, capture_output=True, text=True)
    subprocess.run([*pip, "--no-deps", str(wheel)], check=True, capture_output=True, text=True)
    # no node, no user-level Jupyter config: only the venv
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=str(bin_dir), HOME=str(tmp_path / "home"))
    assert shutil.which("node", path=env["PATH"]) is None
    assert shutil.which("jupyter", path=env["PATH"]) is not None

    def jupyter(*args: str) -> str:
        done = subprocess.run(
            [str(bin_dir / "jupyter"), *args], env=env, capture_output=True, text=True, timeout=120, check=True
        )
        return ANSI.sub("", done.stdout + done.stderr)

    labext = jupyter("labextension", "list")
    assert re.search(r"primenb v0\.1\.0 enabled\s+OK", labext), labext
    server = jupyter("server", "extension", "list")
    assert re.search(r"primenb\.server enabled", server), server
    assert re.search(r"primenb\.server\s+OK", server), server
    assert sys.prefix not in labext  # the fresh venv's, not the test runner's
