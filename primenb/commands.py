"""Every terminal command and magic, declared once: typed arguments, help, defaults and aliases.

The `primenb` CLI (`primenb.cli`) and the magics (`primenb.notebook`) build their argparse parsers
from these declarations, so `primenb harness diff` and `%prime_harness diff` cannot drift, and
`%prime_harness?` shows the same text as `primenb harness --help`. An argument that only makes
sense in one face (`--wait` in a cell, `--detach` or `--json` in a terminal) says so in `faces`.
Each command's arguments are one typed class (a frozen dataclass whose fields, declared with
`arg`, are the command-line arguments: TRL's typed-dataclass commands); `resolve` builds it from
what either face parsed, and an alias (`%prime_train --stop RUN`) routes to the command it names.
Each command has one handler, which both faces call (`primenb.verbs.registry`, keyed by the
argument class, so the type checker follows it); this module stays at the bottom of the layers
and never imports it.
"""

from __future__ import annotations

import argparse
import difflib
import html
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any

from primenb.tracker_kinds import TRACKER_KINDS

CLI, MAGIC = "cli", "magic"
BOTH = (CLI, MAGIC)
_SPEC = "primenb.arg"  # the dataclass field metadata key that makes a field a command-line argument


@dataclass(frozen=True)
class Arg:
    """One argument as argparse sees it: a field of a command's argument class, or an alias."""

    names: tuple[str, ...]
    help: str = ""
    faces: tuple[str, ...] = BOTH
    exclusive: str | None = None  # arguments sharing this name are mutually exclusive
    kw: Mapping[str, Any] = field(default_factory=dict)
    to: str | None = None  # an alias: the command (same family) that a value given here runs
    after: str | None = None  # an alias: shown after this argument (its place in help and docs)


def arg(
    *names: str,
    help: str = "",
    faces: tuple[str, ...] = BOTH,
    exclusive: str | None = None,
    default: Any = MISSING,
    default_factory: Any = MISSING,
    **kw: Any,
) -> Any:
    """A field of a command's argument class that is also its command-line argument: ``names`` are
    its flags (none: a positional named as the field); the field's default is argparse's; ``kw``
    goes to ``add_argument`` as is."""
    spec = {_SPEC: Arg(names, help, faces, exclusive, kw)}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=spec)
    return field(default=default, metadata=spec)


def flag(name: str, *, help: str, faces: tuple[str, ...] = BOTH, exclusive: str | None = None) -> Any:
    """A ``store_true`` option (default False)."""
    return arg(name, help=help, faces=faces, exclusive=exclusive, default=False, action="store_true")


def alias(
    name: str, to: str, *, help: str, after: str, faces: tuple[str, ...] = BOTH, metavar: str | None = "RUN"
) -> Arg:
    """``--stop RUN`` on one command runs the command ``to`` with RUN as its first positional (the
    other arguments given go with it, by name); an older spelling that users and docs still type.
    ``metavar=None``: a flag (``--ui``) that takes no value and only chooses the command."""
    kw = {"metavar": metavar, "default": None} if metavar else {"action": "store_const", "const": True}
    return Arg((name,), help, faces, None, kw, to, after)


def _as_arg(f: Field[Any]) -> Arg:
    spec: Arg = f.metadata[_SPEC]
    kw = dict(spec.kw)
    if f.default is not MISSING:
        kw["default"] = f.default
    elif f.default_factory is not MISSING:
        kw["default"] = f.default_factory()
    if not spec.names:  # a positional: argparse names its destination after it
        return replace(spec, names=(f.name,), kw=kw)
    return replace(spec, kw={**kw, "dest": f.name})


@dataclass(frozen=True)
class Command:
    family: str  # "harness", "env", or "train" for the top-level commands
    name: str
    help: str
    type: type  # the typed arguments: a dataclass whose `arg` fields are the command-line arguments
    faces: tuple[str, ...] = BOTH
    aliases: tuple[Arg, ...] = ()
    face_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # {face: {field: value}}

    @property
    def args(self) -> tuple[Arg, ...]:
        out = [_as_arg(f) for f in fields(self.type) if _SPEC in f.metadata]
        for a in self.aliases:
            out.insert(next((i + 1 for i, x in enumerate(out) if dest(x) == a.after), len(out)), a)
        return tuple(out)

    def args_for(self, face: str) -> tuple[Arg, ...]:
        return tuple(a for a in self.args if face in a.faces)


