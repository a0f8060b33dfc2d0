"""MLflow against a stand-in tracking server on 127.0.0.1 (MLflow's REST API, answered from
memory, every request counted): the starter config's ~190 parameters go in batches of at most
100 (they went one request each: 204 requests, 17.7 s against a server adding 50 ms per
request, before training started), MLflow's own MLFLOW_EXPERIMENT_NAME names the experiment,
and the run ends with the primenb run's state."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from primenb.trackers import TrackerSettings, open_sinks
from primenb.trackers.sinks import _flat

API = "/api/2.0/mlflow/"
INFO = {"run_id": "r1", "run_uuid": "r1", "experiment_id": "7", "status": "RUNNING", "lifecycle_stage": "active"}


class StandIn(BaseHTTPRequestHandler):
    requests: list[tuple[str, dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        self.requests.append((url.path.removeprefix(API), {k: v[0] for k, v in parse_qs(url.query).items()}))
        if url.path.endswith("experiments/get-by-name"):
            self._answer(404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no such experiment"})
        elif url.path.endswith("runs/get"):
            self._answer(200, {"run": {"info": INFO, "data": {}}})
        else:
            self._answer(404, {"error_code": "ENDPOINT_NOT_FOUND", "message": url.path})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        path = urlparse(self.path).path.removeprefix(API)
        self.requests.append((path, body))
        info = INFO
        if path == "experiments/create":
            self._answer(200, {"experiment_id": "7"})
        elif path == "runs/create":
            self._answer(200, {"run": {"info": {**info, "run_name": body.get("run_name", "")}, "data": {}}})
        elif path == "runs/update":
            self._answer(200, {"run_info": {**info, "status": body.get("status")}})
        else:
            self._answer(200, {})


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    StandIn.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{httpd.server_address[1]}")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "my-experiment")
    try:
        yield StandIn.requests
    finally:
        httpd.shutdown()
        httpd.server_close()


def starter_config(tmp_path: Path) -> dict[str, Any]:
    from primenb.config import load_config
    from primenb.config.templates import starter

    path = tmp_path / "rl.toml"
    path.write_text(starter())
    return load_config(path).resolved(primenb=True)  # what the engine's trackers get (redacted, same keys)


def test_the_starter_config_params_go_in_a_few_batches(
    server: list[tuple[str, dict[str, Any]]], tmp_path: Path
) -> None:
    config = starter_config(tmp_path)
    n = len(_flat(config))
    assert n > 150  # the starter config's parameters, flattened
    fan = open_sinks(["mlflow"], TrackerSettings(root=tmp_path / "t", name="n", trace_id="t1", config=config))
    assert fan.warnings == []
    fan.log_row({"step": 1, "loss": 0.5})
    fan.finish({"eval/rev/reward": 0.5}, "stopped")

    with_params = [body for path, body in server if body.get("params")]
    assert 1 <= len(with_params) <= 5
    assert all(len(body["params"]) <= 100 for body in with_params)
    sent = {p["key"] for body in with_params for p in body["params"]}
    assert len(sent) == n  # every parameter, once
    assert len(server) <= 14  # the whole run: experiment, run, params, two metric rows, the end
    # MLflow's own variable named the experiment (TRL honours it too)
    assert ("experiments/get-by-name", {"experiment_name": "my-experiment"}) in server
    assert ("experiments/create", {"name": "my-experiment"}) in [(p, {"name": b.get("name")}) for p, b in server]
    (update,) = [body for path, body in server if path == "runs/update"]
    assert update["status"] == "KILLED"  # the run was stopped


class AnythingGoes(StandIn):
    """An HTTP service that answers every request 200 {} (not MLflow)."""

    def do_GET(self) -> None:
        self._answer(200, {})

    def do_POST(self) -> None:
        self._answer(200, {})


def test_a_service_answering_200_to_everything_is_not_taken_for_mlflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), AnythingGoes)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    try:
        fan = open_sinks(["mlflow"], TrackerSettings(root=tmp_path / "t", name="n", trace_id="t1"))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert fan.sinks == []
    assert fan.warnings == [
        f"tracker mlflow: could not start (RuntimeError: {url} does not answer as an MLflow tracking server "
        "(no experiment or run id)); the run goes on without it"
    ]
