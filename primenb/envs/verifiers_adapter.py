"""verifiers v1 tasksets as environments of the local engine (``verifiers`` 0.4.x, ``verifiers.v1``).

A taskset id resolves the way verifiers' own loader resolves it
(``verifiers.v1.utils.loaders``): ``owner/name@version`` -> module ``name`` with ``-`` -> ``_``,
lowercased (``verifiers.v1.tasksets.<module>`` first), whose ``__all__`` exports one ``Taskset``
subclass. Its config class validates the arguments (the extra keys of
``[...env.taskset]``), ``load()`` yields the tasks, and then:

* each task becomes a row: ``prompt`` (text or messages), ``answer`` (the task data's ``answer``
  field, when it has one), ``info`` = ``{"vf_idx": position, **the task data's own fields}``;
  a system prompt shared by every task becomes the environment's system prompt, a per-task one
  is put in front of that row's messages;
* each ``@vf.reward`` (and each reward plugged through ``[...taskset.task.rewards]``) becomes
  one reward function with the same name and weight. It is called the way verifiers calls it
  (by parameter name: ``task`` = the task data, ``trace`` = a one-turn trace: the prompt
  messages and the completion as the sampled assistant reply, so ``trace.last_reply`` is the
  completion). A reward returning keyed scores counts as their sum. Async rewards run on one
  background event loop (so this works inside a running Jupyter loop too).

What does not fit one turn raises `UnsupportedEnvironmentError` (the engine then trains it on
verifiers' own episodes, `primenb.envs.episode_env`): a taskset that ships its own Env (several
agents/turns) or Harness, tools (toolsets), tasks that need a container or a runtime
(``setup``/``finalize``, rewards that take a ``runtime``), judges, and tasks whose prompt is empty
(the user opens the conversation).

Nothing here imports verifiers until a taskset is actually loaded: `could_be_taskset` and
`installed_tasksets` only look at files and package metadata.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import inspect
import logging
import math
import os
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from primenb.envs.base import Environment, Row, completion_text
from primenb.envs.errors import (
    EnvironmentArgumentError,
    EnvironmentLoadError,
    UnsupportedEnvironmentError,
)
from primenb.envs.guard import PartialScores, checked_score
from primenb.protocol.privacy import error_text

log = logging.getLogger("primenb.envs")

MAX_TASKS = 10_000  # read from an infinite taskset
REMOTE = (
    "not a one-turn task: the engine trains it on verifiers' own episodes (its env.agent harness and "
    "runtime; docs/environments.md, Training on episodes); one-turn evaluation cannot run it"
)


# ---------------------------------------------------------------------------------------------
# cheap lookups (no verifiers import)


def module_name(env_id: str) -> str:
    """The module verifiers imports for a taskset id (``owner/name@1.0`` -> ``name``)."""
    name = env_id.rsplit("/", 1)[-1].split("@", 1)[0]
    return name.replace("-", "_").lower()


def _spec(name: str) -> Any:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def installed() -> bool:
    return _spec("verifiers") is not None


def _builtin_dir() -> Path | None:
    spec = _spec("verifiers")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        path = Path(loc) / "v1" / "tasksets"
        if path.is_dir():
            return path
    return None


# primenb's own tasksets: top-level packages in this folder, found as installed ones are
BUILTIN_TASKSETS = Path(__file__).resolve().parent / "vf_builtin"


def builtin_tasksets() -> dict[str, str]:
    """primenb's own verifiers tasksets: ``{id: first line of its docstring}`` (no import)."""
    out = {}
    for pkg in sorted(BUILTIN_TASKSETS.iterdir()):
        init = pkg / "__init__.py"
        if pkg.is_dir() and init.is_file():
            doc = init.read_text(encoding="utf-8").split('"""', 2)
            out[pkg.name.replace("_", "-")] = _first_line(doc[1] if len(doc) > 2 else "")
    return out


def builtin_tasksets_on_path() -> None:
    """Let verifiers' loader import primenb's own tasksets (after anything installed: an
    installed package of the same name wins)."""
    folder = str(BUILTIN_TASKSETS)
    if folder not in sys.path:
        sys.path.append(folder)
    # verifiers starts a taskset's tool servers as `python -m <module>` with this environment
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([*paths, folder])