def dest(a: Arg) -> str:
    return str(a.kw.get("dest") or a.names[0].lstrip("-").replace("-", "_"))


def resolve(cmd: Command, face: str, parsed: argparse.Namespace, **given: Any) -> tuple[Command, Any]:
    """The command that runs and its typed arguments, from what ``cmd``'s parser (`add_arguments`)
    read in ``face``: ``cmd``'s own, or the one an alias given names (`--stop RUN` -> ``stop RUN``).
    Arguments the face does not declare keep their class defaults; ``given`` fills the fields that
    are no command-line argument (a cell's text)."""
    read = vars(parsed)
    own = {dest(a): read[dest(a)] for a in cmd.args_for(face) if a.to is None and dest(a) in read}
    for a in cmd.aliases:
        if face in a.faces and read.get(dest(a)) is not None:  # the other arguments go with it, by name
            target = command(cmd.family, a.to or "")
            values = {**target.face_defaults.get(face, {}), **own}
            if read[dest(a)] is not True:  # its value fills the target's first positional
                values[dest(next(x for x in target.args if not x.names[0].startswith("-")))] = read[dest(a)]
            return target, _build(target, values)
    return cmd, _build(cmd, {**cmd.face_defaults.get(face, {}), **own, **given})


def _build(cmd: Command, values: Mapping[str, Any]) -> Any:
    return cmd.type(**{f.name: values[f.name] for f in fields(cmd.type) if f.name in values})


# fields that choose how a result is shown or followed, not what the work does
PRESENTATION = frozenset({"json", "wait", "detach"})


def work_values(args: Any, *without: str) -> dict[str, Any]:
    """A command's argument values by field name, less the presentation ones and ``without`` (those
    the verb resolves itself): what a verb hands the code doing the work, whole, so a new argument
    reaches it without being forwarded by hand."""
    return {f.name: getattr(args, f.name) for f in fields(args) if f.name not in PRESENTATION and f.name not in without}


def _sft(**kw: Any) -> Any:
    return flag("--sft", help="an SFT config", exclusive="mode", **kw)


def _rl(**kw: Any) -> Any:
    return flag("--rl", help="an RL config", exclusive="mode", **kw)


def _lenient(**kw: Any) -> Any:
    return flag("--lenient", help="keys prime-rl 0.4.0 does not know are warnings (a newer platform's)", **kw)


_TRACE = "a trace id, a unique id prefix, a run name, a run directory (in a notebook also a variable holding a Run)"


def _backend() -> Any:
    return arg("--backend", default=None, metavar="B", help="where to train (default: [primenb] backend, local)")


def _name() -> Any:
    return arg("--name", default=None, metavar="RUN", help="run name (default: <env>--<model>--<id>)")


def _wait() -> Any:
    return flag("--wait", faces=(MAGIC,), help="block the cell until the run ends")


def _detach() -> Any:
    return flag("--detach", faces=(CLI,), help="start the run and return at once")


def _json() -> Any:
    return flag("--json", faces=(CLI,), help="machine-readable output")


def _trust() -> Any:
    return flag(
        "--trust",
        help="a trace this installation's engine did not make (imported, copied in): run the environment code it names",
    )


def _server() -> Any:
    return arg("--server", default=None, metavar="URL", help="which running server (default: the newest)")


def _run() -> Any:
    return arg(help="run name or directory")


_ARGS = dataclass(frozen=True, kw_only=True)  # every argument class: typed, immutable, by name


def _gpu_type() -> Any:
    return arg(
        "--gpu-type",
        default=None,
        metavar="T",
        help="modelfactory: GPU type, e.g. H200_141GB (default: the platform's)",
    )


def _volume() -> Any:
    return arg("--volume", default=None, metavar="V", help="modelfactory: named volume for outputs (and SFT data)")


def _team() -> Any:
    return arg(
        "--team", default=None, metavar="ID", help="modelfactory: team that pays (PRIME_TEAM_ID for this launch only)"
    )


