"""Every REST route: an answer for good input, 403 without a token, 400/404/409 for bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tornado.httpclient

LIVE = "live00000099"
DONE = "s00000003"

ROUTES: list[tuple[str, str, str | None]] = [
    ("GET", "traces", None),
    ("GET", f"traces/{DONE}", None),
    ("GET", f"traces/{LIVE}/metrics", None),
    ("GET", f"traces/{LIVE}/samples", None),
    ("GET", f"traces/{LIVE}/config", None),
    ("POST", f"traces/{LIVE}/stop", "{}"),
    ("POST", f"traces/{DONE}/apply", "{}"),
    ("GET", "servers", None),
    ("POST", "servers/stop", '{"pid": 2}'),
]


async def get(jp_fetch: Any, *parts: str, **params: Any) -> Any:
    r = await jp_fetch("primenb", "api", *parts, params=params or None)
    assert r.code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    return json.loads(r.body)


async def error(
    jp_fetch: Any, *parts: str, method: str = "GET", body: str | None = None, **params: Any
) -> tuple[int, str]:
    with pytest.raises(tornado.httpclient.HTTPClientError) as info:
        await jp_fetch("primenb", "api", *parts, method=method, body=body, params=params or None)
    response = info.value.response
    assert response is not None
    payload = json.loads(response.body)
    assert isinstance(payload["message"], str) and payload["message"]
    return info.value.code, payload["message"]


# -- authentication ---------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "route", "body"), ROUTES)
async def test_unauthenticated_refused(
    home: Path, jp_serverapp: Any, http_server_client: Any, jp_base_url: str, method: str, route: str, body: str | None
) -> None:
    url = f"{jp_base_url}primenb/api/{route}"
    r = await http_server_client.fetch(url, method=method, body=body, raise_error=False)
    assert r.code == 403, (route, r.code)
    # a wrong token is refused too
    r = await http_server_client.fetch(
        url, method=method, body=body, raise_error=False, headers={"Authorization": "token nope"}
    )
    assert r.code == 403
    assert not (home / "runs" / "live-run" / "STOP").exists()


# -- the list ---------------------------------------------------------------------------------


async def test_list_newest_first_paged(home: Path, jp_fetch: Any) -> None:
    page = await get(jp_fetch, "traces", limit="5")
    assert page["total"] == 13 and page["offset"] == 0 and page["limit"] == 5
    names = [i["name"] for i in page["items"]]
    assert names == ["live-run", "s-run-11", "s-run-10", "s-run-9", "s-run-8"]
    live = page["items"][0]
    assert live["status"] == "running" and live["live"] is True and live["backend"] == "local"
    assert live["steps"] == 3  # refreshed from status.json
    nxt = await get(jp_fetch, "traces", limit="5", offset="5")
    assert [i["name"] for i in nxt["items"]] == ["s-run-7", "s-run-6", "s-run-5", "s-run-4", "s-run-3"]
    item = nxt["items"][0]
    assert {"trace", "model", "env", "final_reward", "steps", "max_steps", "parent"} <= set(item)
    assert item["model"] == "primenb/tiny-byte" and item["env"] == "reverse-text"


async def test_list_filters(home: Path, jp_fetch: Any) -> None:
    assert (await get(jp_fetch, "traces", status="running"))["total"] == 1
    assert (await get(jp_fetch, "traces", status="completed,stopped"))["total"] == 12
    assert (await get(jp_fetch, "traces", q="s-run-1"))["total"] == 3  # 1, 10, 11
    assert (await get(jp_fetch, "traces", q="s0000001"))["total"] == 2  # id prefix: s00000010, s00000011
    assert (await get(jp_fetch, "traces", model="tiny"))["total"] == 13
    # LIKE wildcards are literal
    assert (await get(jp_fetch, "traces", q="%"))["total"] == 0
    assert (await get(jp_fetch, "traces", env="_"))["total"] == 0


async def test_list_sft_rows_carry_their_loss(home: Path, jp_fetch: Any) -> None:
    """After a reload the sidebar has only the list: an SFT row needs its stored final loss."""
    from tests.server.synth_runs import write_run

    trace, _ = write_run(home / "runs", 1, prefix="sftrow", mode="sft", rows=[], created=1_900_000_000)
    item = (await get(jp_fetch, "traces", limit="1"))["items"][0]
    assert item["trace"] == trace and item["mode"] == "sft" and item["final_loss"] == pytest.approx(0.26)


@pytest.mark.parametrize(
    "params",
    [{"limit": "0"}, {"limit": "501"}, {"limit": "x"}, {"offset": "-1"}, {"status": "bogus"}, {"q": "a" * 201}],
)
async def test_list_bad_input(home: Path, jp_fetch: Any, params: dict[str, str]) -> None:
    code, _ = await error(jp_fetch, "traces", **params)
    assert code == 400


# -- one trace --------------------------------------------------------------------------------


async def test_detail(home: Path, jp_fetch: Any) -> None:
    d = await get(jp_fetch, "traces", DONE)
    assert d["trace"] == DONE and d["name"] == "s-run-3" and d["status"] == "completed" and not d["live"]
    assert d["backend"] == "local"
    assert [e["trace"] for e in d["lineage"]] == [DONE]  # make_doc: parent i-1 unless i%3==0
    child = await get(jp_fetch, "traces", "s00000004")
    assert [e["trace"] for e in child["lineage"]] == [DONE, "s00000004"]
    assert (await get(jp_fetch, "traces", DONE))["children"] == [{"trace": "s00000004", "name": "s-run-4"}]
    assert d["config"]["trainer"]["optim"]["lr"] == pytest.approx(1e-4)
    assert d["headline"]["model"] == "primenb/tiny-byte"


async def test_a_live_runs_detail_counts_its_steps(home: Path, jp_fetch: Any) -> None:
    """The trace records its last step when the run ends: a live run's detail said
    "steps 0 → None (max 60)". It counts from status.json's step instead."""
    from primenb.protocol.record import read_trace, write_trace

    run_dir = home / "runs" / "live-run"
    doc = read_trace(run_dir)
    assert doc is not None
    write_trace(run_dir, {**doc, "steps": {"start": 0, "last": None, "max": 10}})
    d = await get(jp_fetch, "traces", LIVE)
    assert d["live"] and d["headline"]["steps"] == "0 → 3 so far (max 10)"


