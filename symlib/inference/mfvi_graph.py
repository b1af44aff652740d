"""Mean-field VI training with each step replayed as one CUDA graph: :func:`fit_captured`.

On a GPU, chapter 1's step (four small networks, 64 Monte Carlo samples, 128 points) is bound by
kernel launches: a few hundred kernels of a few microseconds each. :func:`fit_captured` records
one step of :func:`symlib.inference.mfvi.fit` -- the Monte Carlo ELBO, its backward pass and the
Adam update -- once as a :class:`torch.cuda.CUDAGraph` and replays it (``benchmarks/bench_vi_capture.py``:
5.8x the eager steps per second on an H200). The graph is the eager step made replayable:

- the KL weight of every step is precomputed in a device tensor that the step indexes with a
  device counter (no host value in the recording);
- Adam keeps its step counts on the device (``capturable=True``);
- the Monte Carlo noise is drawn from the caller's generator, registered with the graph
  (``CUDAGraph.register_generator_state``): a replay advances it as the eager step would;
- the recorded ELBO parts are summed into device buffers between records
  (``average_records``), and read on the host only at a record.

The warm-up steps PyTorch's capture recipe needs (run on a side stream before recording, so that
autograd and cuBLAS set up their state outside the graph) are undone: parameters, Adam's moments
and step counts and the generator's state go back to where they were, so the captured run starts
where the eager one does and takes the same steps. ``mode="replay"`` runs that same step function
eagerly, step by step (the CPU's path, and the test of the step function against
:func:`~symlib.inference.mfvi.fit`); ``mode="eager"`` is :func:`~symlib.inference.mfvi.fit` itself.

Checkpoints (:func:`fit_resumable`): the fit's steps run in :func:`symlib.inference.loop.run`,
the loop HMC's pieces run in, so the whole state is written at most every few minutes and a time
budget (an argument) stops a piece cleanly; chapter 1's 200,000 steps go in pieces across short
GPU allocations and resume to the numbers of an uninterrupted fit. The state is
:class:`CapturedFit` itself: the tensors a recorded graph writes in place, stepped in place.

Public: :func:`fit_captured`, :func:`fit_resumable`, :class:`ResumableFit`, :class:`CapturedFit`,
:data:`MODES`.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from symlib.inference import loop, mfvi
from symlib.inference.loop import BudgetExhausted

MODES = ("auto", "graph", "replay", "eager")
"""``auto``: ``graph`` on CUDA, ``eager`` elsewhere; ``graph``: one CUDA graph per step;
``replay``: the graph's step function run eagerly; ``eager``: :func:`mfvi.fit`."""

CHECKPOINT_FORMAT = 1

WARMUP_STEPS = 3
"""Steps run (and undone) on a side stream before the graph is recorded."""


def fit_captured(model: mfvi.BayesMLP, q: mfvi.MeanField, x: Tensor, y: Tensor, *, n_steps: int,
                 n_samples: int, lr: float, generator: torch.Generator, noise_sd: float | Tensor = 0.2,
                 learn_noise: bool = False, anneal_fraction: float = 0.5, record_every: int = 100,
                 average_records: bool = False, progress: bool = True, desc: str = "MFVI (captured)",
                 mode: str = "auto") -> mfvi.FitResult:
    """:func:`symlib.inference.mfvi.fit` with each step replayed as one CUDA graph.

    Arguments as for :func:`~symlib.inference.mfvi.fit`, plus ``mode`` (:data:`MODES`). The result
    has the same form. With ``mode="graph"`` the generator must be a CUDA generator on the data's
    device.

    Raises:
        ValueError: an unknown mode, or ``"graph"`` without CUDA tensors and a CUDA generator.
    """
    if mode not in MODES:
        raise ValueError(f"fit_captured: mode must be one of {', '.join(MODES)}; got {mode!r}")
    device = q.mean["W1"].device
    if mode == "auto":
        mode = "graph" if device.type == "cuda" else "eager"
    kwargs = {"n_steps": n_steps, "n_samples": n_samples, "lr": lr, "generator": generator, "noise_sd": noise_sd,
              "learn_noise": learn_noise, "anneal_fraction": anneal_fraction, "record_every": record_every,
              "average_records": average_records, "progress": progress, "desc": desc}
    if mode == "eager":
        return mfvi.fit(model, q, x, y, **kwargs)
    if mode == "graph" and (device.type != "cuda" or generator.device.type != "cuda"):
        raise ValueError(f"fit_captured: mode 'graph' needs CUDA tensors and a CUDA generator; got tensors on "
                         f"{device} and a generator on {generator.device} (mode 'auto' runs eagerly off CUDA)")
    return CapturedFit(model, q, x, y, graph=mode == "graph", **kwargs).run()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _plain(value) -> float | list:
    """A float or tensor setting as plain numbers (a checkpoint's settings are compared with ==)."""
    return torch.as_tensor(value).detach().cpu().double().flatten().tolist() if isinstance(value, Tensor) else float(value)


