"""The authors' restart rule (:func:`symlib.nn.training.train_with_restarts`), shared by chapters
2a and 2b, on made-up networks: one stuck at chance is restarted from its next seed, one that
learns is not, the count is right, and the batched path trains the same replacement as a single
network trained alone from that seed."""

import pytest
import torch
import torch.nn.functional as F

from symlib.nn import training as bt

N, D = 200, 10


def _data():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(N, D, generator=gen, dtype=torch.float64)
    return x, x.argmax(1)


def _logits_one(p, x):
    return torch.relu(x @ p["W1"]) @ p["W2"]


def _loss(p, x, y):
    return F.cross_entropy(_logits_one(p, x), y)


def _logits(params, x):
    return torch.vmap(_logits_one, in_dims=(0, None))(params, x)


def _alive(gen, n):
    """Networks that learn: a near-identity first layer (positive on positive inputs)."""
    return {"W1": torch.eye(D, dtype=torch.float64) + 0.1 * torch.rand(n, D, D, generator=gen, dtype=torch.float64),
            "W2": 0.1 * torch.randn(n, D, D, generator=gen, dtype=torch.float64)}


def _dead(gen, n):
    """Networks stuck at chance: every hidden ReLU off on positive inputs, so no gradient at all."""
    p = _alive(gen, n)
    return {"W1": -p["W1"], "W2": p["W2"]}


CFG = bt.SGDConfig(lr=0.5, epochs=6, batch_size=20, momentum=0.5)


def _rule(init_fn=_alive, seed=7, **kw):
    x, y = _data()
    return bt.RestartRule(x_val=x, y_val=y, logits_fn=_logits, init_fn=init_fn, seed=seed, **kw)


def _accuracy(params):
    x, y = _data()
    return (_logits(params, x).argmax(-1) == y).double().mean(-1)


def _batch(*inits, seed=1):
    gen = torch.Generator().manual_seed(seed)
    parts = [init(gen, 1) for init in inits]
    return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


def _alone(seed: int) -> dict:
    """A single network trained alone from ``seed`` (initialisation and draws), no rule."""
    gen = torch.Generator().manual_seed(seed)
    return bt.train_batched(_loss, _alive(gen, 1), *_data(), CFG, gen)


def test_stuck_network_restarts_from_its_next_seed_and_learning_one_does_not():
    x, y = _data()
    params = _batch(_alive, _dead, _alive)
    out, restarts = bt.train_with_restarts(_loss, params, x, y, CFG, torch.Generator().manual_seed(3), _rule())
    assert restarts.tolist() == [0, 1, 0]
    # the learning networks are exactly train_batched's (the rule moved no draw)
    plain = bt.train_batched(_loss, params, x, y, CFG, torch.Generator().manual_seed(3))
    for k in out:
        torch.testing.assert_close(out[k][[0, 2]], plain[k][[0, 2]], rtol=0, atol=0)
    assert _accuracy(plain)[1] < 0.15  # without the rule the stuck one stays at chance
    # the replacement is the single network trained alone from network 1's next seed
    alone = _alone(bt.restart_seed(7, 1, 1))
    for k in out:
        torch.testing.assert_close(out[k][1], alone[k][0], rtol=0, atol=0)
    assert (_accuracy(out) > 0.5).all()


def test_single_and_batched_paths_agree():
    """A single network (M = 1) is restarted from its own next seed, as a batched one is; the
    replacement is the same single training in both paths; a run is deterministic."""
    x, y = _data()
    one, r1 = bt.train_with_restarts(_loss, _batch(_dead), x, y, CFG, torch.Generator().manual_seed(3), _rule())
    assert r1.tolist() == [1]
    alone = _alone(bt.restart_seed(7, 0, 1))
    for k in one:
        torch.testing.assert_close(one[k][0], alone[k][0], rtol=0, atol=0)
    both, r2 = bt.train_with_restarts(_loss, _batch(_dead, _dead), x, y, CFG,
                                      torch.Generator().manual_seed(3), _rule())
    assert r2.tolist() == [1, 1]
    for k in both:  # network 0 of the batch gets the single path's replacement
        torch.testing.assert_close(both[k][0], one[k][0], rtol=0, atol=0)
        assert not torch.equal(both[k][0], both[k][1])  # each its own next seed
    again, _ = bt.train_with_restarts(_loss, _batch(_dead, _dead), x, y, CFG,
                                      torch.Generator().manual_seed(3), _rule())
    for k in both:
        assert torch.equal(both[k], again[k])


def test_restart_count_and_the_last_try():
    """Every try of a network that never learns is counted, up to ``max_restarts``; the last try
    is kept, trained to the end."""
    x, y = _data()
    out, restarts = bt.train_with_restarts(_loss, _batch(_alive, _dead), x, y, CFG,
                                           torch.Generator().manual_seed(3),
                                           _rule(init_fn=_dead, max_restarts=3))
    assert restarts.tolist() == [0, 3]
    assert _accuracy(out)[1] < 0.15


def test_restart_hook_reports_each_try_from_step_zero():
    x, y = _data()
    seen = []
    bt.train_with_restarts(_loss, _batch(_alive, _dead), x, y, CFG, torch.Generator().manual_seed(3),
                           _rule(), on_restart_step=lambda m, step, p: seen.append((m, step)))
    steps = CFG.epochs * (N // CFG.batch_size)
    assert seen == [(1, s) for s in range(steps + 1)]


def test_short_training_is_not_checked():
    """Training of at most ``rule.epoch`` epochs has no epoch after the check: nothing restarts."""
    x, y = _data()
    cfg = bt.SGDConfig(lr=0.5, epochs=3, batch_size=20)
    _, restarts = bt.train_with_restarts(_loss, _batch(_dead), x, y, cfg, torch.Generator().manual_seed(3), _rule())
    assert restarts.tolist() == [0]


@pytest.mark.parametrize("acc, failed", [(0.1, True), (0.149, True), (0.15, False), (0.9, False)])
def test_threshold_is_strict(acc, failed):
    """Below 0.15 fails; 0.15 itself passes (the authors' ``<``)."""
    n_right = round(acc * 1000)
    y = torch.zeros(1000, dtype=torch.long)
    logits = torch.zeros(1, 1000, 10)
    logits[0, :n_right, 0] = 1
    logits[0, n_right:, 1] = 1
    rule = bt.RestartRule(x_val=torch.zeros(1000, 1), y_val=y, logits_fn=lambda p, x: logits,
                          init_fn=_alive, seed=0)
    assert rule.failed({}).tolist() == [failed]


def test_optunet_rule_is_the_authors():
    from symlib.chapters.symmetry_removal import reference

    rule = reference.optunet_restart_rule(torch.zeros(2, 1, 28, 28), torch.zeros(2, dtype=torch.long), 5)
    assert (rule.epoch, rule.threshold, rule.seed) == (3, 0.15, 5)
    gen = torch.Generator().manual_seed(0)
    assert rule.logits_fn(rule.init_fn(gen, 2), torch.zeros(4, 1, 28, 28)).shape == (2, 4, 10)
