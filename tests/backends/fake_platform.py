"""A stand-in for Prime Intellect's platform API on 127.0.0.1, for the real `prime` CLI (0.18.0).

It answers the endpoints the CLI calls (`prime_cli/api/rl.py`, `api/training.py`) with the shapes
the CLI reads: `{"run": RLRun}` with `id, userId, status, createdAt, updatedAt`, camelCase
progress, `{"metrics": [...]}`, `{"checkpoints": [...]}`, `{"logs": "..."}`. Each run follows a
script of states, one step of the script per `GET /rft/runs/{id}` (what `prime train get` asks),
so a test decides exactly what the next poll sees. `fail(...)` injects HTTP errors (401, 402, 422,
500, ...) on the next matching requests. Every request is recorded, with whether it carried the
expected key (the key itself is never recorded).
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

T0 = "2026-12-03T04:00:00Z"
PRICE = 3.2  # USD per GPU-hour of the fake H200_141GB

# The script of a run that finishes: queued (two runs ahead), queued (one), running, completed.
FINISHING = (
    {"status": "QUEUED", "runsAhead": 2, "queueReason": "waiting for H200_141GB capacity", "step": None},
    {"status": "RUNNING", "step": 2},
    {"status": "COMPLETED", "step": 4},
)
# A run that keeps running until stopped or paused.
RUNNING_ON = (
    {"status": "QUEUED", "runsAhead": 1, "queueReason": "provisioning", "step": None},
    {"status": "RUNNING", "step": 1},
)


@dataclass
class FakeRun:
    id: str
    config: dict[str, Any]
    script: tuple[dict[str, Any], ...]
    team: str | None = None
    gpu_type: str | None = None
    resumed_from: str | None = None
    gets: int = 0
    forced: str | None = None  # a status set by stop/pause, overriding the script
    max_steps: int = 4
    storage: str = "s3://prime-checkpoints/{run}/step_{step}"

    @property
    def tick(self) -> dict[str, Any]:
        return self.script[min(max(self.gets - 1, 0), len(self.script) - 1)]

    @property
    def status(self) -> str:
        return self.forced or str(self.tick["status"])

    @property
    def step(self) -> int:
        steps = [int(t["step"]) for t in self.script[: max(self.gets, 1)] if t.get("step")]
        return max(steps, default=0)

    def record(self) -> dict[str, Any]:
        tick = self.tick
        queued = self.status == "QUEUED"
        return {
            "id": self.id,
            "name": None,
            "userId": "user_fake",
            "teamId": self.team,
            "primeClusterId": "cluster-fake-h200",
            "status": self.status,
            "kind": "DEDICATED_FULL_FT",
            "maxSteps": self.max_steps,
            "baseModel": ((self.config.get("model") or {}).get("name")),
            "gpuCount": 2,
            "runsAhead": tick.get("runsAhead") if queued else None,
            "queueReason": tick.get("queueReason") if queued else None,
            "startedAt": None if queued else T0,
            "completedAt": "2026-12-03T04:30:00Z"
            if self.status in ("COMPLETED", "STOPPED", "FAILED", "PAUSED")
            else None,
            "errorMessage": tick.get("errorMessage"),
            "createdAt": T0,
            "updatedAt": T0,
        }


@dataclass
class Failure:
    method: str
    pattern: str
    status: int
    body: Any
    times: int


@dataclass
class FakePlatform:
    api_key: str
    script: tuple[dict[str, Any], ...] = FINISHING
    runs: dict[str, FakeRun] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    teams: tuple[dict[str, Any], ...] = (
        {"teamId": "team_fake", "name": "Fake Lab", "slug": "fake-lab", "role": "ADMIN", "createdAt": T0},
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)
    text: str = ""  # planted in every rollout's prompt and completion and in every log line

    # -- control from a test ---------------------------------------------------------------
    def fail(self, pattern: str, status: int, *, body: Any = None, times: int = 1, method: str = "") -> None:
        """The next ``times`` requests whose path matches ``pattern`` get HTTP ``status``."""
        self.failures.append(Failure(method, pattern, status, body, times))

    def start(self) -> FakePlatform:
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                status, reply = platform.answer(method, self.path, self.headers.get("Authorization"), body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PUT(self) -> None:
                self._serve("PUT")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def paths(self, method: str | None = None) -> list[str]:
        return [r["path"] for r in self.requests if method is None or r["method"] == method]

    # -- the API ---------------------------------------------------------------------------
    def answer(self, method: str, target: str, auth: str | None, body: Any) -> tuple[int, Any]:
        parts = urlsplit(target)
        path, query = parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()}
        with self._lock:
            self.requests.append(
                {"method": method, "path": path, "query": query, "authorized": auth == f"Bearer {self.api_key}"}
            )
            if body is not None:
                self.requests[-1]["body"] = body
            for f in self.failures:
                if f.times > 0 and (not f.method or f.method == method) and re.search(f.pattern, path):
                    f.times -= 1
                    return f.status, f.body if f.body is not None else {"detail": f"injected HTTP {f.status}"}
            if auth != f"Bearer {self.api_key}":
                return 401, {"detail": "Invalid API key"}
            return self._route(method, path, query, body)

    def _route(self, method: str, path: str, q: dict[str, str], body: Any) -> tuple[int, Any]:
        p = path.removeprefix("/api/v1")
        if p == "/training/runs/prepare":
            return 404, {"detail": "Not Found"}  # an API without local validation: "validates on submission"
        if p == "/training/available-fft-models":
            return 200, {
                "models": [
                    {
                        "name": "Qwen/Qwen3-0.6B",
                        "clusters": [{"clusterId": "c1", "clusterName": "fake", "gpuType": "H200_141GB"}],
                    }
                ],
                "onDemand": [
                    {
                        "gpuType": "H200_141GB",
                        "pricePerGpuHour": PRICE,
                        "discountLabel": None,
                        "availableNow": True,
                        "isBeta": False,
                    },
                    {
                        "gpuType": "B200_180GB",
                        "pricePerGpuHour": 5.5,
                        "discountLabel": None,
                        "availableNow": False,
                        "isBeta": True,
                    },
                ],
                "onDemandBetaAccess": True,
            }
        if p == "/user/teams":
            return 200, {"data": list(self.teams), "total_count": len(self.teams)}
        if p == "/training/volumes":
            if method == "POST":
                return 200, self._volume(body["name"], body.get("size"))
            return 200, {"volumes": [self._volume("research", "5Ti")]}
        if p == "/training/runs" and method == "POST":
            run = FakeRun(
                id=f"run_{len(self.runs) + 1:04d}{int(time.time()) % 1000:03d}",
                config=body.get("config") or {},
                script=self.script,
                team=body.get("teamId"),
                gpu_type=body.get("gpuType"),
                resumed_from=body.get("resumeFrom"),
                max_steps=int((body.get("config") or {}).get("max_steps") or 4),
            )
            self.runs[run.id] = run
            return 200, self._created(run)
        m = re.fullmatch(r"/training/runs/([^/]+)/(pause|resume)", p)
        if m:
            run = self.runs.get(m.group(1))
            if run is None:
                return 404, {"detail": "Run not found"}
            if m.group(2) == "pause":
                if run.status != "RUNNING":
                    return 409, {"detail": f"Only a RUNNING run can be paused (this one is {run.status})"}
                run.forced = "PAUSED"  # PAUSING -> PAUSED at once here
                return 200, {"runId": run.id, "status": "PAUSING"}
            if run.status != "PAUSED":
                return 409, {"detail": "Only a PAUSED run can be resumed"}
            child = FakeRun(
                id=f"{run.id}r",
                config=run.config,
                script=self.script,
                team=run.team,
                gpu_type=run.gpu_type,
                resumed_from=run.id,
            )
            self.runs[child.id] = child
            return 200, self._created(child)
        if p == "/rft/runs":
            runs = [r.record() for r in self.runs.values()]
            return 200, {"runs": runs, "total": len(runs), "page": 1, "limit": 20, "total_pages": 1}
        m = re.fullmatch(r"/rft/runs/([^/]+)(?:/([a-z-]+))?", p)
        if not m or m.group(1) not in self.runs:
            return 404, {"detail": "Run not found"}
        run, what = self.runs[m.group(1)], m.group(2)
        if what is None and method == "GET":
            run.gets += 1
            return 200, {"run": run.record()}
        if what == "stop" and method == "PUT":
            run.forced = "STOPPED"
            return 200, {"run": run.record()}
        if what == "progress":
            samples = list(range(1, run.step + 1))
            return 200, {
                "latestStep": run.step or None,
                "stepsWithSamples": samples,
                "stepsWithDistributions": samples,
                "lastUpdatedAt": T0,
            }
        if what == "metrics":
            lo = int(q.get("min_step", 0))
            rows = [
                {"step": s, "metrics": {"reward/mean": 0.1 * s, "loss/mean": 1.0 / s, "entropy": 0.5}, "createdAt": T0}
                for s in range(max(lo, 1), run.step + 1)
            ]
            return 200, {"metrics": rows}
        if what == "samples":
            step = int(q["step"])
            samples = [
                {
                    "step": step,
                    "prompt": [{"role": "user", "content": f"reverse: abc{step}{self.text}"}],
                    "completion": [{"role": "assistant", "content": f"{self.text}{step}cba"}],
                    "reward": 0.1 * step,
                }
            ]
            return 200, {"run_id": run.id, "samples": samples, "total": 1, "page": 1, "limit": 100, "total_pages": 1}
        if what == "checkpoints":
            cps = [
                {
                    "id": f"ckpt_{run.id}_{s}",
                    "rftRunId": run.id,
                    "step": s,
                    "storageUrl": run.storage.format(run=run.id, step=s),
                    "status": "READY"
                    if run.status in ("COMPLETED", "STOPPED", "PAUSED") or s < run.step
                    else "UPLOADING",
                    "sizeBytes": 1234,
                    "createdAt": T0,
                    "uploadedAt": T0,
                }
                for s in range(2, run.step + 1, 2)
            ]
            if q.get("status_filter"):
                cps = [c for c in cps if c["status"] == q["status_filter"]]
            return 200, {"checkpoints": cps}
        if what == "logs":
            component = q.get("component") or "orchestrator"
            lines = [f"{T0} INFO [{component}] step {s} done{self.text}" for s in range(1, run.step + 1)]
            return 200, {"logs": "\n".join(lines)}
        return 404, {"detail": "Not Found"}

    def _created(self, run: FakeRun) -> dict[str, Any]:
        return {
            "runId": run.id,
            "tokenValue": "tok_never_printed",
            "onDemand": True,
            "gpuType": run.gpu_type or "H200_141GB",
            "pricePerGpuHour": PRICE,
            "estimatedCostPerHour": PRICE * 2,
            "isBeta": False,
        }

    @staticmethod
    def _volume(name: str, size: str | None) -> dict[str, Any]:
        return {
            "id": f"vol_{name}",
            "name": name,
            "size": size,
            "status": "RUNNING",
            "clusterId": "c1",
            "pvcName": f"pvc-{name}",
        }


__all__ = ["FINISHING", "PRICE", "RUNNING_ON", "FakePlatform", "FakeRun"]
