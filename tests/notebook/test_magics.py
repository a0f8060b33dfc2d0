"""The magics in a real IPython InteractiveShell, as a notebook kernel runs them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from primenb.config import Config

from ..config.test_broken import VALID
from ..conftest import UPSTREAM

BROKEN = VALID.replace("batch_size = 32", "batch_size = 30")


def _cell(shell, line: str, body: str):
    return shell.run_cell(f"%%rltoml {line}\n{body}")


@pytest.mark.parametrize("path", UPSTREAM, ids=lambda p: p.parent.name + "/" + p.name)
def test_upstream_examples_validate_clean_in_the_magic(shell, path):
    result = _cell(shell, "cfg", path.read_text())
    assert result.success, result.error_in_exec
    cfg = shell.user_ns["cfg"]
    assert isinstance(cfg, Config)
    assert not cfg.report.diagnostics
    assert cfg.mode == ("sft" if path.name == "sft.toml" else "rl")


def test_success_binds_config_with_summary(shell):
    assert _cell(shell, "cfg", VALID).success
    cfg = shell.user_ns["cfg"]
    html = cfg._repr_html_()
    for text in ("RL", "primenb/tiny-byte", "reverse-text", "32 rollouts, group 8", "full fine-tune"):
        assert text in html
    assert cfg.resolved()["trainer"]["max_steps"] == 20  # propagated from the top level


def test_failure_keeps_previous_value_and_saved_file(shell, tmp_path, capsys):
    target = tmp_path / "rl.toml"
    assert _cell(shell, f"cfg --save {target}", VALID).success
    good = shell.user_ns["cfg"]
    saved = target.read_text()
    result = _cell(shell, f"cfg --save {target}", BROKEN)
    assert not result.success
    assert shell.user_ns["cfg"] is good
    assert target.read_text() == saved
    out = capsys.readouterr()
    assert "must be divisible by group_size" in out.out
    assert "Traceback" not in out.out + out.err  # a message, not a Python traceback


def test_save_writes_exactly_the_cell(shell, tmp_path):
    target = tmp_path / "sub" / "rl.toml"
    assert _cell(shell, f"cfg --save {target}", VALID).success
    assert target.read_text() == VALID + "\n" or target.read_text() == VALID
    assert not list(target.parent.glob(".*tmp"))  # no temp file left behind


def test_mode_flags_override_detection(shell):
    sft = 'max_steps = 5\n\n[data]\nname = "reverse-text"\n'
    assert _cell(shell, "cfg", sft).success and shell.user_ns["cfg"].mode == "sft"
    result = _cell(shell, "cfg --rl", sft)
    assert not result.success  # [data] is not an RL key


def test_fix_offers_migrated_cell_and_binds_it(shell):
    legacy = VALID.replace("group_size = 8", "rollouts_per_example = 8  # per prompt")
    payloads = []
    shell.set_next_input = lambda text, replace=False: payloads.append(text)
    try:
        assert _cell(shell, "cfg --fix", legacy).success
    finally:
        del shell.set_next_input
    assert payloads and payloads[0].startswith("%%rltoml cfg\n")
    assert "group_size = 8  # per prompt" in payloads[0]  # renamed in place, comment kept
    assert "rollouts_per_example" not in payloads[0]
    assert not shell.user_ns["cfg"].warnings


def test_usage_error_is_a_message(shell, capsys):
    result = shell.run_cell("%%rltoml\nmax_steps = 1\n")
    assert not result.success
    assert "usage" in capsys.readouterr().out.lower()


def test_prime_train_init_writes_valid_config_and_never_overwrites(shell, tmp_path):
    out = tmp_path / "rl.toml"
    assert shell.run_cell(f"%prime_train init --out {out}").success
    text = out.read_text()
    assert "primenb/tiny-byte" in text and "reverse-text" in text
    assert _cell(shell, "cfg", text).success
    out.write_text("# mine\n")
    assert not shell.run_cell(f"%prime_train init --out {out}").success
    assert out.read_text() == "# mine\n"
    assert shell.run_cell(f"%prime_train init --sft --lora --out {out} --force").success
    assert _cell(shell, "cfg", out.read_text()).success
    cfg = shell.user_ns["cfg"]
    assert cfg.mode == "sft" and cfg.lora.rank == 16


def test_loading_the_extension_imports_no_training_stack():
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "sh = InteractiveShell.instance()\n"
        "sh.run_line_magic('load_ext', 'primenb')\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'peft', 'accelerate', 'pandas', 'plotly',"
        " 'wandb', 'trackio', 'mlflow', 'tensorboard', 'primenb.trackers')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _line_of(text: str, fragment: str) -> int:
    """1-based line of the first line of ``text`` holding ``fragment``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def test_rltoml_reports_the_cells_line_numbers(shell, capsys):
    """Line 1 of the cell is `%%rltoml cfg`: a problem on TOML line N is on the cell's line N + 1."""
    text = VALID.replace("lr = 1e-5", 'lr = "fast"')
    toml_line = _line_of(text, 'lr = "fast"')
    assert not _cell(shell, "cfg", text).success
    out = capsys.readouterr().out
    cell_line = toml_line + 1
    assert f"<cell>:{cell_line}:" in out, out
    assert f'{cell_line:>4} | lr = "fast"' in out, out  # the quoted text is that line's
    assert f"<cell>:{toml_line}:" not in out


