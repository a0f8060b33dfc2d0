"""The harness index: one SQLite table over every run directory's ``trace.json``.

It is only an index. The files are the truth: `reindex` rebuilds it from run directories, a
missing index is rebuilt by whoever opens it first, and a corrupt one is moved aside and rebuilt.
Writers (engines of concurrent runs, notebooks) use WAL mode, a busy timeout and short
``BEGIN IMMEDIATE`` transactions; every upsert is guarded by the trace's ``revision`` so an older
write never replaces a newer one. No index problem is ever fatal to a run.

Where run directories are found: ``roots.txt`` (the folders that hold run directories, recorded
by every engine at start), the launcher's ``runs.txt``, the index's own rows, and paths given to
`reindex`.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import secrets
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from primenb.protocol.documents import FINALS, INDEX_COLUMNS, INDEX_VERSION, is_live_state
from primenb.protocol.fields import Mode, detect_mode, get_field, get_path
from primenb.protocol.reader import is_regular
from primenb.protocol.record import TRACE_FILE, read_trace, read_trace_checked
from primenb.protocol.rundir import RunDir

log = logging.getLogger("primenb.harness")

SCHEMA_VERSION = INDEX_VERSION
INDEX_FILE = "index.sqlite"
ROOTS_FILE = "roots.txt"

# (column, SQL type), declared once by the typed index row (`primenb.protocol.documents.IndexRow`)
COLUMNS: tuple[tuple[str, str], ...] = INDEX_COLUMNS
NAMES = tuple(c for c, _ in COLUMNS)


def harness_home() -> Path:
    from primenb.home import prime_home

    folder = prime_home() / "harness"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# ---------------------------------------------------------------------------------------------
# trace.json -> index row


_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # SQLite INTEGER; a bigger one (seed = 2**64) is not indexed


def _num(value: Any) -> float | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except OverflowError:  # an int beyond a float's range
        return None
    return out if math.isfinite(out) else None


def _int(value: Any) -> int | None:
    if isinstance(value, float) and math.isfinite(value):
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return value if _INT_MIN <= value <= _INT_MAX else None


def _text(value: Any) -> str | None:
    """A TEXT column: strings as they are, numbers as text, anything else (a table) not indexed."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def config_fields(config: dict[str, Any], mode: str | None) -> dict[str, Any]:
    """lr, batch, group size, env ids, model id and seed from a resolved config."""
    m: Mode = "rl" if mode == "rl" else "sft" if mode == "sft" else detect_mode(config)
    if m == "rl":
        sources = get_path(config, "orchestrator.train.source") or []
        envs = (
            [get_path(s, "env.taskset.id") for s in sources if isinstance(s, dict)] if isinstance(sources, list) else []
        )
    else:
        envs = [get_path(config, "data.name")]
    return {
        "lr": _num(get_field(config, "lr", m)),
        "batch": _int(get_field(config, "batch_size", m)),
        "group_size": _int(get_field(config, "group_size", m)),
        "env": ",".join(dict.fromkeys(str(e) for e in envs if e)) or None,
        "model": _text(get_field(config, "model", m)),
        "seed": _int(get_field(config, "seed", m)),
    }


def tracker_text(where: Any) -> str | None:
    """``wandb: URL; mlflow: RUN_ID``: where each tracker run of a trace lives, in one cell, and
    the warning of a tracker that failed (``mlflow: could not start (...)``)."""
    if not isinstance(where, dict):
        return None
    parts = []
    for kind, loc in where.items():
        loc = loc if isinstance(loc, dict) else {}
        spot = next((loc[k] for k in ("url", "run_id", "folder") if isinstance(loc.get(k), str) and loc[k]), "")
        warning = loc.get("warning")
        if isinstance(warning, str) and warning:  # a tracker that failed: why, as the monitor said it
            warning = warning.removeprefix(f"tracker {kind}: ")
            spot = f"{spot} ({warning})" if spot else warning
        parts.append(f"{kind}: {spot}" if spot else str(kind))
    return _text("; ".join(parts)) if parts else None