def _yes() -> Any:
    return flag("--yes", help="modelfactory: launch the billable run without asking")


# -- configs and runs ----------------------------------------------------------------------------
@_ARGS
class ValidateArgs:
    files: list[str] = arg(nargs="+", help="TOML files")
    sft: bool = _sft()
    rl: bool = _rl()
    json: bool = _json()
    lenient: bool = _lenient()
    fix: bool = flag("--fix", help="rewrite legacy keys in each file (comments kept) when the result validates")


@_ARGS
class RltomlArgs:
    name: str = arg(help="variable that receives the Config")
    save: str | None = arg(
        "--save", default=None, metavar="PATH", help="write the TOML to PATH (atomically) when it is valid"
    )
    sft: bool = _sft()
    rl: bool = _rl()
    fix: bool = flag("--fix", help="rewrite legacy keys and offer the migrated cell")
    lenient: bool = _lenient()
    line: str = ""  # the magic's line and cell, given by the notebook
    cell: str = ""


@_ARGS
class InitArgs:
    model: str | None = arg(
        "--model", default=None, metavar="M", help="model id (default: the embedded primenb/tiny-byte)"
    )
    env: str | None = arg("--env", default=None, metavar="E", help="environment id (default: reverse-text)")
    sft: bool = flag("--sft", help="an SFT config instead of RL")
    lora: bool = flag("--lora", help="train LoRA adapters")
    out: str | None = arg(
        "--out", default=None, metavar="FILE", help="file to write (default rl.toml, or sft.toml with --sft)"
    )
    force: bool = flag("--force", help="overwrite an existing file")


@_ARGS
class TrainArgs:
    config: str | None = arg(nargs="?", default=None, help="a .toml path (in a notebook also a %%rltoml variable)")
    name: str | None = _name()
    backend: str | None = _backend()
    wait: bool = _wait()
    detach: bool = _detach()
    sft: bool = flag("--sft", faces=(CLI,), help="validate as SFT", exclusive="mode")
    rl: bool = flag("--rl", faces=(CLI,), help="validate as RL", exclusive="mode")
    lenient: bool = _lenient(faces=(CLI,))
    gpu_type: str | None = _gpu_type()  # Prime Intellect's hosted training (--backend modelfactory);
    volume: str | None = _volume()  # the API key is never an argument
    team: str | None = _team()
    yes: bool = _yes()


@_ARGS
class UiArgs:
    config: str | None = arg(nargs="?", default=None, help="a .toml path or a %%rltoml variable to start from")


@_ARGS
class StopArgs:
    run: str = _run()
    wait: bool = flag("--wait", faces=(MAGIC,), help="block the cell until the run has stopped")
    timeout: float = arg(
        "--timeout", type=float, default=120.0, metavar="S", help="seconds before the process group is killed"
    )


@_ARGS
class AttachArgs:
    run: str = _run()
    wait: bool = _wait()
    stop: bool = flag("--stop", faces=(CLI,), help="Ctrl-C stops the run (default: Ctrl-C detaches)")


@_ARGS
class PauseArgs:
    run: str = _run()
    gpu_type: str | None = _gpu_type()
    volume: str | None = _volume()
    team: str | None = _team()


@_ARGS
class ResumeArgs:
    run: str = _run()
    name: str | None = _name()
    wait: bool = _wait()
    gpu_type: str | None = _gpu_type()
    volume: str | None = _volume()
    team: str | None = _team()
    yes: bool = _yes()


# -- the harness ---------------------------------------------------------------------------------
@_ARGS
class HarnessShowArgs:
    trace: str | None = arg(nargs="?", default=None, help=_TRACE)
    last: int | None = arg("--last", type=int, default=None, metavar="N", help="the newest N traces")
    status: str | None = arg(
        "--status", default=None, metavar="S", help="completed, failed, stopped, running or queued (a,b,...)"
    )
    env: str | None = arg("--env", default=None, metavar="E", help="environment id (substring)")
    model: str | None = arg("--model", default=None, metavar="M", help="model id (substring)")
    where: str | None = arg("--where", default=None, metavar="EXPR", help="SQL expression over the columns")
    json: bool = flag("--json", faces=(CLI,), help="the table as JSON records")
    ui: bool = flag(
        "--ui",
        faces=(MAGIC,),
        help="open the harness browser (grid, filters, actions) with these filters set and TRACE selected",
    )