def test_steps_text() -> None:
    from primenb.traces.trace import steps_text

    assert steps_text({"start": 0, "last": 30, "max": 30}) == "0 → 30 (max 30)"
    assert steps_text({"start": 0, "last": None, "max": 60}, live_step=12) == "0 → 12 so far (max 60)"
    assert steps_text({"start": 5, "last": None}) == "5 → not started"
    # a run stopped in its SFT warm-up ended before its first step: said so, never "0 → 0"
    assert steps_text({"start": 0, "last": 0, "max": 20}) == "no step trained (max 20)"
    assert steps_text({"start": 30, "last": 30, "max": 40}) == "no step trained after step 30 (max 40)"


@pytest.mark.parametrize(
    ("trace", "code"),
    [("nope0000", 404), ("..", 400), ("a", 400), ("s000%2F..%2F..", 400), ("s0000000*", 400), ("%2Fetc%2Fpasswd", 400)],
)
async def test_detail_bad_ids(home: Path, jp_fetch: Any, trace: str, code: int) -> None:
    got, message = await error(jp_fetch, "traces", trace)
    assert got == code, message


async def test_detail_id_must_be_exact(home: Path, jp_fetch: Any) -> None:
    """A unique prefix or a run name (what `primenb harness show` accepts) is not an id here."""
    assert (await error(jp_fetch, "traces", "s-run-3"))[0] == 404
    assert (await error(jp_fetch, "traces", "live0000"))[0] == 404


async def test_detail_moved_run_dir(home: Path, jp_fetch: Any) -> None:
    (home / "runs" / "s-run-4").rename(home / "runs" / "elsewhere")
    code, message = await error(jp_fetch, "traces", "s00000004")
    assert code == 404 and "no longer holds it" in message


# -- metrics (incremental) --------------------------------------------------------------------


