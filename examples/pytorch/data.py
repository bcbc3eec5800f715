"""The example's data: a classification set made in code, and the job's sample order.

Both depend on the seed alone, never on the world size or the node, so every
rank of every run sees the same dataset and the same order: a run on 4 GPUs
takes up the order exactly where a run on 1 left it (``GlobalOrder.ids``).
"""

from __future__ import annotations

import torch

CLASSES = 10
SIDE = 12


def make_dataset(size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Ten fixed patterns plus noise; sample ``i`` is of class ``i % 10``."""
    gen = torch.Generator().manual_seed(seed)
    patterns = torch.randn(CLASSES, 1, SIDE, SIDE, generator=gen)
    labels = torch.arange(size) % CLASSES
    images = patterns[labels] + 1.5 * torch.randn(size, 1, SIDE, SIDE, generator=gen)
    return images, labels


class GlobalOrder:
    """The job's sample order: one seeded permutation per epoch, cut by position."""

    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self.seed = seed
        self._epoch = -1
        self._perm = torch.empty(0, dtype=torch.long)

    def _permutation(self, epoch: int) -> torch.Tensor:
        if epoch != self._epoch:
            gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._perm, self._epoch = torch.randperm(self.size, generator=gen), epoch
        return self._perm

    def ids(self, position: int, count: int) -> torch.Tensor:
        """Sample ids at global positions ``[position, position + count)``."""
        out: list[torch.Tensor] = []
        while count > 0:
            epoch, offset = divmod(position, self.size)
            take = min(count, self.size - offset)
            out.append(self._permutation(epoch)[offset : offset + take])
            position, count = position + take, count - take
        return torch.cat(out) if out else torch.empty(0, dtype=torch.long)