def test_rltoml_html_and_warnings_use_cell_lines_and_files_keep_toml_lines(shell, tmp_path):
    from primenb.config import check

    text = VALID.replace("group_size = 8", 'group_size = "8"')  # a quoted number: a warning
    toml_line = _line_of(text, 'group_size = "8"')
    assert _cell(shell, "cfg", text).success
    [warning] = shell.user_ns["cfg"].warnings
    assert warning.line == toml_line + 1
    assert f"line {toml_line + 1})" in shell.user_ns["cfg"]._repr_html_()
    assert "group_size = <mark" in shell.user_ns["cfg"]._repr_html_()  # the quoted line, value marked
    path = tmp_path / "rl.toml"
    path.write_text(text)
    [in_file] = check(path).report.warnings
    assert in_file.line == toml_line  # a file's own numbering


def test_conflict_message_names_the_cells_line_of_the_shared_value(shell, capsys):
    text = VALID.replace("[orchestrator]\n", "[orchestrator]\nmax_steps = 7\n")
    shared = _line_of(text, "max_steps = 20")
    assert not _cell(shell, "cfg", text).success
    out = capsys.readouterr().out
    assert f"disagrees with the shared `max_steps` = 20 (line {shared + 1})" in out, out


@pytest.fixture
def umask():
    """Set the process umask for a test, and put the old one back."""
    import os

    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def _mode(path) -> int:
    import stat

    return stat.S_IMODE(path.stat().st_mode)


def test_configs_the_user_asked_for_get_ordinary_file_modes(shell, tmp_path, umask):
    """init, --save and Config.save write 0644 under umask 022 (not 0600), and follow the umask."""
    from primenb.cli import main

    assert shell.run_cell(f"%prime_train init --out {tmp_path / 'rl.toml'}").success
    assert _mode(tmp_path / "rl.toml") == 0o644
    assert main(["init", "--out", str(tmp_path / "cli.toml")]) == 0
    assert _mode(tmp_path / "cli.toml") == 0o644
    assert _cell(shell, f"cfg --save {tmp_path / 'saved.toml'}", VALID).success
    assert _mode(tmp_path / "saved.toml") == 0o644
    shell.user_ns["cfg"].save(str(tmp_path / "method.toml"))
    assert _mode(tmp_path / "method.toml") == 0o644
    umask(0o077)  # a user who wants private files gets them
    assert shell.run_cell(f"%prime_train init --out {tmp_path / 'private.toml'}").success
    assert _mode(tmp_path / "private.toml") == 0o600


def test_a_syntax_error_is_reported_on_the_cells_line(shell, capsys):
    text = VALID.replace("group_size = 8", "group_size = = 8")
    toml_line = _line_of(text, "group_size = = 8")
    assert not _cell(shell, "cfg", text).success
    out = capsys.readouterr().out
    assert f"<cell>:{toml_line + 1}:" in out and f"{toml_line + 1:>4} | group_size = = 8" in out, out