def could_be_taskset(env_id: str) -> bool:
    """Whether verifiers' loader would find a module for ``env_id`` (not imported here)."""
    if not env_id or ":" in env_id or not installed():
        return False
    mod = module_name(env_id)
    if not mod.isidentifier() or mod in sys.stdlib_module_names or mod in ("primenb", "verifiers"):
        return False
    if (BUILTIN_TASKSETS / mod / "__init__.py").is_file():
        builtin_tasksets_on_path()
        return True
    builtin = _builtin_dir()
    if builtin is not None and (builtin / mod).is_dir():
        return True
    return _spec(mod) is not None


_SCAN: dict[tuple[Any, ...], dict[str, dict[str, str]]] = {}


def _path_state() -> tuple[Any, ...]:
    """sys.path and the modification times of its folders (installing a package changes them)."""
    state: list[Any] = []
    for entry in sys.path:
        try:
            state.append((entry, Path(entry or ".").stat().st_mtime_ns))
        except OSError:
            state.append((entry, None))
    return tuple(state)


def installed_tasksets() -> dict[str, dict[str, str]]:
    """Installed distributions that depend on verifiers: ``{id: {version, description, module}}``
    (the id is the distribution name, which verifiers' loader maps to its module). Scanning
    package metadata takes ~0.1 s, so the answer is kept until sys.path or its folders change."""
    if not installed():
        return {}
    key = _path_state()
    if key not in _SCAN:
        _SCAN.clear()
        _SCAN[key] = _scan()
    return dict(_SCAN[key])


def _scan() -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for dist in importlib.metadata.distributions():
        try:
            name = dist.metadata["Name"]
            requires = dist.requires or []
        except Exception as exc:
            log.debug("skipping distribution with unreadable metadata: %s", exc)
            continue
        if not name or name.lower() in ("verifiers", "primenb"):
            continue
        if not any(_req_name(r) == "verifiers" for r in requires if "extra ==" not in r):
            continue
        mod = module_name(name)
        if _spec(mod) is None:
            continue
        out[name.lower()] = {
            "version": dist.version or "",
            "description": (dist.metadata.get_all("Summary") or [""])[0] or "",
            "module": mod,
        }
    return out


def _req_name(req: str) -> str:
    for sep in "<>=!~;[ (":
        req = req.split(sep, 1)[0]
    return req.strip().lower().replace("_", "-")


def dist_version(mod: str) -> str:
    """The version of the distribution that provides module ``mod`` ("" when unknown)."""
    try:
        dists = importlib.metadata.packages_distributions().get(mod) or []
        return importlib.metadata.version(dists[0]) if dists else ""
    except Exception:
        return ""


# ---------------------------------------------------------------------------------------------
# one background event loop for async rewards


class _Loop:
    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def run(cls, coro: Any) -> Any:
        with cls._lock:
            if cls._loop is None or cls._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="primenb-verifiers", daemon=True)
                thread.start()
                cls._loop = loop
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, cls._loop)
        return future.result()


# ---------------------------------------------------------------------------------------------
# loading


def _loaders() -> Any:
    builtin_tasksets_on_path()
    try:
        from verifiers.v1.utils import loaders
    except ImportError as exc:
        raise EnvironmentLoadError(
            f"verifiers is installed but could not be imported ({error_text(exc)}); primenb needs verifiers "
            f"0.4.x (pip install 'verifiers>=0.4,<0.5')"
        ) from exc
    return loaders


def taskset_args(env_id: str) -> dict[str, Any]:
    """The arguments (config fields) a taskset accepts, with their defaults."""
    config_cls = _config_class(env_id)
    return {
        name: (inspect.Parameter.empty if f.is_required() else f.get_default(call_default_factory=True))
        for name, f in config_cls.model_fields.items()
        if name != "id"
    }


def _taskset_class(env_id: str) -> type:
    loaders = _loaders()
    try:
        return loaders.taskset_class(env_id)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise EnvironmentLoadError(f"verifiers taskset {env_id!r} could not be loaded: {error_text(exc)}") from exc
    except Exception as exc:
        raise EnvironmentLoadError(f"verifiers taskset {env_id!r}: importing it raised {error_text(exc)}") from exc


def _config_class(env_id: str) -> Any:
    _taskset_class(env_id)
    return _loaders().taskset_config_type(env_id)


