"""Chapter 6's gold standard: long multi-chain HMC, run in resumable pieces, and its record.

:func:`gold_standard` runs the chains through :func:`symlib.inference.hmc_resumable.sample_resumable`
(the transitions of :func:`symlib.inference.hmc.sample`, bit for bit on the CPU), checkpointed,
so a run stopped at its time budget (``$SYMLIB_BUDGET_S``) continues where it stopped. What the
later stages read of the draws is gathered as they are made (:class:`GoldRecord`, an
:class:`~symlib.inference.hmc_resumable.Accumulator` whose state is part of the checkpoint):

* the weights of the draws that the comparisons use (:func:`reference_index`): the draws evenly
  thinned to ``mmd_gold`` over all chains (every remedy's MMD and the ``q_r`` fit of the HMC
  samples), and the two halves of the chains thinned as the floor compares them
  (:func:`symlib.chapters.synthesis.stages.gold_floor`), not every draw: at the full profile's
  digits that is about a fifth of them;
* the mixing diagnostics' quantities of every draw: the predictions at the first ``diag_points``
  test inputs (log-probability of the true class for classification), and :data:`DIAG_WEIGHTS`
  evenly spaced coordinates of the raw and of the canonicalised weights;
* for classification, the running sums of the class probabilities on the test and OOD inputs
  over every draw (the gold standard's predictive mean, against which the remedies' agreement
  and total variation are measured).

The draws are indexed chain-major (chain ``k``'s ``j``-th draw is ``k * hmc_samples + j``), as
:func:`symlib.chapters.synthesis.benchmarks.thin` indexes them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from symlib import symmetry as sym
from symlib.chapters.synthesis.benchmarks import Benchmark, potential, reset_peak, thin_index
from symlib.inference import hmc_resumable, loop
from symlib.metrics.mcmc import summary
from symlib.nn.mlp import Params, init_mlp, mlp_forward

__all__ = ["CHECKPOINT_MAX_BYTES", "DIAG_WEIGHTS", "GoldRecord", "floor_halves", "gold_draws", "gold_standard",
           "reference_index"]

DIAG_WEIGHTS = 300
"""Weight coordinates (evenly spaced) whose R-hat/ESS the gold standard reports."""
CHECKPOINT_MAX_BYTES = 512 << 20
"""Largest gold-standard checkpoint written. It lives in the cache of the machine that runs it; a
GPU piece's state must also fit the 64 MiB that travels to the machine
(``tools/longruns/gpu_piece.sh`` warns past 52 MiB), which the paper profile's digits exceed
(README, "paper tier")."""


def floor_halves(config) -> tuple[np.ndarray, np.ndarray]:
    """The chain-major indices of the floor's two samples: the first ``hmc_chains // 2`` chains
    thinned to ``n_pred_samples``, the others thinned to ``mmd_gold`` (the sample sizes of the
    remedies' comparisons)."""
    total = config.hmc_chains * config.hmc_samples
    first = (config.hmc_chains // 2) * config.hmc_samples
    return thin_index(first, config.n_pred_samples), first + thin_index(total - first, config.mmd_gold)


def reference_index(config) -> np.ndarray:
    """The chain-major indices of every draw whose weights the record keeps (sorted): all chains
    thinned to ``mmd_gold``, and the floor's two halves (:func:`floor_halves`)."""
    total = config.hmc_chains * config.hmc_samples
    return np.union1d(thin_index(total, config.mmd_gold), np.concatenate(floor_halves(config)))


def gold_draws(gold: dict, index) -> Params:
    """The weights of the draws at chain-major ``index`` from a gold record (each must be one it
    keeps).

    Raises:
        KeyError: a draw the record does not keep.
    """
    index = np.asarray(index)
    kept = np.asarray(gold["index"])
    rows = np.searchsorted(kept, index)
    missing = index[(rows >= len(kept)) | (kept[np.minimum(rows, len(kept) - 1)] != index)]
    if len(missing):
        raise KeyError(f"the gold record does not keep draws {missing[:5].tolist()} (it keeps {len(kept)} of "
                       f"{gold['n_draws']}: reference_index)")
    rows = torch.as_tensor(rows)
    return {k: v[rows] for k, v in gold["draws"].items()}


def _columns(n_params: int) -> np.ndarray:
    return np.linspace(0, n_params - 1, min(DIAG_WEIGHTS, n_params)).round().astype(int)


def _flat(w: Params) -> Tensor:
    return torch.cat([v.reshape(v.shape[0], -1) for v in w.values()], 1)


class GoldRecord:
    """What the chapter keeps of the gold standard's draws, gathered one kept transition at a time
    (module docstring); :meth:`state_dict` / :meth:`load_state_dict` make it part of the HMC
    checkpoint. Everything is held on the CPU; the forward passes run on ``b``'s device."""

    def __init__(self, b: Benchmark, config):
        c, t = config.hmc_chains, config.hmc_samples
        self.b, self.n_chains, self.n_samples = b, c, t
        self.index = reference_index(config)
        self.points = config.diag_points
        self.cols = torch.as_tensor(_columns(b.spec.n_params))
        self.j = 0
        self.draws: dict[str, Tensor] | None = None   # allocated at the first draw, shaped like it
        self.pred = torch.zeros(t, c, min(self.points, len(b.x_test)))
        self.raw = torch.zeros(t, c, len(self.cols))
        self.canon = torch.zeros(t, c, len(self.cols), dtype=torch.float64)
        self.probs = None if b.task == "regression" else {
            "probs_test": torch.zeros(len(b.x_test), b.spec.widths[-1], dtype=torch.float64),
            "probs_ood": torch.zeros(len(b.x_ood), b.spec.widths[-1], dtype=torch.float64)}

    def _forward(self, w: Params, x: Tensor) -> Tensor:
        return torch.func.vmap(mlp_forward, in_dims=(0, None, None))(w, x, self.b.spec)

    def update(self, position: dict[str, Tensor]) -> None:
        """Take in the ``j``-th kept transition: every chain's weights (leading axis ``C``)."""
        b, j, c = self.b, self.j, self.n_chains
        if j >= self.n_samples:
            raise ValueError(f"GoldRecord: more than the {self.n_samples} kept transitions it was made for")
        w = {k: v.detach() for k, v in position.items()}
        if self.draws is None:
            self.draws = {k: torch.zeros(len(self.index), *v.shape[1:], dtype=v.dtype) for k, v in w.items()}
        chains = np.arange(c)
        rows = np.searchsorted(self.index, chains * self.n_samples + j)
        hit = (rows < len(self.index)) & (self.index[np.minimum(rows, len(self.index) - 1)] == chains * self.n_samples + j)
        if hit.any():
            take, at = torch.as_tensor(chains[hit]), torch.as_tensor(rows[hit])
            for k, v in w.items():
                self.draws[k][at] = v[take.to(v.device)].cpu()
        with torch.no_grad():
            f = self._forward(w, b.x_test[: self.points])
            if b.task == "classification":
                f = torch.log_softmax(f, -1).gather(-1, b.y_test[: self.points].expand(c, -1)[..., None])
            self.pred[j] = f[..., 0].cpu()
            self.raw[j] = _flat({k: v.cpu() for k, v in w.items()})[:, self.cols]
            canon = sym.canonicalise({k: v.double().cpu() for k, v in w.items()}, b.spec)
            self.canon[j] = _flat(canon)[:, self.cols]
            if self.probs is not None:
                self.probs["probs_test"] += torch.softmax(self._forward(w, b.x_test), -1).sum(0).cpu().double()
                self.probs["probs_ood"] += torch.softmax(self._forward(w, b.x_ood), -1).sum(0).cpu().double()
        self.j += 1

    def state_dict(self) -> dict:
        return {"j": self.j, "draws": self.draws, "pred": self.pred, "raw": self.raw, "canon": self.canon,
                "probs": self.probs}

    def load_state_dict(self, state: dict) -> None:
        self.j, self.draws, self.probs = state["j"], state["draws"], state["probs"]
        self.pred, self.raw, self.canon = state["pred"], state["raw"], state["canon"]

    def result(self) -> dict:
        """The record (after every kept transition): ``draws`` and their chain-major ``index``,
        ``n_draws``, ``diagnostics`` and, for classification, the predictive means."""
        if self.j != self.n_samples:
            raise ValueError(f"GoldRecord: {self.j} of {self.n_samples} kept transitions taken in")
        c, t = self.n_chains, self.n_samples

        def chains(x: Tensor) -> np.ndarray:   # (t, c, k) -> (c, t, k), the layout of summary()
            return x.transpose(0, 1).double().numpy()

        diag = {"predictions": summary(chains(self.pred))._asdict(),
                "canonical weights": summary(chains(self.canon))._asdict(),
                "raw weights": summary(chains(self.raw))._asdict()}
        out = {"draws": self.draws, "index": self.index, "n_draws": c * t, "diagnostics": diag}
        if self.probs is not None:
            out |= {k: (v / (c * t)).float() for k, v in self.probs.items()}
        return out


def gold_standard(b: Benchmark, config, g: torch.Generator, device: str, *,
                  checkpoint: str | Path | None = None, deadline: float | None = None) -> dict:
    """Multi-chain HMC on ``b``: the record of :class:`GoldRecord` and the sampler's statistics.

    Args:
        checkpoint: where the chains checkpoint (a run finding one continues from it; see
            :func:`~symlib.inference.hmc_resumable.sample_resumable`); None: a temporary file,
            so the run cannot be resumed.
        deadline: when the chains must stop (seconds since the epoch: the stage's
            :attr:`~symlib.book.chapter.StageContext.deadline`), their checkpoint written;
            None: no time limit.

    Returns:
        ``draws`` (the kept draws' weights, float32, CPU), ``index`` (their chain-major indices),
        ``n_draws``, ``diagnostics`` (R-hat and ESS on predictions, canonical and raw weights),
        for classification ``probs_test`` and ``probs_ood`` (the predictive mean over every draw),
        and the sampler's statistics (``wall_s``, ``peak_mb``, ``accept_rate``, ``step_size``,
        ``n_grad_evals``, ``pieces``, ``stored_floats``: what the full posterior sample would store).

    Raises:
        BudgetExhausted: the run stopped at its time budget, its checkpoint written.
    """
    if checkpoint is None:
        with tempfile.TemporaryDirectory() as tmp:
            return gold_standard(b, config, g, device, checkpoint=Path(tmp) / "gold.pt", deadline=deadline)
    chains = [init_mlp(b.spec, g) for _ in range(config.hmc_chains)]
    init = {k: torch.stack([c[k] for c in chains]).to(device) for k in chains[0]}
    record = GoldRecord(b, config)
    peak = reset_peak(device)
    res = hmc_resumable.sample_resumable(
        potential(b, b.x, b.y), init, checkpoint=checkpoint, n_burnin=config.hmc_burnin,
        n_samples=config.hmc_samples, n_leapfrog=config.hmc_leapfrog, step_size=1e-2, generator=g,
        thin=config.hmc_thin, accumulate=record, max_checkpoint_bytes=CHECKPOINT_MAX_BYTES,
        budget_s=loop.seconds_left(deadline), desc=f"gold {b.name}")
    res.require_complete(f"chapter 6's gold standard ({b.name})")
    return {**record.result(), "wall_s": res.wall_time_s, "peak_mb": peak(),
            "accept_rate": res.accept_rate.mean().item(), "step_size": res.step_size.mean().item(),
            "n_grad_evals": res.n_grad_evals, "pieces": res.pieces,
            "stored_floats": config.hmc_chains * config.hmc_samples * b.spec.n_params}
