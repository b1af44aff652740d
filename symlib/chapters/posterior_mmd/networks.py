"""Chapter 2b's data and networks: MNIST, the reference checkpoints and the deep ensemble.

:func:`load_data` reads the digits and the OOD inputs; :func:`train_networks` trains the
reference checkpoints and the ensemble members in one vmapped computation
(:func:`symlib.nn.training.train_batched`), or in independent chunks; :func:`sample_probs`
gives the class probabilities of a set of weight samples.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from symlib.book.parallel import fan_out
from symlib.chapters.posterior_mmd import ood as _ood
from symlib.chapters.symmetry_removal.reference import (
    LEARNED_ACCURACY,
    MNIST_MEAN,
    MNIST_SD,
    mnist_source,
    optunet_restart_rule,
)
from symlib.data import load_mnist
from symlib.inference import posteriors as post
from symlib.nn.convnets import init_optunet, optunet_cross_entropy_batched, optunet_forward
from symlib.nn.training import SGDConfig, train_with_restarts

__all__ = [
    "LEARNED_ACCURACY",
    "TRAIN_FIELDS",
    "combine_chunks",
    "first_learned",
    "load_data",
    "sample_probs",
    "sgd_config",
    "test_accuracies",
    "train_chunk",
    "train_chunks",
    "train_networks",
]

_TRAIN_STREAM = 0  # SeedSequence stream of the training chunks

TRAIN_FIELDS = ("reference_models", "ensemble_models", "epochs", "optimizer", "lr", "momentum",
                "milestones", "weight_decay", "batch_size", "crop_padding", "mnist_source",
                "train_chunk")
"""The profile fields the networks depend on (:func:`train_networks`, :func:`sgd_config`)."""


def load_data(config, *, ood: bool = True) -> dict[str, torch.Tensor]:
    """Normalised MNIST images ``(N, 1, 28, 28)`` and (``ood``) the OOD set, normalised the same way.

    Reads ``config.mnist_source`` (resolved by
    :func:`~symlib.chapters.symmetry_removal.reference.mnist_source`) and, with ``ood``,
    ``config.ood_source`` and ``config.ood_points``: a stage that sees no OOD input loads with
    ``ood=False`` and need not declare those fields. The OOD set
    (:func:`symlib.chapters.posterior_mmd.ood.inputs`: Fashion-MNIST's test images or the
    grey-patch stand-in) is drawn from its own fixed seed, so loading it or not moves no other
    number.
    """
    data = load_mnist(mnist_source(config), flatten=False)

    def norm(x):
        return (x - MNIST_MEAN) / MNIST_SD

    out = {"x_train": norm(data["x_train"]), "y_train": data["y_train"],
           "x_test": norm(data["x_test"]), "y_test": data["y_test"]}
    if ood:
        out["x_ood"] = norm(_ood.inputs(config.ood_source, config.ood_points))
    return out


def _loss(params, x, y):
    return F.cross_entropy(optunet_forward(params, x), y)


def sgd_config(config, epochs: int | None = None) -> SGDConfig:
    """The training recipe of every network (reference, ensemble, dropout)."""
    return SGDConfig(lr=config.lr, epochs=config.epochs if epochs is None else epochs,
                     batch_size=config.batch_size, weight_decay=config.weight_decay,
                     momentum=config.momentum, milestones=config.milestones,
                     crop_padding=config.crop_padding, optimizer=config.optimizer)


def _progress_hook(total: int, desc: str, progress: bool):
    bar = tqdm(total=total, desc=desc, disable=not progress, mininterval=5)

    def on_step(step, params):
        bar.update(1)
        if step == total:
            bar.close()
    return on_step


def train_networks(config, data: dict, seed: int, *,
                   progress: bool = True, jobs: int | None = None,
                   device: torch.device | str = "cpu") -> dict:
    """Reference checkpoints and ensemble members: ``reference_models + ensemble_models``
    OptuNets with independent initialisations and data orders, trained as one batch, or as
    chunks of ``config.train_chunk`` networks (each chunk one batch, with its own generator).

    The chunks are independent and run through :func:`symlib.book.parallel.fan_out` (``jobs``
    at a time, default ``$SYMLIB_JOBS``); the networks depend on the chunk size, never on
    ``jobs``.

    Training runs on ``device``; initialisation and data orders are drawn from CPU generators,
    so a GPU run trains the same networks as a CPU run up to rounding.

    Every chunk applies the authors' restart rule
    (:func:`symlib.chapters.symmetry_removal.reference.optunet_restart_rule`, checked on the
    training images): a network below 0.15 accuracy after epoch 3 is trained again alone from
    its next seed.

    Returns ``{"reference": params, "ensemble": params}`` (float32, leading model axis, on the
    CPU), their test accuracies and their restart counts (``reference_restarts``,
    ``ensemble_restarts``).
    """
    chunks = train_chunks(config)
    tasks = [(config, data["x_train"], data["y_train"], seed, chunk, size,
              progress and len(chunks) == 1, str(device)) for chunk, size in chunks]
    parts = fan_out(_train_chunk, tasks, threads=config.threads, jobs=jobs,
                    progress=progress and len(chunks) > 1, desc="reference + ensemble chunks")
    return combine_chunks(config, data, parts, device)


def train_chunks(config) -> list[tuple[int | None, int]]:
    """The independent training tasks of :func:`train_networks`, as ``(chunk, size)``:
    ``[(None, total)]`` for one batch drawn from the run's seed itself (``train_chunk=None``),
    else chunks ``0, 1, ...`` of ``config.train_chunk`` networks, the last one short.
    Chapter 2b's ``train_chunks`` stage caches each on its own, so a run in pieces keeps the
    chunks it finished."""
    total = config.reference_models + config.ensemble_models
    if config.train_chunk is None:
        return [(None, total)]
    return list(enumerate(min(config.train_chunk, total - i) for i in range(0, total, config.train_chunk)))


def train_chunk(config, data: dict, seed: int, chunk: int | None, size: int, *,
                progress: bool = True, device: torch.device | str = "cpu") -> dict:
    """One task of :func:`train_chunks`: ``size`` OptuNets trained as one batch on the training
    digits of ``data``, as :func:`train_networks` trains it (same seed, same networks)."""
    return _train_chunk(config, data["x_train"], data["y_train"], seed, chunk, size, progress, str(device))


def combine_chunks(config, data: dict, parts: list[dict], device: torch.device | str = "cpu") -> dict:
    """:func:`train_networks`'s result from its chunks' results (in the order of
    :func:`train_chunks`): the networks concatenated, split into the reference checkpoints and the
    ensemble members, with their test accuracies on ``data`` and their restart counts."""
    n_ref = config.reference_models
    restarts = torch.cat([part["restarts"] for part in parts])
    trained = {k: torch.cat([part[k] for part in parts]) for k in parts[0] if k != "restarts"}
    acc = test_accuracies(trained, data, device)
    return {"reference": {k: v[:n_ref] for k, v in trained.items()},
            "ensemble": {k: v[n_ref:] for k, v in trained.items()},
            "reference_accuracy": acc[:n_ref], "ensemble_accuracy": acc[n_ref:],
            "reference_restarts": restarts[:n_ref], "ensemble_restarts": restarts[n_ref:]}


def _train_chunk(config, x: torch.Tensor, y: torch.Tensor, seed: int,
                 chunk: int | None, size: int, progress: bool, device: str = "cpu") -> dict:
    """``size`` OptuNets initialised and trained as one batch (one task).

    ``chunk=None`` draws from ``seed`` itself (the single batch); chunk ``c`` from a generator
    derived from ``(seed, c)`` with numpy's SeedSequence. The restarts of network ``m`` of the
    chunk draw from :func:`symlib.nn.training.restart_seed` ``(chunk seed, m, r)``.
    Returns the trained parameters and ``restarts`` (per network).
    """
    if chunk is None:
        chunk_seed = seed
    else:
        state = np.random.SeedSequence([seed, _TRAIN_STREAM, chunk]).generate_state(2)
        chunk_seed = int(state[0]) << 32 | int(state[1])
    gen = torch.Generator().manual_seed(chunk_seed)
    params = {k: v.to(device) for k, v in init_optunet(gen, size).items()}
    steps = config.epochs * (len(x) // config.batch_size)
    x, y = x.to(device), y.to(device)
    trained, restarts = train_with_restarts(
        _loss, params, x, y, sgd_config(config), gen, optunet_restart_rule(x, y, chunk_seed),
        on_step=_progress_hook(steps, "reference + ensemble", progress),
        batched_loss_fn=optunet_cross_entropy_batched)
    return {**{k: v.cpu() for k, v in trained.items()}, "restarts": restarts}


def test_accuracies(params: dict, data: dict, device: torch.device | str = "cpu") -> torch.Tensor:
    probs = sample_probs(params, data["x_test"], device=device)
    return (probs.argmax(-1) == data["y_test"]).double().mean(-1)


def sample_probs(params: dict, x: torch.Tensor, device: torch.device | str = "cpu",
                 centre: dict | None = None) -> torch.Tensor:
    """Class probabilities ``(S, N, 10)`` of ``S`` OptuNet weight samples on inputs ``x``,
    computed on ``device`` (:func:`symlib.inference.posteriors.predictive_probs`) and returned
    on the CPU. With ``centre`` (each sample's mode, same shapes as ``params``), the network
    linearised there predicts (Laplace's GLM predictive,
    :func:`symlib.inference.posteriors.linearised_predictive_probs`)."""
    one_mode = {k: v[None].to(device) for k, v in params.items()}
    if centre is not None:
        at = {k: v[None].to(device) for k, v in centre.items()}
        return post.linearised_predictive_probs(optunet_forward, one_mode, at, x.to(device))[0].cpu()
    return post.predictive_probs(optunet_forward, one_mode, x.to(device))[0].cpu()


def first_learned(accuracy: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the first ``k`` networks above chance level (test accuracy > 20 %), topped up
    with the first stuck ones if too few learned.

    A network stuck at chance (a dead ReLU bottleneck: OptuNet's head has 3 units) is not a
    mode anyone would approximate a posterior around; the reference and the deep ensemble keep
    them, being the plain outcome of training.
    """
    learned = torch.nonzero(accuracy > LEARNED_ACCURACY).flatten()
    stuck = torch.nonzero(accuracy <= LEARNED_ACCURACY).flatten()
    return torch.cat([learned, stuck])[:k]

