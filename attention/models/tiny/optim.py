"""AdamW written out, the same arithmetic as torch's, without importing torch._dynamo."""

from __future__ import annotations

import math
from typing import Any

import torch


class AdamW:
    """torch.optim.AdamW's update (its defaults: betas 0.9 and 0.999, eps 1e-8, weight decay 0.01), written out.

    torch's own optimizers import torch._dynamo the first time one is made (every torch.optim method is wrapped in
    torch._disable_dynamo, which imports it at its first call): about 70 MB and 1 s, for good, in the process that
    trains, which on a hosted copy is the server itself. This is the same arithmetic, op for op, as torch's
    single-tensor AdamW (tests/unit/attention/models/test_tiny.py holds it to torch's, step by step)."""

    def __init__(self, params: list[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2) -> None:  # fmt: skip
        self.params, self.lr, self.betas, self.eps, self.weight_decay = params, lr, betas, eps, weight_decay
        self.steps = 0
        self.exp_avg = [torch.zeros_like(p) for p in params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        self.steps += 1
        step_size = self.lr / (1 - beta1**self.steps)
        bias_correction2_sqrt = math.sqrt(1 - beta2**self.steps)
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True):
            if p.grad is None:
                continue
            grad = p.grad
            p.mul_(1 - self.lr * self.weight_decay)
            m.lerp_(grad, 1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (v.sqrt() / bias_correction2_sqrt).add_(self.eps)
            p.addcdiv_(m, denom, value=-step_size)

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "exp_avg": [m.clone() for m in self.exp_avg],
                "exp_avg_sq": [v.clone() for v in self.exp_avg_sq]}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = state["steps"]
        for mine, saved in zip(self.exp_avg + self.exp_avg_sq, state["exp_avg"] + state["exp_avg_sq"], strict=True):
            mine.copy_(saved)
