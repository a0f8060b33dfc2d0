"""Every terminal command and magic, declared once: arguments, help, defaults and handler.

The `primenb` CLI (`primenb.cli`) and the magics (`primenb.notebook`) build their argparse parsers
from these declarations, so `primenb harness diff` and `%prime_harness diff` cannot drift, and
`%prime_harness?` shows the same text as `primenb harness --help`. An argument that only makes
sense in one face (`--wait` in a cell, `--detach` or `--json` in a terminal) says so in `faces`.
Each command names its one handler (`Command.handler`, a function in `primenb.verbs`), which
both faces call; this module stays at the bottom of the layers, so it names it and never imports it.
"""

from __future__ import annotations

import argparse
import builtins
import html
import keyword
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CLI, MAGIC = "cli", "magic"
BOTH = (CLI, MAGIC)


@dataclass(frozen=True)
class Arg:
    names: tuple[str, ...]
    help: str = ""
    faces: tuple[str, ...] = BOTH
    exclusive: str | None = None  # arguments sharing this name are mutually exclusive
    kw: Mapping[str, Any] = field(default_factory=dict)


def arg(*names: str, help: str = "", faces: tuple[str, ...] = BOTH, exclusive: str | None = None, **kw: Any) -> Arg:
    return Arg(names, help, faces, exclusive, kw)


@dataclass(frozen=True)
class Command:
    family: str  # "harness", "env", or "train" for the top-level commands
    name: str
    help: str
    args: tuple[Arg, ...] = ()
    faces: tuple[str, ...] = BOTH

    def args_for(self, face: str) -> tuple[Arg, ...]:
        return tuple(a for a in self.args if face in a.faces)

    @property
    def handler(self) -> str:
        """``module:function`` of the one handler both faces call (see `primenb.verbs`); a name
        Python keeps for itself (``import``, ``list``) gets a trailing underscore."""
        reserved = keyword.iskeyword(self.name) or hasattr(builtins, self.name)
        return f"primenb.verbs.{self.family}:{self.name}{'_' if reserved else ''}"


_SFT = arg("--sft", action="store_true", help="an SFT config", exclusive="mode")
_RL = arg("--rl", action="store_true", help="an RL config", exclusive="mode")
_LENIENT = arg(
    "--lenient", action="store_true", help="keys prime-rl 0.4.0 does not know are warnings (a newer platform's)"
)
_TRACE = "a trace id, a unique id prefix, a run name, a run directory (in a notebook also a variable holding a Run)"
_BACKEND = arg("--backend", default=None, metavar="B", help="where to train (default: [primenb] backend, local)")
_NAME = arg("--name", default=None, metavar="RUN", help="run name (default: <env>--<model>--<id>)")
_WAIT = arg("--wait", action="store_true", faces=(MAGIC,), help="block the cell until the run ends")
_DETACH = arg("--detach", action="store_true", faces=(CLI,), help="start the run and return at once")
_JSON = arg("--json", action="store_true", faces=(CLI,), help="machine-readable output")
_TRUST = arg(
    "--trust",
    action="store_true",
    help="an imported trace: run the environment code its config names (refused until trusted)",
)
_SERVER = arg("--server", default=None, metavar="URL", help="which running server (default: the newest)")

# Prime Intellect's hosted training (--backend modelfactory); the API key is never an argument.
_HOSTED = (
    arg(
        "--gpu-type",
        default=None,
        metavar="T",
        help="modelfactory: GPU type, e.g. H200_141GB (default: the platform's)",
    ),
    arg("--volume", default=None, metavar="V", help="modelfactory: named volume for outputs (and SFT data)"),
    arg("--team", default=None, metavar="ID", help="modelfactory: team that pays (PRIME_TEAM_ID for this launch only)"),
    arg("--yes", action="store_true", help="modelfactory: launch the billable run without asking"),
    arg("--pause", metavar="RUN", faces=(MAGIC,), help="modelfactory: pause a hosted run at a checkpoint"),
    arg("--resume", metavar="RUN", faces=(MAGIC,), help="modelfactory: continue a paused hosted run (a child run)"),
)

