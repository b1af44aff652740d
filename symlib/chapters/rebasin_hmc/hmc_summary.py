"""What chapter 5's evaluation needs of HMC's draws, accumulated as they are drawn.

The comparison of Table 1 and Figure 3 reads every kept HMC draw's weights: the predictive mean,
the moments of the raw draws (``q_d``), the moments after rebasing each draw onto a reference
draw by activation and by weight matching (``q_r``) with each draw's NoT, every draw's test
accuracy and its logits at a few test points (mixing). At the paper's width (784-512-10, 1,000
draws) the draws weigh 1.6 GB, more than a run in pieces can carry between machines, so
:class:`HMCSummary` reduces each kept transition as it is made (the reductions of
:mod:`symlib.inference.compact`, the same running sums) and
:func:`symlib.inference.hmc_resumable.sample_resumable` checkpoints its state (a few MiB).

Public: :class:`HMCSummary`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from symlib.inference import compact
from symlib.nn.mlp import MLPSpec, Params, mlp_forward
from symlib.symmetry import GroupElement
from symlib.symmetry.rebasin import hidden_activations, total_not

__all__ = ["HMCSummary"]

_MOMENTS = ("raw", "activation", "weight")
"""The running moments kept: of the draws, and of the draws rebased by either matching."""


class HMCSummary:
    """A streaming reduction of HMC's kept draws (an :class:`~symlib.inference.hmc_resumable.Accumulator`).

    The reference of ``q_r`` is the first kept draw of chain 0 (as in the chapter's evaluation
    from stored draws). Draws are taken in the order they are made: transition by transition,
    chains 0..C-1 within one.

    Args:
        spec: the network.
        x_test, y_test: the test set (predictive mean, each draw's accuracy).
        x_match: the inputs of activation matching.
        mix_points: how many of the first test images' logits to keep per draw (mixing).
    """

    def __init__(self, spec: MLPSpec, x_test: Tensor, y_test: Tensor, x_match: Tensor, mix_points: int):
        self.spec, self.x_test, self.y_test, self.x_match = spec, x_test, y_test, x_match
        self.mix_points = mix_points
        self.device = x_test.device
        self._forward = torch.func.vmap(mlp_forward, in_dims=(0, None, None))
        self.count = 0
        self.reference: Params | None = None
        self._ref_act: list[Tensor] | None = None
        self._moments = {name: compact.RunningMoments() for name in _MOMENTS}
        self._prob_sum: Tensor | None = None
        self.nots: dict[str, list[int]] = {"activation": [], "weight": []}
        self.accuracy: list[np.ndarray] = []
        self.logits: list[np.ndarray] = []
        self.chains: list[np.ndarray] = []

    @torch.no_grad()
    def update(self, position: Params) -> None:
        """Take in one kept transition (every chain's position, leading axis ``C``)."""
        batch = {k: v.detach() for k, v in position.items()}
        n = next(iter(batch.values())).shape[0]
        if self.reference is None:
            self.reference = {k: v[0].clone() for k, v in batch.items()}
            self._ref_act = hidden_activations(self.reference, self.x_match, self.spec)
        logits = self._forward(batch, self.x_test, self.spec)
        probs = torch.softmax(logits, -1).to(torch.float64).sum(0)
        self._prob_sum = probs if self._prob_sum is None else self._prob_sum + probs
        self.accuracy.append((logits.argmax(-1) == self.y_test).double().mean(-1).cpu().numpy())
        self.logits.append(logits[:, : self.mix_points].double().cpu().numpy())
        self.chains.append(np.arange(n))
        self._moments["raw"].update(batch)
        for method in ("activation", "weight"):
            matched, g = compact.rebase(batch, self.reference, self.spec, method, x=self.x_match,
                                        reference_activations=self._ref_act if method == "activation" else None)
            self._moments[method].update(matched)
            self.nots[method] += [total_not(GroupElement({k: p[i] for k, p in g.perms.items()}))
                                  for i in range(n)]
        self.count += n

    # ------------------------------------------------------------------ results

    def predictive(self) -> Tensor:
        """HMC's predictive mean on the test set, ``(n_test, K)``."""
        self._require(1)
        return (self._prob_sum / self.count).to(self.x_test.dtype)

    def moments(self, which: str = "raw") -> compact.DiagonalGaussian:
        """``q_d`` (``"raw"``) or ``q_r`` by ``"activation"`` / ``"weight"`` matching."""
        self._require(2)
        return self._moments[which].result()

    def sample_accuracy(self) -> np.ndarray:
        """Each draw's test accuracy, in draw order."""
        return self.kept_draws(self.state_lists())["accuracy"]

    def sample_logits(self) -> np.ndarray:
        """Each draw's logits at the first ``mix_points`` test images, ``(draws, mix_points, K)``."""
        return self.kept_draws(self.state_lists())["logits"]

    def sample_chain(self) -> np.ndarray:
        """The chain of each draw."""
        return self.kept_draws(self.state_lists())["chains"]

    def state_lists(self) -> dict:
        """The per-step lists of the draws kept so far (as :meth:`state_dict` stores them)."""
        return {"accuracy": self.accuracy, "logits": self.logits, "chains": self.chains}

    @staticmethod
    def kept_draws(state: dict) -> dict[str, np.ndarray]:
        """The draws a summary kept, from its :meth:`state_dict` (a checkpoint's, read without
        building a summary) or :meth:`state_lists`: ``accuracy`` (each draw's test accuracy),
        ``logits`` (``(draws, mix_points, K)``) and ``chains`` (each draw's chain), in draw order;
        empty arrays before any draw."""
        def joined(parts, empty):
            return np.concatenate(parts) if parts else empty

        return {"accuracy": joined(state["accuracy"], np.empty(0)),
                "logits": joined(state["logits"], np.empty((0,))),
                "chains": joined(state["chains"], np.empty(0, dtype=np.int64))}

    def _require(self, n: int) -> None:
        if self.count < n:
            raise ValueError(f"HMC kept {self.count} draws; the summary needs at least {n}")

    # ------------------------------------------------------------------ checkpointing

    def state_dict(self) -> dict:
        """The reduction's state on the CPU (what a checkpoint stores)."""

        def cpu(value):
            if isinstance(value, Tensor):
                return value.detach().cpu().clone()
            if isinstance(value, dict):
                return {k: cpu(v) for k, v in value.items()}
            return value

        return {
            "count": self.count,
            "reference": cpu(self.reference),
            # the shift is a draw (float32) held in float64: stored as float32, losslessly
            "moments": {name: {"count": m.count, "_shift": cpu({k: v.float() for k, v in (m._shift or {}).items()}),
                               **{f: cpu(getattr(m, f)) for f in ("_sum", "_sq")}}
                        for name, m in self._moments.items()},
            "prob_sum": cpu(self._prob_sum),
            "nots": {k: list(v) for k, v in self.nots.items()},
            "accuracy": list(self.accuracy), "logits": list(self.logits), "chains": list(self.chains),
        }

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict`'s output, moved onto this summary's device."""

        def dev(value):
            if isinstance(value, Tensor):
                return value.to(self.device)
            if isinstance(value, dict):
                return {k: dev(v) for k, v in value.items()}
            return value

        self.count = state["count"]
        self.reference = dev(state["reference"])
        self._ref_act = (hidden_activations(self.reference, self.x_match, self.spec)
                         if self.reference is not None else None)
        for name, saved in state["moments"].items():
            m = compact.RunningMoments()
            m.count = saved["count"]
            m._shift = {k: v.to(self.device, torch.float64) for k, v in saved["_shift"].items()} or None
            m._sum, m._sq = dev(saved["_sum"]), dev(saved["_sq"])
            self._moments[name] = m
        self._prob_sum = dev(state["prob_sum"])
        self.nots = {k: list(v) for k, v in state["nots"].items()}
        self.accuracy, self.logits, self.chains = list(state["accuracy"]), list(state["logits"]), list(state["chains"])
