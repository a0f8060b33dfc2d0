"""Optimizers transformers does not offer by name: ``sign_sgd`` and ``muon`` (prime-rl types).

Both reach the Trainer through ``trainer.optimizer_cls_and_kwargs``, so the Trainer still builds
the LR scheduler, clips gradients and logs the learning rate as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from primenb.engine.plan import OptimSpec, need


class SignSGD(torch.optim.Optimizer):
    """``p <- p * (1 - lr * wd) - lr * sign(grad)`` (decoupled weight decay)."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-4, weight_decay: float = 0.0) -> None:
        if lr < 0:
            raise ValueError(f"invalid learning rate {lr}")
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if wd:
                    p.mul_(1 - lr * wd)
                p.add_(torch.sign(p.grad), alpha=-lr)
        return loss


class CombinedOptimizer(torch.optim.Optimizer):
    """Several optimizers stepped as one. ``param_groups`` are the members' own group dicts, so an
    LR scheduler that edits them reaches every member."""

    def __init__(self, optimizers: list[torch.optim.Optimizer]) -> None:
        self.optimizers = optimizers
        params = [p for opt in optimizers for g in opt.param_groups for p in g["params"]]
        # `defaults["lr"]` is read by some schedulers (e.g. cosine_with_min_lr)
        lr = next((opt.defaults["lr"] for opt in optimizers if "lr" in opt.defaults), 0.0)
        super().__init__(params, {"lr": lr})
        self.param_groups = [g for opt in optimizers for g in opt.param_groups]

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for opt in self.optimizers:
            opt.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {"members": [opt.state_dict() for opt in self.optimizers]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for opt, sd in zip(self.optimizers, state_dict["members"], strict=True):
            opt.load_state_dict(sd)


def _is_muon_param(name: str, p: torch.Tensor) -> bool:
    lowered = name.lower()
    return p.ndim == 2 and not any(k in lowered for k in ("embed", "lm_head", "wte", "wpe"))


class MuonFactory:
    """Muon (``torch.optim.Muon``, ``adjust_lr_fn="match_rms_adamw"`` so an AdamW learning rate
    carries over) for the 2-D weight matrices of the hidden layers; AdamW for embeddings, the LM
    head, norms and biases. Called by the Trainer with the model (an optimizer "factory")."""

    def __call__(
        self,
        model: torch.nn.Module,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        momentum: float = 0.95,
        betas: tuple[float, float] = (0.9, 0.95),
        **_: Any,
    ) -> torch.optim.Optimizer:
        muon, adam_decay, adam_plain = [], [], []
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            if _is_muon_param(name, p):
                muon.append(p)
            elif p.ndim >= 2:
                adam_decay.append(p)
            else:
                adam_plain.append(p)
        members: list[torch.optim.Optimizer] = []
        if muon:
            members.append(
                torch.optim.Muon(
                    muon,
                    lr=lr,
                    weight_decay=weight_decay,
                    momentum=momentum,
                    nesterov=True,
                    adjust_lr_fn="match_rms_adamw",
                )
            )
        groups = [
            g
            for g in (
                {"params": adam_decay, "weight_decay": weight_decay},
                {"params": adam_plain, "weight_decay": 0.0},
            )
            if g["params"]
        ]
        if groups:
            members.append(torch.optim.AdamW(groups, lr=lr, betas=betas))
        return CombinedOptimizer(members)


def custom_optimizer(spec: OptimSpec) -> tuple[Any, dict[str, Any]] | None:
    """``(optimizer class or factory, kwargs)`` for types transformers lacks, else None."""
    if spec.type == "sign_sgd":
        return SignSGD, {"lr": spec.lr, "weight_decay": spec.weight_decay}
    if spec.type == "muon":
        return MuonFactory, {
            "lr": spec.lr,
            "weight_decay": spec.weight_decay,
            "momentum": need(spec.mu, "mu", spec),
            "betas": need(spec.betas, "betas", spec),
        }
    return None


__all__ = ["CombinedOptimizer", "MuonFactory", "SignSGD", "custom_optimizer"]
