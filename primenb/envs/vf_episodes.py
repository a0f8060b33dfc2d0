"""verifiers' own episodes, run locally against an inference server, with each turn's tokens.

`run_episodes` runs a verifiers 0.4 environment (its ``Env``: the taskset, its agents, their
harness and runtime, toolsets, scripted user turns, turn limits, its scoring) through verifiers'
own loop (``Env.serving`` / ``slots`` / ``run_slot``), with the model served at ``base_url``:

* through verifiers' training client (``client="train"``, the default): each turn is rendered to
  token ids by the ``renderers`` package and sent to vLLM's ``/inference/v1/generate`` route
  (``primenb serve`` has it), so every turn comes back as the ids the model saw and sampled and the
  completion's logprobs: what prime-rl trains on;
* or through its eval client (``client="eval"``): OpenAI chat completions, no token ids.

Every episode comes back as an `Episode`: its messages, its turns (`Turn`: prompt ids, completion
ids, completion logprobs, the messages the prompt rendered), verifiers' rewards and metrics, and
verifiers' own errors (an episode whose model reply broke something is data, not an exception).

What cannot run here raises `EpisodePartError` naming the part and what would make it run, before
any episode starts where it can be known (a harness that downloads its agent at run time, a remote
or container runtime, a remote judge or tool server, an unreachable server, a tokenizer that
cannot be loaded), and after the first attempt otherwise (the chat program's uv environment).

The ``null`` and ``bash`` harnesses run their chat program as a uv script (PEP 723): it needs
``uv`` (a ``uv`` next to this Python or on PATH is put first on the harness's PATH; without one,
verifiers runs ``pip install --user uv``) and the script's packages (``openai``, ``mcp==2.0.0``,
``httpx``, ``httpx2``, ``tenacity``, ``certifi``) from the package index, or offline from a
wheelhouse (``wheelhouse=``). Nothing here imports torch; verifiers is imported when used.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import shutil
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from primenb.aio import run_async
from primenb.envs.errors import EnvironmentArgumentError, EnvironmentLoadError, EpisodePartError
from primenb.protocol import openai_api as api
from primenb.protocol.privacy import error_text

log = logging.getLogger("primenb.envs")

# The script's dependencies (verifiers.v1.harnesses.utils.launch.CHAT_PROGRAM).
CHAT_PROGRAM_PACKAGES = ("openai", "mcp==2.0.0", "httpx", "httpx2", "tenacity", "certifi")
UV_SCRIPT_HARNESSES = frozenset({"null", "bash", "mini_swe_agent", "terminus_2"})
# Harnesses whose agent program is fetched at run time from outside the package registries.
DOWNLOADING_HARNESSES = {
    "claude_code": "Node.js (from nodejs.org) and the Claude Code package (npm)",
    "codex": "Node.js (from nodejs.org) and the Codex package (npm)",
    "pi": "Node.js (from nodejs.org) and the pi coding agent (npm)",
    "prime_agent": "Node.js (from nodejs.org) and prime-agent's release (GitHub)",
    "hermes_agent": "Hermes Agent's source (GitHub)",
    "kimi_code": "Kimi Code's installer (code.kimi.com)",
    "openclaw": "OpenClaw's installer (openclaw.ai)",
    "rlm": "RLM's source (a git clone from GitHub)",
}
CONTAINER_RUNTIMES = {"docker": "docker", "podman": "podman", "apptainer": "apptainer"}
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
UV_SCRIPT_FAILED = "failed to prepare uv script"


@dataclass
class Turn:
    """One model turn: the messages its prompt rendered and what the model answered. With the
    training client: the prompt's token ids, the sampled ids (ending with the stop token when the
    model stopped) and their logprobs; with the eval client these are empty."""

    messages: list[dict[str, Any]]
    reply: dict[str, Any]
    prompt_ids: list[int] = field(default_factory=list, repr=False)
    completion_ids: list[int] = field(default_factory=list, repr=False)
    logprobs: list[float] = field(default_factory=list, repr=False)
    tools: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def has_tokens(self) -> bool:
        return bool(self.completion_ids)


@dataclass
class AgentRun:
    """One agent's trace in an episode (a single-agent environment has one)."""

    agent: str | None
    messages: list[dict[str, Any]]
    turns: list[Turn]
    reward: float
    rewards: dict[str, float | None]
    metrics: dict[str, float | None]
    ok: bool
    errors: list[dict[str, Any]]
    stop_condition: str | None
    is_truncated: bool
    trainable: bool = True
    trace: Any = field(default=None, repr=False, compare=False)  # verifiers' Trace