def index_row(doc: dict[str, Any], run_dir: str | os.PathLike[str], *, resolved: bool = False) -> dict[str, Any]:
    """The index row of a trace; ``resolved``: ``run_dir`` is already absolute and real."""
    from primenb.protocol.record import iso_to_epoch

    trace_id = doc.get("trace_id")
    if not isinstance(trace_id, str) or not trace_id:
        raise ValueError(f"trace_id is {type(trace_id).__name__}, not text")
    config = _dict(doc.get("config"))
    fields = config_fields(config, _text(doc.get("mode")))
    metrics = _dict(doc.get("metrics"))
    best, final = _dict(metrics.get("best_eval")), _dict(metrics.get("final_eval"))
    train_sources = get_path(doc, "data.train.sources")
    train_sources = train_sources if isinstance(train_sources, list) else []
    env = ",".join(dict.fromkeys(str(s.get("env_id")) for s in train_sources if isinstance(s, dict)))
    created = _num(doc.get("created")) or iso_to_epoch(_text(doc.get("created_at"))) or 0.0
    if not 0.0 <= created < 10**10:  # before 1970 or after 2286: no date a table can show
        created = 0.0
    match = get_path(doc, "reproduction.metrics_match")
    return {
        "trace": trace_id,
        "parent": _text(doc.get("parent")),
        "name": _text(doc.get("name")),
        "created": float(created),
        "status": _text(doc.get("status")),
        "mode": _text(doc.get("mode")),
        "model": _text(get_path(doc, "model.id")) or fields["model"],
        "env": env or fields["env"],
        "steps": _int(get_path(doc, "steps.last")),
        "max_steps": _int(get_path(doc, "steps.max")),
        "lr": fields["lr"],
        "batch": fields["batch"],
        "group_size": fields["group_size"],
        "lora_rank": _int(get_path(doc, "adapter.rank")),
        "best_eval": _num(best.get("value")),
        "best_eval_step": _int(best.get("step")),
        "final_eval": _num(final.get("value")),
        **{name: _num(metrics.get(name)) for name in FINALS},
        "duration": _num(doc.get("duration_s")),
        "backend": _text(doc.get("backend")),
        "trackers": tracker_text(doc.get("trackers")),
        "host": _text(doc.get("host")),
        "reproduces": _text(doc.get("reproduces")),
        "metrics_match": None if match is None else int(bool(match)),
        "fingerprint": _text(get_path(doc, "model.fingerprint")),
        "data_hash": _text(get_path(doc, "data.train.hash")),
        "seed": fields["seed"],
        "run_dir": str(run_dir) if resolved else str(Path(run_dir).resolve()),
        "revision": _int(doc.get("revision")) or 0,
    }


# ---------------------------------------------------------------------------------------------
# the index


_UPSERT = (
    f"INSERT INTO traces ({', '.join(NAMES)}) VALUES ({', '.join('?' for _ in NAMES)}) "
    f"ON CONFLICT(trace) DO UPDATE SET "
    + ", ".join(f"{c}=excluded.{c}" for c in NAMES if c != "trace")
    + " WHERE excluded.revision >= traces.revision"
)


def _back_off(attempt: int) -> None:
    """Wait before retry ``attempt`` on a locked index: 50 ms doubling, at most 2 s (20 tries: ~30 s)."""
    time.sleep(min(2.0, 0.05 * 2**attempt))


def _is_lock_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


