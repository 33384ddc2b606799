"""An LSTM language model for `envkit verify --model examples/lstm_lm.py:small`.

RNNs are one of the cases the AMP guides call risky (long recurrences, saturating gates). The text is
synthetic: each sequence counts up from a random start with a random stride (mod the vocabulary), so
the next token is predictable and the loss falls. `make` is sized for a GPU, `small` for a CPU.
"""

from __future__ import annotations

import torch
from torch import nn

VOCAB = 64


class LstmLM(nn.Module):
    def __init__(self, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, hidden)
        self.lstm = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        states, _ = self.lstm(self.embed(tokens))
        return self.out(states)


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def _factory(hidden: int, layers: int, batch: int, seq: int):  # type: ignore[no-untyped-def]
    model = LstmLM(hidden, layers)

    def make_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(step)
        start = torch.randint(0, VOCAB, (batch, 1), generator=g)
        stride = torch.randint(1, 4, (batch, 1), generator=g)
        text = (start + stride * torch.arange(seq + 1)) % VOCAB
        return text[:, :-1], text[:, 1:]

    return model, make_batch, lm_loss, lambda p: torch.optim.AdamW(p, lr=3e-3)


def make():  # type: ignore[no-untyped-def]
    return _factory(hidden=1024, layers=2, batch=64, seq=128)


def small():  # type: ignore[no-untyped-def]
    return _factory(hidden=32, layers=1, batch=16, seq=16)
