"""The built wheel (shared by the packaging and browser tests): built once per session."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "primenb" / "labextension" / "static" / "style.js"


def build_wheel(out: Path) -> Path:
    """``pip wheel`` of the source tree (the labextension is built first when it is not yet, which
    needs node; `make labextension` builds it). ``PRIMENB_WHEEL`` names a wheel to use instead."""
    given = os.environ.get("PRIMENB_WHEEL")
    if given:
        return Path(given)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(ROOT), "-w", str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = out.glob("primenb-*.whl")
    return wheel


def extract_data(wheel: Path, dest: Path) -> Path:
    """The wheel's data folder (``share/jupyter/...``, ``etc/jupyter/...``) unpacked under ``dest``."""
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            head, sep, rest = name.partition(".data/data/")
            if sep and "/" not in head:
                target = dest / rest
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
    return dest
