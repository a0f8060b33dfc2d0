"""The rules Prime Intellect's hosted training (Model Factory) applies on top of prime-rl's schema,
as located diagnostics, so a config fails in its cell instead of after a billable launch.

From prime CLI 0.18.0 (``prime train run`` and its validation worker): the retired shared-LoRA
shape is rejected (``primenb.config.migrate`` already reports it), as are ``clean = true``,
``[k8s]``, disaggregated inference, RL without inference GPUs (unless ``trainer.data.fake``), and
``[eval]``/``[inference]``/``[weight_broadcast]`` in a hosted SFT config. Machine-local keys
(``output_dir``, ``run.dir``, ``[slurm]``) are ignored by the platform; primenb uses them only for
the local mirror. A hosted SFT run reads data from a volume, never from this machine.

`ModelFactoryBackend.config_rules` names `hosted_report`, so validating a config whose
``[primenb] backend`` is ``modelfactory`` shows these in its cell (`primenb.config.backend_rules`).
"""

from __future__ import annotations

from pathlib import Path as FsPath
from typing import Any

from primenb.config.diagnostics import Diagnostic, Report
from primenb.config.locate import located as _at
from primenb.config.positions import Path, scan
from primenb.config.tomlread import read_toml
from primenb.protocol.fields import get_path

ON_VOLUME = ("/volume/", "datasets/")


def _problems(raw: dict[str, Any], mode: str, volume: str | None) -> list[tuple[str, Path, str, str]]:
    """``(severity, path, message, hint)`` for each hosted-only rule ``raw`` breaks."""
    out: list[tuple[str, Path, str, str]] = []
    if raw.get("clean") is True:
        out.append(
            (
                "error",
                ("clean",),
                "a hosted run cannot use `clean = true`",
                "remove `clean`: every hosted run starts in a fresh directory",
            )
        )
    if "k8s" in raw:
        out.append(("error", ("k8s",), "[k8s] is the platform's business on a hosted run", "remove the [k8s] table"))
    if get_path(raw, ("inference", "deployment", "type")) == "disaggregated":
        out.append(
            (
                "error",
                ("inference", "deployment", "type"),
                "hosted training does not run disaggregated inference",
                'use type = "single_node" or "multi_node", or remove [inference.deployment]',
            )
        )
    if mode == "rl":
        fake = get_path(raw, ("trainer", "data", "fake")) is not None
        infer_gpus = get_path(raw, ("deployment", "num_infer_gpus"))
        if not fake and "inference" not in raw:
            out.append(
                (
                    "error",
                    (),
                    "a hosted RL run needs inference GPUs: this config has no [inference] table",
                    "add an [inference] table (the platform serves the policy with vLLM on its own GPUs)",
                )
            )
        elif not fake and infer_gpus == 0:
            out.append(
                (
                    "error",
                    ("deployment", "num_infer_gpus"),
                    "a hosted RL run needs inference GPUs (num_infer_gpus = 0)",
                    "set num_infer_gpus to 1 or more, or train on fake data ([trainer.data.fake])",
                )
            )
    if mode == "sft":
        for table in ("eval", "inference", "weight_broadcast"):
            if table in raw:
                out.append(
                    (
                        "error",
                        (table,),
                        f"hosted SFT is trainer-only: [{table}] is rejected",
                        f"remove the [{table}] table",
                    )
                )
        name = get_path(raw, ("data", "name"))
        fake = get_path(raw, ("data", "type")) == "fake"
        if isinstance(name, str) and not fake and _looks_local(name) and not name.startswith(ON_VOLUME):
            out.append(
                (
                    "error",
                    ("data", "name"),
                    f"data.name {name!r} is a path on this machine, which a hosted run cannot read",
                    "stage the dataset on a volume (prime volumes ssh VOLUME --read-write) and write "
                    'data.name = "datasets/<name>" with --volume VOLUME',
                )
            )
        elif isinstance(name, str) and not fake and name.startswith(ON_VOLUME) and not volume:
            out.append(
                (
                    "error",
                    ("data", "name"),
                    f"data.name {name!r} is on a volume, but no volume is given",
                    "pass --volume VOLUME",
                )
            )
    for key, what in ((("output_dir",), "output_dir"), (("run", "dir"), "run.dir"), (("slurm",), "[slurm]")):
        if get_path(raw, key) is not None:
            out.append(
                (
                    "warning",
                    key,
                    f"{what} is ignored by a hosted run (outputs stay on the platform)",
                    "primenb uses it only for the local mirror of the run",
                )
            )
    return out


def _looks_local(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or FsPath(name).exists()


def hosted_report(text: str, mode: str, *, source: str = "<cell>", volume: str | None = None) -> Report:
    """Every hosted-only rule ``text`` breaks, each located in the text."""
    raw = read_toml(text)
    pos = scan(text)
    diags = [_at(pos, {}, path, sev, "hosted", msg, hint) for sev, path, msg, hint in _problems(raw, mode, volume)]
    diags.sort(key=lambda d: (d.line or 0, d.col or 0))
    return Report(diags, source, text.splitlines())


def platform_report(text: str, errors: list[tuple[str, str]], *, source: str = "<cell>") -> Report:
    """The platform's 422 errors (``config.trainer.optim.lr: must be > 0``) located in ``text``
    where the path maps to a line; the rest at the top."""
    pos = scan(text)
    diags = []
    for where, message in errors:
        parts = [p for p in where.split(".") if p and p != "body"]
        if parts and parts[0] in ("config", "normalizedConfig"):
            parts = parts[1:]
        path: Path = tuple(int(p) if p.isdigit() else p for p in parts)
        d = _at(pos, {}, path, "error", "platform", message, "the platform's validation (HTTP 422)")
        if not d.path:
            d = Diagnostic("error", "platform", where, message, "the platform's validation (HTTP 422)")
        diags.append(d)
    return Report(diags, source, text.splitlines())


__all__ = ["hosted_report", "platform_report"]