@dataclass
class Episode:
    """One episode of a task, as verifiers ran and scored it."""

    task: int | None  # the task's idx (its position when it has none)
    ok: bool
    errors: list[dict[str, Any]]  # the episode's own (Env.run / finalize), then its traces'
    runs: list[AgentRun]
    episode: Any = field(default=None, repr=False, compare=False)  # verifiers' Episode

    @property
    def reward(self) -> float:
        """The mean reward of its trainable agents' runs (one agent: its reward)."""
        runs = [r for r in self.runs if r.trainable] or self.runs
        return sum(r.reward for r in runs) / len(runs) if runs else 0.0

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.runs[-1].messages if self.runs else []

    @property
    def turns(self) -> list[Turn]:
        return [t for r in self.runs for t in r.turns]

    @property
    def tool_calls(self) -> int:
        return sum(len(t.reply.get("tool_calls") or []) for t in self.turns)


# ---------------------------------------------------------------------------------------------
# loading


def load_env(
    taskset: str,
    args: Mapping[str, Any] | None = None,
    *,
    harness: str = "null",
    runtime: str = "subprocess",
    max_turns: int | None = None,
    env_id: str = "",
    harness_env: Mapping[str, str] | None = None,
) -> Any:
    """verifiers' ``Env`` for the taskset ``taskset`` (``owner/name@version`` or ``name``) with
    ``args`` as its config fields, one agent seat playing through ``harness`` in ``runtime``,
    at most ``max_turns`` model turns (verifiers' ``[env.agent] max_turns``; a taskset's own
    ``max_turns`` argument, e.g. user turns, goes in ``args``)."""
    from pydantic import ValidationError

    from primenb.envs.verifiers_adapter import builtin_tasksets_on_path

    vf = _verifiers()
    builtin_tasksets_on_path()
    agent: dict[str, Any] = {"harness": {"id": harness, "env": dict(harness_env or {})}, "runtime": {"type": runtime}}
    if max_turns is not None:
        agent["max_turns"] = max_turns
    raw: dict[str, Any] = {"taskset": {**dict(args or {}), "id": taskset}, "agent": agent}
    if env_id:
        raw["id"] = env_id
    try:
        config = vf.resolve_env_config(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in exc.errors())
        raise EnvironmentArgumentError(f"verifiers environment {taskset!r}: {problems}") from None
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise EnvironmentLoadError(f"verifiers environment {taskset!r} could not be loaded: {error_text(exc)}") from exc
    try:
        return vf.load_environment(config)
    except Exception as exc:
        raise EnvironmentLoadError(
            f"verifiers environment {taskset!r} raised while loading: {error_text(exc)}"
        ) from exc


def _verifiers() -> Any:
    try:
        import verifiers.v1 as vf
    except ImportError as exc:
        raise EnvironmentLoadError(
            f"verifiers episodes need verifiers 0.4 (pip install 'primenb[verifiers]'): {error_text(exc)}"
        ) from exc
    return vf


# ---------------------------------------------------------------------------------------------
# what cannot run here, found before any episode


