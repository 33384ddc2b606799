"""A model whose custom normalisation has a tiny denominator: fine in fp32, inf in fp16.

`TinyEpsRMSNorm` divides by sqrt(mean(x*x) + 1e-8). The inputs are sensor readings in physical units
(about 5e-5), so the first layer's outputs are about 1e-5: their squares (about 1e-10) are below
fp16's smallest subnormal (6e-8) and become 0, and eps = 1e-8 rounds to 0 in fp16 as well. The
denominator is exactly 0 and the division gives inf. bf16 keeps fp32's exponent range, so it is safe.
`envkit verify --model examples/tiny_eps_norm.py:make` names `norm` (TinyEpsRMSNorm) as the module
whose fp16 output overflows and recommends keeping it in fp32 (or bf16).
"""

from __future__ import annotations

import torch
from torch import nn

FEATURES = 64


class TinyEpsRMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-8) -> None:
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gain * x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)


class SensorRegressor(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = nn.Linear(FEATURES, width, bias=False)  # no bias: outputs keep the inputs' scale
        self.norm = TinyEpsRMSNorm(width)
        self.act = nn.GELU()
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act(self.norm(self.proj(x))))


def _factory(width: int, batch: int):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = SensorRegressor(width)
    direction = torch.randn(FEATURES, generator=torch.Generator().manual_seed(1))

    def make_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(step)
        x = torch.randn(batch, FEATURES, generator=g)
        return x * 5e-5, torch.tanh(x @ direction / 8).unsqueeze(1)  # volts in, a unitless target out

    return model, make_batch, nn.functional.mse_loss


def make():  # type: ignore[no-untyped-def]
    return _factory(width=4096, batch=4096)


def small():  # type: ignore[no-untyped-def]
    return _factory(width=64, batch=64)
