"""Figure 1 of Laurent et al.: the toy posterior of 2-2-1 ReLU perceptrons, raw and with its
symmetries removed."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from symlib import symmetry as sym
from symlib.data import gaussian_blobs
from symlib.nn.mlp import MLPSpec, mlp_forward
from symlib.nn.training import SGDConfig, train_batched

__all__ = ["TOY_SPEC", "toy_posterior"]

TOY_SPEC = MLPSpec((2, 2, 1), "relu")


def _toy_loss(params, x, y):
    return F.binary_cross_entropy_with_logits(mlp_forward(params, x, TOY_SPEC)[..., 0], y)


def toy_posterior(config, seed: int, device: torch.device | str = "cpu") -> dict:
    """Train ``config.toy_models`` perceptrons in one vmapped computation on ``device``; remove
    symmetries.

    Initialisation as :func:`symlib.nn.mlp.init_mlp` (``W ~ N(0, 1/fan_in)``, biases
    ``N(0, 0.1^2)``), drawn for all networks at once. Removal for the figure, as in App. A.2:
    each hidden unit's incoming weights rescaled to norm ``toy_norm`` (outgoing weight
    compensating), then the two hidden units sorted by DESCENDING output weight.

    Args:
        config: the chapter profile, or a view with its ``toy_*`` fields.
        seed: the one generator's seed (data, initialisation, batches, probe inputs, in that order).
        device: where the training runs; the draws stay on the CPU.
    """
    gen = torch.Generator().manual_seed(seed)
    x, y = gaussian_blobs(config.toy_points_per_class, config.toy_means, gen)
    y = y.to(torch.float32)
    m = config.toy_models
    params = {}
    for k, s in TOY_SPEC.shapes().items():
        z = torch.randn((m, *s), generator=gen)
        params[k] = z / math.sqrt(s[1]) if k.startswith("W") else 0.1 * z
    cfg = SGDConfig(lr=config.toy_lr, epochs=config.toy_epochs, batch_size=config.toy_batch)
    # the draws stay on the CPU generator (the same run on every device); the arithmetic moves
    on = {k: v.to(device) for k, v in params.items()}
    trained = train_batched(_toy_loss, on, x.to(device), y.to(device), cfg, gen)
    with torch.no_grad():
        loss = torch.vmap(_toy_loss, in_dims=(0, None, None))(trained, x.to(device), y.to(device)).cpu()
    trained = {k: v.cpu() for k, v in trained.items()}
    kept = torch.isfinite(loss) & (loss <= config.toy_loss_threshold)
    nets = {k: v[kept].to(torch.float64) for k, v in trained.items()}
    ps = sym.mlp_permutation_spec(TOY_SPEC)
    norm = nets["W1"].norm(dim=-1)
    norm = torch.where(norm > 0, norm, torch.ones_like(norm))
    ident = torch.arange(2).expand(len(norm), 2)
    normalised = sym.apply_group_element(
        nets, ps, sym.GroupElement({"P1": ident}, None, {"P1": config.toy_norm / norm}))
    order = torch.argsort(normalised["W2"][:, 0, :], dim=-1, descending=True, stable=True)
    ordered = sym.apply_group_element(normalised, ps, sym.GroupElement({"P1": order}))
    probe = torch.randn(256, 2, generator=gen, dtype=torch.float64) * 4
    fwd = torch.vmap(lambda p: mlp_forward(p, probe, TOY_SPEC))
    ref = fwd(nets)
    # relative to the outputs' scale: some runs reach weights of 1e4 and logits of 1e5
    scale = ref.abs().max().item() if len(ref) else 1.0
    change = max((fwd(t) - ref).abs().max().item() / scale for t in (normalised, ordered)) if len(ref) else 0.0
    return {
        "x": x, "y": y,
        "separable": _linearly_separable(x, y),
        "n_trained": m, "n_kept": int(kept.sum()),
        "raw": nets["W2"][:, 0, :],
        "normalised": normalised["W2"][:, 0, :],
        "sorted": ordered["W2"][:, 0, :],
        "hidden_raw": torch.cat([nets["W1"], nets["b1"][..., None]], -1),
        "hidden_canonical": _toy_canonical_hidden(nets),
        "max_output_change": change,  # relative: max |f(g.w) - f(w)| / max |f(w)|
    }


def _toy_canonical_hidden(nets):
    canon = sym.canonicalise(nets, TOY_SPEC)
    return torch.cat([canon["W1"], canon["b1"][..., None]], -1)


def _linearly_separable(x, y) -> bool:
    from sklearn.svm import LinearSVC

    clf = LinearSVC(C=1e6, max_iter=100_000).fit(x.numpy(), y.numpy())
    return bool((clf.predict(x.numpy()) == y.numpy()).all())