@_ARGS
class HarnessApplyArgs:
    trace: str = arg(help=_TRACE)
    steps: int | None = arg(
        "--steps", type=int, default=None, metavar="N", help="steps to add (default: as the parent)"
    )
    overrides: list[str] = arg(
        "--set",
        nargs="+",
        action="extend",
        default_factory=list,
        metavar="key=value",
        help="config changes, e.g. trainer.optim.lr=1e-5",
    )
    backend: str | None = _backend()
    name: str | None = _name()
    wait: bool = _wait()
    detach: bool = _detach()
    yes: bool = flag("--yes", help="a hosted (modelfactory) trace: launch the billed continuation")
    trust: bool = _trust()


@_ARGS
class HarnessRerunArgs:
    trace: str = arg(help=_TRACE)
    backend: str | None = _backend()
    name: str | None = _name()
    wait: bool = _wait()
    detach: bool = _detach()
    trust: bool = _trust()


@_ARGS
class HarnessDiffArgs:
    traces: list[str] = arg(nargs="+", help="two or more traces")


@_ARGS
class HarnessCompareArgs:
    traces: list[str] = arg(nargs="+", help="two or more traces")
    metrics: list[str] | None = arg("--metric", action="append", default=None, metavar="M", help="a metric to compare")
    html: str | None = arg(
        "--html", default=None, metavar="FILE", faces=(CLI,), help="write the overlaid chart to FILE"
    )


@_ARGS
class HarnessReindexArgs:
    paths: list[str] = arg(nargs="*", default_factory=list, help="more folders holding run directories")


@_ARGS
class HarnessExportArgs:
    trace: str = arg(help=_TRACE)
    path: str | None = arg(nargs="?", default=None, help="folder to write")
    to: str | None = arg(
        "--to",
        default=None,
        choices=TRACKER_KINDS,
        help="backfill a tracker from the stored metrics instead (docs/trackers.md)",
    )


@_ARGS
class HarnessImportArgs:
    path: str = arg(help="an exported folder")
    dest: str | None = arg("--dest", default=None, metavar="DIR", help="where to put it")


@_ARGS
class HarnessRmArgs:
    trace: str = arg(help=_TRACE)
    files: bool = flag("--files", help="also delete the run directory")


# -- environments --------------------------------------------------------------------------------
@_ARGS
class EnvListArgs:
    json: bool = _json()
    no_verifiers: bool = flag("--no-verifiers", help="leave out installed verifiers tasksets")


@_ARGS
class EnvAddArgs:
    target: str = arg(help="a folder or .py file with load_environment(), or a module name")
    id: str | None = arg(
        "--id", default=None, metavar="ID", help="id to register it under (default: the folder/module name)"
    )
    force: bool = flag("--force", help="replace an environment registered under the same id")
    json: bool = _json()


@_ARGS
class EnvShowArgs:
    id: str = arg(help="environment id")
    args: list[str] = arg(nargs="*", default_factory=list, metavar="KEY=VALUE", help="arguments to build it with")
    json: bool = _json()


@_ARGS
class EnvRemoveArgs:
    id: str = arg(help="environment id")


# -- named backends ------------------------------------------------------------------------------
@_ARGS
class BackendAddArgs:
    name: str = arg(help="the name to train with: --backend NAME")
    url: str = arg(help="ssh://[user@]host[:port][/workdir], slurm://, slurm://login-host")
    options: list[str] = arg(
        nargs="*",
        default_factory=list,
        metavar="KEY=VALUE",
        help="python, workdir, env, ssh_args, sbatch_args, request_gpus",
    )
    force: bool = flag("--force", help="replace a backend saved under the same name")


@_ARGS
class BackendListArgs:
    json: bool = _json()


@_ARGS
class BackendShowArgs:
    name: str = arg(help="backend name")


@_ARGS
class BackendRemoveArgs:
    name: str = arg(help="backend name")


