"""GRPO on verifiers' own episodes (`primenb.engine.episodes`, `primenb.engine.policy_server`).

- The policy served inside the training process answers verifiers' token route with the logprobs
  the trainer's own forward pass gives the same tokens (a LoRA model, its adapter active), and
  refuses what it cannot answer with a 4xx.
- Environment tokens (user turns, tool results, scaffold) get no gradient: a GRPO step on samples
  with an ``env_mask`` leaves every masked position's logit gradient exactly zero.
- Episodes become samples (`cut`).
- Slow: a stop while a step's episodes run cancels them; the run ends at the previous step.
- Slow: configs of upstream's ``alphabet-sort`` shape (a taskset's own Env playing user turns,
  harness ``null``, runtime ``subprocess``) and a tool taskset train end to end in the engine.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from primenb.engine.episodes import Sample, cut
from primenb.engine.policy_server import PolicyServer
from tests.polling import wait_for

VF_ENVS = Path(__file__).resolve().parent.parent / "data" / "vf_envs"
TURN_TOKENS = 256  # long turns: a step's episodes take far longer than a stop takes to cancel them


@pytest.fixture(scope="module")
def lora_policy() -> Any:
    from peft import LoraConfig, get_peft_model

    from primenb.engine.models import load_model

    model, tok, _ = load_model("primenb/tiny-byte", seed=3)
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))
    return model, tok


def _post(url: str, body: Any, key: str | None) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_served_logprobs_equal_the_trainers_forward_pass(lora_policy: Any) -> None:
    model, tok = lora_policy
    model.train()  # as the trainer holds it; the rollout puts it in eval mode while episodes run
    prompt = tok("<bos>sort: b a c", add_special_tokens=False)["input_ids"]
    with PolicyServer(model, tok) as server:
        route = server.base_url.removesuffix("/v1") + "/inference/v1/generate"
        body = {"token_ids": prompt, "sampling_params": {"temperature": 1.0, "max_tokens": 12, "seed": 7}}
        status, answer = _post(route, body, server.api_key)
        assert status == 200, answer
        assert answer["model"] == server.served_id
    choice = answer["choices"][0]
    ids = choice["token_ids"]
    served = [e["logprob"] for e in choice["logprobs"]["content"]]
    assert [e["token"] for e in choice["logprobs"]["content"]] == [f"token_id:{i}" for i in ids]
    assert len(ids) == len(served) >= 1
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0].float()
    own = torch.log_softmax(logits, -1)[len(prompt) - 1 : -1].gather(1, torch.tensor(ids)[:, None])[:, 0]
    assert own.tolist() == pytest.approx(served, abs=2e-4)
    with torch.no_grad(), model.disable_adapter():  # the adapter was on: the base says otherwise
        base = torch.log_softmax(model(torch.tensor([prompt + ids])).logits[0].float(), -1)
    base_lp = base[len(prompt) - 1 : -1].gather(1, torch.tensor(ids)[:, None])[:, 0]
    assert max(abs(a - b) for a, b in zip(base_lp.tolist(), served, strict=True)) > 1e-3


def test_the_policy_server_refuses_what_it_cannot_answer(lora_policy: Any) -> None:
    model, tok = lora_policy
    with PolicyServer(model, tok) as server:
        root = server.base_url.removesuffix("/v1")
        route = root + "/inference/v1/generate"
        ok = {"token_ids": [5, 6], "sampling_params": {"max_tokens": 2}}
        assert _post(route, ok, None)[0] == 401
        assert _post(route, ok, "wrong")[0] == 401
        vocab = server.vocab
        cases = [
            ({"token_ids": [vocab], "sampling_params": {}}, 400),
            ({"token_ids": [-1], "sampling_params": {}}, 400),
            ({"token_ids": [], "sampling_params": {}}, 400),
            ({"token_ids": [5], "sampling_params": {"guided_json": {}}}, 400),
            ({"token_ids": [5], "sampling_params": {"n": 2}}, 400),
            ({"token_ids": [5], "sampling_params": {"temperature": "hot"}}, 400),
            ({"token_ids": [5] * (server.context + 1), "sampling_params": {}}, 400),
            ({"token_ids": [5], "model": "other"}, 404),
            (b"\xff\xfe not json", 400),
        ]
        for body, want in cases:
            status, answer = _post(route, body, server.api_key)
            assert status == want, (body if isinstance(body, bytes) else str(body)[:80], answer)
            assert "message" in answer["error"]
        assert _post(root + "/v1/nothing", ok, server.api_key)[0] == 404
        # a declared body over the bound is refused before it is read
        host, port = server.base_url.split("//")[1].split("/")[0].split(":")
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"POST /inference/v1/generate HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n")
            assert b" 413 " in s.recv(200)
        with urllib.request.urlopen(
            urllib.request.Request(root + "/v1/models", headers={"Authorization": f"Bearer {server.api_key}"})
        ) as r:
            card = json.loads(r.read())["data"][0]
        assert card["id"] == server.served_id and card["max_model_len"] == server.context
    assert model.active_adapter == "default" and hasattr(model, "peft_config")  # closing left the policy alone


def test_a_client_that_leaves_cancels_its_generation(lora_policy: Any) -> None:
    """Episodes that give up on a turn (verifiers' timeout, a cancelled step) close their
    connection: the policy server then drops their rows instead of decoding them to the end."""
    model, tok = lora_policy
    with PolicyServer(model, tok) as server:
        host, port = server.base_url.split("//")[1].split("/")[0].split(":")
        length = server.context - 4  # every row must decode to here: min_tokens = max_tokens
        body = json.dumps(
            {"token_ids": [5, 6, 7, 8], "sampling_params": {"max_tokens": length, "min_tokens": length, "seed": 1}}
        ).encode()
        head = (
            f"POST /inference/v1/generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {server.api_key}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        clients = [socket.create_connection((host, int(port)), timeout=10) for _ in range(8)]
        for c in clients:
            c.sendall(head + body)
        wait_for(lambda: server.scheduler.rows_stepped > 0, 60, "decoding to start")
        for c in clients:
            c.close()
        wait_for(lambda: not server.scheduler.busy, 120, "the cancelled rows to be dropped")
        stepped = server.scheduler.rows_stepped
        # decoded to the end, the eight rows would take 8 x length row-steps
        assert stepped < 8 * length // 2, (stepped, 8 * length)
        # the server still answers the next client
        ok = {"token_ids": [5, 6], "sampling_params": {"max_tokens": 2}}
        assert _post(server.base_url.removesuffix("/v1") + "/inference/v1/generate", ok, server.api_key)[0] == 200


def test_a_stopping_run_ends_the_generations_in_flight_and_refuses_new_ones(lora_policy: Any) -> None:
    """A stop during a step's episodes: the policy server answers every request in flight with a
    clean 503 instead of decoding it to the end, and refuses the next one the same way."""
    from concurrent.futures import ThreadPoolExecutor

    model, tok = lora_policy
    with PolicyServer(model, tok) as server:
        route = server.base_url.removesuffix("/v1") + "/inference/v1/generate"
        length = server.context - 4  # every row must decode to here: min_tokens = max_tokens
        body = {"token_ids": [5, 6, 7, 8], "sampling_params": {"max_tokens": length, "min_tokens": length, "seed": 1}}
        with ThreadPoolExecutor(4) as pool:
            answers = [pool.submit(_post, route, body, server.api_key) for _ in range(4)]
            wait_for(lambda: server.scheduler.rows_stepped > 0, 60, "decoding to start")
            server.stop_generating()
            done = [a.result(timeout=120) for a in answers]  # the timeout only catches a hang
        assert [status for status, _ in done] == [503] * 4, done
        assert all("stopping" in answer["error"]["message"] for _, answer in done)
        wait_for(lambda: not server.scheduler.busy, 120, "the cancelled rows to be dropped")
        assert server.scheduler.rows_stepped < 4 * length // 2, (server.scheduler.rows_stepped, 4 * length)
        status, answer = _post(route, {"token_ids": [5, 6], "sampling_params": {"max_tokens": 2}}, server.api_key)
        assert status == 503 and "stopping" in answer["error"]["message"]
        assert server.answered == 0


def test_an_episode_longer_than_seq_len_loses_its_tail_not_its_prompt() -> None:
    s = Sample([1, 2, 3], [4, 5, 6, 7, 8], [1, 1, 0, 0, 1], [-0.1, -0.2, 0.0, 0.0, -0.3], 0.5)
    assert cut(s, 8) is s
    short = cut(s, 6)
    assert (short.prompt_ids, short.completion_ids, short.env_mask, short.truncated) == (
        [1, 2, 3],
        [4, 5, 6],
        [1, 1, 0],
        True,
    )
    assert short.logprobs == [-0.1, -0.2, 0.0] and short.reward == 0.5
    none_left = cut(s, 3)
    assert none_left.prompt_ids == [1, 2, 3] and none_left.env_mask == [0]


def test_a_checkpoint_trained_on_conversations_is_served_through_its_template(tmp_path: Path) -> None:
    """The embedded models train on their environments' text format, so a server shows them the
    last user message; one trained on episodes (its checkpoint note says so) sees the template."""
    from primenb.engine.chat import Conversation
    from primenb.engine.models import load_model
    from primenb.engine.serving import ModelPool
    from primenb.protocol.checkpoint import CheckpointDir

    model, tok, base = load_model("primenb/tiny-byte", seed=2)
    for name, chat in (("text", False), ("chat", True)):
        folder = tmp_path / name
        model.save_pretrained(str(folder))
        tok.save_pretrained(str(folder))
        meta: dict[str, Any] = {"step": 1, "mode": "rl", "model": "primenb/tiny-byte", "adapter": False, "base": base}
        # the chat one's note records no base, as warm-up checkpoints did before: still served
        chat_meta = {**meta, "base": {}, "prompt_format": "chat_template"}
        CheckpointDir(folder).write_meta(chat_meta if chat else meta)
    pool = ModelPool(device="cpu")
    text = pool.add_checkpoint("text", str(tmp_path / "text"), model_name="primenb/tiny-byte")
    chat = pool.add_checkpoint("chat", str(tmp_path / "chat"), model_name="primenb/tiny-byte")
    talk = Conversation(messages=[{"role": "user", "content": "Reverse: abc"}])
    assert pool.prompt_format(text) == "raw" and pool.prompt_ids(text, talk)[1] == "Reverse: abc"
    assert pool.prompt_format(chat) == "chat_template"
    assert pool.prompt_ids(chat, talk)[1] == "<bos>user\nReverse: abc<eos>\n<bos>assistant\n"


def test_environment_tokens_get_no_gradient(tmp_path: Path) -> None:
    """One real GRPO step (TRL's trainer, a rollout function returning fixed episodes): the
    gradient is exactly zero at every position whose next token the env mask excludes, and not
    at the model's."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from primenb.engine.episodes import episode_reward
    from primenb.engine.models import load_model

    model, tok, _ = load_model("primenb/tiny-byte", seed=1)
    completions = [[10, 11, 12, 40, 41, 42, 13, 14, 2], [20, 21, 22, 50, 51, 52, 23, 24, 2]]
    masks = [[1, 1, 1, 0, 0, 0, 1, 1, 1], [1, 1, 1, 0, 0, 0, 1, 1, 1]]

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        n = len(prompts)
        return {
            "prompt_ids": [[1, 5, 6]] * n,
            "completion_ids": [completions[i % 2] for i in range(n)],
            "logprobs": [[-1.0] * 9 for _ in range(n)],
            "env_mask": [masks[i % 2] for i in range(n)],
            "episode_reward": [float(i % 2) for i in range(n)],
        }

    grads: list[torch.Tensor] = []

    def keep_grad(_module: Any, _inputs: Any, output: torch.Tensor) -> None:
        if output.requires_grad:
            output.register_hook(lambda g: grads.append(g.detach().clone()))

    # TRL multiplies the final hidden states by lm_head.weight itself: the final norm's output at
    # position p feeds only the logit that predicts token p + 1
    model.model.norm.register_forward_hook(keep_grad)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        num_generations=2,
        learning_rate=1e-3,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        use_cpu=True,
        beta=0.0,
        max_completion_length=16,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[episode_reward],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "task"}] * 4),
        processing_class=tok,
        rollout_func=rollout,
    )
    trainer.train()
    assert grads, "no backward pass reached the final hidden states"
    g = grads[-1]  # [rows, prompt (3) + completion (9), hidden]
    assert g.shape[1] == 12
    per_pos = g.abs().sum(-1)[:, 2:11]  # the positions predicting completion tokens 0..8
    for row in range(per_pos.shape[0]):
        mask = torch.tensor(masks[row % 2], dtype=torch.bool)
        assert torch.all(per_pos[row][~mask] == 0), per_pos[row]
        assert torch.all(per_pos[row][mask] > 0), per_pos[row]