async def test_metrics_cursor(home: Path, jp_fetch: Any) -> None:
    m = await get(jp_fetch, "traces", LIVE, "metrics")
    assert [r["step"] for r in m["rows"]] == [1, 2, 3]  # the partial line is skipped
    assert m["start"] == 0 and m["cursor"] == 3 and m["state"] == "running" and m["max_steps"] == 10
    m = await get(jp_fetch, "traces", LIVE, "metrics", cursor="2", keys="reward")
    assert m["rows"] == [{"step": 3, "reward": 0.3, "phase": None}]
    # the writer finishes its line and adds one: only the new rows come back
    path = home / "runs" / "live-run" / "metrics.jsonl"
    text = path.read_text().rsplit("\n", 1)[0] + "\n"
    path.write_text(
        text + json.dumps({"step": 4, "reward": 0.4}) + "\n" + json.dumps({"step": 5, "reward": 0.5}) + "\n"
    )
    m = await get(jp_fetch, "traces", LIVE, "metrics", cursor="3")
    assert [r["step"] for r in m["rows"]] == [4, 5] and m["cursor"] == 5 and not m["more"]
    m = await get(jp_fetch, "traces", LIVE, "metrics", cursor="5")
    assert m["rows"] == [] and m["cursor"] == 5
    # the file was rewritten shorter (a re-synced mirror): start over from row 0
    path.write_text(json.dumps({"step": 1, "reward": 0.9}) + "\n")
    m = await get(jp_fetch, "traces", LIVE, "metrics", cursor="5")
    assert m["start"] == 0 and m["cursor"] == 1 and m["rows"][0]["reward"] == 0.9


async def test_metrics_across_phases(home: Path, jp_fetch: Any) -> None:
    """A warm-up run: GRPO's steps restart at 1 after the warm-up's 200, and an eval row shares
    its step with a train row; every row comes back once, in file order, with its phase."""
    from tests.server.synth_runs import WARMUP_STEPS, warmup_rows, write_run

    rows = warmup_rows()
    trace, run_dir = write_run(home / "runs", 1, prefix="warm", rows=rows[: WARMUP_STEPS + 1], status="running")
    m = await get(jp_fetch, "traces", trace, "metrics", keys="reward,loss,warmup/loss")
    assert m["cursor"] == WARMUP_STEPS + 1 and {r["phase"] for r in m["rows"]} == {"sft warmup"}
    # GRPO begins: its rows (steps 0.., below the warm-up's 200) arrive with the next cursor
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    m2 = await get(jp_fetch, "traces", trace, "metrics", cursor=str(m["cursor"]), keys="reward,loss,eval/reward")
    got = [(r["phase"], r["step"], "reward" in r) for r in m2["rows"]]
    expected = [(r["phase"], r["step"], "reward" in r) for r in rows[WARMUP_STEPS + 1 :]]
    assert got == expected
    assert sum(1 for r in m2["rows"] if "reward" in r) == 6  # every train row, none dropped
    assert (("rl", 3, False) in got) and (("rl", 3, True) in got)  # eval and train of step 3 both
    # a run written before rows had a phase: the warmup/ prefix says it
    (run_dir / "metrics.jsonl").write_text(json.dumps({"step": 1, "warmup/loss": 2.0}) + "\n")
    m3 = await get(jp_fetch, "traces", trace, "metrics")
    assert m3["rows"][0]["phase"] == "sft warmup"


async def test_metrics_since_replaced(home: Path, jp_fetch: Any) -> None:
    code, message = await error(jp_fetch, "traces", LIVE, "metrics", since="200")
    assert code == 400 and "cursor" in message


@pytest.mark.parametrize("params", [{"cursor": "x"}, {"cursor": "-5"}, {"keys": "a;b"}, {"keys": "../x"[:0] + "a b"}])
async def test_metrics_bad_input(home: Path, jp_fetch: Any, params: dict[str, str]) -> None:
    assert (await error(jp_fetch, "traces", LIVE, "metrics", **params))[0] == 400


async def test_metrics_unknown(home: Path, jp_fetch: Any) -> None:
    assert (await error(jp_fetch, "traces", "zzzz9999", "metrics"))[0] == 404


# -- samples ----------------------------------------------------------------------------------


async def test_samples(home: Path, jp_fetch: Any) -> None:
    s = await get(jp_fetch, "traces", LIVE, "samples", limit="2")
    assert [x["step"] for x in s["samples"]] == [2, 3] and s["withheld"] is False
    assert s["samples"][0]["completion"] == "<img src=x onerror=alert(2)>"  # raw text; the panel shows it as text