def load(env_id: str, **args: Any) -> VerifiersEnvironment:
    """The taskset ``env_id`` as an `Environment`, built with ``args`` as its config fields."""
    from pydantic import ValidationError

    loaders = _loaders()
    cls = _taskset_class(env_id)
    _check_plugin(env_id, loaders)
    config_cls = loaders.taskset_config_type(env_id)
    try:
        config = config_cls.model_validate({**args, "id": env_id})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in exc.errors())
        accepted = ", ".join(n for n in config_cls.model_fields if n != "id")
        raise EnvironmentArgumentError(
            f"verifiers taskset {env_id!r}: bad arguments ({problems}); it accepts: {accepted}"
        ) from None
    try:
        taskset = cls(config)
        if not taskset.bounded:
            log.info("taskset %s is infinite: using its first %d tasks", env_id, MAX_TASKS)
            taskset = taskset.take(MAX_TASKS)
        tasks = list(taskset)
    except Exception as exc:
        raise EnvironmentLoadError(
            f"verifiers taskset {env_id!r} raised while loading its tasks: {error_text(exc)}"
        ) from exc
    if not tasks:
        raise EnvironmentLoadError(f"verifiers taskset {env_id!r} yielded no tasks")
    _check_tasks(env_id, cls, config, tasks)
    return _build(env_id, cls, args, tasks)


def _check_plugin(env_id: str, loaders: Any) -> None:
    from verifiers.v1.envs.single_agent import SingleAgentEnv

    try:
        env_cls = loaders.environment_class(env_id)
        harness = loaders.default_harness_id(env_id)
    except ValueError as exc:  # an ambiguous export
        raise EnvironmentLoadError(f"verifiers taskset {env_id!r}: {error_text(exc)}") from exc
    if env_cls is not SingleAgentEnv:
        raise UnsupportedEnvironmentError(
            f"verifiers taskset {env_id!r} comes with its own environment {env_cls.__name__} "
            f"(several agents or turns): {REMOTE}"
        )
    if harness == env_id:
        raise UnsupportedEnvironmentError(
            f"verifiers taskset {env_id!r} comes with its own harness (a program the model runs "
            f"in, multi-turn or with tools): {REMOTE}"
        )


def _check_tasks(env_id: str, cls: Any, config: Any, tasks: list[Any]) -> None:
    from verifiers.v1.task import Task

    task = tasks[0]
    task_cls = type(task)
    why: list[str] = []
    try:
        if cls.toolsets(config) or task_cls.toolsets(config.task):
            why.append("its tasks use tools")
    except Exception as exc:
        why.append(f"its toolsets could not be built ({error_text(exc)})")
    if getattr(task_cls, "NEEDS_CONTAINER", False):
        why.append("its tasks need a container")
    for hook in ("setup", "finalize", "stage_verifier"):
        if getattr(task_cls, hook, None) is not getattr(Task, hook, None):
            why.append(f"its tasks define {hook}() (they need a runtime)")
    if getattr(config.task, "judges", None):
        why.append("it scores with judges (a model)")
    needs_runtime = [fn.__name__ for fn in task.hooks("reward") if _needs_runtime(fn)]
    if needs_runtime:
        why.append(f"reward(s) {', '.join(needs_runtime)} need a runtime")
    if any(t.data.prompt is None for t in tasks):
        why.append("some tasks have no prompt (the user opens the conversation)")
    if why:
        raise UnsupportedEnvironmentError(f"verifiers taskset {env_id!r}: {'; '.join(why)}: {REMOTE}")
    if not task.hooks("reward"):
        raise EnvironmentLoadError(
            f"verifiers taskset {env_id!r} has no @vf.reward functions; the local engine needs at least one to train on"
        )


def _needs_runtime(fn: Callable[..., Any]) -> bool:
    param = inspect.signature(fn).parameters.get("runtime")
    return param is not None and param.default is inspect.Parameter.empty


def _messages(prompt: Any) -> str | list[dict[str, Any]]:
    from verifiers.v1.types import content_text

    if isinstance(prompt, str):
        return prompt
    return [{"role": m.role, "content": content_text(getattr(m, "content", None))} for m in prompt]


def _build(env_id: str, cls: Any, args: dict[str, Any], tasks: list[Any]) -> VerifiersEnvironment:
    from verifiers.v1.task import TaskData

    base_fields = set(TaskData.model_fields)
    systems = {t.data.system_prompt for t in tasks}
    shared = systems.pop() if len(systems) == 1 else None
    rows: list[Row] = []
    for i, t in enumerate(tasks):
        prompt = _messages(t.data.prompt)
        if shared is None and t.data.system_prompt:
            msgs = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
            prompt = [{"role": "system", "content": t.data.system_prompt}, *msgs]
        own = t.data.model_dump(mode="json", exclude_none=True)
        info = {"vf_idx": i, **{k: v for k, v in own.items() if k not in base_fields and k != "answer"}}
        answer = getattr(t.data, "answer", None)
        rows.append({"prompt": prompt, "answer": "" if answer is None else str(answer), "info": info})
    hooks = tasks[0].hooks("reward")
    funcs: list[Any] = [VerifiersReward(fn.__name__, tasks, fn.__doc__) for fn in hooks]
    mod = module_name(env_id)
    env = VerifiersEnvironment(
        id=env_id,
        train=rows,
        reward_funcs=funcs,
        reward_weights=[float(getattr(fn, "_vf_weight", 1.0)) for fn in hooks],
        system_prompt=shared,
        args=dict(args),
        description=_first_line(cls.__doc__) or f"verifiers taskset {env_id}",
        version=dist_version(mod.split(".")[0]),
    )
    env.tasks = tasks
    return env