# ---------------------------------------------------------------------------------------------
# slow: the engine trains on episodes


@pytest.fixture
def vf_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "prime-home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(VF_ENVS))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(VF_ENVS), os.environ.get("PYTHONPATH")])))
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] in ("alphabet_sort", "weather_tool")]:
        del sys.modules[name]


def _episode_run(
    env: str, args: str, name: str, *, max_turns: int | None = None, lora: bool = False, primenb: str = ""
) -> Any:
    from primenb import load_config
    from primenb.backends import submit

    from ..tiny import episode_toml

    toml = episode_toml(
        env, args, max_turns=max_turns, steps=2, seq_len=512, max_tokens=16, batch_size=4, group_size=2, lora=lora,
        primenb="sample_every = 1\n" + primenb,
    )  # fmt: skip
    run = submit(load_config(toml), name=name)
    assert run.wait(timeout=600) == "completed", run.logs(200)
    return run


@pytest.mark.slow
def test_an_alphabet_sort_shaped_config_trains_on_its_episodes(vf_workdir: Path) -> None:
    run = _episode_run("alphabet-sort", "min_turns = 2\nmax_turns = 2\nnum_tasks = 4\n", "alphabet", lora=True)
    rows = [r for r in run.metric_rows() if "reward" in r]
    assert len(rows) == 2
    for row in rows:
        assert row["episodes/turns"] == 2.0  # each episode played both scripted user turns
        assert row["episodes/failed"] == 0.0
        assert "rewards/episode_reward/mean" in row and 0.0 <= row["reward"] <= 1.0
    logs = run.logs(100_000)
    assert "verifiers episodes (null harness, subprocess runtime)" in logs
    assert "rollout done" in logs and "policy served to the episodes" in logs
    samples = run.samples
    assert set(samples["task"]) == {"alphabet-sort"}
    # a sample shows what the model was first shown (the scripted user's opening turn), not a label
    assert all("Sort these names alphabetically" in p for p in samples["prompt"])
    assert (run.files.checkpoints / "step_2").is_dir()


