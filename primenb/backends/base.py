"""The one interface every backend implements (local, ssh, slurm, modelfactory).

A backend turns a validated `Config` into a run whose directory is readable *here*: the local
backend writes it in place; a remote backend keeps a local mirror of the remote run directory
current (`RunControl.sync`), so `Run`, the monitor, the harness and the sidebar read every
backend's runs the same way. Nothing above this layer special-cases a backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from primenb.backends.specdoc import BackendSpec
from primenb.config.backend_rules import BackendRules
from primenb.errors import PrimenbError

if TYPE_CHECKING:
    from primenb.config import Config
    from primenb.run import Run


@dataclass(frozen=True)
class Lineage:
    """Where a new run comes from: the trace it continues (`apply`) or reproduces (`rerun`)."""

    parent: str | None = None
    reproduces: str | None = None
    reproduces_run_dir: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Capabilities:
    """What a backend needs from the face that launches on it, and what its verbs mean; the faces,
    the harness and the verbs read this instead of comparing a backend's name."""

    bills: bool = False  # a launch costs money: the face shows the quote and asks (or --yes)
    options: tuple[str, ...] = ()  # launch options it takes (from --gpu-type, --volume, --team, --yes)
    # what "continue this trace" means: "checkpoint" = from its final checkpoint here (apply);
    # "platform" = the platform continues its PAUSED run (the checkpoint stays there)
    resume: Literal["checkpoint", "platform"] = "checkpoint"
    pausable: bool = False  # --pause / --resume act on its runs
    fetches_checkpoints: bool = False  # a final checkpoint is fetched from elsewhere on first load
    describes_account: bool = False  # `backend show NAME` shows who pays (no saved spec)
    # its traces are served on the host that trained them (where the checkpoint is), reached here
    # through a forwarded local port (`serve_host`)
    serves_on_host: bool = False


# Each optional operation of `Backend` and the capability that says a backend does it. A class
# overrides an operation exactly when its `capabilities` say so: `Backend.__init_subclass__` checks
# it when the class is defined, so the flags the faces read and the methods they call cannot disagree.
OPTIONAL: dict[str, Callable[[Capabilities], bool]] = {
    "prepare": lambda c: c.bills,
    "launch": lambda c: c.bills,
    "pause": lambda c: c.pausable,
    "resume": lambda c: c.pausable,
    "resume_quote": lambda c: c.pausable and c.bills,
    "continue_trace": lambda c: c.resume == "platform",
    "fetch_checkpoint": lambda c: c.fetches_checkpoints,
    "account": lambda c: c.describes_account,
    "serve_host": lambda c: c.serves_on_host,
}


class Backend(ABC):
    """Submit a run, and later re-open it (after a kernel restart) from its run directory.

    A backend class is listed once, in `primenb.backends.registry`; everything else (the kinds a
    URL or a saved name may name, `get_backend`, `capabilities`, the builder's choices, the config
    rules registered with the config layer) is read from the class attributes below.
    """

    name: ClassVar[str]  # its kind: what `[primenb] backend` and `--backend` name, and runs record
    capabilities: ClassVar[Capabilities] = Capabilities()
    # how a place on it is written down (`primenb.backends.spec`): `saved`: it is built from a
    # `BackendSpec` (a URL, or a name saved with `backend add NAME URL`), else from launch options;
    # `url_scheme`: the URL is ``kind://[user@]host[:port][/workdir]`` (else the bare kind)
    saved: ClassVar[bool] = False
    url_scheme: ClassVar[bool] = False
    # what validating a config that names it adds (registered with `primenb.config.backend_rules`)
    config_rules: ClassVar[BackendRules] = BackendRules()

    def __init__(self, spec: BackendSpec | None = None) -> None:
        """A `saved` backend is built from its spec (what `primenb.backends.spec` resolved); the
        others take launch options instead (their own ``__init__``)."""
        self.spec = spec

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrong = [op for op, says in OPTIONAL.items() if _overrides(cls, op) != says(cls.capabilities)]
        if wrong:
            raise TypeError(
                f"{cls.__name__}: its capabilities and its methods disagree on {', '.join(wrong)}: "
                "override an optional operation exactly when `capabilities` declares it (base.OPTIONAL)"
            )

    @abstractmethod
    def submit(self, config: Config, *, name: str | None = None, lineage: Lineage | None = None) -> Run:
        """Start ``config`` as a new run; the queued trace records ``lineage``."""

    @abstractmethod
    def open(self, run_dir: Path) -> Run:
        """The `Run` of a run directory this backend launched (wired to follow and stop it)."""

    def fetch_artifacts(self, run: Run) -> Path:
        """Bring the final model/adapter and the trace into the local run directory; its path."""
        return run.dir

    # -- what only some backends do (see `capabilities`); the default says so in words ----------
    def prepare(self, config: Config) -> Any:
        """A billing backend's checks and price for ``config`` (``bills``): the quote the face asks about."""
        raise PrimenbError(f"the {self.name} backend does not bill, so there is nothing to quote")

    def launch(self, config: Config, quote: Any, *, name: str | None = None, lineage: Lineage | None = None) -> Run:
        """Start ``config`` after the face's question was answered (``bills``)."""
        return self.submit(config, name=name, lineage=lineage)

    def pause(self, run: Run) -> str:
        raise PrimenbError(f"{run.name} runs on the {self.name} backend, which cannot pause a run")

    def resume_quote(self, run: Run) -> Any:
        """What resuming the paused ``run`` costs (``pausable`` and ``bills``)."""
        raise PrimenbError(f"{run.name} runs on the {self.name} backend, which cannot resume a paused run")

    def resume(self, run: Run, *, name: str | None = None) -> Run:
        raise PrimenbError(f"{run.name} runs on the {self.name} backend, which cannot resume a paused run")

    def continue_trace(self, parent_dir: Path, config: Config, *, name: str, parent_id: str) -> Run:
        """``apply`` of a trace whose ``resume`` is "platform": continued where it ran."""
        raise PrimenbError(f"the {self.name} backend continues a trace from its final checkpoint (apply)")

    def fetch_checkpoint(self, run_dir: Path) -> Path:
        """The final checkpoint of a run whose checkpoints live elsewhere (``fetches_checkpoints``)."""
        raise PrimenbError(f"{run_dir.name}: the {self.name} backend keeps checkpoints in the run directory")

    def account(self) -> Any:
        """Who pays for a launch (``describes_account``)."""
        raise PrimenbError(f"the {self.name} backend has no account to show")

    def serve_host(self, run_dir: Path) -> Any:
        """Where a trace of this backend is served (``serves_on_host``): an object that starts a
        server there and forwards a local port to it (`primenb.backends.ssh_serve.SSHServeHost`)."""
        raise PrimenbError(f"{run_dir.name}: traces of the {self.name} backend are served on this machine")


def _overrides(cls: type[Backend], op: str) -> bool:
    return getattr(cls, op) is not getattr(Backend, op)


__all__ = ["OPTIONAL", "Backend", "Capabilities", "Lineage"]
