"""Start, list, change and stop servers from a kernel or the CLI. A server is its own process
(`primenb.serve.worker`): a kernel restart does not stop it, and the registry finds it again."""

from __future__ import annotations

import html
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from primenb.commands import ServeStartArgs
from primenb.engine.serve_errors import ServeError
from primenb.errors import PrimenbError
from primenb.protocol import openai_api as api
from primenb.protocol.checkpoint import CheckpointDir
from primenb.protocol.fields import DEFAULT_MODEL
from primenb.protocol.rundir import RunDir
from primenb.protocol.stage import FINAL, SFT_WARMUP, Stage
from primenb.protocol.weights import ADAPTER, FULL, Weights, from_finetune
from primenb.serve import registry, remote

START_TIMEOUT_S = 300.0


# -- what to serve --------------------------------------------------------------------------------


MAX_ID = 200  # characters of a served id we make (the server takes up to 256)
# how a trace's model is named: <base>-<infix>-<trace name>
ID_INFIX = {ADAPTER: "adapter", FULL: "ft", RunDir.WARMUP_CHECKPOINT: "warmup"}


def _safe(text: str) -> str:
    """A trace name as it appears in a model id: hostile characters become ``-``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "trace"


def _safe_model(name: str) -> str:
    """A base model name as an id: a hub name stays, a local path loses its leading ``/``."""
    return re.sub(r"[^A-Za-z0-9._/:+@-]+", "-", name).lstrip("/.:+@-")[:MAX_ID] or "model"


def finetune_kind(trace: Any, checkpoint: Path | None = None) -> Weights:
    """``adapter`` (LoRA) or ``full`` (weights of its own): what the checkpoint holds when it is
    here, else what the run recorded."""
    if checkpoint is not None and checkpoint.is_dir():
        return ADAPTER if CheckpointDir(checkpoint).is_adapter() else FULL
    recorded = from_finetune(trace.get("finetune"))
    if recorded is not None:
        return recorded
    return ADAPTER if trace.get("adapter") else FULL


def warmup_of(trace: Any) -> Path | None:
    """The full checkpoint an RL run's SFT warm-up left here (what its adapter was trained on)."""
    path = RunDir(trace.run_dir).warmup_checkpoint
    return path if path.is_dir() else None


def model_specs(
    traces: list[Any],
    base: str | None = None,
    taken: set[str] | None = None,
    host: Any | None = None,
    *,
    parents: bool = False,
) -> list[dict[str, Any]]:
    """One spec per model to serve: the base(s) the traces were trained on, then each trace's
    checkpoint under ``<base>-adapter-<trace name>`` (LoRA) or ``<base>-ft-<trace name>`` (full); a
    clash gets the short trace id appended. A model trained on an SFT warm-up has that warm-up as
    its parent, served as ``<base>-warmup-<trace name>`` (free for an adapter: its weights are the
    warm-up's; a full fine-tune's warm-up is served when ``parents``). With a ``host``
    (`remote.one_host`), checkpoints are paths on that host."""
    from primenb.harness.inference import describe, trained
    from primenb.traces.trace import get
    from primenb.traces.trust import prompt_format

    taken = set(taken or ())
    specs: list[dict[str, Any]] = []
    bases: dict[str, int] = {}

    def claim(sid: str, trace: Any) -> str | None:
        sid = sid[:MAX_ID]
        if sid in taken:
            sid = f"{sid[: MAX_ID - 9]}-{trace.id[:8]}"
        if sid in taken:
            return None  # this very trace is already served
        taken.add(sid)
        return sid

    for ref in traces:
        trace = get(ref)
        try:
            info = trained(trace) if host is None else describe(trace, Path(remote.checkpoint_on(host, trace)))
        except PrimenbError as exc:  # TraceFieldError: a wrong-typed field; a checkpoint that is gone
            if len(traces) == 1:
                raise
            # plain `serve` (every completed trace): one trace's problem is that trace's, named
            warnings.warn(f"{exc}; not served", stacklevel=2)
            continue
        model_name = info.model_id
        kind = finetune_kind(trace, None if host is not None else Path(info.checkpoint))
        common = {
            "kind": "checkpoint",
            "model_name": model_name,
            "seed": info.base_seed,
            # the road every trace's environment takes: an untrusted trace's format is plain data
            "text_template": prompt_format(trace, "serve"),
            "trace": trace.id,
            "trace_name": trace.name,
        }
        parent = model_name
        warm = warmup_of(trace) if host is None else None
        if warm is not None:
            parent_id = claim(f"{_safe_model(model_name)}-warmup-{_safe(trace.name)}", trace)
            if parent_id is not None and (parents or kind == ADAPTER):
                specs.append({**common, "id": parent_id, "checkpoint": str(warm), "stage": SFT_WARMUP})
            parent = parent_id or parent
        else:
            bases.setdefault(model_name, info.base_seed)
        sid = claim(f"{_safe_model(model_name)}-{ID_INFIX[kind]}-{_safe(trace.name)}", trace)
        if sid is None:
            continue
        specs.append({**common, "id": sid, "checkpoint": str(info.checkpoint), "parent": parent, "stage": FINAL})
    if base:
        bases = {base: bases.get(base, 0)}
    if not bases and not traces:
        bases = {DEFAULT_MODEL: 0}
    base_specs = [
        {"id": name, "kind": "base", "model_name": name, "seed": seed}
        for name, seed in bases.items()
        if name not in taken
    ]
    return base_specs + specs