def check_env(env: Any) -> None:
    """Raise `EpisodePartError` for a part of ``env`` that cannot run on this machine."""
    from verifiers.v1.utils.compile import validate_pairing

    taskset_cls = type(env.taskset)
    task_cls = taskset_cls.task_type()
    for name, spec in env._agent_specs.items():
        harness = env._harnesses[name]
        hid = _plugin(harness.config.id)
        seat = f"agent {name!r}"
        if hid in DOWNLOADING_HARNESSES:
            raise EpisodePartError(
                f"harness {harness.config.id!r} ({seat})",
                f"it downloads its agent program at run time: {DOWNLOADING_HARNESSES[hid]}, which this machine "
                "cannot fetch. Run it where those hosts are reachable, or play the seat with the `null` harness "
                "(a chat loop with the environment's tools).",
            )
        _check_runtime(spec.runtime, f"runtime of {seat}")
        tools = [*task_cls.toolsets(env.taskset.config.task), *env.taskset.toolsets(env.taskset.config)]
        try:
            validate_pairing(harness, task_cls, spec.runtime, tools=tools)
        except ValueError as exc:
            raise EpisodePartError(f"harness {harness.config.id!r} ({seat})", error_text(exc)) from None
        client = spec.client
        if client is not None and not _is_local(client.base_url):
            raise EpisodePartError(f"model client of {seat}", f"it calls {client.base_url}, not a local server.")
    for server in [*task_cls.toolsets(env.taskset.config.task), *env.taskset.toolsets(env.taskset.config)]:
        where = f"tool server {server.server_name or type(server).__name__!r}"
        url = getattr(server.config, "url", None)
        if url and not _is_local(url):
            raise EpisodePartError(where, f"it is a remote MCP server ({url}); this machine reaches no such host.")
        _check_runtime(server.config.runtime, where)
    for judge in getattr(env.taskset.config.task, "judges", None) or []:
        if not _is_local(judge.base_url):
            raise EpisodePartError(
                f"judge {judge.id!r} (model {judge.model!r})",
                f"it scores with a model at {judge.base_url}, a remote API. Point its base_url at a local "
                "server (e.g. primenb serve) to run it here.",
            )


def _plugin(ident: str) -> str:
    return ident.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower()


def _check_runtime(config: Any, where: str) -> None:
    kind = getattr(config, "type", "subprocess")
    if kind == "subprocess":
        return
    binary = CONTAINER_RUNTIMES.get(kind)
    if binary is None:
        raise EpisodePartError(
            where,
            f"{kind!r} is a remote sandbox: it needs that provider's account and network access. Use "
            '`runtime = "subprocess"` to run here (prime-rl\'s local examples do).',
        )
    if shutil.which(binary) is None:
        raise EpisodePartError(
            where, f"the {kind} runtime needs `{binary}` and its images on this machine; use `subprocess` instead."
        )


def _is_local(url: str) -> bool:
    return (urlsplit(url).hostname or "") in LOCAL_HOSTS


def check_server(base_url: str, model: str, *, token_route: bool, api_key_var: str | None = None) -> None:
    """The server at ``base_url`` (``.../v1``) answers, serves ``model``, and (``token_route``)
    has vLLM's ``/inference/v1/generate``."""
    root = base_url.rstrip("/").removesuffix(api.API_ROOT)
    key = os.environ.get(api_key_var) if api_key_var else None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(root + api.MODELS, headers=headers), timeout=30) as r:
            ids = [m.get("id") for m in json.loads(r.read()).get("data", [])]
    except (OSError, ValueError) as exc:
        raise EpisodePartError("inference server", f"{root}{api.MODELS} did not answer ({error_text(exc)}).") from None
    if model not in ids:
        raise EpisodePartError("inference server", f"it does not serve {model!r}; it serves {ids}.")
    if not token_route:
        return
    probe = urllib.request.Request(
        root + api.GENERATE, data=b"{}", headers={**headers, "Content-Type": "application/json"}
    )
    try:
        urllib.request.urlopen(probe, timeout=30).close()
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 405):
            raise EpisodePartError(
                "inference server",
                f"{root} has no {api.GENERATE} (vLLM's token route, which verifiers' training client "
                "calls). Serve the model with primenb serve or vLLM, or run with client='eval'.",
            ) from None
    except OSError as exc:
        raise EpisodePartError("inference server", f"{root}{api.GENERATE}: {error_text(exc)}") from None


# ---------------------------------------------------------------------------------------------
# the training client's renderer