# -- serving and evaluation (primenb.serve) ------------------------------------------------------
@_ARGS
class ServeStartArgs:
    traces: list[str] = arg(nargs="*", default_factory=list, metavar="TRACE", help=_TRACE)
    base: str | None = arg(
        "--base", default=None, metavar="MODEL", help="the base model to list (default: the traces' own)"
    )
    port: int = arg("--port", type=int, default=0, metavar="P", help="port (default: a free one)")
    host: str = arg("--host", default="127.0.0.1", metavar="H", help="address to listen on; not loopback needs a key")
    api_key_var: str | None = arg(
        "--api-key-var",
        default=None,
        metavar="VAR",
        help="environment variable holding the API key clients send as Bearer (never the key itself)",
    )
    max_batch: int = arg(
        "--max-batch",
        type=int,
        default=32,  # the one default (`client.start`'s too): 2 CPU cores keep gaining up to about this many
        metavar="N",
        help="rows decoded together (requests x n); more wait in the queue",
    )
    max_queue: int = arg(
        "--max-queue",
        type=int,
        default=256,  # the one default (`client.start`'s too)
        metavar="N",
        help="requests waiting for a row before the server answers 429",
    )
    stream_interval: int = arg(
        "--stream-interval",
        type=int,
        default=1,
        metavar="N",
        help="vLLM's: a streamed row's tokens go out every N (its first at once); fewer events, more throughput",
    )
    json: bool = _json()


@_ARGS
class ServeAddArgs:
    trace: str = arg(help=_TRACE)
    server: str | None = _server()
    json: bool = _json()


@_ARGS
class ServeRemoveArgs:
    trace: str = arg(help="a trace or a served model id")
    server: str | None = _server()


@_ARGS
class ServeListArgs:
    json: bool = _json()


@_ARGS
class ServeStopArgs:
    server: str | None = arg(nargs="?", default=None, metavar="URL", help="a server URL, port or pid, or all")


@_ARGS
class EvalArgs:
    models: list[str] = arg(
        nargs="+",
        metavar="MODEL_OR_TRACE",
        help="traces or served model ids; one trace alone is compared with the model it was trained on",
    )
    env: str = arg(
        "--env",
        required=True,
        metavar="ID",
        help="required: the environment id (built in, added with %prime_env add, or a verifiers taskset: one that "
        "plays several turns or uses tools is evaluated on its episodes)",
    )
    args: list[str] = arg(
        "--args", nargs="+", action="extend", default_factory=list, metavar="K=V", help="environment arguments"
    )
    num_examples: int = arg("-n", "--num-examples", type=int, default=20, metavar="N", help="held-out examples")
    rollouts: int = arg("-r", "--rollouts", type=int, default=1, metavar="R", help="rollouts per example")
    temperature: float = arg(
        "--temperature", type=float, default=0.0, metavar="T", help="sampling temperature (0: greedy)"
    )
    max_tokens: int | None = arg(
        "--max-tokens", type=int, default=None, metavar="K", help="tokens per completion (default: the run's)"
    )
    seed: int = arg(
        "--seed", type=int, default=0, metavar="S", help="the eval's seed: each rollout's seed derives from it"
    )
    pass_reward: float = arg(
        "--pass-reward",
        type=float,
        default=1.0,
        metavar="R",
        help="with -r > 1: a rollout passes (pass@k) when its reward reaches R",
    )
    keep_server: bool = flag(
        "--keep-server", help="keep a server this eval starts running (default: stopped at the end)"
    )
    trust: bool = _trust()
    json: bool = _json()