COMMANDS: tuple[Command, ...] = (
    # -- configs and runs ----------------------------------------------------------------------
    Command(
        "train",
        "validate",
        "validate rl.toml / sft.toml files (in a notebook: %%rltoml)",
        (
            arg("files", nargs="+", help="TOML files"),
            _SFT,
            _RL,
            _JSON,
            _LENIENT,
        ),
        faces=(CLI,),
    ),
    Command(
        "train",
        "rltoml",
        "validate the cell's rl.toml / sft.toml; bind it as NAME when valid",
        (
            arg("name", help="variable that receives the Config"),
            arg("--save", metavar="PATH", help="write the TOML to PATH (atomically) when it is valid"),
            _SFT,
            _RL,
            arg("--fix", action="store_true", help="rewrite legacy keys and offer the migrated cell"),
            _LENIENT,
        ),
        faces=(MAGIC,),
    ),
    Command(
        "train",
        "init",
        "write a starter config that validates",
        (
            arg("--model", default=None, metavar="M", help="model id (default: the embedded primenb/tiny-byte)"),
            arg("--env", default=None, metavar="E", help="environment id (default: reverse-text)"),
            arg("--sft", action="store_true", help="an SFT config instead of RL"),
            arg("--lora", action="store_true", help="train LoRA adapters"),
            arg("--out", default=None, metavar="FILE", help="file to write (default rl.toml, or sft.toml with --sft)"),
            arg("--force", action="store_true", help="overwrite an existing file"),
        ),
    ),
    Command(
        "train",
        "train",
        "validate a config and train it",
        (
            arg("config", nargs="?", help="a .toml path (in a notebook also a %%rltoml variable)"),
            _NAME,
            _BACKEND,
            _WAIT,
            _DETACH,
            arg("--sft", action="store_true", faces=(CLI,), help="validate as SFT", exclusive="mode"),
            arg("--rl", action="store_true", faces=(CLI,), help="validate as RL", exclusive="mode"),
            arg(
                "--lenient",
                action="store_true",
                faces=(CLI,),
                help="keys prime-rl 0.4.0 does not know are warnings (a newer platform's)",
            ),
            arg("--stop", metavar="RUN", faces=(MAGIC,), help="ask a run to save a final checkpoint and stop"),
            arg(
                "--attach", metavar="RUN", faces=(MAGIC,), help="show a run (e.g. after a kernel restart) and follow it"
            ),
            *_HOSTED,
            arg(
                "--ui", action="store_true", faces=(MAGIC,), help="open the config builder form (from CONFIG if given)"
            ),
        ),
    ),
    Command(
        "train",
        "stop",
        "ask a run to save a final checkpoint and stop",
        (
            arg("run", help="run name or directory"),
            arg("--timeout", type=float, default=120.0, metavar="S", help="seconds before the process group is killed"),
        ),
        faces=(CLI,),
    ),
    Command(
        "train",
        "attach",
        "follow a run's progress (Ctrl-C detaches; twice within 3 s stops)",
        (
            arg("run", help="run name or directory"),
            arg("--stop", action="store_true", help="Ctrl-C stops the run (default: Ctrl-C detaches)"),
        ),
        faces=(CLI,),
    ),
    # -- the harness ---------------------------------------------------------------------------
    Command(
        "harness",
        "show",
        "list traces (newest first), or show one",
        (
            arg("trace", nargs="?", help=_TRACE),
            arg("--last", type=int, default=None, metavar="N", help="the newest N traces"),
            arg(
                "--status",
                default=None,
                metavar="S",
                help="completed, failed, stopped, running or queued (a,b,...)",
            ),
            arg("--env", default=None, metavar="E", help="environment id (substring)"),
            arg("--model", default=None, metavar="M", help="model id (substring)"),
            arg("--where", default=None, metavar="EXPR", help="SQL expression over the columns"),
            arg("--json", action="store_true", faces=(CLI,), help="the table as JSON records"),
            arg(
                "--ui",
                action="store_true",
                faces=(MAGIC,),
                help="open the harness browser (grid, filters, actions) with these filters set and TRACE selected",
            ),
        ),
    ),
    Command(
        "harness",
        "apply",
        "continue a trace from its final checkpoint (a new run, parent = TRACE)",
        (
            arg("trace", help=_TRACE),
            arg(
                "--steps",
                type=int,
                default=None,
                metavar="N",
                help="steps to add (default: as the parent)",
            ),
            arg(
                "--set",
                dest="overrides",
                nargs="+",
                action="extend",
                default=[],
                metavar="key=value",
                help="config changes, e.g. trainer.optim.lr=1e-5",
            ),
            _BACKEND,
            _NAME,
            _WAIT,
            _DETACH,
            arg("--yes", action="store_true", help="a hosted (modelfactory) trace: launch the billed continuation"),
            _TRUST,
        ),
    ),
    Command(
        "harness",
        "rerun",
        "re-execute a trace from scratch and check the metrics match",
        (
            arg("trace", help=_TRACE),
            _BACKEND,
            _NAME,
            _WAIT,
            _DETACH,
            _TRUST,
        ),
    ),
    Command(
        "harness",
        "diff",
        "config/data/environment/deps/hardware differences",
        (arg("traces", nargs="+", help="two or more traces"),),
    ),
    Command(
        "harness",
        "compare",
        "summary table and overlaid curves of traces",
        (
            arg("traces", nargs="+", help="two or more traces"),
            arg("--metric", dest="metrics", action="append", default=None, metavar="M", help="a metric to compare"),
            arg("--html", default=None, metavar="FILE", faces=(CLI,), help="write the overlaid chart to FILE"),
        ),
    ),
    Command(
        "harness",
        "reindex",
        "rebuild the index from the run directories",
        (arg("paths", nargs="*", help="more folders holding run directories"),),
    ),
    Command(
        "harness",
        "export",
        "write a self-contained folder for another machine, or (--to) send the metrics to a tracker",
        (
            arg("trace", help=_TRACE),
            arg("path", nargs="?", default=None, help="folder to write"),
            arg(
                "--to",
                default=None,
                choices=("mlflow", "trackio", "wandb", "tensorboard"),
                help="backfill a tracker from the stored metrics instead (docs/trackers.md)",
            ),
        ),
    ),
    Command(
        "harness",
        "import",
        "bring an exported trace back",
        (
            arg("path", help="an exported folder"),
            arg("--dest", default=None, metavar="DIR", help="where to put it"),
        ),
    ),
    Command(
        "harness",
        "rm",
        "remove a trace (--files: and its run directory)",
        (
            arg("trace", help=_TRACE),
            arg("--files", action="store_true", help="also delete the run directory"),
        ),
    ),
    # -- environments --------------------------------------------------------------------------
    Command(
        "env",
        "list",
        "every known environment (built-in, registered, verifiers)",
        (
            _JSON,
            arg("--no-verifiers", action="store_true", help="leave out installed verifiers tasksets"),
        ),
    ),
    Command(
        "env",
        "add",
        "register a local folder / .py file or an importable module",
        (
            arg("target", help="a folder or .py file with load_environment(), or a module name"),
            arg("--id", default=None, metavar="ID", help="id to register it under (default: the folder/module name)"),
            arg("--force", action="store_true", help="replace an environment registered under the same id"),
            _JSON,
        ),
    ),
    Command(
        "env",
        "show",
        "description, arguments, reward functions and sample prompts",
        (
            arg("id", help="environment id"),
            arg("args", nargs="*", metavar="KEY=VALUE", help="arguments to build it with"),
            _JSON,
        ),
    ),
    Command(
        "env", "remove", "unregister an environment (its folder is left alone)", (arg("id", help="environment id"),)
    ),
)