@pytest.mark.slow
def test_a_tool_taskset_trains_on_its_episodes(vf_workdir: Path) -> None:
    run = _episode_run("weather-tool", "", "weather", max_turns=3)
    rows = [r for r in run.metric_rows() if "reward" in r]
    assert len(rows) == 2 and all("episodes/tool_calls" in r and r["episodes/failed"] == 0.0 for r in rows)


@pytest.mark.slow
def test_the_built_in_multi_turn_taskset_warms_up_on_ideal_conversations_then_trains_on_episodes(
    vf_workdir: Path,
) -> None:
    run = _episode_run(
        "reverse-turns", "num_tasks = 200\n", "reverse-turns", max_turns=4, primenb="sft_warmup_steps = 20\n"
    )
    rows = run.metric_rows()
    warm = [r["warmup/loss"] for r in rows if "warmup/loss" in r]
    assert len(warm) >= 2 and warm[-1] < warm[0]  # the warm-up trained on the conversations' replies
    grpo = [r for r in rows if "reward" in r]
    assert len(grpo) == 2 and all(r["episodes/turns"] == 2.0 for r in grpo)
    assert (run.files.checkpoints / "sft_warmup").is_dir() and (run.files.checkpoints / "step_2").is_dir()
    trainer_args = json.loads((run.files.configs / "trainer_args.sft_warmup.json").read_text())["args"]
    assert trainer_args["assistant_only_loss"] is True
    for folder in ("sft_warmup", "step_2"):  # a server shows them chat through the template they learned
        note = json.loads((run.files.checkpoints / folder / "primenb_checkpoint.json").read_text())
        assert note["prompt_format"] == "chat_template"
        assert note["base"]["name"] == "primenb/tiny-byte"  # the warm-up's note names its weights too