async def test_samples_withheld(home: Path, jp_fetch: Any) -> None:
    from primenb.protocol.record import read_trace, write_trace

    run = home / "runs" / "live-run"
    doc = read_trace(run)
    assert doc is not None
    doc["privacy"] = {"data_collection": "deny"}
    write_trace(run, doc)
    s = await get(jp_fetch, "traces", LIVE, "samples")
    assert s == {"trace": LIVE, "samples": [], "withheld": True}


async def test_samples_bad_input(home: Path, jp_fetch: Any) -> None:
    assert (await error(jp_fetch, "traces", LIVE, "samples", limit="-1"))[0] == 400
    assert (await error(jp_fetch, "traces", "nope1234", "samples"))[0] == 404


# -- config -----------------------------------------------------------------------------------


async def test_config_text(home: Path, jp_fetch: Any) -> None:
    c = await get(jp_fetch, "traces", LIVE, "config")
    assert c["toml"].startswith("max_steps = 10") and c["path"].endswith("configs/config.toml")
    assert c["contents_path"] is None  # outside the Jupyter root: shown read-only


async def test_config_from_resolved(home: Path, jp_fetch: Any) -> None:
    import tomllib

    c = await get(jp_fetch, "traces", DONE, "config")
    assert c["path"] is None
    assert tomllib.loads(c["toml"])["orchestrator"]["batch_size"] == 16


async def test_config_bad_input(home: Path, jp_fetch: Any) -> None:
    assert (await error(jp_fetch, "traces", "x%2F..%2Fy", "config"))[0] == 400
    assert (await error(jp_fetch, "traces", "nope1234", "config"))[0] == 404


# -- stop -------------------------------------------------------------------------------------


async def test_stop(home: Path, jp_fetch: Any) -> None:
    r = await jp_fetch("primenb", "api", "traces", LIVE, "stop", method="POST", body="{}")
    body = json.loads(r.body)
    assert body["trace"] == LIVE and body["stop_requested"] is True
    assert (home / "runs" / "live-run" / "STOP").exists()  # the engine checkpoints and stops at its next step


async def test_stop_finished_run_is_a_no_op(home: Path, jp_fetch: Any) -> None:
    (home / "runs" / "s-run-3" / "status.json").write_text(json.dumps({"state": "completed"}))
    r = await jp_fetch("primenb", "api", "traces", DONE, "stop", method="POST", body="{}")
    assert json.loads(r.body) == {"trace": DONE, "state": "completed", "stop_requested": False}
    assert not (home / "runs" / "s-run-3" / "STOP").exists()


async def test_stop_bad_input(home: Path, jp_fetch: Any) -> None:
    assert (await error(jp_fetch, "traces", "nope1234", "stop", method="POST", body="{}"))[0] == 404
    assert (await error(jp_fetch, "traces", "s00000005", "stop", method="POST", body="{}"))[0] == 409  # no status.json
    assert (await error(jp_fetch, "traces", "a*", "stop", method="POST", body="{}"))[0] == 400


# -- apply ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[]",
        '{"steps": 0}',
        '{"steps": "5"}',
        '{"steps": true}',
        '{"overrides": "a=1"}',
        '{"overrides": ["no_equals"]}',
        '{"overrides": ["../x=1"]}',
        '{"name": "../escape"}',
        '{"rm": true}',
    ],
)
async def test_apply_bad_input(home: Path, jp_fetch: Any, body: str) -> None:
    code, _ = await error(jp_fetch, "traces", DONE, "apply", method="POST", body=body)
    assert code == 400


async def test_apply_refused(home: Path, jp_fetch: Any) -> None:
    code, message = await error(jp_fetch, "traces", LIVE, "apply", method="POST", body='{"steps": 2}')
    assert code == 409 and "still running" in message
    code, message = await error(jp_fetch, "traces", DONE, "apply", method="POST", body='{"steps": 2}')
    assert code == 409 and "no final checkpoint" in message
    assert (await error(jp_fetch, "traces", "nope1234", "apply", method="POST", body="{}"))[0] == 404
