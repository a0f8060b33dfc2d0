"""`Config`: a validated prime-rl config, as bound by `%%rltoml NAME`."""

from __future__ import annotations

import html
from typing import Any

import tomlkit

from primenb.config.diagnostics import Report
from primenb.config.schema import RLConfig, SFTConfig
from primenb.config.schema.common import LoraConfig, PrimenbSettings
from primenb.fsutil import atomic_write_text
from primenb.protocol.fields import Mode


class Config:
    """A valid RL or SFT config: the text as written, the validated model, and its warnings."""

    def __init__(self, model: RLConfig | SFTConfig, *, mode: Mode, text: str, report: Report) -> None:
        _refuse_credentials(text, report.source)
        self.model = model
        self.mode = mode
        self.text = text
        self.report = report
        self.source = report.source

    # -- what the config says -------------------------------------------------------------
    @property
    def settings(self) -> PrimenbSettings:
        """primenb's own `[primenb]` table (defaults when absent)."""
        return self.model.primenb or PrimenbSettings()

    @property
    def model_name(self) -> str:
        m = self.model
        return m.model.name if isinstance(m, SFTConfig) else m.trainer.model.name

    @property
    def max_steps(self) -> int | None:
        return self.model.max_steps

    @property
    def lora(self) -> LoraConfig | None:
        m = self.model
        return m.model.lora if isinstance(m, SFTConfig) else m.trainer.model.lora

    @property
    def environments(self) -> list[str]:
        """Each environment once, in order (an SFT run's data and its eval on the same one read
        "reverse-text, reverse-text")."""
        m: Any = self.model
        if self.mode == "sft":
            sources = m.eval.source if m.eval else []
            found = [m.data.name] + [s.env.taskset.id for s in sources if s.env.taskset]
        else:
            found = [s.env.taskset.id for s in m.orchestrator.train.source if s.env.taskset]
        return list(dict.fromkeys(found))

    @property
    def warnings(self) -> list[Any]:
        return self.report.warnings

    def resolved(self, *, primenb: bool = False) -> dict[str, Any]:
        """The fully propagated config with every default, as upstream's dry-run JSON.

        `primenb=True` keeps primenb's own table (what the local engine reads)."""
        data = self.model.model_dump(mode="json")
        data.pop("primenb", None)
        if primenb:
            data["primenb"] = self.settings.model_dump(mode="json")
        return data

    def upstream_toml(self) -> str:
        """The TOML as written, minus the `[primenb]` table, for upstream tools."""
        doc = tomlkit.parse(self.text)
        doc.pop("primenb", None)
        return tomlkit.dumps(doc)

    def save(self, path: str) -> None:
        atomic_write_text(path, self.text)

    def summary(self) -> dict[str, Any]:
        m: Any = self.model
        lora = self.lora
        if self.mode == "sft":
            batch = f"{m.data.batch_size} (micro {m.data.micro_batch_size})"
            dep = m.deployment
            deployment = (
                f"single node: {dep.num_train_gpus} train GPU(s)"
                if dep.type == "single_node"
                else f"multi node: {dep.num_train_nodes} train nodes"
            )
            lr = m.optim.lr
        else:
            o = m.orchestrator
            batch = f"{o.batch_size} rollouts, group {o.group_size}" if o.batch_size else f"{o.token_batch_size} tokens"
            dep = m.deployment
            deployment = (
                f"single node: {dep.num_train_gpus} train + {dep.num_infer_gpus} inference GPU(s)"
                if dep.type == "single_node"
                else f"multi node: {dep.num_train_nodes} train + {dep.num_infer_nodes or 'derived'} inference nodes"
            )
            lr = m.trainer.optim.lr
        return {
            "mode": self.mode.upper(),
            "model": self.model_name,
            "environments": ", ".join(self.environments) or "(none)",
            "max_steps": self.max_steps if self.max_steps is not None else "(unbounded)",
            "batch": batch,
            "learning rate": lr,
            "LoRA": f"rank {lora.rank}, alpha {lora.alpha:g}" if lora else "full fine-tune",
            # the GPU layout only where the config sets one: a local CPU run has no train/inference GPUs
            **({"deployment": deployment} if "deployment" in self.model.model_fields_set else {}),
            "backend": self.settings.backend,
        }

    def __repr__(self) -> str:
        s = self.summary()
        lines = [f"<primenb Config {s['mode']} from {self.source}>"] + [
            f"  {k:>13}: {v}" for k, v in s.items() if k != "mode"
        ]
        if self.warnings:
            lines.append(f"  {len(self.warnings)} warning(s): " + "; ".join(w.message for w in self.warnings))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(
            f'<tr><th style="text-align:right;padding-right:1em;color:#555">{html.escape(k)}</th>'
            f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
            for k, v in self.summary().items()
        )
        warn = self.report._repr_html_() if self.warnings else ""
        return (
            f'<div class="primenb-config"><div><b>✓ valid {self.mode.upper()} config</b> '
            f'<span style="color:#888">({html.escape(self.source)})</span></div>'
            f"<table>{rows}</table>{warn}</div>"
        )


def _refuse_credentials(text: str, source: str) -> None:
    """A `Config` never holds a credential, so none is written anywhere from one (the run's
    configs/config.toml, a platform upload, a saved cell), whichever road built it."""
    from primenb.config.credentials import credentials
    from primenb.config.diagnostics import format_path
    from primenb.config.tomlread import read_toml
    from primenb.errors import PrimenbError

    found = sorted({format_path(p.path) for p in credentials(read_toml(text))})
    if found:
        raise PrimenbError(
            f"{source} holds a credential at {', '.join(found)}; secrets never go in a config file "
            "(remove it and export it in the environment that launches the run)"
        )