class Index:
    """The SQLite index under ``PRIME_HOME/harness/``. Cheap to create: connects on demand."""

    def __init__(self, folder: str | os.PathLike[str] | None = None, *, busy_timeout_s: float = 30.0) -> None:
        self.folder = Path(folder) if folder is not None else harness_home()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / INDEX_FILE
        self.busy_timeout_s = busy_timeout_s
        self.rebuilt: str | None = None  # why the index was rebuilt by this object, if it was

    # -- connections ------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
        con.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        mode = con.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode and str(mode[0]).lower() != "wal":  # pragma: no cover - e.g. a filesystem without shm
            log.debug("harness index journal mode: %s", mode[0])
        con.execute("PRAGMA synchronous = NORMAL")
        return con

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """A file lock for rebuilds (SQLite's own locking covers ordinary writes)."""
        with open(self.folder / "index.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _writing(self, *, exclusive: bool = False) -> Iterator[None]:
        """Ordinary writes hold this lock shared (for the few milliseconds of one upsert); a
        rebuild holds it exclusively while it merges the writes made during its scan into the new
        file and swaps it in, so no write lands in a file that is being replaced."""
        with open(self.folder / "index.write.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    @staticmethod
    def _healthy(con: sqlite3.Connection) -> bool:
        """The current layout: right version AND every column (a hand-edited index may lack some)."""
        if con.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            return False
        cols = tuple(r[1] for r in con.execute("PRAGMA table_info(traces)"))
        return cols == NAMES

    def connect(self, *, fill: bool = True) -> sqlite3.Connection:
        """An open, valid index: rebuilt from the run directories when missing or of another
        layout, moved aside and rebuilt when corrupt. A rebuild is written into a fresh file and
        swapped in whole, so no reader ever sees a half-filled index (``fill`` is accepted for
        old callers; an index is never left empty to be filled later)."""
        for attempt in range(4):
            try:
                con = self._connect()
                try:
                    if self._healthy(con):
                        con.execute("SELECT count(*) FROM traces").fetchone()
                        return con
                except BaseException:
                    con.close()
                    raise
                con.close()
                with self._lock():
                    if not self._healthy_file():  # another process may have rebuilt it meanwhile
                        self.rebuilt = self.rebuilt or "the index was missing or of another layout"
                        self._rebuild_locked(())
            except sqlite3.DatabaseError as exc:
                if _is_lock_error(exc) and attempt < 3:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                if _is_lock_error(exc):
                    raise
                self._recover(str(exc))
        return self._connect()  # pragma: no cover - repeated recoveries in a row

    def _healthy_file(self) -> bool:
        if not self.path.exists():
            return False
        try:
            con = self._connect()
            try:
                ok = self._healthy(con)
                if ok:
                    con.execute("SELECT count(*) FROM traces").fetchone()
                return ok
            finally:
                con.close()
        except sqlite3.DatabaseError:
            return False

    def _recover(self, reason: str) -> None:
        """Move a corrupt index aside (kept for inspection) so the next open rebuilds it."""
        with self._lock():
            if self._healthy_file():  # another process rebuilt it meanwhile
                return
            stamp = time.strftime("%Y%m%d-%H%M%S")
            for suffix in ("", "-wal", "-shm"):
                src = Path(str(self.path) + suffix)
                if src.exists():
                    os.replace(src, src.with_name(f"{src.name}.corrupt-{stamp}"))
            log.warning(
                "harness index %s was unreadable (%s): rebuilding it from the run directories", self.path, reason
            )
            self.rebuilt = f"the index was corrupt ({reason})"

    # -- rebuilding: a fresh file, filled, then swapped in ------------------------------------
    def _rebuild_locked(self, extra: Sequence[Path]) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
        """Scan the run directories into a new index file and atomically replace the index with it.
        An interrupted rebuild (Ctrl-C, a crash) leaves the old index as it was. Call under `_lock`."""
        skipped: list[tuple[str, str]] = []
        rows = list(self._scan(self.candidate_dirs(extra), skipped))
        tmp = self.folder / f".{INDEX_FILE}.build-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            con = sqlite3.connect(tmp, isolation_level=None)
            try:
                # WAL from birth: switching a swapped-in file to WAL needs an exclusive lock that
                # concurrent writers' first connections race for ("database is locked")
                con.execute("PRAGMA journal_mode = WAL")
                con.execute("BEGIN")
                cols = ", ".join(f"{c} {t}" for c, t in COLUMNS)
                con.execute(f"CREATE TABLE traces ({cols})")
                con.execute("CREATE INDEX traces_created ON traces(created DESC)")
                con.execute("CREATE INDEX traces_name ON traces(name)")
                con.execute("CREATE INDEX traces_parent ON traces(parent)")
                con.execute("CREATE INDEX traces_run_dir ON traces(run_dir)")
                con.executemany(_UPSERT, [tuple(r.get(c) for c in NAMES) for r in rows])
                con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                con.execute("COMMIT")
            finally:
                con.close()
            with self._writing(exclusive=True):
                self._merge_newer(tmp)
                self._swap(tmp)
        finally:
            tmp.unlink(missing_ok=True)
        for where, why in skipped:
            log.warning("harness index: skipped %s (%s)", where, why)
        return rows, skipped

    def _merge_newer(self, new: Path) -> None:
        """Carry into the ``new`` file the writes the current index received while the rebuild
        scanned: rows of a newer revision, and rows of traces the scan did not see yet (a run
        launched meanwhile) whose run directory still holds them. Call under `_writing`."""
        if not self.path.exists():
            return
        try:
            con = sqlite3.connect(new, isolation_level=None, timeout=self.busy_timeout_s)
        except sqlite3.Error:
            return
        try:
            con.execute("ATTACH DATABASE ? AS old", (str(self.path),))
            cols = tuple(r[1] for r in con.execute("PRAGMA old.table_info(traces)"))
            if cols != NAMES:
                return  # another layout: nothing to carry over
            newer = con.execute(
                f"SELECT {', '.join('o.' + c for c in NAMES)}, t.trace IS NULL FROM old.traces o "
                "LEFT JOIN main.traces t ON t.trace = o.trace WHERE t.trace IS NULL OR o.revision > t.revision"
            ).fetchall()
            keep = [r[:-1] for r in newer if not r[-1] or not _stale(r[0], r[NAMES.index("run_dir")])]
            if keep:
                con.execute("BEGIN")
                con.executemany(_UPSERT, keep)
                con.execute("COMMIT")
        except sqlite3.Error as exc:
            log.debug("harness index: could not carry recent writes into the rebuilt index (%s)", exc)
        finally:
            con.close()

    def _swap(self, new: Path) -> None:
        """Replace the index file with ``new``. The old WAL is checkpointed and emptied first and
        removed after, so it is never replayed onto the new file."""
        if self.path.exists():
            with contextlib.suppress(sqlite3.Error):
                old = sqlite3.connect(self.path, timeout=5)
                try:
                    old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    old.close()
        os.replace(new, self.path)
        for suffix in ("-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)

    # -- writing ----------------------------------------------------------------------------
    def _write(self, con: sqlite3.Connection, rows: Sequence[dict[str, Any]], *, prune: bool) -> None:
        """Upsert ``rows`` in one transaction. A run directory holds one trace: rows of the same
        folder with another id are dropped. ``prune``: also drop rows whose trace file is gone."""
        values = [tuple(r.get(c) for c in NAMES) for r in rows]
        for attempt in range(20):
            try:
                con.execute("BEGIN IMMEDIATE")
                try:
                    con.executemany(_UPSERT, values)
                    if prune:
                        keep = {r["trace"] for r in rows}
                        gone = [
                            (tid,)
                            for tid, run_dir in con.execute("SELECT trace, run_dir FROM traces")
                            if tid not in keep and _stale(tid, run_dir)
                        ]
                        con.executemany("DELETE FROM traces WHERE trace = ?", gone)
                    elif len(rows) < 50:
                        con.executemany(
                            "DELETE FROM traces WHERE run_dir = ? AND trace != ?",
                            [(r["run_dir"], r["trace"]) for r in rows],
                        )
                    con.execute("COMMIT")
                    return
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        con.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:
                if not _is_lock_error(exc) or attempt == 19:
                    raise
                _back_off(attempt)

    def upsert(self, doc: dict[str, Any], run_dir: str | os.PathLike[str]) -> None:
        """Add or refresh one trace (ignored when the index holds a newer revision)."""
        self.upsert_many([index_row(doc, run_dir)])

    def _with_writer(self, fn: Any) -> None:
        """Run ``fn(con)`` on the current index file under the shared write lock (a rebuild in
        progress waits for it, or it waits for the rebuild's swap); a missing or broken index is
        rebuilt first, outside the lock."""
        for _ in range(4):
            with self._writing():
                con = self._open_current()
                if con is not None:
                    try:
                        fn(con)
                        return
                    except sqlite3.DatabaseError as exc:
                        if _is_lock_error(exc):
                            raise
                    finally:
                        con.close()
            self.connect().close()  # rebuilds or recovers it
        raise sqlite3.OperationalError(f"the harness index {self.path} could not be opened")  # pragma: no cover

    def _open_current(self) -> sqlite3.Connection | None:
        """The index file opened, or None when it is missing, broken or of another layout. A lock
        met while opening is waited out: SQLite's busy handler does not cover every lock taken
        there (a journal-mode change, a WAL recovery)."""
        for attempt in range(20):
            try:
                con = self._connect()
                try:
                    if self._healthy(con):
                        return con
                except BaseException:
                    con.close()
                    raise
                con.close()
                return None
            except sqlite3.DatabaseError as exc:
                if not _is_lock_error(exc):
                    return None
                if attempt == 19:
                    raise
                _back_off(attempt)
        return None  # pragma: no cover - the loop returns or raises

    def upsert_many(self, rows: Sequence[dict[str, Any]]) -> None:
        self._with_writer(lambda con: self._write(con, rows, prune=False))

    def remove(self, trace_id: str) -> None:
        def delete(con: sqlite3.Connection) -> None:
            for attempt in range(20):
                try:
                    con.execute("DELETE FROM traces WHERE trace = ?", (trace_id,))
                    return
                except sqlite3.OperationalError as exc:
                    if not _is_lock_error(exc) or attempt == 19:
                        raise
                    time.sleep(0.1)

        self._with_writer(delete)

    # -- reading ----------------------------------------------------------------------------
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        con = self.connect()
        try:
            con.execute("PRAGMA query_only = ON")
            return con.execute(sql, params).fetchall()
        finally:
            con.close()

    def count(self) -> int:
        return int(self.query("SELECT count(*) FROM traces")[0][0])

    # -- finding run directories ------------------------------------------------------------
    def add_root(self, folder: str | os.PathLike[str]) -> None:
        """Remember a folder that holds run directories (`reindex` scans it)."""
        folder = str(Path(folder).resolve())
        path = self.folder / ROOTS_FILE
        with open(path, "a+", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                fh.seek(0)
                if folder not in fh.read().splitlines():
                    fh.write(folder + "\n")
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _prune_roots(self) -> None:
        """Forget root folders that no longer exist (temporary folders of finished tests...)."""
        path = self.folder / ROOTS_FILE
        if not path.exists():
            return
        with open(path, "r+", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                lines = [ln for ln in dict.fromkeys(fh.read().splitlines()) if ln.strip()]
                keep = [ln for ln in lines if Path(ln).is_dir()]
                if len(keep) != len(lines):
                    fh.seek(0)
                    fh.truncate()
                    fh.write("".join(f"{ln}\n" for ln in keep))
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def roots(self) -> list[Path]:
        try:
            lines = (self.folder / ROOTS_FILE).read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        return [Path(line) for line in dict.fromkeys(lines) if line.strip()]

    def candidate_dirs(self, extra: Iterable[str | os.PathLike[str]] = ()) -> list[Path]:
        """Run directories and folders of run directories to scan."""
        from primenb.protocol.rundir import RUN_INDEX

        out: list[Path] = [Path(p) for p in extra]
        out += self.roots()
        try:
            runs = (self.folder.parent / RUN_INDEX).read_text(encoding="utf-8").splitlines()
            out += [Path(line) for line in runs if line.strip()]
        except OSError:
            pass
        if self.path.exists():
            with contextlib.suppress(sqlite3.Error):
                con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5)
                try:
                    out += [Path(r[0]) for r in con.execute("SELECT run_dir FROM traces")]
                finally:
                    con.close()
        return list(dict.fromkeys(out))

    @staticmethod
    def _scan(candidates: Iterable[Path], skipped: list[tuple[str, str]] | None = None) -> Iterator[dict[str, Any]]:
        """Index rows of every trace under ``candidates`` (a run directory, or a folder whose
        children are run directories); a trace left unfinished by a dead engine is completed.
        A trace.json that cannot be read or indexed is skipped and listed in ``skipped``."""
        from primenb.protocol.record import reconcile

        seen: set[str] = set()
        for cand in candidates:
            if is_regular(RunDir(cand).trace_path):
                dirs: Iterable[str] = [os.path.realpath(cand)]
            else:
                try:  # children of a real folder, symlinks skipped: their paths are real already
                    dirs = [e.path for e in os.scandir(os.path.realpath(cand)) if e.is_dir(follow_symlinks=False)]
                except OSError:
                    continue
            for real in dirs:
                if real in seen:
                    continue
                seen.add(real)
                doc, why = read_trace_checked(real)
                if doc is None:
                    if skipped is not None and why != "missing":
                        skipped.append((real, f"{TRACE_FILE} is not a readable trace ({why})"))
                    continue
                try:
                    if is_live_state(doc.get("status")):
                        reconcile(doc, Path(real))
                    row = index_row(doc, real, resolved=True)
                except Exception as exc:  # one odd trace never empties the index
                    if skipped is not None:
                        skipped.append((real, f"{type(exc).__name__}: {str(exc)[:200]}"))
                    continue
                yield row

    def reindex(self, paths: Iterable[str | os.PathLike[str]] = ()) -> dict[str, Any]:
        """Rebuild the index from the run directories (into a fresh file, swapped in whole).
        Returns what was found, with the traces that were skipped and why."""
        t0 = time.perf_counter()
        extra = [Path(p).expanduser().resolve() for p in paths]
        for p in extra:
            if p.is_dir() and not RunDir(p).trace_path.exists():
                self.add_root(p)
            elif RunDir(p).trace_path.exists():
                self.add_root(p.parent)
        with self._lock():
            rows, skipped = self._rebuild_locked(extra)
            self._prune_roots()
        return {
            "traces": len(rows),
            "indexed": len(rows),
            "skipped": skipped,
            "seconds": time.perf_counter() - t0,
            "index": str(self.path),
        }


def _stale(trace_id: str, run_dir: str) -> bool:
    """An index row whose run directory no longer holds that trace."""
    doc = read_trace(run_dir)
    return doc is None or doc.get("trace_id") != trace_id


def status_in(states: Iterable[str]) -> tuple[str, list[str]]:
    """``status IN (?, ...)`` and its parameters: the one way a query names states (`State`
    members, or the words a person typed, bound as parameters and never spliced into the SQL)."""
    values = [str(s) for s in states]
    return f"status IN ({', '.join('?' for _ in values) or 'NULL'})", values


def index_trace(doc: dict[str, Any], run_dir: str | os.PathLike[str]) -> bool:
    """Best effort: add a trace to the index and its folder to the roots; never raises."""
    try:
        index = Index()
        index.add_root(Path(run_dir).resolve().parent)
        index.upsert(doc, run_dir)
        return True
    except Exception as exc:  # an index problem must never fail a run
        log.warning(
            "could not update the harness index (%s: %s); `primenb harness reindex` "
            "rebuilds it from the run directories",
            type(exc).__name__,
            exc,
        )
        return False


__all__ = ["COLUMNS", "NAMES", "Index", "config_fields", "harness_home", "index_row", "index_trace", "status_in"]
