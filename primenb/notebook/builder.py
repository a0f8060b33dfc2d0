"""`ConfigBuilder`: an ipywidgets form beside the TOML text, validated on every change.

The TOML text is the source of truth. A form edit rewrites only that key in the text (tomlkit,
so comments and keys the form does not know stay); a text edit re-reads the form. Both go through
`primenb.config.check`, the validation `%%rltoml` runs, and each diagnostic is shown next to the
field it concerns (the rest under the form). Launch calls what `%prime_train` calls.
"""

from __future__ import annotations

import contextlib
import html
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as W
from IPython.display import display

from primenb.errors import PrimenbError
from primenb.notebook import fallback
from primenb.notebook import form_fields as F
from primenb.notebook.feedback import GREEN, RED, Feedback
from primenb.notebook.layout import wrapping_row
from primenb.render.summary import short_path
from primenb.render.svgchart import WARN

if TYPE_CHECKING:
    from primenb.config import Config
    from primenb.config.diagnostics import Diagnostic
    from primenb.protocol.fields import Mode
    from primenb.run import Run

LABEL = W.Layout(width="180px", min_width="180px", flex="0 0 auto")  # never cut ("max s")
WIDE = W.Layout(width="260px")
AMBER = WARN
OPTIONAL_NUMBERS = ("ckpt_interval", "eval_interval")


def _initial_text(config: Any) -> str:
    from primenb.config import Config
    from primenb.config.loader import read_source
    from primenb.config.templates import starter

    if config is None:
        return starter()
    if isinstance(config, Config):
        return config.text
    if isinstance(config, (str, Path)):
        return read_source(config)[0]
    raise PrimenbError(f"ConfigBuilder takes a Config, TOML text or a .toml path, not {type(config).__name__}")


def _make_inputs() -> dict[str, W.Widget]:
    from primenb.backends.registry import OFFERED
    from primenb.backends.spec import names as backend_names
    from primenb.engine.models_info import TINY_MODELS
    from primenb.envs import known_ids

    def num(cls: Any, **kw: Any) -> Any:
        return cls(layout=WIDE, continuous_update=False, **kw)

    return {
        "model": W.Combobox(options=list(TINY_MODELS), ensure_option=False, placeholder="hub id", layout=WIDE),
        "env": W.Dropdown(options=known_ids(), layout=WIDE),
        "max_steps": num(W.IntText),
        "lr": W.FloatLogSlider(base=10, min=-7, max=-1, step=0.05, readout_format=".1e", layout=WIDE),
        "batch_size": num(W.IntText),
        "group_size": num(W.IntText),
        "seq_len": num(W.IntText),
        "max_tokens": num(W.IntText),
        "temperature": num(W.FloatText, step=0.1),
        "lora": W.Checkbox(indent=False),
        "lora_rank": num(W.IntText),
        "lora_alpha": num(W.FloatText),
        "lora_targets": W.Text(
            placeholder="q_proj, v_proj (empty: the defaults)", layout=WIDE, continuous_update=False
        ),
        # unset by default (no periodic checkpoint / eval): a text box can show "not set", a number box cannot
        "ckpt_interval": W.Text(placeholder="not set", layout=WIDE, continuous_update=False),
        "eval_interval": W.Text(placeholder="not set", layout=WIDE, continuous_update=False),
        "train_gpus": num(W.IntText),
        "infer_gpus": num(W.IntText),
        "backend": W.Dropdown(options=[*OFFERED, *backend_names()], layout=WIDE),
    }


