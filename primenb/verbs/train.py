"""The top-level verbs: validate, rltoml, init, train, stop, attach, pause, resume (`primenb ...`,
`%%rltoml`, `%prime_train`)."""

from __future__ import annotations

import builtins
import keyword
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from primenb.commands import (
    AttachArgs,
    InitArgs,
    PauseArgs,
    ResumeArgs,
    RltomlArgs,
    StopArgs,
    TrainArgs,
    UiArgs,
    ValidateArgs,
    command,
    invocation,
)
from primenb.errors import PrimenbError
from primenb.verbs import Face

if TYPE_CHECKING:
    from primenb.protocol.fields import Mode
    from primenb.run import Run

# a cell's line 1 is `%%rltoml NAME`: the TOML starts on line 2, and diagnostics say so
CELL_FIRST_LINE = 2


class _Modal(Protocol):
    @property
    def sft(self) -> bool: ...
    @property
    def rl(self) -> bool: ...


class _Hosted(Protocol):
    """The hosted platform's launch options (`--gpu-type`, `--volume`, `--team`)."""

    @property
    def gpu_type(self) -> str | None: ...
    @property
    def volume(self) -> str | None: ...
    @property
    def team(self) -> str | None: ...


def _mode(args: _Modal) -> Mode | None:
    return "sft" if args.sft else "rl" if args.rl else None