@pytest.mark.slow
def test_a_stop_during_a_steps_episodes_cancels_them_and_ends_as_a_stop_between_steps_does(vf_workdir: Path) -> None:
    """Stop while step 2's episodes are in flight: they are cancelled (fewer turns answered than a
    full step), step 2 is not trained, and the run ends `stopped` at step 1 with step 1's final
    checkpoint, as a stop at step 1's end would leave it."""
    from primenb import load_config
    from primenb.backends import submit

    from ..tiny import episode_toml

    turns_log = vf_workdir / "turns.log"
    episodes, turns = 4, 3
    full_step = episodes * turns  # every episode plays all its scripted turns (none ends early)
    toml = episode_toml(
        "alphabet-sort", f'min_turns = {turns}\nmax_turns = {turns}\nnum_tasks = 4\nturn_log = "{turns_log}"\n',
        steps=1000, seq_len=512, max_tokens=TURN_TOKENS, batch_size=episodes, group_size=2, primenb="sample_every = 1\n",
    )  # fmt: skip

    def answered() -> int:
        return len(turns_log.read_text().splitlines()) if turns_log.exists() else 0

    run = submit(load_config(toml), name="stop-episodes")
    try:
        wait_for(lambda: answered() > full_step, 900, "a turn of step 2 answered")
        assert run.stop(timeout=600) == "stopped", run.logs(200)  # the timeout only catches a hang
    finally:
        if run.state not in ("stopped", "failed", "completed"):
            run.stop(force=True, timeout=30)
    played = answered() - full_step
    assert 1 <= played < full_step, played  # step 2's episodes were cancelled before they ended
    st = run.status
    assert st["state"] == "stopped" and st["stop_requested"] == "STOP file"
    assert st["step"] == 1  # step 2 was not trained on its partial episodes
    final = run.files.checkpoints / "step_1"
    assert Path(st["final_checkpoint"]).resolve() == final.resolve() and (final / "model.safetensors").is_file()
    assert not (run.files.checkpoints / "step_2").exists()
    assert [r["step"] for r in run.metric_rows() if "reward" in r] == [1]
    trace = json.loads(run.files.trace_path.read_text())
    assert trace["status"] == "stopped" and trace["steps"]["last"] == 1
    assert trace["final"] and "step_1" in json.dumps(trace["final"])
    assert "its 4 episodes were cancelled" in run.logs(100_000)


