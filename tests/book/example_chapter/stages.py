"""The example chapter's compute: two stages, the second taking the first's result."""

import torch

from symlib.book.chapter import Stage

__all__ = ["STAGES", "draw", "summarise"]


def draw(ctx) -> torch.Tensor:
    """``n_draws`` standard normal draws from the stage's named stream ``noise``."""
    return torch.randn(ctx.config.n_draws, generator=ctx.stream("noise").torch(ctx.device),
                       device=ctx.device, dtype=torch.float64)


def summarise(ctx) -> dict[str, float]:
    """Mean and scaled standard deviation of the draws."""
    x = ctx.inputs["draws"]
    return {"mean": x.mean().item(), "scaled sd": ctx.config.scale * x.std().item(), "n": len(x)}


STAGES = (
    Stage("draws", draw, fields=("n_draws",), streams=("noise",)),
    Stage("summary", summarise, fields=("n_draws", "scale"), needs=("draws",)),
)
