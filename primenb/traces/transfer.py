"""`export` a trace as a self-contained folder, `import_` it on another machine, `rm` a trace."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import time
from pathlib import Path
from typing import Any

from primenb.errors import PrimenbError
from primenb.protocol.checkpoint import CheckpointDir
from primenb.protocol.documents import MANIFEST_VERSION, ManifestDoc, is_live_state, parse
from primenb.protocol.reader import open_regular, read_json_object
from primenb.protocol.record import TRACE_FILE, read_trace, write_trace
from primenb.protocol.rundir import FINAL_STATES, RunDir, atomic_write_json, now_iso
from primenb.protocol.safepath import contained, is_safe_id, safe_name, symlinks_under
from primenb.traces.trace import Trace, get

MANIFEST = "primenb_export.json"
_COPY = RunDir.BUNDLED


def special_files(root: Path) -> list[Path]:
    """Everything under ``root`` that is neither a regular file nor a folder (symbolic links,
    FIFOs, devices, sockets): a bundle never holds one, and copying one could hang (a FIFO),
    never end (``/dev/zero``) or leave the folder (a link)."""
    found: list[Path] = []
    if not root.is_dir() or root.is_symlink():
        return [root] if os.path.lexists(root) and not root.is_file() and not root.is_dir() else []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in (*dirnames, *filenames):
            path = Path(dirpath) / name
            try:
                mode = path.lstat().st_mode
            except OSError:
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                found.append(path)
    return found


def _copy_file(src: Path, dst: Path) -> None:
    fd = open_regular(src)
    if fd is None:
        raise PrimenbError(f"{src} is not a regular file (a link, FIFO or device); it was not copied")
    with os.fdopen(fd, "rb") as fin, open(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)


def _copy(src: Path, dst: Path) -> None:
    """Copy contents only: a bundle is for sharing, so its files get the usual (umask) mode, not
    the mode they had in the run directory (a 0600 file there would stay private in the bundle).
    Regular files and folders only (`special_files` are refused before copying)."""
    if src.is_symlink():
        raise PrimenbError(f"{src} is a symbolic link; it was not copied")
    if src.is_dir():
        dst.mkdir(parents=True, exist_ok=True)
        for entry in sorted(os.scandir(src), key=lambda e: e.name):
            _copy(Path(entry.path), dst / entry.name)
    elif os.path.lexists(src):
        dst.parent.mkdir(parents=True, exist_ok=True)
        _copy_file(src, dst)


def _refuse_special(root: Path, names: Any, what: str) -> None:
    bad = [p for name in names for p in special_files(root / name)]
    if bad:
        raise PrimenbError(
            f"{what} holds files that are not regular files or folders "
            f"({', '.join(str(p.relative_to(root)) for p in bad[:3])}: links, FIFOs or devices); "
            "a run's files never are, so nothing was copied"
        )


def _inside(path: Path, root: Path) -> bool:
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))
    except (OSError, ValueError):
        return False


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
    ckpt = trace.final_checkpoint
    if ckpt is not None and not _inside(ckpt, trace.run_dir):  # a copied status/trace cannot ship any folder
        ckpt = None
    _refuse_special(trace.run_dir, [*_COPY, *([ckpt.relative_to(trace.run_dir)] if ckpt else [])], str(trace.run_dir))
    dest.mkdir(parents=True, exist_ok=True)
    for name in _COPY:
        _copy(trace.run_dir / name, dest / name)
    _redact_copied_trace(dest)
    manifest: dict[str, Any] = {
        "version": MANIFEST_VERSION,
        "trace_id": trace.id,
        "name": trace.name,
        "exported_at": now_iso(),
        "from_run_dir": str(trace.run_dir),
        "final": None,
        "base": None,
    }
    if ckpt is not None and ckpt.is_dir():
        _copy(ckpt, dest / "final")
        manifest["final"] = {"dir": "final", **(trace.get("final") or {})}
        final = CheckpointDir(dest / "final")
        base_path = final.base().get("path")
        if (
            final.is_adapter()
            and isinstance(base_path, str)
            and _inside(Path(base_path), trace.run_dir)  # the run's own warm-up, never any folder
            and Path(base_path).is_dir()
            and not special_files(Path(base_path))
        ):
            _copy(Path(base_path), dest / "base")
            manifest["base"] = {"dir": "base", "original": base_path}
    atomic_write_json(dest / MANIFEST, manifest)
    return dest


def _redact_copied_trace(dest: Path) -> None:
    """A bundle's trace.json with its third-party parts redacted (a trace recorded before the rule
    covered them still held a tracker URI's password)."""
    from primenb.protocol.record import redact_recorded

    path = dest / TRACE_FILE
    if path.is_file():
        try:
            doc = read_json_object(path)
        except (OSError, ValueError, PrimenbError):
            return
        atomic_write_json(path, redact_recorded(doc))