def renderer_for(tokenizer: str, renderer: Any = None) -> Any:
    """The ``renderers`` config verifiers' training client renders with: ``renderer`` when given
    (a config, or a name: ``"hermes"`` for `primenb.envs.vf_renderer.HermesRenderer`), else the
    family renderer ``renderers`` knows for the tokenizer's name, else the tokenizer's chat
    template (`HermesRenderer` when the template writes Hermes ``<tool_call>`` blocks, as primenb's
    embedded models' does, so their tool calls are parsed)."""
    import renderers

    if renderer is not None and not isinstance(renderer, str):
        return renderer
    if renderer == "hermes":
        from primenb.envs.vf_renderer import renderer_config

        return renderer_config()
    if isinstance(renderer, str):
        return _renderer_adapter().validate_python({"name": renderer})
    from renderers.base import MODEL_RENDERER_MAP

    if tokenizer in MODEL_RENDERER_MAP:
        return None  # verifiers' auto resolution picks the family renderer
    template = _chat_template(tokenizer)
    if template and "<tool_call>" in template:
        from primenb.envs.vf_renderer import renderer_config

        return renderer_config()
    return renderers.DefaultRendererConfig()


def _renderer_adapter() -> Any:
    from pydantic import TypeAdapter
    from renderers import RendererConfig

    return TypeAdapter(RendererConfig)


def _chat_template(tokenizer: str) -> str | None:
    path = Path(tokenizer)
    for name in ("chat_template.jinja", "tokenizer_config.json"):
        f = path / name
        if f.is_file():
            text = f.read_text()
            if name.endswith(".json"):
                template = json.loads(text).get("chat_template")
                return template if isinstance(template, str) else None
            return text
    return None


def build_renderer(tokenizer: str, renderer: Any = None) -> Any:
    """The renderer the training client builds for ``tokenizer`` (to compare ids with)."""
    from renderers import create_renderer
    from renderers.base import load_tokenizer

    if not Path(tokenizer).is_dir() and not _cached(tokenizer) and not _hub_reachable():
        raise EpisodePartError(
            f"tokenizer {tokenizer!r}",
            "verifiers' training client renders every turn with it; it is not a folder, not in the Hugging "
            "Face cache, and the Hub cannot be reached from here. Pass tokenizer=<a folder with the "
            "tokenizer's files> (primenb's embedded models: save primenb.engine.models.build_byte_tokenizer()).",
        )
    try:
        tok = load_tokenizer(tokenizer)
    except Exception as exc:
        raise EpisodePartError(
            f"tokenizer {tokenizer!r}",
            f"verifiers' training client renders every turn with it and it could not be loaded "
            f"({error_text(exc)[:300]}). Pass tokenizer=<a folder with the tokenizer's files>.",
        ) from None
    try:
        return create_renderer(tok, renderer_for(tokenizer, renderer))
    except Exception as exc:
        raise EpisodePartError(f"renderer for {tokenizer!r}", error_text(exc)[:500]) from None


def _cached(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "tokenizer_config.json"), str)
    except Exception:
        return False


def _hub_reachable() -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=5).close()
    except urllib.error.HTTPError:
        return True  # it answered
    except (OSError, ValueError):
        return False
    return True


# ---------------------------------------------------------------------------------------------
# the harness's chat program (a uv script)


def uv_dir() -> str | None:
    """The folder of a ``uv``: next to this Python (a virtualenv with the ``uv`` package), the
    ``uv`` package's own, on PATH, or ``~/.local/bin`` (where verifiers installs one)."""
    here = Path(sys.executable).parent / "uv"
    if here.is_file():
        return str(here.parent)
    try:
        import uv

        return str(Path(uv.find_uv_bin()).parent)
    except Exception:
        pass
    found = shutil.which("uv")
    if found:
        return str(Path(found).parent)
    user = Path.home() / ".local" / "bin" / "uv"  # where verifiers' own bootstrap (pip install --user uv) puts it
    return str(user.parent) if user.is_file() else None