COMMANDS: tuple[Command, ...] = (
    # -- configs and runs ----------------------------------------------------------------------
    Command("train", "validate", "validate rl.toml / sft.toml files (in a notebook: %%rltoml)", ValidateArgs, (CLI,)),
    Command(
        "train", "rltoml", "validate the cell's rl.toml / sft.toml; bind it as NAME when valid", RltomlArgs, (MAGIC,)
    ),
    Command("train", "init", "write a starter config that validates", InitArgs),
    Command(
        "train",
        "train",
        "validate a config and train it",
        TrainArgs,
        aliases=(
            alias(
                "--stop", "stop", after="lenient", faces=(MAGIC,), help="ask a run to save a final checkpoint and stop"
            ),
            alias(
                "--attach",
                "attach",
                after="stop",
                faces=(MAGIC,),
                help="show a run (e.g. after a kernel restart) and follow it",
            ),
            alias(
                "--pause", "pause", after="yes", faces=(MAGIC,), help="modelfactory: pause a hosted run at a checkpoint"
            ),
            alias(
                "--resume",
                "resume",
                after="pause",
                faces=(MAGIC,),
                help="modelfactory: continue a paused hosted run (a child run)",
            ),
            alias(
                "--ui",
                "ui",
                after="resume",
                faces=(MAGIC,),
                metavar=None,
                help="open the config builder form (from CONFIG if given)",
            ),
        ),
    ),
    # in a terminal `stop` blocks until the run has stopped; in a cell it asks and returns (--wait blocks)
    Command(
        "train", "stop", "ask a run to save a final checkpoint and stop", StopArgs, face_defaults={CLI: {"wait": True}}
    ),
    Command("train", "attach", "follow a run's progress (Ctrl-C detaches; twice within 3 s stops)", AttachArgs),
    Command("train", "pause", "modelfactory: pause a hosted run at a checkpoint", PauseArgs, (MAGIC,)),
    Command("train", "resume", "modelfactory: continue a paused hosted run (a child run)", ResumeArgs, (MAGIC,)),
    Command("train", "ui", "open the config builder form (from CONFIG if given)", UiArgs, (MAGIC,)),
    # -- the harness ---------------------------------------------------------------------------
    Command("harness", "show", "list traces (newest first), or show one", HarnessShowArgs),
    Command(
        "harness",
        "apply",
        "continue a trace from its final checkpoint (a new run, parent = TRACE)",
        HarnessApplyArgs,
    ),
    Command("harness", "rerun", "re-execute a trace from scratch and check the metrics match", HarnessRerunArgs),
    Command("harness", "diff", "config/data/environment/deps/hardware differences", HarnessDiffArgs),
    Command("harness", "compare", "summary table and overlaid curves of traces", HarnessCompareArgs),
    Command("harness", "reindex", "rebuild the index from the run directories", HarnessReindexArgs),
    Command(
        "harness",
        "export",
        "write a self-contained folder for another machine, or (--to) send the metrics to a tracker",
        HarnessExportArgs,
    ),
    Command("harness", "import", "bring an exported trace back", HarnessImportArgs),
    Command("harness", "rm", "remove a trace (--files: and its run directory)", HarnessRmArgs),
    # -- environments --------------------------------------------------------------------------
    Command("env", "list", "every known environment (built-in, registered, verifiers)", EnvListArgs),
    Command("env", "add", "register a local folder / .py file or an importable module", EnvAddArgs),
    Command("env", "show", "description, arguments, reward functions and sample prompts", EnvShowArgs),
    Command("env", "remove", "unregister an environment (its folder is left alone)", EnvRemoveArgs),
    # -- named backends ------------------------------------------------------------------------
    Command("backend", "add", "save NAME for a backend URL and its options (no secrets)", BackendAddArgs),
    Command("backend", "list", "the saved backends", BackendListArgs),
    Command("backend", "show", "a saved backend's URL and options", BackendShowArgs),
    Command("backend", "remove", "forget a saved backend", BackendRemoveArgs),
    # -- serving and evaluation (primenb.serve) -------------------------------------------------
    Command(
        "serve",
        "start",
        "serve traces (default: every completed one with a checkpoint) and their base over an "
        "OpenAI-compatible API, in its own process",
        ServeStartArgs,
    ),
    Command("serve", "add", "load a trace into a running server", ServeAddArgs),
    Command("serve", "remove", "drop a trace (or a model id) from a running server", ServeRemoveArgs),
    Command("serve", "list", "running servers: URL, pid, models, uptime, requests served", ServeListArgs),
    Command("serve", "stop", "stop a server (default: the newest) or all", ServeStopArgs),
    Command(
        "eval",
        "eval",
        "evaluate models and/or traces on an environment's held-out split through the served endpoint",
        EvalArgs,
    ),
)