def _read(path: Path) -> dict[str, Any]:
    return read_json_object(path)


def import_(path: str | os.PathLike[str], dest: str | os.PathLike[str] | None = None) -> Trace:
    """Bring an exported trace back as a run directory (default ``outputs/<name>``) with the same
    trace id, its checkpoint paths pointing at the new place, and index it."""
    from primenb.protocol.index import Index

    src = Path(path).expanduser().resolve()
    manifest = _read(src / MANIFEST)
    doc = read_trace(src)
    if not manifest or doc is None:
        raise PrimenbError(
            f"{src} is not an exported trace (no readable {MANIFEST} / {TRACE_FILE}); "
            "make one with %prime_harness export TRACE PATH"
        )
    _check_bundle(src, manifest, doc)
    manifest = parse(ManifestDoc, manifest) or {}  # typed: a wrong-typed field is unknown
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
    created = not target.exists()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PrimenbError(f"cannot create {target}: {exc.strerror or exc}") from None
    try:
        new_final = _copy_bundle(src, target, manifest)
    except OSError as exc:  # a full disk, a read-only folder: nothing half-imported is left
        if created:
            shutil.rmtree(target, ignore_errors=True)
        raise PrimenbError(
            f"could not import {src} into {target}: {exc.strerror or exc}; nothing was imported "
            "(free some space or pass another destination)"
        ) from None
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
    try:
        write_trace(target, doc)
    except OSError as exc:
        if created:
            shutil.rmtree(target, ignore_errors=True)
        raise PrimenbError(
            f"could not import {src} into {target}: {exc.strerror or exc}; nothing was imported"
        ) from None
    index.add_root(target.parent)
    index.upsert(doc, target)
    return Trace(doc, target)


def _copy_bundle(src: Path, target: Path, manifest: dict[str, Any]) -> dict[str, Any] | None:
    """Copy a checked bundle's files into ``target``; the new final checkpoint entry."""
    files = RunDir(target)
    for name_ in _COPY:
        _copy(src / name_, target / name_)
    final = manifest.get("final") or {}
    if not (final and (src / "final").is_dir()):
        return None
    step = final.get("step")
    ckpt = contained(
        target, files.checkpoint_dir(step if step is not None else "final").relative_to(target), "checkpoint"
    )
    _copy(src / "final", ckpt)
    new_final = {**{k: v for k, v in final.items() if k not in ("dir", "path")}, "path": str(ckpt)}
    if manifest.get("base") and (src / "base").is_dir():
        base_dir = files.checkpoint_dir("base")
        _copy(src / "base", base_dir)
        copied = CheckpointDir(ckpt)
        copied.write_meta({**copied.read_meta(), "base": {**copied.base(), "path": str(base_dir)}})
    return new_final


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
    bad = special_files(src)
    if bad:
        raise PrimenbError(
            f"{src} holds files that are not regular files or folders "
            f"({', '.join(str(p.relative_to(src)) for p in bad[:3])}: FIFOs, devices or sockets); "
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
        RunDir(trace.run_dir).trace_path.unlink(missing_ok=True)
        what = f"removed trace {trace.id} ({trace.name}); its run directory {trace.run_dir} is kept"
    Index().remove(trace.id)
    return what


__all__ = ["export", "import_", "rm"]