def completed_traces() -> list[str]:
    """Every completed trace served on this machine with a checkpoint here (``%prime_serve`` with
    no TRACE); a trace served on the host that trained it (SSH) is served when named."""
    from primenb.protocol.documents import State
    from primenb.protocol.index import Index, status_in
    from primenb.traces.trace import get

    out = []
    cond, params = status_in([State.COMPLETED])
    for (trace_id,) in Index().query(f"SELECT trace FROM traces WHERE {cond} ORDER BY created", params):
        try:
            trace = get(trace_id)
            if remote.host_of(trace) is not None:
                continue
            ckpt = trace.final_checkpoint
        except PrimenbError:
            continue
        if ckpt is not None and ckpt.is_dir():
            out.append(trace_id)
    return out


# -- the handle -----------------------------------------------------------------------------------


class ServerStats(BaseModel):
    """The part of ``/admin/stats`` a client reads (the rest is shown as the server sent it)."""

    model_config = ConfigDict(extra="allow")
    uptime_s: float = Field(ge=0, allow_inf_nan=False)
    requests: StrictInt = Field(ge=0)


@dataclass
class Server:
    """A running server: ``url`` (``http://127.0.0.1:P/v1``), ``models``, ``pid``; ``remote``: where
    it runs when that is the host a trace trained on (``pid`` is then the local port forward's)."""

    url: str
    pid: int
    models: list[str]
    api_key_var: str | None = None
    remote: dict[str, Any] | None = None

    @property
    def where(self) -> str:
        return remote.describe({"remote": self.remote})

    def snippet(self) -> str:
        key = f'os.environ["{self.api_key_var}"]' if self.api_key_var else '"none"'
        # the model a run trained (its adapter or fine-tune), the newest first; a warm-up only when
        # nothing else was trained: a warm-up's id sorted first had named it instead of the adapter
        final = [m for m in self.models if any(f"-{ID_INFIX[k]}-" in m for k in (ADAPTER, FULL))]
        warm = [m for m in self.models if f"-{ID_INFIX[RunDir.WARMUP_CHECKPOINT]}-" in m]
        trained = final or warm
        model = trained[-1] if trained else (self.models[0] if self.models else "MODEL")
        return (
            f'client = openai.OpenAI(base_url="{self.url}", api_key={key})\n'
            f'client.chat.completions.create(model="{model}", messages=[{{"role": "user", "content": "hello"}}])'
        )

    def refresh(self) -> Server:
        """The models it serves now: asked of the server itself (the registry file follows it by
        polling, so it can lag an add or remove), else the registry's record."""
        try:
            self.models = [str(c["id"]) for c in _admin(self, "GET", api.MODELS, timeout=10.0)["data"]]
            return self
        except (ServeError, KeyError, TypeError):
            pass
        rec = registry.read(self.pid)
        if rec is not None:
            self.models = list(rec.get("models") or [])
        return self

    def stats(self) -> dict[str, Any]:
        """``/admin/stats``, parsed by a typed model (`ServerStats`): an answer of another shape
        (a forged record's port, an older server) is a `ServeError` saying so, never a KeyError."""
        from pydantic import ValidationError

        answer = _admin(self, "GET", api.ADMIN_STATS)
        try:
            typed = ServerStats.model_validate(answer)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "the answer"
            raise ServeError(
                f"{self.url} answered /admin/stats with {where}: {first['msg']}; not a primenb server's answer"
            ) from None
        return {**answer, **typed.model_dump(include={"uptime_s", "requests"})}

    def verified(self) -> bool:
        """Whether the process the record names is the server: a local record's worker is checked
        when the registry reads it; a remote record's forward here (`remote.forward_verified`)."""
        if self.remote is None:
            return registry.live_worker(self.pid)
        return remote.forward_verified({"url": self.url, "pid": self.pid, "remote": self.remote})

    def cards(self) -> list[dict[str, Any]]:
        """The model cards it serves now (``/v1/models``)."""
        data = _admin(self, "GET", api.MODELS, timeout=30.0).get("data")
        return [c for c in data or [] if isinstance(c, dict) and isinstance(c.get("id"), str)]

    def model_of(self, trace: Any, stage: Stage = FINAL) -> str | None:
        """The id it serves a trace's model under (``stage`` ``sft_warmup``: its warm-up's)."""
        for card in self.cards():
            info = card.get("primenb") or {}
            if info.get("trace") == trace.id and (info.get("stage") or FINAL) == stage:
                return str(card["id"])
        return None

    def add(self, trace: Any) -> list[str]:
        return add(trace, server=self)

    def remove(self, trace_or_id: Any) -> None:
        remove(trace_or_id, server=self)

    def stop(self, timeout: float = 30.0) -> None:
        if self.remote is not None:
            remote.stop({"pid": self.pid, "remote": self.remote}, timeout)
        else:
            _stop_pid(self.pid, timeout)

    def __repr__(self) -> str:
        self.refresh()
        on = f", on {self.where}" if self.remote else ""
        lines = [f"primenb server {self.url} (pid {self.pid}{on})", "models:"]
        lines += [f"  {m}" for m in self.models]
        return "\n".join([*lines, "", self.snippet()])

    def _repr_html_(self) -> str:
        self.refresh()
        models = "".join(f"<li><code>{html.escape(m)}</code></li>" for m in self.models)
        on = f", on {html.escape(self.where)}" if self.remote else ""
        return (
            f"<div><b>primenb server</b> <code>{html.escape(self.url)}</code> (pid {self.pid}{on})"
            f"<ul>{models}</ul><pre>import openai\n{html.escape(self.snippet())}</pre></div>"
        )