COMMANDS += (
    # -- named backends ------------------------------------------------------------------------
    Command(
        "backend",
        "add",
        "save NAME for a backend URL and its options (no secrets)",
        (
            arg("name", help="the name to train with: --backend NAME"),
            arg("url", help="ssh://[user@]host[:port][/workdir], slurm://, slurm://login-host"),
            arg(
                "options",
                nargs="*",
                metavar="KEY=VALUE",
                help="python, workdir, env, ssh_args, sbatch_args, request_gpus",
            ),
            arg("--force", action="store_true", help="replace a backend saved under the same name"),
        ),
    ),
    Command("backend", "list", "the saved backends", (_JSON,)),
    Command("backend", "show", "a saved backend's URL and options", (arg("name", help="backend name"),)),
    Command("backend", "remove", "forget a saved backend", (arg("name", help="backend name"),)),
    # -- serving and evaluation (primenb.serve) -------------------------------------------------
    Command(
        "serve",
        "start",
        "serve traces (default: every completed one with a checkpoint) and their base over an "
        "OpenAI-compatible API, in its own process",
        (
            arg("traces", nargs="*", metavar="TRACE", help=_TRACE),
            arg("--base", default=None, metavar="MODEL", help="the base model to list (default: the traces' own)"),
            arg("--port", type=int, default=0, metavar="P", help="port (default: a free one)"),
            arg("--host", default="127.0.0.1", metavar="H", help="address to listen on; not loopback needs a key"),
            arg(
                "--api-key-var",
                default=None,
                metavar="VAR",
                help="environment variable holding the API key clients send as Bearer (never the key itself)",
            ),
            arg(
                "--max-batch",
                type=int,
                default=32,
                metavar="N",
                help="rows decoded together (requests x n); more wait in the queue",
            ),
            arg(
                "--max-queue",
                type=int,
                default=256,
                metavar="N",
                help="requests waiting for a row before the server answers 429",
            ),
            _JSON,
        ),
    ),
    Command("serve", "add", "load a trace into a running server", (arg("trace", help=_TRACE), _SERVER, _JSON)),
    Command(
        "serve",
        "remove",
        "drop a trace (or a model id) from a running server",
        (arg("trace", help="a trace or a served model id"), _SERVER),
    ),
    Command("serve", "list", "running servers: URL, pid, models, uptime, requests served", (_JSON,)),
    Command(
        "serve",
        "stop",
        "stop a server (default: the newest) or all",
        (arg("server", nargs="?", metavar="URL", help="a server URL, port or pid, or all"),),
    ),
    Command(
        "eval",
        "eval",
        "evaluate models and/or traces on an environment's held-out split through the served endpoint",
        (
            arg(
                "models",
                nargs="+",
                metavar="MODEL_OR_TRACE",
                help="traces or served model ids; one trace alone is compared with the model it was trained on",
            ),
            arg("--env", required=True, metavar="ID", help="environment id (built in, or added with %prime_env add)"),
            arg("--args", nargs="+", action="extend", default=[], metavar="K=V", help="environment arguments"),
            arg(
                "-n", "--num-examples", dest="num_examples", type=int, default=20, metavar="N", help="held-out examples"
            ),
            arg("-r", "--rollouts", dest="rollouts", type=int, default=1, metavar="R", help="rollouts per example"),
            arg("--temperature", type=float, default=0.0, metavar="T", help="sampling temperature (0: greedy)"),
            arg("--max-tokens", type=int, default=None, metavar="K", help="tokens per completion (default: the run's)"),
            arg(
                "--seed", type=int, default=0, metavar="S", help="the eval's seed: each rollout's seed derives from it"
            ),
            arg(
                "--pass-reward",
                type=float,
                default=1.0,
                metavar="R",
                help="with -r > 1: a rollout passes (pass@k) when its reward reaches R",
            ),
            arg(
                "--keep-server",
                action="store_true",
                help="keep a server this eval starts running (default: stopped at the end)",
            ),
            _TRUST,
            _JSON,
        ),
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


def add_arguments(parser: argparse.ArgumentParser, cmd: Command, face: str) -> argparse.ArgumentParser:
    """Declare ``cmd``'s arguments for ``face`` on ``parser``."""
    groups: dict[str, Any] = {}
    for a in cmd.args_for(face):
        target: Any = parser
        if a.exclusive:
            target = groups.get(a.exclusive) or groups.setdefault(a.exclusive, parser.add_mutually_exclusive_group())
        target.add_argument(*a.names, help=a.help or None, **dict(a.kw))
    return parser


def _synopsis_arg(a: Arg) -> str:
    if not a.names[0].startswith("-"):
        name = str(a.kw.get("metavar") or a.names[0]).upper()
        nargs = a.kw.get("nargs")
        return {"?": f"[{name}]", "*": f"[{name} ...]", "+": f"{name} [{name} ...]"}.get(str(nargs), name)
    if a.kw.get("action") == "store_true":
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
    return "" if value in (None, False, []) or a.kw.get("action") == "store_true" else f"`{value}`"


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
    "Arg",
    "Command",
    "add_arguments",
    "command",
    "family",
    "help_text",
    "invocation",
    "markdown",
    "synopsis",
]

if __name__ == "__main__":
    raise SystemExit(main())