def chat_program_env(wheelhouse: str | Path | None = None) -> dict[str, str]:
    """The harness's process variables that let verifiers prepare its chat program here: this
    machine's ``uv`` first on PATH and, with a ``wheelhouse`` (a folder of wheels of the script's
    packages and their dependencies), no package index at all."""
    env: dict[str, str] = {}
    found = uv_dir()
    if found and found not in os.environ.get("PATH", "").split(os.pathsep)[:1]:
        env["PATH"] = os.pathsep.join([found, os.environ.get("PATH", "")])
    if wheelhouse is not None:
        wh = Path(wheelhouse).resolve()
        if not wh.is_dir():
            raise EpisodePartError("wheelhouse", f"{wh} is not a folder")
        empty = wh / ".no-index"
        empty.mkdir(exist_ok=True)
        env.update(
            {
                "PIP_NO_INDEX": "1",
                "PIP_FIND_LINKS": str(wh),
                "UV_DEFAULT_INDEX": empty.as_uri(),
                "UV_FIND_LINKS": str(wh),
                "UV_PYTHON_DOWNLOADS": "never",
            }
        )
    return env


def _uv_script_error(harness: str, detail: str) -> EpisodePartError:
    found = uv_dir()
    need = f"uv ({found}/uv)" if found else "uv (none found: pip install uv, or primenb[verifiers], which brings it)"
    return EpisodePartError(
        f"harness {harness!r}: its chat program",
        "verifiers runs it as a uv script, which needs "
        f"{need} and its packages ({', '.join(CHAT_PROGRAM_PACKAGES)} and their dependencies) from the package "
        "index, or offline from a wheelhouse of them (run_episodes(..., wheelhouse=DIR); `pip download "
        f"{' '.join(CHAT_PROGRAM_PACKAGES)} uv -d DIR` where the index is reachable). uv said: {detail[-600:]}",
    )


# ---------------------------------------------------------------------------------------------
# running


def keep_runtime_folders_home() -> None:
    """verifiers' subprocess runtime makes (and removes) a working folder per rollout under
    ``~/.cache/verifiers``; primenb keeps them under its own home (PRIME_HOME)."""
    import verifiers.v1.runtimes.subprocess as runtime

    from primenb.home import prime_home

    if hasattr(runtime, "CACHE_DIR"):  # verifiers 0.4's name for it
        runtime.CACHE_DIR = prime_home() / "cache" / "verifiers"


def run_episodes(
    env: Any,
    *,
    base_url: str,
    model: str,
    args: Mapping[str, Any] | None = None,
    num_tasks: int | None = 1,
    rollouts: int = 1,
    client: str = "train",
    tokenizer: str | Path | None = None,
    renderer: Any = None,
    sampling: Mapping[str, Any] | None = None,
    max_turns: int | None = None,
    harness: str = "null",
    runtime: str = "subprocess",
    api_key_var: str | None = None,
    max_concurrent: int = 4,
    wheelhouse: str | Path | None = None,
) -> list[Episode]:
    """Run ``rollouts`` episodes of each of the first ``num_tasks`` tasks (None: all; an infinite
    taskset needs a number) of ``env`` (a verifiers ``Env``, or a taskset id loaded with ``args``,
    ``harness``, ``runtime`` and ``max_turns`` by `load_env`) against ``model`` served at
    ``base_url`` (``http://host:port/v1``), through verifiers' own episode loop.

    ``client="train"``: verifiers' training client, rendering with ``tokenizer`` (a folder or a
    hub name; default: the model id) and ``renderer`` (see `renderer_for`), so each `Turn` has
    its token ids and logprobs; ``client="eval"``: OpenAI chat completions. ``sampling`` is
    verifiers' ``SamplingConfig`` (``temperature``, ``max_tokens``, ``seed``, vLLM's extras).
    Episodes come back in task order, ``rollouts`` per task."""
    return run_async(
        arun_episodes(
            env,
            base_url=base_url,
            model=model,
            args=args,
            num_tasks=num_tasks,
            rollouts=rollouts,
            client=client,
            tokenizer=tokenizer,
            renderer=renderer,
            sampling=sampling,
            max_turns=max_turns,
            harness=harness,
            runtime=runtime,
            api_key_var=api_key_var,
            max_concurrent=max_concurrent,
            wheelhouse=wheelhouse,
        )
    )