FAMILY_HELP = {
    "backend": "name SSH hosts and SLURM clusters to train on",
    "harness": "traces of every run: show, apply, rerun, diff, compare, reindex, export, import, rm",
    "env": "list, register, inspect and remove training environments",
    "serve": "serve trained models over an OpenAI-compatible API: start, add, remove, list, stop",
    "eval": "evaluate models and traces on an environment's held-out split through a served endpoint",
}


def family(name: str, face: str | None = None) -> tuple[Command, ...]:
    return tuple(c for c in COMMANDS if c.family == name and (face is None or face in c.faces))


def command(family_name: str, name: str) -> Command:
    for c in COMMANDS:
        if c.family == family_name and c.name == name:
            return c
    raise KeyError(f"{family_name} {name}")


def as_help(text: str) -> str:
    """``text`` as argparse help: argparse %-formats help (``%(default)s``), so a magic's name in it
    (``%prime_env``, ``%%rltoml``) is escaped, or `--help` prints it wrong or fails."""
    return text.replace("%", "%%")


def did_you_mean(parser: argparse.ArgumentParser, unknown: Iterable[str]) -> str:
    """``; did you mean --name (not --nmae)?`` for each unrecognized option close to one ``parser``
    knows; both faces add it to argparse's error message."""
    known = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    hints = []
    for word in unknown:
        option = word.split("=", 1)[0]
        if option.startswith("--"):
            close = difflib.get_close_matches(option, known, n=1, cutoff=0.6)
            hints += [f"did you mean {close[0]} (not {option})?"] if close else []
    return "; " + "; ".join(hints) if hints else ""


def add_arguments(parser: argparse.ArgumentParser, cmd: Command, face: str) -> argparse.ArgumentParser:
    """Declare ``cmd``'s arguments for ``face`` on ``parser``."""
    groups: dict[str, Any] = {}
    for a in cmd.args_for(face):
        target: Any = parser
        if a.exclusive:
            target = groups.get(a.exclusive) or groups.setdefault(a.exclusive, parser.add_mutually_exclusive_group())
        target.add_argument(*a.names, help=as_help(a.help) or None, **dict(a.kw))
    return parser


def _synopsis_arg(a: Arg) -> str:
    if not a.names[0].startswith("-"):
        name = str(a.kw.get("metavar") or a.names[0]).upper()
        nargs = a.kw.get("nargs")
        return {"?": f"[{name}]", "*": f"[{name} ...]", "+": f"{name} [{name} ...]"}.get(str(nargs), name)
    if a.kw.get("action") in ("store_true", "store_const"):
        return f"[{a.names[0]}]"
    metavar = a.kw.get("metavar") or a.names[0].lstrip("-").upper()
    many = " ..." if a.kw.get("nargs") == "+" or a.kw.get("action") == "append" else ""
    return f"[{a.names[0]} {metavar}{many}]"


def invocation(cmd: Command, face: str) -> str:
    """How the command is typed: ``primenb harness show`` or ``%prime_harness show``."""
    if cmd.family == "train":
        if face == CLI:
            return f"primenb {cmd.name}"
        return {"rltoml": "%%rltoml", "train": "%prime_train"}.get(cmd.name, f"%prime_train {cmd.name}")
    if (cmd.family, cmd.name) in (("serve", "start"), ("eval", "eval")):  # the family's bare form
        return f"primenb {cmd.family}" if face == CLI else f"%prime_{cmd.family}"
    return f"primenb {cmd.family} {cmd.name}" if face == CLI else f"%prime_{cmd.family} {cmd.name}"


def in_cli_syntax(text: str) -> str:
    """A message written in the notebook's syntax as a terminal types it: ``%prime_serve TRACE``
    -> ``primenb serve TRACE``, ``%prime_train --pause NAME`` -> ``primenb pause NAME``, ``%%rltoml
    NAME`` -> ``primenb validate FILE`` (messages from shared code name the notebook's form); a
    notebook-only command (``%prime_train --pause``) stays as the notebook types it."""
    import re

    train = {c.name for c in COMMANDS if c.family == "train" and CLI in c.faces}

    def say(m: re.Match[str]) -> str:
        if m["rltoml"]:
            return "primenb validate FILE"
        if m["option"]:  # `%prime_train --stop RUN`: a command of its own in a terminal, if it has one there
            return f"primenb {m['option']}" if m["option"] in train else m[0]
        if m["family"] == "train" and m["word"] in train:  # `%prime_train validate` is `primenb validate`
            return f"primenb {m['word']}"
        return f"primenb {m['family']}" + (f" {m['word']}" if m["word"] else "")

    magic = (
        r"(?P<rltoml>%%rltoml(?: NAME)?)"
        r"|%prime_train --(?P<option>[a-z]+)"
        r"|%prime_(?P<family>[a-z]+)(?: (?P<word>[a-z]+)\b)?"
    )
    return re.sub(magic, say, text)


