"""`export` a trace as a self-contained folder, `import_` it on another machine, `rm` a trace."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from primenb.errors import PrimenbError
from primenb.protocol.documents import is_live_state
from primenb.protocol.record import TRACE_FILE, read_trace, write_trace
from primenb.protocol.rundir import FINAL_STATES, atomic_write_json, now_iso
from primenb.protocol.safepath import contained, is_safe_id, safe_name, symlinks_under
from primenb.traces.trace import Trace, get

MANIFEST = "primenb_export.json"
_COPY = ("trace.json", "status.json", "metrics.jsonl", "samples.jsonl", "configs")


def _copy(src: Path, dst: Path) -> None:
    """Copy contents only: a bundle is for sharing, so its files get the usual (umask) mode, not
    the mode they had in the run directory (a 0600 file there would stay private in the bundle)."""
    if src.is_dir():
        shutil.copytree(src, dst, copy_function=shutil.copyfile)
    elif src.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


def export(ref: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``path/``: config TOML and resolved JSON, trace.json, metrics, samples, and the final
    model or adapter (``final/``; with the base it sits on under ``base/`` when that base is a
    folder, e.g. an SFT warm-up). Another machine brings it back with `import_`."""
    trace = get(ref)
    if trace.status not in FINAL_STATES:
        raise PrimenbError(f"trace {trace.id} is still {trace.status}; export it when it has ended")
    dest = Path(path).expanduser().resolve()
    if dest.exists() and any(dest.iterdir()):
        raise PrimenbError(f"{dest} exists and is not empty; export into a new folder")
    dest.mkdir(parents=True, exist_ok=True)
    for name in _COPY:
        _copy(trace.run_dir / name, dest / name)
    manifest: dict[str, Any] = {
        "trace_id": trace.id,
        "name": trace.name,
        "exported_at": now_iso(),
        "from_run_dir": str(trace.run_dir),
        "final": None,
        "base": None,
    }
    ckpt = trace.final_checkpoint
    if ckpt is not None and ckpt.is_dir():
        _copy(ckpt, dest / "final")
        manifest["final"] = {"dir": "final", **(trace.get("final") or {})}
        meta_path = dest / "final" / "primenb_checkpoint.json"
        meta = _read(meta_path)
        base_path = (meta.get("base") or {}).get("path")
        if (dest / "final" / "adapter_config.json").exists() and base_path and Path(base_path).is_dir():
            _copy(Path(base_path), dest / "base")
            manifest["base"] = {"dir": "base", "original": base_path}
    atomic_write_json(dest / MANIFEST, manifest)
    return dest


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def import_(path: str | os.PathLike[str], dest: str | os.PathLike[str] | None = None) -> Trace:
    """Bring an exported trace back as a run directory (default ``outputs/<name>``) with the same
    trace id, its checkpoint paths pointing at the new place, and index it."""
    from primenb.protocol.index import Index

    src = Path(path).expanduser().resolve()
    manifest = _read(src / MANIFEST)
    doc = read_trace(src)
    if not manifest or doc is None:
        raise PrimenbError(
            f"{src} is not an exported trace (no {MANIFEST} / {TRACE_FILE}); "
            "make one with %prime_harness export TRACE PATH"
        )
    _check_bundle(src, manifest, doc)
    index = Index()
    known = index.query("SELECT run_dir FROM traces WHERE trace = ?", (doc["trace_id"],))
    if known and (Path(known[0][0]) / TRACE_FILE).exists():
        raise PrimenbError(f"trace {doc['trace_id']} is already here: {known[0][0]}")
    # the bundle's name becomes a folder name: one safe component under outputs/, never a path
    name = safe_name(str(doc.get("name") or src.name), "the bundle's trace name")
    target = Path(dest).expanduser() if dest else Path("outputs") / name
    if target.exists() and any(target.iterdir()):
        target = target.with_name(f"{target.name}-imported-{int(time.time())}")
    target = target.resolve()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PrimenbError(f"cannot create {target}: {exc.strerror or exc}") from None
    for name_ in _COPY:
        _copy(src / name_, target / name_)
    final = manifest.get("final") or {}
    new_final = None
    if final and (src / "final").is_dir():
        step = final.get("step")
        ckpt = contained(target, Path("checkpoints") / (f"step_{step}" if step is not None else "final"), "checkpoint")
        _copy(src / "final", ckpt)
        new_final = {**{k: v for k, v in final.items() if k != "dir"}, "path": str(ckpt)}
        if manifest.get("base") and (src / "base").is_dir():
            base_dir = target / "checkpoints" / "base"
            _copy(src / "base", base_dir)
            meta_path = ckpt / "primenb_checkpoint.json"
            meta = _read(meta_path)
            meta.setdefault("base", {})["path"] = str(base_dir)
            meta_path.write_text(json.dumps(meta, indent=1))
    doc = read_trace(target) or doc
    doc["run_dir"] = str(target)
    doc["final"] = new_final
    doc["checkpoints"] = (
        [{"step": new_final.get("step"), "path": new_final["path"], "kind": new_final.get("kind")}] if new_final else []
    )
    doc["imported"] = {
        "from": manifest.get("from_run_dir"),
        "exported_at": manifest.get("exported_at"),
        "imported_at": now_iso(),
        "host": socket.gethostname(),
    }
    write_trace(target, doc)
    index.add_root(target.parent)
    index.upsert(doc, target)
    return Trace(doc, target)


def _check_bundle(src: Path, manifest: dict[str, Any], doc: dict[str, Any]) -> None:
    """Refuse a bundle whose fields would place files outside the import's target folder."""
    if not is_safe_id(doc.get("trace_id")):
        raise PrimenbError(f"{src}: trace_id {str(doc.get('trace_id'))[:80]!r} is not a trace id; not imported")
    final = manifest.get("final")
    if final is not None and not isinstance(final, dict):
        raise PrimenbError(f"{src}/{MANIFEST}: `final` must be an object; not imported")
    step = (final or {}).get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise PrimenbError(
            f"{src}/{MANIFEST}: final.step {str(step)[:80]!r} is not a step number (a bundle cannot "
            "choose where its files go); not imported"
        )
    links = symlinks_under(src)
    if links:
        raise PrimenbError(
            f"{src} holds symbolic links ({', '.join(str(p.relative_to(src)) for p in links[:3])}); "
            "an exported trace never does, so it was not imported"
        )


def rm(ref: Any, *, files: bool = False) -> str:
    """Remove a trace from the harness: its trace.json (the run directory stays, so a reindex
    does not bring it back), or with ``files=True`` the whole run directory."""
    from primenb.protocol.index import Index

    trace = get(ref)
    if is_live_state(trace.status):
        raise PrimenbError(
            f"trace {trace.id} ({trace.name}) is still {trace.status}; stop it first (%prime_train --stop {trace.name})"
        )
    if files:
        shutil.rmtree(trace.run_dir)
        what = f"removed trace {trace.id} and its run directory {trace.run_dir}"
    else:
        (trace.run_dir / TRACE_FILE).unlink(missing_ok=True)
        what = f"removed trace {trace.id} ({trace.name}); its run directory {trace.run_dir} is kept"
    Index().remove(trace.id)
    return what


__all__ = ["export", "import_", "rm"]