class ConfigBuilder(Feedback):
    """A form for an RL or SFT config, in sync with its TOML text.

    ``builder.config`` is the current valid `Config` (the last valid one while there are errors),
    ``builder.text`` the TOML. ``config`` may be a `Config`, TOML text or a path.
    """

    def __init__(self, config: Any = None, *, name: str = "cfg") -> None:
        self._syncing = False
        self._edited: str | None = None  # the form field edited last (until its validation ran)
        # diagnostics no field owns, as last shown -> the field whose edit caused them (None: the text's)
        self._unowned: dict[tuple[str, str], str | None] = {}
        self._config: Config | None = None
        self._mode: Mode = "rl"
        self.diagnostics: list[Diagnostic] = []
        self.runs: list[Run] = []
        self._env_shown: str | None = None
        self._env_arg_inputs: dict[str, W.Text] = {}

        self.inputs = _make_inputs()
        self.errors = {k: W.HTML() for k in self.inputs}
        self.mode_input = W.ToggleButtons(options=[("RL", "rl"), ("SFT", "sft")], style={"button_width": "70px"})
        self.env_args = W.VBox()
        self.text_input = W.Textarea(layout=W.Layout(width="460px", height="560px"), continuous_update=True)
        self.text_input.add_class("primenb-toml")
        self.status = W.HTML()
        self.other = W.HTML()  # diagnostics no field shows (syntax, unknown keys, ...)
        self.message = W.HTML()
        self.save_path = W.Text(value="rl.toml", layout=W.Layout(width="160px"))
        self.run_name = W.Text(placeholder="run name (optional)", layout=W.Layout(width="180px"))
        self.cell_name = W.Text(value=name, layout=W.Layout(width="90px"))
        self.save_button = W.Button(description="Save", icon="save", tooltip="write the TOML to the path")
        self.launch_button = W.Button(description="Launch", icon="play", button_style="success")
        self.copy_button = W.Button(description="Copy as %%rltoml", icon="copy", layout=W.Layout(width="170px"))
        self.cell_text = W.Textarea(layout=W.Layout(width="100%", height="0px", display="none"))
        from primenb.notebook.clipboard import Clipboard

        self.clipboard = Clipboard()
        self.output = W.Output()

        for key, widget in self.inputs.items():
            widget.observe(lambda ch, key=key: self._on_field(key, ch["new"]), names="value")
        self.mode_input.observe(lambda ch: self._on_mode(ch["new"]), names="value")
        self.text_input.observe(lambda ch: self._on_text(), names="value")
        self.save_button.on_click(lambda _: self._guard(self.save))
        self.launch_button.on_click(lambda _: self._guard(self.launch))
        self.copy_button.on_click(lambda _: self._guard(self.copy_cell))

        self.widget = self._layout()
        self._syncing = True
        self.text_input.value = _initial_text(config)
        self._syncing = False
        self._on_text()

    # -- the public face -----------------------------------------------------------------------
    @property
    def config(self) -> Config | None:
        """The current valid `Config`; while the text has errors, the last valid one."""
        return self._config

    @property
    def text(self) -> str:
        return str(self.text_input.value)

    @text.setter
    def text(self, value: str) -> None:
        self.text_input.value = value

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def valid(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    def set(self, **values: Any) -> ConfigBuilder:
        """Set form fields as a person would (``builder.set(lr=1e-4, lora=True)``)."""
        for key, value in values.items():
            if key == "mode":
                self.mode_input.value = value
            elif key in self.inputs:
                self.inputs[key].value = value
            else:
                raise PrimenbError(f"no form field {key!r}; fields: mode, {', '.join(self.inputs)}")
        return self

    def set_env_arg(self, name: str, value: str) -> None:
        if name not in self._env_arg_inputs:
            raise PrimenbError(f"{self._env_shown} takes no argument {name!r} ({', '.join(self._env_arg_inputs)})")
        self._env_arg_inputs[name].value = value

    def field_diagnostics(self, key: str) -> list[Diagnostic]:
        """The diagnostics shown next to form field ``key``."""
        return [d for d in self.diagnostics if F.owner(d.path, self._mode) == key]

    def save(self, path: str | None = None) -> Path:
        """Write the TOML to ``path`` (default: the path box) when it is valid, as `%%rltoml --save`."""
        from primenb.protocol.safepath import write_user_file

        self._require_valid("saving")
        target = write_user_file(path or self.save_path.value, self.text, overwrite=True)
        self._say(f"saved {html.escape(short_path(target))}")
        return target

    def launch(self, name: str | None = None) -> Run:
        """Start the config exactly as `%prime_train` does, and show its live monitor."""
        from primenb.backends import submit
        from primenb.notebook.monitor import follow_in_output

        config = self._require_valid("launching")
        # outside the Output: inside it, IPython would print a submit error as a traceback there
        run = submit(config, name=name or self.run_name.value or None)
        follow_in_output(self.output, run)  # the summary replaces the monitor when the run ends
        self.runs.append(run)
        self._say(f"started {html.escape(run.name)} in {html.escape(short_path(run.dir))}")  # no absolute path
        return run

    def copy_cell(self, name: str | None = None) -> str:
        """The config as a `%%rltoml NAME` cell: shown to copy, and put on the clipboard."""
        var = name or self.cell_name.value or "cfg"
        cell = f"%%rltoml {var}\n{self.text}"
        self.cell_text.value = cell
        self.cell_text.layout.height, self.cell_text.layout.display = "160px", ""
        self.clipboard.copy(cell)
        self._say(f"copied a %%rltoml {html.escape(var)} cell (also shown below)")
        return cell

    def close(self) -> None:
        """Replace the display by its static snapshot and close every widget."""
        for handle, widget, _ in list(fallback._LIVE.values()):
            if widget is self.widget:
                fallback.freeze(handle)
        for w in [*self.inputs.values(), *self._env_arg_inputs.values(), *self.errors.values()]:
            w.close()
        self.widget.close()

    # -- display ---------------------------------------------------------------------------------
    def _layout(self) -> W.Widget:
        rows: list[W.Widget] = [W.HBox([W.Label("mode", layout=LABEL), self.mode_input])]
        for field in F.FIELDS:
            row = W.VBox([W.HBox([W.Label(field.label, layout=LABEL), self.inputs[field.key]]), self.errors[field.key]])
            row.add_class(f"primenb-field-{field.key}")  # a handle for the page (and browser tests)
            rows.append(row)
            if field.key == "env":
                rows.append(self.env_args)
        form = W.VBox(rows, layout=W.Layout(width="470px", flex="0 0 auto"))
        form.add_class("primenb-form")
        actions = wrapping_row(
            [
                self.save_button,
                self.save_path,
                self.launch_button,
                self.run_name,
                self.copy_button,
                self.cell_name,
            ]
        )
        right = W.VBox([W.HTML("<b>TOML</b>"), self.text_input, self.other])
        box = W.VBox(
            [
                self.status,
                wrapping_row([form, right], align_items="flex-start"),
                actions,
                self.message,
                self.cell_text,
                self.clipboard,
                self.output,
            ]
        )
        box.add_class("primenb-builder")
        return box

    def _static(self) -> dict[str, Any]:
        summary = self._config._repr_html_() if self._config is not None and self.valid else self.status.value
        body = f"<pre style='max-height:24em;overflow:auto'>{html.escape(self.text)}</pre>"
        return {
            "text/html": f'<div class="primenb-builder-static">{summary}{body}</div>',
            "text/plain": f"<primenb ConfigBuilder ({self._mode.upper()})>\n{self.text}",
        }

    def _ipython_display_(self) -> None:
        fallback.show(self.widget, self._static)

    def __repr__(self) -> str:
        return self._static()["text/plain"]

    # -- form -> text ----------------------------------------------------------------------------
    def _on_field(self, key: str, value: Any) -> None:
        if self._syncing:
            return
        self._edited = key  # a new diagnostic no field owns is shown beside this one
        self._guard(self._edit, key, value)

    def _on_mode(self, mode: Mode) -> None:
        if self._syncing or mode == self._mode:
            return
        from primenb.config.templates import starter

        model = self.inputs["model"].value or None
        env = self.inputs["env"].value or None
        try:  # RL and SFT keep settings in different places: start from that mode's starter
            text = starter(model, env, sft=mode == "sft", lora=bool(self.inputs["lora"].value))
        except PrimenbError:
            text = starter(sft=mode == "sft")
        self._mode = mode
        self.text_input.value = text

    def _edit(self, key: str, value: Any) -> None:
        import tomlkit

        try:
            doc = tomlkit.parse(self.text)
        except Exception:
            self._say("fix the TOML syntax (see the error under the text) before editing the form", error=True)
            return
        written = doc.unwrap()
        field = F.BY_KEY[key]
        path = F.write_path(field, self._mode, written)
        if path is None:
            return
        if key == "lora":
            if value:
                F.set_at(doc, f"{path}.rank", int(self.inputs["lora_rank"].value or 16))
                F.set_at(doc, f"{path}.alpha", float(self.inputs["lora_alpha"].value or 32))
            else:
                F.remove_at(doc, path)
        elif key == "lora_targets":
            targets = [t.strip() for t in str(value).split(",") if t.strip()]
            F.set_at(doc, path, targets) if targets else F.remove_at(doc, path)
        elif value is None or str(value).strip() == "":
            F.remove_at(doc, path)
        elif key in OPTIONAL_NUMBERS:
            from primenb.config.tomledit import parse_value

            F.set_at(doc, path, parse_value(str(value).strip()))  # "abc" stays text: the schema says why
        else:
            F.set_at(doc, path, _tidy(key, value))
            if key == "env":
                self._env_renamed(doc, written, str(value))
        self.text_input.value = tomlkit.dumps(doc)

    def _env_renamed(self, doc: Any, written: dict[str, Any], env: str) -> None:
        """A new environment also names its source and its eval source (kept as written otherwise)."""
        for path in (
            f"{F.RL_SOURCE}.name",
            "orchestrator.eval.source[0].env.taskset.id",
            "eval.source[0].env.taskset.id",
        ):
            if F.has(written, path):
                F.set_at(doc, path, env)
        taskset = F.get_at(written, F.RL_TASKSET) if self._mode == "rl" else None
        if isinstance(taskset, dict):  # the old environment's arguments mean nothing to the new one
            for arg in [a for a in taskset if a != "id"]:
                F.remove_at(doc, f"{F.RL_TASKSET}.{arg}")

    def _on_env_arg(self, name: str, raw: str) -> None:
        if self._syncing or self._mode != "rl":
            return
        import tomlkit

        from primenb.config.tomledit import parse_value

        try:
            doc = tomlkit.parse(self.text)
        except Exception:
            self._say("fix the TOML syntax before editing the form", error=True)
            return
        path = f"{F.RL_TASKSET}.{name}"
        F.set_at(doc, path, parse_value(raw)) if raw.strip() else F.remove_at(doc, path)
        self.text_input.value = tomlkit.dumps(doc)

    # -- text -> form ----------------------------------------------------------------------------
    def _on_text(self) -> None:
        if self._syncing:
            return
        from primenb.config import Config, check

        text = self.text
        outcome = check(text)
        self._mode = outcome.mode
        if self.save_path.value in ("rl.toml", "sft.toml"):  # the default name follows the mode
            self.save_path.value = f"{outcome.mode}.toml"
        self.diagnostics = list(outcome.report.diagnostics)
        if outcome.model is not None:
            self._config = Config(outcome.model, mode=outcome.mode, text=text, report=outcome.report)
        try:
            written = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            written = None
        resolved = outcome.model.model_dump(mode="json") if outcome.model is not None else None
        self._syncing = True
        try:
            self.mode_input.value = outcome.mode
            if written is not None:
                self._fill_form(written, resolved)
            self._show_diagnostics(outcome.report)
        finally:
            self._syncing = False

    def _fill_form(self, written: dict[str, Any], resolved: dict[str, Any] | None) -> None:
        for field in F.FIELDS:
            widget = self.inputs[field.key]
            widget.disabled = not field.paths(self._mode)
            if field.key == "lora":
                widget.value = F.read(field, self._mode, written, None) is not None
                continue
            value = F.read(field, self._mode, written, resolved)
            if field.key == "lora_targets":
                value = (
                    ", ".join(value) if isinstance(value, list) and F.has(written, field.paths(self._mode)[0]) else ""
                )
            if field.key in OPTIONAL_NUMBERS:
                value = "" if value is None else str(value)
            if value is None:
                continue
            if field.key in ("env", "backend", "model") and value not in widget.options:
                widget.options = [*widget.options, value]  # written by hand: still shown
            with contextlib.suppress(Exception):  # a wrong type written by hand: the diagnostics say so
                widget.value = value
        lora_on = bool(self.inputs["lora"].value)
        for key in ("lora_rank", "lora_alpha", "lora_targets"):
            self.inputs[key].disabled = not lora_on
        self._fill_env_args(written)

    def _fill_env_args(self, written: dict[str, Any]) -> None:
        env = str(self.inputs["env"].value or "") if self._mode == "rl" else ""
        if env != self._env_shown:
            self._rebuild_env_args(env)
        taskset = F.get_at(written, F.RL_TASKSET) if self._mode == "rl" else None
        for name, box in self._env_arg_inputs.items():
            value = taskset.get(name) if isinstance(taskset, dict) else None
            box.value = "" if value is None else str(value)

    def _rebuild_env_args(self, env: str) -> None:
        from primenb.envs import environment_args

        for old in (*self._env_arg_inputs.values(), *self.env_args.children):
            _close(old)  # old widgets (and their layout/style models) would live on in the kernel
        self._env_arg_inputs = {}
        self._env_shown = env
        try:
            args = environment_args(env) if env else {}
        except PrimenbError:
            args = {}
        for name, default in args.items():
            shown = "required" if default is _empty() else repr(default)
            box = W.Text(
                description=name,
                placeholder=shown[:60],
                continuous_update=False,
                style={"description_width": "110px"},
                layout=W.Layout(width="400px"),
            )
            box.observe(lambda ch, name=name: self._on_env_arg(name, ch["new"]), names="value")
            self._env_arg_inputs[name] = box
        self.env_args.children = (
            [W.HTML(f"<i>arguments of {html.escape(env)}</i>"), *self._env_arg_inputs.values()] if args else []
        )

    def _show_diagnostics(self, report: Any) -> None:
        by_field: dict[str, list[str]] = {k: [] for k in self.inputs}
        rest: list[str] = []
        edited, self._edited = self._edited, None
        before, self._unowned = self._unowned, {}
        for d in self.diagnostics:
            line = _diag_html(d)
            key = F.owner(d.path, self._mode)
            if key is None:
                mark = (str(d.path), d.message)
                # caused by the field just edited: shown there (not off-screen under the TOML) for as
                # long as it lasts
                key = self._unowned[mark] = before.get(mark, edited)
            by_field.get(key or "", rest).append(line)
        for key, lines in by_field.items():
            self.errors[key].value = "".join(lines)
        self.other.value = "".join(rest)
        errors, warnings = len(report.errors), len(report.warnings)
        if errors:
            self.status.value = (
                f'<b style="color:{RED}">✗ {errors} error{"s" * (errors != 1)}</b>'
                + (f", {warnings} warning(s)" if warnings else "")
                + (" · launch/save use the last valid config only after a fix" if self._config else "")
            )
        else:
            extra = f' · <span style="color:{AMBER}">{warnings} warning(s)</span>' if warnings else ""
            self.status.value = f'<b style="color:{GREEN}">✓ valid {self._mode.upper()} config</b>{extra}'

    # -- helpers ---------------------------------------------------------------------------------
    def _require_valid(self, doing: str) -> Config:
        if not self.valid or self._config is None:
            raise PrimenbError(f"the config has errors (shown next to their fields); fix them before {doing}")
        return self._config


def _close(widget: Any) -> None:
    for part in ("layout", "style"):
        child = getattr(widget, part, None)
        if isinstance(child, W.Widget):
            child.close()
    widget.close()


def _empty() -> Any:
    import inspect

    return inspect.Parameter.empty


def _tidy(key: str, value: Any) -> Any:
    """A slider's float as a person would write it (5e-05, not 5.011872336272725e-05)."""
    if key == "lr":
        return float(f"{float(value):.2g}")
    if key == "temperature":
        return round(float(value), 4)
    return value


def _diag_html(d: Any) -> str:
    color = RED if d.is_error else AMBER
    hint = (
        f'<div style="color:var(--jp-ui-font-color2, #555);margin-left:1em">hint: {html.escape(d.hint)}</div>'
        if d.hint
        else ""
    )
    where = f" (line {d.line})" if d.line else ""
    return (
        f'<div class="primenb-diag primenb-diag-{html.escape(d.severity)}" style="color:{color};'
        f'font-size:12px;margin:0 0 4px 180px">{html.escape(d.severity)}{where}: '
        f"{html.escape(d.message)}{hint}</div>"
    )


def show_builder(config: Any = None, *, show: bool = True) -> ConfigBuilder:
    """Display a new builder; ``show=False`` only returns it (what `%prime_train --ui` does: the
    cell displays what it returns, once)."""
    builder = ConfigBuilder(config)
    if show:
        display(builder)
    return builder


__all__ = ["ConfigBuilder", "show_builder"]
