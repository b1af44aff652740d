"""Chapter 3's stages: each experiment a cached, seeded unit of compute (:mod:`symlib.book.chapter`).

Gelberg, van der Ouderaa, van der Wilk & Gal (2024), "Variational inference failures under
model symmetries". Five experiments, each a pure function of the profile fields it declares and
the run seed, cached on its own:

1. ``interp``: mode interpolation (Sec. 3, Figure 3, App. A), :mod:`~symlib.chapters.sgm_vi.stages_geometry`;
2. ``prox``: mode proximity (Theorem 3.1), same module;
3. ``toy``: the two-parameter BNN (Sec. 5, Figure 4, Tables 2-3), :mod:`~symlib.chapters.sgm_vi.stages_toy`;
4. ``mnist``: MNIST (Sec. 5, Table 1), :mod:`~symlib.chapters.sgm_vi.stages_mnist`;
5. ``cost``: the cost per step as K grows (not cached: it times this machine, now);

and ``robustness``, a fan-out stage that reruns one experiment per setting of the profile's
``robustness`` (choices the paper left open), each variant cached on its own; the sweeps
(:mod:`~symlib.chapters.sgm_vi.sweeps`) judge the claims again on them.

Figure 3's fits (``interp``, and the ``robustness`` settings that refit them) keep their state in
a checkpoint (:func:`interp_checkpoint`) at most every two minutes: a run stopped at its deadline
(``ctx.deadline``, from ``$SYMLIB_BUDGET_S``) or killed continues from it to the numbers of an
uninterrupted run, so the `paper` profile's fits (about an hour and a half on one core) may go in
pieces. The other experiments are minutes each and start again.

Every stage runs with the profile's torch ``threads`` and declares the run seed as its
``legacy_seed``: its generators come from :func:`symlib.chapters.sgm_vi.rng.generator`, one
SeedSequence per (seed, stream, width), exactly as before the chapter contract, so the stages'
shared legacy seed aliases no draws (their streams differ by their entropy).
"""

from __future__ import annotations

from pathlib import Path

from symlib.book.chapter import Stage
from symlib.book.checkpoints import stage_checkpoint
from symlib.book.runtime import torch_threads
from symlib.chapters.sgm_vi.rng import run_seed
from symlib.chapters.sgm_vi.stages_geometry import interpolation_experiment, proximity_experiment
from symlib.chapters.sgm_vi.stages_mnist import cost_experiment, mnist_experiment, mnist_source
from symlib.chapters.sgm_vi.stages_toy import toy_experiment
from symlib.data import data_fingerprint
from symlib.inference.loop import seconds_left

__all__ = ["PART_FIELDS", "STAGES", "STAGE_CODE", "VERSION", "interp_checkpoint", "part_of", "robustness_items"]

VERSION = "3"  # 2: SGM ratios through the cost rule's path; 3: objective curves kept for the plateau check
"""The experiments' version, carried over from before the chapter contract."""

PART_FIELDS = {
    "interp": ("interp_n_a", "interp_samples", "interp_steps", "interp_dims", "interp_sds", "interp_lr",
               "interp_band", "interp_direction", "interp_init"),
    "prox": ("prox_widths", "prox_draws", "prox_shapes"),
    "toy": ("toy_eval_samples", "toy_grid", "toy_a", "toy_seeds", "toy_n", "toy_noise_sd", "toy_prior_sd",
            "toy_epochs", "toy_batch_size", "toy_lr", "toy_k", "toy_train_samples", "toy_init_mean_sd",
            "toy_init_sd", "toy_pred_samples"),
    "mnist": ("mnist_source", "mnist_seeds", "mnist_epochs", "mnist_widths", "mnist_ks", "mnist_batch_size",
              "mnist_lr", "mnist_train_samples", "mnist_prior_sd", "mnist_init_sd", "mnist_pred_samples",
              "mnist_diag_k"),
    "cost": ("cost_steps", "cost_ks", "cost_width"),
}
"""The profile fields each experiment reads (its stage adds ``threads``)."""


def part_of(field: str) -> str:
    """The experiment that profile field ``field`` belongs to.

    Raises:
        ValueError: no experiment reads ``field``.
    """
    for part, fields in PART_FIELDS.items():
        if field in fields:
            return part
    raise ValueError(f"no experiment of chapter 3 reads {field!r}; fields by experiment: {PART_FIELDS}")


