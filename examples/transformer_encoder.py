"""A Transformer encoder classifier for `envkit verify --model examples/transformer_encoder.py:small`.

The task is synthetic and learnable (name the most frequent token of a sequence), so fp32 and AMP
have a real loss curve to agree on. `make` is sized for a GPU (d=512, 6 layers, 64x128 tokens),
`small` for a CPU run in CI.
"""

from __future__ import annotations

import torch
from torch import nn

VOCAB = 32


class EncoderClassifier(nn.Module):
    def __init__(self, d_model: int, layers: int, heads: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def _factory(d_model: int, layers: int, heads: int, batch: int, seq: int):  # type: ignore[no-untyped-def]
    model = EncoderClassifier(d_model, layers, heads)

    def make_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(step)
        tokens = torch.randint(0, VOCAB, (batch, seq), generator=g)
        favourite = torch.randint(0, VOCAB, (batch, 1), generator=g)
        tokens[:, : seq // 3] = favourite  # a third of the sequence is one token: the label
        return tokens, favourite.squeeze(1)

    return model, make_batch, nn.functional.cross_entropy, lambda p: torch.optim.AdamW(p, lr=1e-3)


def make():  # type: ignore[no-untyped-def]
    return _factory(d_model=512, layers=6, heads=8, batch=64, seq=128)


def small():  # type: ignore[no-untyped-def]
    return _factory(d_model=32, layers=2, heads=4, batch=16, seq=12)
