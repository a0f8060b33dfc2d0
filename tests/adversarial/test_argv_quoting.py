"""Issue 22, class "everything that reaches a shell or another program's argv is quoted for that
program": SLURM values with a line break become shell lines or extra #SBATCH lines; an ssh
destination starting with '-' is an ssh option; `prime` ids without '--' are options. Hostile
values are generated (newlines, spaces, quotes, leading dashes, `$()`), not one example."""

from __future__ import annotations

import itertools
import shlex
import subprocess

import pytest

from primenb.config import load_config

SFT = """max_steps = 10
[model]
name = "primenb/tiny-byte-xs"
[data]
name = "reverse-text"
[slurm]
partition = "debug"
"""
PIECES = ["a", " ", "'", '"', "$(touch /tmp/pwned)", "`id`", ";", "-", "--begin=now", "\\", "#", "é"]
BREAKS = ["\n", "\r", "\r\n", "\x00", "\x1b", "\u2028", "\x0b"]


def hostile(with_break: bool) -> list[str]:
    values = ["".join(p) for p in itertools.product(PIECES, repeat=2)]
    if with_break:
        return [f"{a}{b}{c}" for a, b, c in itertools.product(["x", "-x", "'"], BREAKS, ["#SBATCH --x", "rm -rf ~"])]
    return values


@pytest.mark.parametrize("key", ["job_name", "time", "exclude", "account", "partition", "nodelist"])
def test_argv_quoting_slurm_value_with_a_line_break_is_refused(key: str) -> None:
    from primenb.backends.slurm_script import SlurmScriptError, batch_script

    config = load_config(SFT)
    for value in hostile(with_break=True):
        object.__setattr__(config.model.slurm, key, value)
        with pytest.raises(SlurmScriptError, match="line break"):
            batch_script(config, "/r/x")


@pytest.mark.parametrize("key", ["job_name", "time", "exclude", "account"])
def test_argv_quoting_slurm_values_stay_one_directive(key: str) -> None:
    """Every other value is one #SBATCH line whose value sbatch (shell-like quote rules) reads back."""
    from primenb.backends.slurm_script import batch_script

    config = load_config(SFT)
    for value in hostile(with_break=False):
        object.__setattr__(config.model.slurm, key, value)
        text = batch_script(config, "/r/x y'z")
        flag = {"job_name": "job-name"}.get(key, key)
        lines = [ln for ln in text.splitlines() if ln.startswith(f"#SBATCH --{flag}=")]
        assert len(lines) == 1, (value, text)
        assert shlex.split(lines[0].split("=", 1)[1]) == [value]
        out = [ln for ln in text.splitlines() if ln.startswith("#SBATCH --output=")]
        assert shlex.split(out[0].split("=", 1)[1]) == ["/r/x y'z/logs/launcher.log"]
        assert text.count("\n#SBATCH") == text.count("#SBATCH") - 0  # no directive hides inside another line


def test_argv_quoting_slurm_script_parses_as_bash() -> None:
    from primenb.backends.slurm_script import batch_script

    config = load_config(SFT)
    for value in hostile(with_break=False)[:40]:
        object.__setattr__(config.model.slurm, "job_name", value)
        proc = subprocess.run(["bash", "-n"], input=batch_script(config, "/r/x"), text=True, capture_output=True)
        assert proc.returncode == 0, (value, proc.stderr)


USERS = ["-oProxyCommand=touch /tmp/pwned", "-F/tmp/cfg", "-", "--", "a b", "a\nb", "", "\x1b[31m"]
HOSTS = ["-oProxyCommand=sh", "-p22", "host name", "host\n", "-", "a@b"]


def test_argv_quoting_ssh_destination_starting_with_a_dash_is_refused() -> None:
    from urllib.parse import quote

    from primenb.backends.spec import BackendSpecError, parse_url
    from primenb.backends.sshconn import SSHError, SSHTarget

    for user in USERS:
        if user:
            with pytest.raises(BackendSpecError, match="cannot be an ssh"):
                parse_url(f"ssh://{quote(user, safe='-=/')}@host")
        with pytest.raises(SSHError):
            SSHTarget(host="host", user=user)  # a saved remote.json is read into this too
    for host in HOSTS:
        with pytest.raises(SSHError):
            SSHTarget(host=host)
    for url in ("ssh://-oProxyCommand=x@host", "ssh://-oProxyCommand=x@host:22/w", "slurm://-oProxyCommand=x@h"):
        with pytest.raises(BackendSpecError):
            parse_url(url)
    assert parse_url("ssh://me@box-1:2222/w").host == "box-1"


def test_argv_quoting_ssh_puts_double_dash_before_the_destination() -> None:
    from primenb.backends.sshconn import SSHConnection, SSHTarget

    conn = SSHConnection(SSHTarget(host="box", user="me", ssh_args=("-F", "cfg")))
    calls: list[list[str]] = []

    def fake_run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[bytes]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, b"", b"")

    import primenb.backends.sshconn as sshconn

    real = sshconn.subprocess.run
    sshconn.subprocess.run = fake_run  # type: ignore[assignment]
    try:
        conn.run("true")
        conn.close()
    finally:
        sshconn.subprocess.run = real  # type: ignore[assignment]
    for argv in calls:
        assert argv[argv.index("me@box") - 1] == "--", argv