def _first_line(text: str | None) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines()]
    return lines[0] if lines else ""


class VerifiersEnvironment(Environment):
    """A verifiers taskset's tasks and rewards (``tasks`` holds the verifiers Task objects)."""

    tasks: list[Any]  # set by `load`


class VerifiersReward:
    """One ``@vf.reward`` as a TRL reward function over single-turn completions."""

    def __init__(self, name: str, tasks: list[Any], doc: str | None) -> None:
        self.__name__ = name
        self.__qualname__ = name
        self.__doc__ = doc
        self.tasks = tasks
        self._hooks: dict[int, Callable[..., Any]] = {}

    def _hook(self, idx: int) -> Callable[..., Any]:
        if idx not in self._hooks:
            self._hooks[idx] = {fn.__name__: fn for fn in self.tasks[idx].hooks("reward")}[self.__name__]
        return self._hooks[idx]

    def __call__(
        self, prompts: list[Any], completions: list[Any], info: list[Any] | None = None, **_: Any
    ) -> list[float | None]:
        if info is None or len(info) != len(completions):
            raise ValueError("verifiers rewards need the rows' `info` column (vf_idx)")
        idxs = [_index(x) for x in info]
        texts = [completion_text(c) for c in completions]
        results = _Loop.run(self._score_all(idxs, texts))
        values: list[float | None] = []
        errors: dict[int, BaseException] = {}
        for i, result in enumerate(results):
            if isinstance(result, BaseException):
                errors[i] = result
                values.append(None)
            else:
                values.append(result)
        if errors:
            raise PartialScores(values, errors)
        return values

    async def _score_all(self, idxs: list[int], texts: list[str]) -> list[Any]:
        return await asyncio.gather(
            *(self._score_one(i, t) for i, t in zip(idxs, texts, strict=True)), return_exceptions=True
        )

    async def _score_one(self, idx: int, text: str) -> Any:
        from verifiers.v1.utils.decorators import invoke

        task = self.tasks[idx]
        trace = one_turn_trace(task, text)
        result = invoke(self._hook(idx), {"task": task.data, "trace": trace})
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, Mapping):
            return math.fsum(score or 0.0 for score in map(checked_score, result.values()))
        return result  # the guard around every reward function turns it into a score, or refuses it


def _index(info: Any) -> int:
    if isinstance(info, str):
        import json

        info = json.loads(info)
    if not isinstance(info, Mapping) or not isinstance(info.get("vf_idx"), int):
        raise TypeError(f"row info has no vf_idx: {info!r:.80}")
    return int(info["vf_idx"])


def one_turn_trace(task: Any, reply: str) -> Any:
    """A verifiers Trace of one turn: the task's system prompt and prompt, then ``reply`` as the
    model's sampled answer."""
    import verifiers.v1 as vf
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.state import state_cls
    from verifiers.v1.trace import AgentInfo, Trace, TraceTask

    data = task.data
    messages: list[Any] = []
    if data.system_prompt:
        messages.append(vf.SystemMessage(content=data.system_prompt))
    if isinstance(data.prompt, str):
        messages.append(vf.UserMessage(content=data.prompt))
    else:
        messages.extend(data.prompt or [])
    messages.append(vf.AssistantMessage(content=reply))
    nodes = [
        MessageNode(parent=i - 1 if i else None, message=m, sampled=i == len(messages) - 1)
        for i, m in enumerate(messages)
    ]
    return Trace(
        task=TraceTask(type=type(task).__name__, data=data, key=task.key, hash=task.hash),
        state=state_cls(type(task))(),
        agent=AgentInfo(config=vf.AgentConfig(), name="primenb"),
        nodes=nodes,
        is_completed=True,
        ok=True,
    )


__all__ = [
    "VerifiersEnvironment",
    "VerifiersReward",
    "could_be_taskset",
    "installed",
    "installed_tasksets",
    "load",
    "module_name",
    "one_turn_trace",
    "taskset_args",
]
