from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.homes import plain_home  # noqa: F401  (the `home` fixture, offered to every test)

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    """No test writes into the user's real ~/.prime/agent (run index, traces, environments)."""
    import os
    import tempfile

    os.environ["PRIME_HOME"] = tempfile.mkdtemp(prefix="primenb-test-home-")


UPSTREAM = sorted((ROOT / "examples" / "upstream").rglob("*.toml"))


@pytest.fixture
def shell():
    """A real IPython shell with the extension loaded, as a notebook kernel has."""
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "primenb")
    yield sh
    sh.run_line_magic("unload_ext", "primenb")
    sh.user_ns.pop("cfg", None)


@pytest.fixture(scope="session")
def tool_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded model fine-tuned to call a weather tool (`tests/serve/toolmodel.py`): the
    stored fit while its recipe is unchanged, else fitted once per session (minutes on 2 cores)."""
    import fcntl

    from tests.serve.toolmodel import checkpoint

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return checkpoint(tmp_path_factory.mktemp("toolrun"))
    # under `make test`'s two workers: fitted once, by whichever worker asks first (the other waits)
    shared = tmp_path_factory.getbasetemp().parent  # this session's folder, above each worker's own
    with open(shared / "toolrun.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "toolrun.json"
        if not done.exists():
            done.write_text(json.dumps({"checkpoint": str(checkpoint(shared / "toolrun"))}))
        return Path(json.loads(done.read_text())["checkpoint"])