def _headers(server: Server) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(server.api_key_var) if server.api_key_var else None
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def _admin(server: Server, method: str, path: str, body: Any = None, timeout: float = 300.0) -> Any:
    root = server.url.rsplit(api.API_ROOT, 1)[0]
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(root + path, data=data, method=method, headers=_headers(server))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read())["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = str(exc)
        raise ServeError(f"{server.url}: {message}") from exc
    except OSError as exc:
        raise ServeError(f"{server.url} does not answer ({exc}); `%prime_serve list` shows running servers") from exc


# -- verbs ----------------------------------------------------------------------------------------


MAX_PORT = 65535


def check_limits(*, port: Any, max_batch: Any, max_queue: Any, stream_interval: Any) -> None:
    """The numbers a server starts with, each in its range: a clear error naming the option, never a
    traceback from the socket (``--port 70000``) nor a value replaced silently (``--max-batch 0``)."""

    def whole(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    if not whole(port) or not 0 <= port <= MAX_PORT:
        raise ServeError(f"--port {str(port)[:20]}: a port is a whole number from 1 to {MAX_PORT} (0: a free one)")
    for flag, value, low in (
        ("--max-batch", max_batch, 1),
        ("--max-queue", max_queue, 1),
        ("--stream-interval", stream_interval, 1),
    ):
        if not whole(value) or not low <= value <= 1_000_000:
            raise ServeError(f"{flag} {str(value)[:20]}: a whole number from {low} to 1000000")


# what a key looks like where a variable's name belongs: a run of hex (a W&B key is 40), or a long
# word of letters and digits with no `_` (variable names have words; keys do not)
_KEY_LIKE = re.compile(r"[0-9a-fA-F]{16,}|(?=[A-Za-z0-9]{20,}$)(?=(?:[^0-9]*[0-9]){4})[A-Za-z0-9]+")


def check_key_var(name: str | None) -> None:
    """``--api-key-var`` names a variable that holds the key, on any host: a missing or empty one
    would start a server with no key. What was given is never echoed (it may be the key itself,
    pasted where its name belongs)."""
    if name is None:
        return
    from primenb.protocol.hashing import has_credential

    # a token (hf_..., sk-...) is an identifier too: one that looks like a key, or is as long as one, is refused
    if not registry.KEY_VAR_RE.match(name) or len(name) > 64 or has_credential(name) or _KEY_LIKE.fullmatch(name):
        raise ServeError(
            "--api-key-var wants the NAME of an environment variable (letters, digits and '_', e.g. "
            "PRIMENB_API_KEY) whose value is the key; what was given is not a name and is not shown, "
            "in case it is the key itself. Put the key in a variable and pass its name."
        )
    if not os.environ.get(name, "").strip():  # spaces alone: no key a client could send as Bearer
        raise ServeError(
            f"--api-key-var {name}: that environment variable is not set or is empty (or only spaces), so the "
            f"server would have no key. Set it first (os.environ[{name!r}] = ... or %env {name}=...)."
        )


def start(
    traces: list[Any] | None = None,
    *,
    base: str | None = None,
    port: int = ServeStartArgs.port,
    host: str = ServeStartArgs.host,
    api_key_var: str | None = None,
    timeout: float = START_TIMEOUT_S,
    max_batch: int = ServeStartArgs.max_batch,
    max_queue: int = ServeStartArgs.max_queue,
    parents: bool = False,
    stream_interval: int = ServeStartArgs.stream_interval,
) -> Server:
    """Start a server for ``traces`` (default: every completed trace with a checkpoint here) and the
    base model(s) under them; return once it answers. Traces trained on an SSH host are served
    there, through a forwarded port here; traces of different hosts are refused. The defaults are
    ``%prime_serve start``'s (`primenb.commands.ServeStartArgs`), declared there once."""
    check_limits(port=port, max_batch=max_batch, max_queue=max_queue, stream_interval=stream_interval)
    if not registry.is_loopback(host) and not api_key_var:
        raise ServeError(
            f"--host {host} makes the server reachable from other machines: it needs an API key. "
            "Put one in an environment variable and pass its name with --api-key-var VAR."
        )
    check_key_var(api_key_var)
    from primenb.traces.trace import get

    refs = [get(r) for r in (list(traces) if traces else completed_traces())]
    on = remote.one_host(refs)
    specs = model_specs(refs, base, host=on, parents=parents)
    if on is not None:
        return _start_remote(on, specs, refs[0].id, host, port, api_key_var, timeout)
    folder = registry.folder()
    tag = uuid.uuid4().hex[:12]
    spec_path, ready = folder / f"spec-{tag}.json", folder / f"ready-{tag}.json"
    spec = {
        "host": host,
        "port": int(port),
        "api_key_var": api_key_var,
        "models": specs,
        "ready_file": str(ready),
        "max_batch": int(max_batch),
        "max_queue": int(max_queue),
        "stream_interval": int(stream_interval),
    }
    spec_path.write_text(json.dumps(spec))
    log = folder / f"server-{tag}.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "primenb.serve.worker", str(spec_path)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # a kernel restart (SIGINT/SIGTERM to its group) leaves it running
            cwd=tempfile.gettempdir(),
        )
    # whoever stops it (this kernel, another, the sidebar), its exit is reaped here: no zombie
    threading.Thread(target=proc.wait, name=f"primenb-reap-{proc.pid}", daemon=True).start()
    try:
        record = _wait_ready(proc, ready, log, timeout)
    finally:
        spec_path.unlink(missing_ok=True)
        ready.unlink(missing_ok=True)
    return Server(record["url"], int(record["pid"]), list(record["models"]), api_key_var)


def _start_remote(
    on: Any, specs: list[dict[str, Any]], trace: str, host: str, port: int, key_var: str | None, timeout: float
) -> Server:
    rec = remote.start(
        on, {"models": specs}, trace=trace, bind=host, port=int(port), api_key_var=key_var, timeout=timeout
    )
    server = Server(rec["url"], int(rec["pid"]), list(rec["models"]), key_var, rec["remote"])
    try:
        _admin(server, "GET", api.MODELS, timeout=30.0)  # answers through the forward
    except ServeError:
        server.stop()
        raise
    return server


def _wait_ready(proc: subprocess.Popen[bytes], ready: Path, log: Path, timeout: float) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if ready.exists():
            try:
                doc = json.loads(ready.read_text())
            except json.JSONDecodeError:
                doc = None
            if isinstance(doc, dict) and "error" in doc:
                proc.wait(timeout=30)
                raise ServeError(f"the server did not start: {doc['error']}")
            if isinstance(doc, dict) and "url" in doc:
                return doc
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise ServeError(f"the server exited at start (code {proc.returncode}); its log {log}:\n{tail}")
        time.sleep(0.1)
    proc.terminate()
    raise ServeError(f"the server did not answer within {timeout:.0f} s; its log: {log}")


def servers(*, revive: bool = True) -> list[Server]:
    """Running servers, oldest first; a remote one whose local forward died gets a new forward
    (``revive``; `stop` does not bother)."""
    records = registry.records()
    if revive:
        records = [remote.revive(r) for r in records]
    return [
        Server(r["url"], int(r["pid"]), list(r.get("models") or []), r.get("api_key_var"), r.get("remote"))
        for r in records
    ]


def find(url_or_pid: Any = None, *, revive: bool = True) -> Server:
    """The server at a URL (or pid); with none given, the only (or newest) running one."""
    running = servers(revive=revive)
    if not running:
        raise ServeError("no primenb server is running; start one with %prime_serve TRACE")
    if url_or_pid in (None, ""):
        return running[-1]
    text = str(url_or_pid).rstrip("/")
    for s in running:
        if text in (s.url, s.url.rsplit(api.API_ROOT, 1)[0], str(s.pid)) or text == str(
            s.url.rsplit(":", 1)[-1].split("/")[0]
        ):
            return s
    raise ServeError(f"no running server at {url_or_pid!r}; running: {', '.join(s.url for s in running)}")


def add(trace: Any, server: Server | None = None) -> list[str]:
    """Load a trace's checkpoint into a running server (no restart); its new model id(s)."""
    server = server or find()
    cards = server.cards()
    from primenb.traces.trace import get

    found = get(trace)
    on = remote.host_of(found)
    if (None if on is None else on.key) != remote.host_key(server.remote):
        raise ServeError(
            f"{found.name} is served on {remote.where(on)} and {server.url} runs on "
            f"{remote.describe({'remote': server.remote})}: start a server there with %prime_serve {found.name}"
        )
    if server.model_of(found) is not None:
        specs = []
    else:
        taken = {c["id"] for c in cards}
        specs = [s for s in model_specs([found], taken=taken, host=on) if s["kind"] == "checkpoint"]
    if not specs:
        raise ServeError(f"{server.url} already serves {trace}; `%prime_serve list` shows its models")
    for spec in specs:
        _admin(server, "POST", api.ADMIN_MODELS, spec)
    server.refresh()
    return [s["id"] for s in specs]


def remove(trace_or_id: Any, server: Server | None = None) -> str:
    """Drop a model id (or a trace's model) from a running server."""
    server = server or find()
    served = server.refresh().models
    target = str(trace_or_id)
    if target not in served:
        from primenb.traces.trace import get

        serves = f"it serves: {', '.join(served)}" if served else "it serves no model"
        try:
            trace = get(trace_or_id)
        except PrimenbError as exc:  # neither a served id nor a trace: say what can be removed
            raise ServeError(f"{server.url} does not serve {target!r} ({exc}); {serves}") from exc
        found = server.model_of(trace)
        if found is None:
            raise ServeError(f"{server.url} does not serve {trace.name!r}; {serves}")
        target = found
    _admin(server, "DELETE", f"{api.ADMIN_MODELS}/" + urllib.parse.quote(target, safe="/"))
    server.refresh()
    return target


def _stop_pid(pid: int, timeout: float) -> None:
    if not registry.live_worker(pid):  # gone, or the pid now belongs to another program
        registry.remove(pid)
        return
    os.kill(pid, signal.SIGTERM)  # the worker aborts what is still decoding after a second, then exits
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _exited(pid):
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
    registry.remove(pid)


def _exited(pid: int) -> bool:
    """Whether ``pid`` has ended; a zombie has (its parent reaps it: `start` leaves a thread that does)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return not registry.alive(pid)
    return state in ("Z", "X")


def stop(target: Any = None) -> list[str]:
    """Stop one server (URL, port or pid; default the newest) or ``"all"``; the URLs stopped."""
    chosen = servers(revive=False) if target == "all" else [find(target, revive=False)]
    for s in chosen:
        s.stop(30.0)
    return [s.url for s in chosen]


def table() -> Any:
    """A DataFrame of running servers: URL, pid, models, uptime, requests served."""
    import pandas as pd

    rows = []
    for s in servers():
        try:
            st = s.refresh().stats()
            uptime, requests = float(st["uptime_s"]), int(st["requests"])
        except ServeError:
            uptime, requests = float("nan"), -1
        rows.append(
            {
                "url": s.url,
                "pid": s.pid,
                "models": ", ".join(s.models),
                "uptime_s": uptime,
                "requests": requests,
                "where": s.where,
            }
        )
    return pd.DataFrame(rows, columns=["url", "pid", "models", "uptime_s", "requests", "where"])


__all__ = [
    "ServeError",
    "Server",
    "ServerStats",
    "add",
    "check_key_var",
    "check_limits",
    "completed_traces",
    "find",
    "model_specs",
    "remove",
    "servers",
    "start",
    "stop",
    "table",
]