def synopsis(cmd: Command, face: str) -> str:
    return " ".join([invocation(cmd, face), *(_synopsis_arg(a) for a in cmd.args_for(face))])


def help_text(family_name: str, face: str, skip: tuple[str, ...] = ()) -> str:
    """Every command of a family: its synopsis, what it does, and each argument's help."""
    out = []
    for cmd in family(family_name, face):
        if cmd.name in skip:
            continue
        out.append(synopsis(cmd, face))
        out.append(f"    {cmd.help}")
        for a in cmd.args_for(face):
            if a.help:
                out.append(f"    {', '.join(a.names):<18} {a.help}")
    return "\n".join(out)


def _default(a: Arg) -> str:
    value = a.kw.get("default")
    return "" if value in (None, False, []) or a.kw.get("action") in ("store_true", "store_const") else f"`{value}`"


def markdown() -> str:
    """docs/magics.md: every magic, its subcommands and options, from the declarations above
    (`make docs` writes it; a test checks it against the file and against `%magic?`)."""
    out = [
        "# Magics: every command and option",
        "",
        "<!-- Generated from primenb/commands.py by `make docs` (python -m primenb.commands --markdown). -->",
        "<!-- Do not edit: change the declarations and run `make docs`. -->",
        "",
        "Load them with `%load_ext primenb`. `%magic?` shows the same text in a notebook. Commands marked",
        "*terminal too* exist as `primenb ...` with the same arguments (`primenb --help`).",
    ]
    magic = ""
    for cmd in (c for c in COMMANDS if MAGIC in c.faces):
        name = invocation(cmd, MAGIC).split()[0]
        if name != magic:
            magic = name
            title = FAMILY_HELP.get(cmd.family, "")
            out += ["", f"## `{name}`", *(["", title[0].upper() + title[1:] + "."] if title else [])]
        also = f" (*terminal too*: `{invocation(cmd, CLI)}`)" if CLI in cmd.faces else ""
        out += ["", f"### `{invocation(cmd, MAGIC)}`", "", f"{cmd.help[0].upper()}{cmd.help[1:]}{also}.", ""]
        out += ["```", synopsis(cmd, MAGIC), "```"]
        args = [a for a in cmd.args_for(MAGIC) if a.help]
        defaults = any(_default(a) for a in args)  # a default column only where one is declared
        if args:
            out += ["", "| argument | meaning |" + (" default |" if defaults else ""), "| --- | --- |"]
            out[-1] += " --- |" if defaults else ""
            for a in args:
                label = ", ".join(a.names) if a.names[0].startswith("-") else _synopsis_arg(a)
                cells = [f"`{label}`", html.escape(a.help, quote=False), *([_default(a)] if defaults else [])]
                out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m primenb.commands", description=markdown.__doc__)
    parser.add_argument("--markdown", action="store_true", help="print docs/magics.md")
    if parser.parse_args(argv).markdown:
        print(markdown(), end="")
        return 0
    parser.print_help()
    return 2


__all__ = [
    "BOTH",
    "CLI",
    "COMMANDS",
    "FAMILY_HELP",
    "MAGIC",
    "PRESENTATION",
    "Arg",
    "Command",
    "add_arguments",
    "alias",
    "arg",
    "as_help",
    "command",
    "dest",
    "did_you_mean",
    "family",
    "flag",
    "help_text",
    "in_cli_syntax",
    "invocation",
    "markdown",
    "resolve",
    "synopsis",
    "work_values",
]

if __name__ == "__main__":
    raise SystemExit(main())
