"""Is the Hugging Face hub reachable? (no torch import)"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from primenb.engine.models_info import is_tiny
from primenb.engine.plan import Plan
from primenb.envs import is_known


def hub_unreachable(timeout: float = 3.0) -> bool:
    """True when the hub cannot be reached: ``HF_HUB_OFFLINE`` is set, or (with no proxy set) a
    TCP connection to the endpoint fails. Without this check an offline machine spends ~45 s in
    the hub client's retries before failing."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    proxies = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
    if any(os.environ.get(v) for v in proxies):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout).close()
    except OSError:
        return True
    return False


def needs_hub(plan: Plan) -> bool:
    """Whether the run loads anything by hub id (a model or an SFT dataset)."""
    model = plan.model_name
    if not plan.init_from and not is_tiny(model) and not Path(model).expanduser().is_dir():
        return True
    if plan.mode == "sft":
        name = str(plan.data.get("name", ""))
        return not (is_known(name) and ("/" not in name or ":" in name))  # see data.is_env_name
    return False


def go_offline_if_unreachable(plan: Plan) -> bool:
    """Set ``HF_HUB_OFFLINE=1`` (before any HF import) when the run needs the hub and cannot
    reach it, so loads use the local cache and fail in seconds instead of after retries."""
    if needs_hub(plan) and not os.environ.get("HF_HUB_OFFLINE") and hub_unreachable():
        os.environ["HF_HUB_OFFLINE"] = "1"
        return True
    return False


__all__ = ["go_offline_if_unreachable", "hub_unreachable", "needs_hub"]
