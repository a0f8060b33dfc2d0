"""Issue 22, class "writers never replace what is not a regular file": `%%rltoml --save` and
`init --out --force` onto /dev/null as root replaced the device. The one atomic writer refuses
every target that exists and is not a regular file, so every writer does. Tests use a FIFO, a
socket and a folder made in tmp_path, and a mocked stat mode for devices (never a real device)."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import pytest


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _socket(p: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    s.close()


def _folder(p: Path) -> None:
    p.mkdir()


MAKERS: dict[str, Callable[[Path], None]] = {"FIFO": _fifo, "socket": _socket, "folder": _folder}


def _writers(target: Path) -> dict[str, Callable[[], object]]:
    from primenb.fsutil import atomic_write_json, atomic_write_text
    from primenb.protocol.safepath import write_user_file

    return {
        "atomic_write_text": lambda: atomic_write_text(target, "x = 1\n"),
        "atomic_write_json": lambda: atomic_write_json(target, {"a": 1}),
        "write_user_file --force": lambda: write_user_file(target, "x = 1\n", overwrite=True),
    }


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_special_file_every_writer_refuses_and_leaves_it(tmp_path: Path, kind: str) -> None:
    from primenb.errors import PrimenbError

    for name, write in _writers(tmp_path / f"target-{kind}").items():
        target = tmp_path / f"target-{kind}"
        if not os.path.lexists(target):
            MAKERS[kind](target)
        before = os.lstat(target)
        with pytest.raises(PrimenbError, match=r"not a file|is a folder") as info:
            write()
        assert kind.lower().split()[0] in str(info.value).lower() or kind == "folder", (name, info.value)
        after = os.lstat(target)
        assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode) and after.st_ino == before.st_ino, name
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"target-{kind}"]  # no temp file left


@pytest.mark.parametrize("mode", [stat.S_IFCHR | 0o666, stat.S_IFBLK | 0o660])
def test_special_file_device_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int) -> None:
    """A device (mocked: the stat mode of /dev/null) on a plain file made here: refused, untouched."""
    from primenb import fsutil

    target = tmp_path / "dev-null"
    target.write_text("keep")
    real = os.lstat

    def fake_lstat(path: object, *a: object, **kw: object) -> os.stat_result:
        st = real(path, *a, **kw)  # type: ignore[arg-type]
        if os.fspath(path) == str(target):  # type: ignore[call-overload]
            return os.stat_result((mode, *tuple(st)[1:]))
        return st

    monkeypatch.setattr(fsutil.os, "lstat", fake_lstat)
    with pytest.raises(fsutil.NotAFileError, match="device"):
        fsutil.atomic_write_text(target, "replaced")
    assert target.read_text() == "keep"


def test_special_file_rltoml_save_and_init_out_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user-facing writers: `init --out X --force` and `Config.save` onto a FIFO."""
    from primenb.config.templates import starter
    from primenb.errors import PrimenbError
    from primenb.protocol.safepath import write_user_file

    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "cfg.toml")
    with pytest.raises(PrimenbError, match="already exists"):
        write_user_file(tmp_path / "cfg.toml", starter(), overwrite=False)
    with pytest.raises(PrimenbError, match="FIFO"):
        write_user_file(tmp_path / "cfg.toml", starter(), overwrite=True)
    assert stat.S_ISFIFO(os.lstat(tmp_path / "cfg.toml").st_mode)


def test_special_file_regular_file_and_link_still_written(tmp_path: Path) -> None:
    from primenb.fsutil import atomic_write_text

    (tmp_path / "a.txt").write_text("old")
    atomic_write_text(tmp_path / "a.txt", "new")
    assert (tmp_path / "a.txt").read_text() == "new"
    atomic_write_text(tmp_path / "fresh" / "b.txt", "b")
    assert (tmp_path / "fresh" / "b.txt").read_text() == "b"