@pytest.mark.slow
def test_the_built_in_tool_taskset_warms_up_with_its_tools_then_trains_on_tool_episodes(vf_workdir: Path) -> None:
    """``lookup-code``: the warm-up trains on its ideal conversations, then GRPO plays episodes whose
    tool server verifiers starts from primenb's own package (``python -m lookup_code.servers.lookup``)
    and counts the tool calls. (That the warm-up renders the episode's tool block token for token:
    tests/envs/test_lookup_code.py; that the model learns to call: bench/agents_learning.py.)"""
    run = _episode_run("lookup-code", "num_tasks = 64\n", "lookup-code", max_turns=3, primenb="sft_warmup_steps = 6\n")
    rows = run.metric_rows()
    warm = [r["warmup/loss"] for r in rows if "warmup/loss" in r]
    assert len(warm) >= 2 and warm[-1] < warm[0]
    grpo = [r for r in rows if "reward" in r]
    assert len(grpo) == 2
    for row in grpo:  # every episode ran (a tool server that cannot start fails them all)
        assert row["episodes/failed"] == 0.0 and row["episodes/tool_calls"] >= 0.0
        assert 0.0 <= row["reward"] <= 1.0  # looked_up (0.2) + answered (0.8)
    assert (run.files.checkpoints / "sft_warmup").is_dir() and (run.files.checkpoints / "step_2").is_dir()
