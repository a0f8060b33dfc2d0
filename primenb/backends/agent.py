"""The remote half of a remote backend: a stdlib-only script sent on stdin to the host's Python
(``python - COMMAND ARGS``), so following a run needs nothing installed beyond what trains it.

``probe``                 where things are: the Python, its version, primenb's version (or none)
``sync RUN_DIR OFFSETS``  the run's status, new bytes of its appended files after OFFSETS (JSON),
                          whether its process group lives, and its checkpoints; one JSON line out
``stop RUN_DIR FORCE``    write the STOP file (FORCE=1: also SIGKILL the process group)
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys

APPENDED = ("metrics.jsonl", "samples.jsonl", "logs/engine.log", "logs/launcher.log")
WHOLE = ("status.json", "launcher.json")
CHUNK = 4 << 20  # at most this many new bytes per file per sync: a long backlog comes in pieces


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _pgid_alive(run_dir: str) -> bool | None:
    raw = _read(os.path.join(run_dir, "launcher.pid"))
    if raw is None:
        return None
    try:
        os.killpg(int(raw.strip() or b"0"), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return None
    return True


def sync(run_dir: str, offsets: dict[str, int]) -> dict[str, object]:
    out: dict[str, object] = {"files": {}, "exists": os.path.isdir(run_dir)}
    files: dict[str, dict[str, object]] = {}
    # status first: the engine writes every metric before its final status, so a final status
    # read here means the bytes read below are complete.
    for name in WHOLE:
        data = _read(os.path.join(run_dir, name))
        if data is not None:
            files[name] = {"replace": True, "data": base64.b64encode(data).decode()}
    more = False
    for name in APPENDED:
        path = os.path.join(run_dir, name)
        try:
            size = os.path.getsize(path)
        except OSError:
            continue
        start = int(offsets.get(name, 0))
        replace = size < start  # truncated or replaced: send it again from the start
        if replace:
            start = 0
        if size == start:
            continue
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read(min(size - start, CHUNK))
        more = more or start + len(data) < size
        files[name] = {"replace": replace, "offset": start, "data": base64.b64encode(data).decode()}
    out["files"] = files
    out["more"] = more
    out["alive"] = _pgid_alive(run_dir)
    ckpt = os.path.join(run_dir, "checkpoints")
    out["checkpoints"] = sorted(os.listdir(ckpt)) if os.path.isdir(ckpt) else []
    return out


def probe() -> dict[str, object]:
    primenb: str | None
    try:
        from importlib.metadata import version

        primenb = version("primenb")
    except Exception:
        import importlib.util

        primenb = "unknown" if importlib.util.find_spec("primenb") else None
    return {
        "python": sys.executable,
        "version": ".".join(str(v) for v in sys.version_info[:3]),
        "primenb": primenb,
        "home": os.path.expanduser("~"),
    }


def stop(run_dir: str, force: bool) -> dict[str, object]:
    with open(os.path.join(run_dir, "STOP"), "a"):
        pass
    killed = False
    if force:
        raw = _read(os.path.join(run_dir, "launcher.pid"))
        try:
            os.killpg(int((raw or b"0").strip() or b"0"), signal.SIGKILL)
            killed = True
        except (ProcessLookupError, PermissionError, ValueError):
            pass
    return {"stop": True, "killed": killed}


def main(argv: list[str]) -> None:
    cmd = argv[0]
    if cmd == "probe":
        result = probe()
    elif cmd == "sync":
        result = sync(argv[1], json.loads(argv[2]))
    elif cmd == "stop":
        result = stop(argv[1], argv[2] == "1")
    else:
        raise SystemExit(f"unknown command {cmd!r}")
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