def _experiment(part: str, config, seed: int, device, checkpoint: Path | None = None, deadline: float | None = None):
    """Experiment ``part`` on ``config`` (a stage's view of the profile), with its torch threads;
    Figure 3's fits keep their state in ``checkpoint`` and stop at ``deadline`` (seconds since the
    epoch), the other experiments ignore both."""
    with torch_threads(config.threads):
        if part == "interp":
            out = interpolation_experiment(config, seed, device=device, checkpoint=checkpoint,
                                           budget_s=seconds_left(deadline))
            if checkpoint is not None:
                checkpoint.unlink(missing_ok=True)   # the stage's result is what is cached
            return out
        if part == "prox":  # a handful of assignment problems: on the CPU
            return proximity_experiment(config, seed)
        if part == "toy":
            return toy_experiment(config, seed, device=device)
        if part == "mnist":
            return mnist_experiment(config, seed, device=device)
        return cost_experiment(config, seed)  # times the CPU on purpose


def _mnist_files(config) -> dict:
    """Key data of the stages that may train on MNIST: the fingerprint of the files of the source
    :func:`~symlib.chapters.sgm_vi.stages_mnist.mnist_source` resolves (``{}`` for the shipped digits)."""
    return data_fingerprint(mnist_source(config))


def interp_checkpoint(ctx, run: str = "interp") -> Path:
    """Where Figure 3's fits of stage ``ctx`` (``interp``, or a ``robustness`` setting ``run`` =
    ``"field=value"``) keep their state: :func:`symlib.book.checkpoints.stage_checkpoint`."""
    return stage_checkpoint(ctx, run)


def _part_stage(part: str):
    if part == "interp":
        return lambda ctx: _experiment(part, ctx.config, ctx.seed, ctx.device, interp_checkpoint(ctx), ctx.deadline)
    return lambda ctx: _experiment(part, ctx.config, ctx.seed, ctx.device)


def robustness_items(config) -> list[tuple[str, object]]:
    """The variants the ``robustness`` stage reruns: ``(field, value)`` for every setting of
    ``config.robustness`` other than the run's own. ``interp_band`` reruns nothing: ``a*`` is read
    off the same fits for another band (:func:`~symlib.chapters.sgm_vi.stages_geometry.with_band`)."""
    items = []
    for field, values in config.robustness:
        part_of(field)  # fails now, naming the field, rather than after the run's own stages
        own = getattr(config, field)
        if field != "interp_band":
            items += [(field, value) for value in values if value != own]
    return items


def robustness_variant(ctx, item: tuple[str, object]):
    """One variant of the sweep: the experiment ``item``'s field belongs to, with that field changed."""
    field, value = item
    part = part_of(field)
    checkpoint = interp_checkpoint(ctx, f"{field}={value}") if part == "interp" else None
    return _experiment(part, ctx.config.replace(**{field: value}), ctx.seed, ctx.device, checkpoint, ctx.deadline)


_SWEPT = tuple(f for part in ("interp", "prox", "toy", "mnist") for f in PART_FIELDS[part])

STAGES = (
    Stage("interp", _part_stage("interp"), fields=(*PART_FIELDS["interp"], "threads"), version=VERSION,
          legacy_seed=run_seed),
    Stage("prox", _part_stage("prox"), fields=(*PART_FIELDS["prox"], "threads"), version=VERSION,
          legacy_seed=run_seed),
    Stage("toy", _part_stage("toy"), fields=(*PART_FIELDS["toy"], "threads"), version=VERSION,
          legacy_seed=run_seed),
    Stage("mnist", _part_stage("mnist"), fields=(*PART_FIELDS["mnist"], "threads"), version=VERSION,
          legacy_seed=run_seed, key_data=_mnist_files),
    Stage("cost", _part_stage("cost"), fields=(*PART_FIELDS["cost"], "threads"), version=VERSION,
          legacy_seed=run_seed, cache=False),
    Stage("robustness", robustness_variant, fields=(*_SWEPT, "threads", "robustness"), version=VERSION,
          legacy_seed=run_seed, key_data=_mnist_files, items=robustness_items),
)
"""Chapter 3's stages in the order the old ``run`` computed them (each experiment builds its own
generators, so the order moves no number)."""

STAGE_CODE = {stage.name: ("symlib.chapters.sgm_vi.stages",) for stage in STAGES}
"""The code each stage runs (:data:`symlib.book.provenance.STAGE_CODE_ATTRIBUTE`): this module
and what it imports (``stages_toy``, ``stages_mnist``, ``stages_geometry``, the mode modules, ``rng``, ``paper`` and the library's SGM and MFVI code), not ``claims``, ``views``, ``figures``, ``profiles`` or ``sweeps``. So an edit of the claims or texts leaves
the cached entries current and a `paper` run in GPU pieces continues; an edit of what computes
restarts it."""