class ResumableFit(NamedTuple):
    """What a piece of :func:`fit_resumable` returns."""

    complete: bool
    """Whether every step is done (False: stopped at the budget; call again to go on)."""
    fit: mfvi.FitResult
    """The fit so far (its history holds the records up to the steps done)."""
    steps: int
    """Steps done, over all pieces."""
    wall_time_s: float
    """Seconds of training over all pieces (checkpoint writes included)."""
    pieces: int
    """How many calls the fit took so far (1: never resumed)."""

    def require_complete(self) -> ResumableFit:
        """Itself if complete; else raise :class:`~symlib.inference.loop.BudgetExhausted`
        (a stage must cache no partial fit)."""
        if not self.complete:
            raise BudgetExhausted(f"VI fit stopped at its time budget after {self.steps} steps; "
                                  "run again to continue from its checkpoint")
        return self


def fit_resumable(model: mfvi.BayesMLP, q: mfvi.MeanField, x: Tensor, y: Tensor, *, checkpoint: str | Path,
                  every_s: float = 120.0, budget_s: float | None = None, mode: str = "auto",
                  **kwargs) -> ResumableFit:
    """:func:`fit_captured` in resumable pieces, as :func:`symlib.inference.hmc_resumable.sample_resumable`
    for HMC: the whole state (parameters, Adam's moments and counts, the generator, the records
    and their running sums) is written to ``checkpoint`` atomically at most every ``every_s``
    seconds; ``budget_s`` (None: no limit; a stage passes what is left of its run's time) stops
    the piece after that many seconds, leaving its checkpoint; a later call with the same
    arguments continues from it and gives the numbers of an uninterrupted fit. A checkpoint of other settings is refused by name.

    Args:
        checkpoint: the checkpoint file; if it exists the fit continues from it.
        mode: ``"auto"``, ``"graph"`` or ``"replay"`` (:data:`MODES`; ``"eager"`` has no checkpoints
            and is read as ``"replay"``, which takes the same steps).
        kwargs: as for :func:`fit_captured` (``n_steps``, ``n_samples``, ``lr``, ``generator``, ...).
    """
    if mode not in MODES:
        raise ValueError(f"fit_resumable: mode must be one of {', '.join(MODES)}; got {mode!r}")
    device = q.mean["W1"].device
    graph = mode == "graph" or (mode == "auto" and device.type == "cuda")
    fit = CapturedFit(model, q, x, y, graph=graph, **kwargs)
    path = Path(checkpoint)
    if path.is_file():
        fit.load(path)
    if fit.done < fit.n_steps:
        fit.run(checkpoint=path, every_s=every_s, budget_s=budget_s)
        if not fit.stopped:
            fit.save(path, fit.wall_s)   # the finished fit: a later call returns it without training again
    return ResumableFit(not fit.stopped, fit.result(), fit.done, fit.wall_s, fit.pieces)


