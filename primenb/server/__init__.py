"""The jupyter_server extension behind the JupyterLab "Prime runs" sidebar: REST routes under
``/primenb/api/`` over the harness index and the run directories (see `primenb.server.handlers`).

A face, like the magics and the CLI: it reads what they read, so the sidebar works with no
kernel at all. Enabled by ``jupyter-config/jupyter_server_config.d/primenb.json`` (in the wheel).
"""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "primenb.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from primenb.server.handlers import setup_handlers

    setup_handlers(serverapp.web_app)
    from primenb.server.snapshots import pre_save_hook

    serverapp.contents_manager.register_pre_save_hook(pre_save_hook)  # saved: snapshots, no dead views
    serverapp.log.info("primenb: sidebar REST routes at /primenb/api/")


# older jupyter_server / notebook names
load_jupyter_server_extension = _load_jupyter_server_extension