def user_path(text: str) -> Path:
    """A path a user typed, ``~`` expanded; ``~nosuchuser/x`` is a message, not a traceback."""
    try:
        return Path(text).expanduser()
    except RuntimeError:  # no home directory for that user
        user = text[1:].split("/", 1)[0] or "the current user"
        raise PrimenbError(
            f"cannot expand {text!r}: there is no home directory for {user} on this machine; "
            "give an absolute path or one relative to the notebook's folder"
        ) from None


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot receive a config: not a Python name, a keyword, or a builtin the shell
    and every later cell rely on (`print`, `get_ipython`, `__builtins__`)."""
    if not name.isidentifier() or keyword.iskeyword(name):  # `for`, `class` cannot be bound
        return f"`{name}` is not a valid Python variable name"
    if hasattr(builtins, name) or (name.startswith("__") and name.endswith("__")):
        return f"`{name}` is a Python builtin; binding a config to it would break later cells: choose another name"
    return None


def validate(args: ValidateArgs, face: Face) -> int:
    import json

    from primenb.config import check

    failed = False
    reports = []
    for file in args.files:
        if args.fix:
            _fix_file(user_path(file), args, face)
        outcome = check(user_path(file), mode=_mode(args), lenient=args.lenient)
        failed |= not outcome.report.ok
        if args.json:
            reports.append(json.loads(outcome.report.to_json()))
        elif outcome.report.diagnostics:
            face.say(outcome.report.to_text())
        else:
            face.say(f"{file}: ok ({outcome.mode.upper()})")
    if args.json:
        face.say(json.dumps(reports if len(reports) > 1 else reports[0], indent=2))
    return 1 if failed else 0


def _fix_file(path: Path, args: ValidateArgs, face: Face) -> None:
    """`validate --fix`: the file's legacy keys rewritten in place (comments and layout kept), only
    when the migrated text validates: a good file is never replaced by a worse one, and a file
    that does not validate after the migration is left as it was, with the reason below."""
    from primenb.config.fix import fix_text
    from primenb.protocol.safepath import write_user_file

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PrimenbError(f"{path}: cannot be read ({type(exc).__name__}); nothing was fixed") from None
    fix = fix_text(text, source=str(path), mode=_mode(args), lenient=args.lenient)
    if not fix.changed:
        face.say(f"{path}: nothing to migrate")
    elif fix.outcome.model is None:
        face.say(f"{path}: not rewritten: the migrated text would not validate either (see below)")
    else:
        write_user_file(path, fix.after, overwrite=True)
        face.say(f"{path}: legacy keys rewritten (comments kept):\n{fix.diff()}")


def rltoml(args: RltomlArgs, face: Face) -> None:
    from primenb.config import Config, check
    from primenb.config.fix import fix_text

    problem = name_problem(args.name) or face.name_problem(args.name)
    if problem:
        raise PrimenbError(problem)
    save = user_path(args.save) if args.save else None
    mode = _mode(args)
    text = args.cell
    if args.fix:
        fix = fix_text(text, mode=mode, first_line=CELL_FIRST_LINE, lenient=args.lenient)
        face.display(fix)
        if fix.changed:
            face.offer(f"%%rltoml {args.line.strip().replace('--fix', '').strip()}\n{fix.after}")
            text = fix.after
        outcome = fix.outcome
    else:
        outcome = check(text, mode=mode, first_line=CELL_FIRST_LINE, lenient=args.lenient)
    if outcome.model is None:
        face.display(outcome.report)
        raise PrimenbError(f"{args.name} not updated: {outcome.report.summary().split(': ', 1)[1]} (listed above)")
    config = Config(outcome.model, mode=outcome.mode, text=text, report=outcome.report)
    if save is not None:
        from primenb.protocol.safepath import write_user_file

        write_user_file(save, text, overwrite=True)  # a folder, a link, read-only: a message
    face.bind(args.name, config)
    face.display(config)
    if save is not None:
        face.say(f"saved {args.save}")


def init(args: InitArgs, face: Face) -> None:
    from primenb.config.templates import starter
    from primenb.protocol.safepath import write_user_file

    out = user_path(args.out or ("sft.toml" if args.sft else "rl.toml"))
    write_user_file(out, starter(args.model, args.env, sft=args.sft, lora=args.lora), overwrite=args.force)
    train = invocation(command("train", "train"), face.name)
    face.say(
        f"wrote {out} ({'SFT' if args.sft else 'RL'}, model {args.model or 'primenb/tiny-byte'}); "
        f"train it with: {train} {out}"
    )


def train(args: TrainArgs, face: Face) -> Any:
    from primenb.backends import capabilities, default_backend, get_backend, submit

    if not args.config:
        usage = invocation(command("train", "train"), face.name)
        init = invocation(command("train", "init"), face.name)
        raise PrimenbError(f"usage: {usage} CONFIG [--name RUN] [--backend B]; or {init} to write a starter config")
    config = face.config(args.config, _mode(args), lenient=args.lenient)
    chosen = args.backend or default_backend(config)
    caps = capabilities(chosen)
    if not caps.bills:
        run = submit(config, name=args.name, backend=args.backend)
        return face.follow(run, new=True, wait=args.wait, detach=args.detach)
    backend = get_backend(chosen, **_options(args, caps.options), yes=True)  # the face asks, not the backend
    quote = backend.prepare(config)  # its checks and price, before anything is billed

    def launch() -> Run:
        return backend.launch(config, quote, name=args.name)

    if args.yes:
        return face.follow(launch(), new=True, wait=args.wait, detach=args.detach)
    return face.confirm(quote, launch, what="Launch", wait=args.wait, detach=args.detach)


def ui(args: UiArgs, face: Face) -> Any:
    """The config builder form; its Launch goes through the same submit + follow as `train`."""
    return face.widget("builder", config=face.config(args.config) if args.config else None)


def _options(args: _Hosted, takes: tuple[str, ...]) -> dict[str, Any]:
    """The launch options a backend declares (`Capabilities.options`), from the arguments of the same name."""
    given = {"gpu_type": args.gpu_type, "volume": args.volume, "team": args.team}
    return {k: v for k, v in given.items() if k in takes}


def _hosted(args: _Hosted, run_ref: str) -> tuple[Run, Any, Any]:
    """The run, its backend and what that backend can do; refused for a backend that cannot pause."""
    from primenb.backends import attach, capabilities, get_backend, run_backend

    run = attach(run_ref)
    name = run_backend(run.dir)
    caps = capabilities(name)
    if not caps.pausable:
        raise PrimenbError(
            f"{run.name} ran on the {name} backend, which cannot pause or resume a run "
            "(--pause and --resume are for hosted runs); continue it with %prime_harness apply"
        )
    return run, get_backend(name, **_options(args, caps.options), yes=True), caps


def pause(args: PauseArgs, face: Face) -> Run:
    run, backend, _ = _hosted(args, args.run)
    state = backend.pause(run)
    face.say(f"{run.name}: {state}; continue it later with %prime_train --resume {run.name}")
    return run


def resume(args: ResumeArgs, face: Face) -> Any:
    run, backend, caps = _hosted(args, args.run)

    def again() -> Run:
        return backend.resume(run, name=args.name)

    if args.yes or not caps.bills:
        return face.follow(again(), new=True, wait=args.wait)
    return face.confirm(backend.resume_quote(run), again, what="Resume", wait=args.wait)


def stop(args: StopArgs, face: Face) -> None:
    """Ask a run to stop; a cell returns at once with one line (``--wait``, and a terminal: after it ended)."""
    from primenb.backends import attach
    from primenb.protocol.rundir import FINAL_STATES

    run = attach(args.run)
    if run.state in FINAL_STATES:
        face.say(f"{run.name} already {run.state}")
    elif args.wait:
        face.say(f"{run.name}: {run.stop(wait=True, timeout=args.timeout)}")
    else:
        run.stop(wait=False)
        face.say(  # a line, not a second monitor (the run's own cell still shows it)
            f"asked {run.name} to save a checkpoint and stop at its next step; "
            f"%prime_train --stop {run.name} --wait blocks until it has"
        )


def attach(args: AttachArgs, face: Face) -> Any:
    from primenb.backends import attach as attach_run

    return face.follow(attach_run(args.run), wait=args.wait, stop_on_interrupt=args.stop)