class CapturedFit:
    """One fit's state (leaves, Adam, the KL-weight schedule, record buffers) and, with ``graph``,
    its recorded step. :meth:`run` takes ``n_steps`` steps; a second call continues from there
    (the KL weight stays at its last value), which is how ``benchmarks/bench_vi_capture.py`` times
    replays without re-recording."""

    def __init__(self, model: mfvi.BayesMLP, q: mfvi.MeanField, x: Tensor, y: Tensor, *, graph: bool,
                 n_steps: int, n_samples: int, lr: float, generator: torch.Generator,
                 noise_sd: float | Tensor = 0.2, learn_noise: bool = False, anneal_fraction: float = 0.5,
                 record_every: int = 100, average_records: bool = False, progress: bool = True,
                 desc: str = "MFVI (captured)"):
        self.n_steps, self.record_every, self.average = n_steps, record_every, average_records
        self.generator, self.progress, self.desc = generator, progress, desc
        self.mean = {k: v.detach().clone().requires_grad_(True) for k, v in q.mean.items()}
        self.log_sd = {k: v.detach().clone().requires_grad_(True) for k, v in q.log_sd.items()}
        ref = q.mean["W1"]
        batch = mfvi._batch_shape(q.mean, model.spec)
        log_noise = torch.log(torch.as_tensor(noise_sd, dtype=ref.dtype, device=ref.device))
        self.log_noise = log_noise.expand(batch).clone().requires_grad_(learn_noise)
        self.leaves = list(self.mean.values()) + list(self.log_sd.values()) + ([self.log_noise] if learn_noise else [])
        # as mfvi.fit (fused Adam); on CUDA with its step counts on the device, so a replay reads them
        self.optimiser = torch.optim.Adam(self.leaves, lr=lr, fused=True, capturable=ref.device.type == "cuda")
        # kl_weight as mfvi.fit computes it (a Python float per step), cast as the eager product casts it
        self.beta_list = [mfvi.kl_weight(t, n_steps, anneal_fraction) for t in range(n_steps)]
        self.betas = torch.tensor(self.beta_list, dtype=torch.float64).to(device=ref.device, dtype=ref.dtype)
        self.counter = torch.zeros((), dtype=torch.long, device=ref.device)
        self.sums = {k: torch.zeros(batch, dtype=ref.dtype, device=ref.device)
                     for k in ("elbo", "objective", "expected_log_likelihood", "kl")}
        self.now: dict[str, Tensor] = {}
        self.done, self.n_summed, self.wall_s, self.pieces, self.stopped = 0, 0, 0.0, 1, False
        self.records: dict[str, list] = {k: [] for k in ("step", "kl_weight", "elbo", "objective",
                                                         "expected_log_likelihood", "kl", "noise_sd")}
        self.settings = {"n_steps": n_steps, "n_samples": n_samples, "lr": lr, "noise_sd": _plain(noise_sd),
                         "learn_noise": learn_noise, "anneal_fraction": anneal_fraction, "record_every": record_every,
                         "average_records": average_records, "device": ref.device.type,
                         "shapes": {k: list(v.shape) for k, v in q.mean.items()}}
        self.state = mfvi.MeanField(self.mean, self.log_sd)
        self.args = (model, x, y, n_samples)
        self.graph = self._record() if graph else None

    def _step(self) -> None:
        model, x, y, n_samples = self.args
        beta = self.betas.index_select(0, self.counter.clamp(max=self.n_steps - 1).reshape(1)).reshape(())
        parts = mfvi.elbo(self.state, model, x, y, self.log_noise.exp(), n_samples, self.generator, kl_weight=beta)
        loss = -parts.elbo.sum() / x.shape[-2]
        loss.backward()
        self.optimiser.step()
        with torch.no_grad():
            now = {"elbo": parts.expected_log_likelihood - parts.kl, "objective": parts.elbo,
                   "expected_log_likelihood": parts.expected_log_likelihood, "kl": parts.kl}
            for k, v in now.items():
                if self.average:         # the running sums serve average_records alone
                    self.sums[k].add_(v)
                self.now[k] = v
            self.counter.add_(1)

    def _snapshot(self):
        return ([p.detach().clone() for p in self.leaves], self.generator.get_state(), self.counter.clone())

    def _restore(self, snap) -> None:
        leaves, gen_state, counter = snap
        with torch.no_grad():
            for p, v in zip(self.leaves, leaves, strict=True):
                p.copy_(v)
            for st in self.optimiser.state.values():
                for v in st.values():
                    if isinstance(v, Tensor):
                        v.zero_()
            for s in self.sums.values():
                s.zero_()
            self.counter.copy_(counter)
        self.generator.set_state(gen_state)

    def _record(self) -> torch.cuda.CUDAGraph:
        device = self.counter.device
        snap = self._snapshot()
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                self.optimiser.zero_grad(set_to_none=True)
                self._step()
        torch.cuda.current_stream(device).wait_stream(side)
        torch.cuda.synchronize(device)
        self._restore(snap)
        graph = torch.cuda.CUDAGraph()
        graph.register_generator_state(self.generator)
        self.optimiser.zero_grad(set_to_none=True)   # the backward in the graph allocates the gradients in its pool
        with torch.cuda.graph(graph):
            self._step()
        torch.cuda.synchronize(device)
        self._restore(snap)          # recording ran nothing, but leave no doubt: start where the eager fit starts
        return graph

    def run(self, n: int | None = None, *, checkpoint: Path | None = None, every_s: float = 120.0,
            budget_s: float | None = None) -> mfvi.FitResult:
        """Take ``n`` more steps (default: up to ``n_steps``); with ``checkpoint``, write the whole
        state there at most every ``every_s`` seconds and stop after ``budget_s`` seconds
        (:func:`fit_resumable`). Returns the fit so far."""
        end = self.n_steps if n is None else self.done + n
        bar = tqdm(total=end - self.done, desc=self.desc, disable=not self.progress, mininterval=1.0)
        save = None if checkpoint is None else lambda fit, seconds: fit.save(checkpoint, fit.wall_s + seconds)
        piece = loop.run(self, CapturedFit._advance, done=CapturedFit._done, total=end, save=save,
                         every_s=every_s, budget_s=budget_s, on_step=lambda _: bar.update())
        self.stopped = piece.stopped
        bar.close()
        _sync(self.counter.device)
        self.wall_s += piece.seconds
        return self.result()

    def _advance(self) -> CapturedFit:
        """One step (the recorded graph's replay, or the step run eagerly), recorded; the fit,
        stepped in place, is :func:`symlib.inference.loop.run`'s state."""
        if self.graph is not None:
            self.graph.replay()
        else:
            self.optimiser.zero_grad(set_to_none=True)
            self._step()
        self._after_step()
        return self

    def _done(self) -> int:
        return self.done

    def _after_step(self) -> None:
        step, self.done = self.done, self.done + 1
        self.n_summed += 1
        if not (step % self.record_every == 0 or step == self.n_steps - 1):
            return
        with torch.no_grad():
            now = ({k: s / self.n_summed for k, s in self.sums.items()} if self.average
                   else {k: v.clone() for k, v in self.now.items()})
            for s in self.sums.values():
                s.zero_()
            self.n_summed = 0
            self.records["step"].append(step)
            self.records["kl_weight"].append(self.beta_list[min(step, self.n_steps - 1)])
            for k, v in now.items():
                self.records[k].append(v.cpu().numpy())
            self.records["noise_sd"].append(self.log_noise.exp().detach().cpu().numpy())

    def result(self) -> mfvi.FitResult:
        history = {k: (np.asarray(v) if k in ("step", "kl_weight") else np.moveaxis(np.asarray(v), 0, -1))
                   for k, v in self.records.items()}
        final = mfvi.MeanField({k: v.detach().clone() for k, v in self.mean.items()},
                               {k: v.detach().clone() for k, v in self.log_sd.items()})
        return mfvi.FitResult(final, self.log_noise.detach().clone(), history)

    # ------------------------------------------------------------------ checkpoints

    def save(self, path: Path, wall_s: float) -> None:
        """Write everything the rest of the run depends on (atomically)."""
        opt = [{k: v.detach().cpu().clone() for k, v in self.optimiser.state[p].items()} if p in self.optimiser.state
               else None for p in self.leaves]
        payload = {"format": CHECKPOINT_FORMAT, "settings": self.settings, "done": self.done,
                   "leaves": [p.detach().cpu().clone() for p in self.leaves], "adam": opt,
                   "sums": {k: v.cpu().clone() for k, v in self.sums.items()}, "n_summed": self.n_summed,
                   "counter": self.counter.cpu().clone(), "generator": self.generator.get_state(),
                   "records": self.records, "wall_s": wall_s, "pieces": self.pieces}
        loop.write_checkpoint(path, payload)

    def load(self, path: Path) -> None:
        """Continue from a checkpoint :meth:`save` wrote with the same settings (the tensors the
        graph recorded are overwritten in place)."""
        saved = loop.read_checkpoint(path, format=CHECKPOINT_FORMAT, settings=self.settings, what="fit")
        with torch.no_grad():
            for p, v in zip(self.leaves, saved["leaves"], strict=True):
                p.copy_(v)
            for p, st in zip(self.leaves, saved["adam"], strict=True):
                if st is None:
                    continue
                if p in self.optimiser.state:
                    for k, v in st.items():
                        self.optimiser.state[p][k].copy_(v)
                else:       # the eager replay creates Adam's state at its first step
                    self.optimiser.state[p] = {k: v.clone().to(p.device) for k, v in st.items()}
            for k, v in saved["sums"].items():
                self.sums[k].copy_(v)
            self.counter.copy_(saved["counter"])
        self.generator.set_state(saved["generator"])
        self.done, self.n_summed, self.records = saved["done"], saved["n_summed"], saved["records"]
        self.wall_s, self.pieces = saved["wall_s"], saved["pieces"] + (1 if saved["done"] < self.n_steps else 0)