async def arun_episodes(
    env: Any,
    *,
    base_url: str,
    model: str,
    args: Mapping[str, Any] | None = None,
    num_tasks: int | None = 1,
    rollouts: int = 1,
    client: str = "train",
    tokenizer: str | Path | None = None,
    renderer: Any = None,
    sampling: Mapping[str, Any] | None = None,
    max_turns: int | None = None,
    harness: str = "null",
    runtime: str = "subprocess",
    api_key_var: str | None = None,
    max_concurrent: int = 4,
    wheelhouse: str | Path | None = None,
) -> list[Episode]:
    """`run_episodes` inside a running event loop."""
    if client not in ("train", "eval"):
        raise EnvironmentArgumentError(f"client must be 'train' or 'eval', got {client!r}")
    if rollouts < 1 or (num_tasks is not None and num_tasks < 1):
        raise EnvironmentArgumentError("num_tasks and rollouts must be at least 1")
    program_env = chat_program_env(wheelhouse)
    if isinstance(env, str):
        env = load_env(env, args, harness=harness, runtime=runtime, max_turns=max_turns, harness_env=program_env)
    else:
        _add_harness_env(env, program_env)
    check_env(env)
    check_server(base_url, model, token_route=client == "train", api_key_var=api_key_var)
    ctx = model_context(
        base_url=base_url,
        model=model,
        client=client,
        tokenizer=tokenizer,
        renderer=renderer,
        sampling=sampling,
        api_key_var=api_key_var,
    )
    tasks = take_tasks(env, num_tasks)
    keep_runtime_folders_home()
    gate = asyncio.Semaphore(max(1, max_concurrent))
    slots = [(env, slot) for task in tasks for slot in env.slots(task, rollouts)]
    try:
        async with env.serving():
            raw = await run_slots(slots, ctx, gate)
    except EpisodePartError:
        raise
    except Exception as exc:  # shared tool servers, the interception: the env's serving resources
        raise EpisodePartError(
            f"verifiers' serving resources for {env.config.env_id!r}", error_text(exc)[:800]
        ) from None
    return [episode(e, order // rollouts) for order, e in enumerate(raw)]


def model_context(
    *,
    base_url: str,
    model: str,
    client: str = "train",
    tokenizer: str | Path | None = None,
    renderer: Any = None,
    sampling: Mapping[str, Any] | None = None,
    api_key_var: str | None = None,
) -> Any:
    """verifiers' ``ModelContext`` for ``model`` at ``base_url`` through its training client (the
    renderer built once here, so a tokenizer that cannot load fails now, clearly) or eval client."""
    vf = _verifiers()
    if client not in ("train", "eval"):
        raise EnvironmentArgumentError(f"client must be 'train' or 'eval', got {client!r}")
    key_var = api_key_var or "PRIMENB_NO_API_KEY"
    if client == "train":
        tok = str(tokenizer or model)
        build_renderer(tok, renderer)
        client_config: Any = vf.TrainClientConfig(
            base_url=base_url, api_key_var=key_var, renderer=renderer_for(tok, renderer), renderer_model_name=tok
        )
    else:
        client_config = vf.EvalClientConfig(base_url=base_url, api_key_var=key_var)
    return vf.ModelContext(model=model, client=client_config, sampling=vf.SamplingConfig(**dict(sampling or {})))


async def run_slots(slots: Sequence[tuple[Any, Any]], ctx: Any, gate: asyncio.Semaphore) -> list[Any]:
    """Run each ``(env, slot)`` through its env's own loop (inside that env's ``serving()``);
    verifiers' episodes in order. A chat program that could not be prepared fails every episode
    the same way: that raises `EpisodePartError` saying what it needs."""
    raw = list(await asyncio.gather(*(env.run_slot(slot, ctx, gate) for env, slot in slots)))
    for env in {id(e): e for e, _ in slots}.values():
        _raise_for_setup(env, [ep for e, ep in zip((e for e, _ in slots), raw, strict=True) if e is env])
    return raw


def _add_harness_env(env: Any, extra: dict[str, str]) -> None:
    """Put ``extra`` under each harness's own variables (an explicit harness variable wins)."""
    if not extra:
        return
    for harness in {id(h): h for h in env._harnesses.values()}.values():
        harness.config.env = {**extra, **harness.config.env}


def take_tasks(env: Any, num_tasks: int | None) -> list[Any]:
    taskset = env.taskset
    if num_tasks is None and not getattr(taskset, "bounded", True):
        raise EnvironmentArgumentError(f"{env.config.env_id!r} is an infinite taskset: give num_tasks")
    try:
        tasks = list(itertools.islice(iter(taskset), num_tasks))
    except Exception as exc:
        raise EnvironmentLoadError(f"{env.config.env_id!r} raised while loading its tasks: {error_text(exc)}") from exc
    if not tasks:
        raise EnvironmentLoadError(f"{env.config.env_id!r} yielded no tasks")
    return tasks


def _raise_for_setup(env: Any, episodes: Sequence[Any]) -> None:
    """A harness whose chat program could not be prepared failed every episode the same way: say
    what it needs instead of returning a list of failures."""
    for ep in episodes:
        for err in [*ep.errors, *(e for t in ep.traces for e in t.errors)]:
            if UV_SCRIPT_FAILED in (err.message or ""):
                harness = next(iter(env._harnesses.values())).config.id
                detail = err.message.split(UV_SCRIPT_FAILED, 1)[1].lstrip(": ")
                raise _uv_script_error(harness, detail)


# ---------------------------------------------------------------------------------------------
# what came back


def episode(ep: Any, order: int) -> Episode:
    idx = ep.task.data.idx
    runs = [_run(t) for t in ep.traces]
    errors = [_error(e) for e in ep.errors] + [e for r in runs for e in r.errors]
    return Episode(task=idx if idx is not None else order, ok=bool(ep.ok), errors=errors, runs=runs, episode=ep)


def _run(trace: Any) -> AgentRun:
    from verifiers.v1.dialects.chat import message_to_wire

    return AgentRun(
        agent=trace.agent.name if trace.agent is not None else None,
        messages=[message_to_wire(m) for m in trace.messages],
        turns=turns(trace),
        reward=float(trace.reward),
        rewards={k: (None if r is None else float(r.score)) for k, r in trace.rewards.items()},
        metrics=dict(trace.metrics),
        ok=bool(trace.ok),
        errors=[_error(e) for e in trace.errors],
        stop_condition=trace.stop_condition,
        is_truncated=bool(trace.is_truncated),
        trainable=bool(getattr(trace.agent, "trainable", True)) if trace.agent is not None else True,
        trace=trace,
    )


def _error(err: Any) -> dict[str, Any]:
    return {"type": err.type, "message": err.message, "status_code": err.status_code}


def turns(trace: Any) -> list[Turn]:
    """Each model turn of a verifiers trace, rebuilt from its message graph: a sampled node's
    prompt is its path's tokens (every ancestor's span, then its own generation-prompt scaffold),
    which is exactly what the model was sent (`MessageNode.token_ids`)."""
    from verifiers.v1.dialects.chat import message_to_wire

    out: list[Turn] = []
    nodes = trace.nodes
    for node in nodes:
        if not node.sampled:
            continue
        path: list[int] = []
        p = node.parent
        while p is not None:
            path.append(p)
            p = nodes[p].parent
        path.reverse()
        root_tools = nodes[path[0]].tools if path else node.tools
        first = node.mask.index(True) if True in node.mask else len(node.token_ids)
        prompt = [t for n in path for t in nodes[n].token_ids] + list(node.token_ids[:first])
        out.append(
            Turn(
                messages=[message_to_wire(nodes[n].message) for n in path],
                reply=message_to_wire(node.message),
                prompt_ids=prompt if node.token_ids else [],
                completion_ids=list(node.token_ids[first:]),
                logprobs=list(node.logprobs),
                tools=[_tool(t) for t in root_tools],
            )
        )
    return out


def _tool(tool: Any) -> dict[str, Any]:
    from verifiers.v1.clients.train import tool_to_wire

    try:
        return tool_to_wire(tool)
    except NotImplementedError:  # a namespaced or custom tool: the training client refuses it anyway
        return dict(tool.model_dump(exclude_none=True))


__all__ = [
    "AgentRun",
    "Episode",
    "Turn",
    "arun_episodes",
    "build_renderer",
    "chat_program_env",
    "check_env",
    "check_server",
    "episode",
    "keep_runtime_folders_home",
    "load_env",
    "model_context",
    "renderer_for",
    "run_episodes",
    "run_slots",
    "take_tasks",
    "turns",
    "uv_dir",
]
