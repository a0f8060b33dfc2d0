"""Import a user environment module from a folder, a ``.py`` file, or an importable module name.

A folder is searched, in order, for (``NAME`` = the folder name with ``-`` -> ``_``):

1. ``NAME.py`` (the layout ``vf-init`` / verifiers v0 environments use),
2. ``NAME/__init__.py`` (a package inside the folder, e.g. a project with a pyproject.toml),
3. ``environment.py``,
4. ``__init__.py`` (the folder itself is a package),
5. the only ``.py`` file in the folder.

The module is imported under a private name (``primenb_env_<id>``) with the folder first on
``sys.path`` while it imports, so sibling modules can be imported by their plain names; they are
then filed under the private name, and a helper named like a library (``datasets.py``) gives the
plain name back, so it never shadows the library for the rest of the process. It is imported
afresh on every load, so edits show up without restarting the kernel.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

from primenb.envs.errors import EnvironmentLoadError
from primenb.protocol.privacy import error_text

ENTRY = "load_environment"


def looks_like_path(target: str) -> bool:
    """A PATH (rather than a module name) for ``add``: it exists, or is written like a path."""
    return (
        Path(target).expanduser().exists()
        or target.startswith((".", "~", "/"))
        or "/" in target
        or "\\" in target
        or target.endswith(".py")
    )


def module_file(path: Path) -> tuple[Path, bool]:
    """(file to import, is it a package ``__init__``) for a folder or ``.py`` file."""
    path = path.expanduser().resolve()
    if path.is_file():
        if path.suffix != ".py":
            raise EnvironmentLoadError(f"{path} is not a Python file (.py) or a folder")
        return path, path.name == "__init__.py"
    if not path.is_dir():
        raise EnvironmentLoadError(f"{path} does not exist")
    name = path.name.replace("-", "_")
    candidates = [
        (path / f"{name}.py", False),
        (path / name / "__init__.py", True),
        (path / "environment.py", False),
        (path / "__init__.py", True),
    ]
    for file, is_pkg in candidates:
        if file.is_file():
            return file, is_pkg
    py = [p for p in sorted(path.glob("*.py")) if not p.name.startswith(("test_", "setup"))]
    if len(py) == 1:
        return py[0], False
    listed = ", ".join(str(f.relative_to(path)) for f, _ in candidates)
    found = f" (found {', '.join(p.name for p in py)})" if py else ""
    raise EnvironmentLoadError(
        f"no environment module in {path}: looked for {listed}, or a single .py file{found}. "
        f"Put `def {ENTRY}(**kwargs)` in {name}.py"
    )


def private_name(env_id: str) -> str:
    return "primenb_env_" + re.sub(r"\W", "_", env_id)


def import_path(path: Path, env_id: str) -> ModuleType:
    """Import the environment module of a folder or file (fresh each time)."""
    file, is_pkg = module_file(path)
    name = private_name(env_id)
    # a copy of the keys: the %load_ext warm-up thread may be importing at the same time
    for mod in [m for m in list(sys.modules) if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]
    search = [str(file.parent)] if is_pkg else None
    spec = importlib.util.spec_from_file_location(name, file, submodule_search_locations=search)
    if spec is None or spec.loader is None:
        raise EnvironmentLoadError(f"cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    root = str(file.parent.parent if is_pkg else file.parent)
    before = set(sys.modules)
    sys.modules[name] = module
    sys.path.insert(0, root)
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # `sys.exit()` at import must not end the kernel or CLI
        sys.modules.pop(name, None)
        raise EnvironmentLoadError(f"environment {env_id!r}: importing {file} raised {error_text(exc)}") from exc
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(root)
        _file_helpers_under(name, Path(root), before)
    return module


def _file_helpers_under(package: str, root: Path, before: set[str]) -> None:
    """The environment's own helper modules (imported by plain name from its folder while it
    loaded) are filed under the environment's private name (``primenb_env_<id>.datasets``). A
    helper whose name is also importable from elsewhere (a library: ``datasets``, ``utils`` of
    some package) leaves the plain name free, so it never shadows that library process-wide; a
    name nothing else provides keeps its plain entry too (a reward function may import it late)."""
    for mod_name in [m for m in sys.modules if m not in before and m != package and not m.startswith(package + ".")]:
        module = sys.modules.get(mod_name)
        where = getattr(module, "__file__", None)
        if not where or not _inside(Path(where), root):
            continue
        sys.modules[f"{package}.{mod_name}"] = module  # type: ignore[assignment]
        top = mod_name.partition(".")[0]
        if _importable_elsewhere(top, root):
            del sys.modules[mod_name]


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except OSError:
        return False


def _importable_elsewhere(name: str, root: Path) -> bool:
    """Whether ``name`` is found on ``sys.path`` (without the environment's folder) or built in."""
    if name in sys.builtin_module_names or name in sys.stdlib_module_names:
        return True
    from importlib.machinery import PathFinder

    paths = [p for p in sys.path if p and not _inside(Path(p), root)]
    try:
        found = PathFinder.find_spec(name, paths)
    except (ImportError, ValueError):
        return False
    return found is not None and not (found.origin and _inside(Path(found.origin), root))


def import_module(module_name: str, env_id: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise EnvironmentLoadError(
                f"environment {env_id!r}: module {module_name!r} is not importable here "
                f"(install it with pip, or register its folder with %prime_env add PATH)"
            ) from exc
        raise EnvironmentLoadError(
            f"environment {env_id!r}: importing {module_name!r} raised {error_text(exc)}"
        ) from exc
    except (Exception, SystemExit) as exc:  # `sys.exit()` at import must not end the kernel or CLI
        raise EnvironmentLoadError(
            f"environment {env_id!r}: importing {module_name!r} raised {error_text(exc)}"
        ) from exc


def entry_point(module: ModuleType, env_id: str) -> Any:
    func = getattr(module, ENTRY, None)
    if not callable(func):
        where = getattr(module, "__file__", None) or module.__name__
        raise EnvironmentLoadError(f"environment {env_id!r}: {where} defines no `{ENTRY}(**kwargs)` function")
    return func


def module_version(module: ModuleType, folder: Path | None) -> str:
    """``__version__`` of the module, else ``[project] version`` of a pyproject.toml next to it."""
    version = getattr(module, "__version__", None)
    if isinstance(version, str) and version:
        return version
    if folder is not None:
        for candidate in (folder, folder.parent):
            pyproject = candidate / "pyproject.toml"
            if pyproject.is_file():
                try:
                    data = tomllib.loads(pyproject.read_text())
                except (OSError, tomllib.TOMLDecodeError):
                    return ""
                return str(data.get("project", {}).get("version") or "")
    return ""


def first_line(text: str | None) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines()]
    return lines[0] if lines else ""


__all__ = [
    "ENTRY",
    "entry_point",
    "first_line",
    "import_module",
    "import_path",
    "looks_like_path",
    "module_file",
    "module_version",
    "private_name",
]
