"""Chapter 2a: Figure 4's sort keys, the readings of "nearly never permute in the last phase",
and the diagnoses of claims that do not hold, on made-up data."""

import dataclasses

import pytest
import torch

from symlib import symmetry as sym
from symlib.book.chapter import RunResults
from symlib.book.results import Cause, Column
from symlib.chapters import get_profile
from symlib.chapters.symmetry_removal import CHAPTER
from symlib.chapters.symmetry_removal.claims import (
    READING_CHOICE,
    SORT_KEY_CHOICE,
    Reading,
    diagnoses,
    last_phase_start,
    rare_late,
)
from symlib.chapters.symmetry_removal.optunets import (
    REPRODUCED_SORT_KEY,
    SortKey,
    permutation_changes,
    sorting_permutation,
)
from symlib.nn.convnets import init_optunet
from symlib.symmetry import optunet_permutation_spec
from tests.chapters.test_symmetry_removal import _all_keys, _changes, _made_up

QUICK = get_profile("02a_symmetry_removal", "quick")


def _split(cat):
    out, start = {}, 0
    for name, n in optunet_permutation_spec().perm_sizes.items():
        out[name] = cat[..., start:start + n]
        start += n
    return out


@pytest.mark.parametrize("key", list(SortKey))
def test_every_sort_key_gives_one_order_per_permutation_orbit(key):
    """Sorting a permuted copy of a network gives the same sorted network, under every key."""
    ps = optunet_permutation_spec()
    gen = torch.Generator().manual_seed(3)
    nets = init_optunet(gen, 6)
    for _ in range(3):
        g = sym.sample_spec_element(ps, gen, scales=False)
        moved = sym.apply_group_element(nets, ps, g)
        a = sym.apply_group_element(nets, ps, sym.GroupElement(_split(sorting_permutation(nets, key))))
        b = sym.apply_group_element(moved, ps, sym.GroupElement(_split(sorting_permutation(moved, key))))
        for k in a:
            torch.testing.assert_close(a[k], b[k])


def test_the_keys_read_the_units_as_documented():
    """The first weight (raw), the largest weight and the first weight after normalisation order
    made-up conv2 channels differently, each in descending order, within each group of 5."""
    nets = {k: v[0] for k, v in init_optunet(torch.Generator().manual_seed(0), 1).items()}
    w1 = torch.zeros(2, 16)
    w1[0, 0], w1[1, 0], w1[1, 1] = 1.0, 0.1, 0.1     # conv1 keeps its order under every key
    nets["W1"] = w1.reshape(nets["W1"].shape)
    group = torch.zeros(5, 25)
    group[:, 0] = torch.tensor([0.5, 0.4, 0.1, -1.0, -2.0])  # first weights: 0 > 1 > 2 > 3 > 4
    group[0, 2], group[2, 1], group[3, 1] = 5.0, 2.0, -0.5    # largest: 5.0, 0.4, 2.0, -0.5, -2.0
    nets["W2"] = torch.cat([group, group]).reshape(nets["W2"].shape)  # normalised first: 0.10, 1, 0.05, -0.89, -1
    conv2 = slice(2, 12)                                      # P2's ten channels
    assert sorting_permutation(nets, SortKey.FIRST)[conv2].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert sorting_permutation(nets, SortKey.MAX)[conv2].tolist() == [0, 2, 1, 3, 4, 5, 7, 6, 8, 9]
    assert sorting_permutation(nets, SortKey.FIRST_NORMALISED)[conv2].tolist() == [1, 0, 2, 3, 4, 6, 5, 7, 8, 9]
    assert REPRODUCED_SORT_KEY is SortKey.FIRST     # the authors' code's method "max"


def test_permutation_changes_counts_per_network_and_keeps_epoch_ends():
    # 2 networks, 3 epochs of 2 steps; network 1 swaps its head units at step 4 and back at step 5
    ident = torch.arange(15)
    swapped = ident.clone()
    swapped[12], swapped[13] = 13, 12
    perms = ident.repeat(7, 2, 1)
    perms[4, 1] = swapped
    out = permutation_changes(perms, steps_per_epoch=2)
    assert out["network_epoch_changes"].tolist() == [[0, 0], [0, 1], [0, 1]]
    assert out["epoch_perms"].shape == (4, 2, 15)
    assert torch.equal(out["epoch_perms"][-1], perms[-1])
    torch.testing.assert_close(out["per_epoch"], torch.tensor([0.0, 0.25, 0.25]))


def test_last_phase_is_after_the_last_learning_rate_drop():
    assert last_phase_start(QUICK, 14) == 7                                  # drops at 4 and 7
    assert last_phase_start(get_profile("02a_symmetry_removal", "full"), 60) == 30
    assert last_phase_start(dataclasses.replace(QUICK, optunet_milestones=()), 10) == 5


def test_each_reading_on_made_up_changes():
    early = [0.2, 0.2, 0.1, 0.05, 0.02, 0.01, 0.01]
    # 10 of 24 networks permute once in the last phase (100 steps each): never for most, rate 0.42 %
    some = _changes([*early, 0.004], late_changes=(1,) * 10 + (0,) * 14)
    assert rare_late(some, QUICK, Reading.NEVER)[0] is True
    assert rare_late(some, QUICK, Reading.RATE)[0] is True
    # every network permutes twice (undoing it): never fails, the rate too (2 %), the end order holds
    undone = _changes([*early, 0.02], late_changes=(2,) * 24)
    assert rare_late(undone, QUICK, Reading.NEVER)[0] is False
    assert rare_late(undone, QUICK, Reading.RATE)[0] is False
    assert rare_late(undone, QUICK, Reading.END_ORDER)[0] is True
    # half the networks end the last phase in another order: tau < 1 for 12 of 24 -> 50 % keep theirs
    moved = torch.arange(15).repeat(24, 1)
    moved[:12, 12], moved[:12, 13] = 13, 12
    ok, words = rare_late(_changes([*early, 0.0], end_perms=moved), QUICK, Reading.END_ORDER)
    assert ok is True and "50% of 24 networks" in words
    moved[12, 12], moved[12, 13] = 13, 12
    assert rare_late(_changes([*early, 0.0], end_perms=moved), QUICK, Reading.END_ORDER)[0] is False
    # the earlier relative reading: late must be below a fifth of the first quarter
    assert rare_late(_changes([0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.06, 0.05]), QUICK, Reading.EARLIER)[0] is False
    assert rare_late(_changes([0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.01, 0.01]), QUICK, Reading.EARLIER)[0] is True


def _judged(res, config=QUICK, robustness=None):
    results = RunResults({**res, "robustness": robustness or {}}, config=config)
    return {c.id: c for c in CHAPTER.judged_claims(results)}, results


def test_a_failing_reading_refutes_the_robust_column_only():
    """The reproduced verdict uses the authors' key and the "never for most networks" reading;
    another sort key or reading that fails makes the robust column "does not hold", naming it."""
    early = [0.2, 0.2, 0.1, 0.05, 0.02, 0.01, 0.01]
    holds = _changes([*early, 0.004], late_changes=(1,) * 10 + (0,) * 14)
    busy = _changes([*early, 0.02], late_changes=(2,) * 24)
    changes = {**holds, "by_key": {SortKey.FIRST.value: holds, SortKey.MAX.value: busy,
                                   SortKey.FIRST_NORMALISED.value: holds}}
    v, results = _judged(_made_up(changes=changes))
    claim = v["permutations-rare-late"]
    assert claim.holds is True and claim.robust is False
    assert SortKey.MAX.value in claim.robust_refuted
    frame = CHAPTER.sweep_frame(next(s for s in CHAPTER.sweeps if s.claim == claim.id), results)
    assert set(frame["choice"]) == {"as run", SORT_KEY_CHOICE, READING_CHOICE}
    assert len(frame) == 1 + 2 + 3
    kinds = {d.cause for d in claim.diagnosis}
    assert Cause.OPEN_CHOICE in kinds and {d.sweep for d in claim.diagnosis} >= {SORT_KEY_CHOICE, READING_CHOICE}


def test_diagnoses_count_the_budget_per_network_and_name_departures():
    busy = _all_keys(_changes([0.2, 0.2, 0.1, 0.05, 0.02, 0.01, 0.01, 0.02], late_changes=(2,) * 24))
    res = _made_up(changes=busy, mass__rows=[{"mass": 1.0, "min-mass": 0.995}] * 24,
                   optunets__n_train=4000, optunets__steps_per_epoch=62)
    v, _ = _judged(res)
    for cid in ("not-min-mass", "permutations-rare-late"):
        claim = v[cid]
        assert claim.holds is False and claim.column_verdict(Column.REPRODUCED) == "does not hold"
        words = {d.cause: d.detail for d in claim.diagnosis}
        assert words[Cause.BUDGET] == "14 of 60 epochs per network (23%); 24 of 1,000 networks"
        assert "4,000 training digits" in words[Cause.DATA] and "62 SGD steps per epoch" in words[Cause.DATA]
        assert words[Cause.PROTOCOL] == "learning rate halved at epochs 4 and 7 of 14 (the paper: 15 and 30 of 60)"
        assert Cause.CLAIM_FAILS not in words
    # at the paper's budget, data and schedule only the open choices and the claim itself remain
    paper = dataclasses.replace(get_profile("02a_symmetry_removal", "full"))
    big = _made_up(optunets__accuracy=torch.full((1000,), 0.95), optunets__restarts=torch.zeros(1000, dtype=torch.long),
                   optunets__n_train=60_000)
    given = diagnoses(RunResults({**big, "robustness": {("optunet_momentum", 0.0): {}}}, config=paper))
    causes = [d.cause for d in given["not-min-mass"]]
    assert causes == [Cause.OPEN_CHOICE, Cause.CLAIM_FAILS]
    assert given["not-min-mass"][0].sweep == "OptuNet momentum"
    # the toy at the paper's 10,000 perceptrons: the open choices the run swept, then the claim
    toy = diagnoses(RunResults({**_made_up(toy__n_trained=10_000),
                                "robustness": {("toy_means", ((-2.0, -2.0), (2.0, 2.0))): {}}}, config=QUICK))
    assert [d.cause for d in toy["toy-duplicated-modes"]] == [Cause.OPEN_CHOICE, Cause.CLAIM_FAILS]
    assert toy["toy-duplicated-modes"][0].sweep == "toy class means"
    small = diagnoses(RunResults({**_made_up(), "robustness": {}}, config=QUICK))  # 2,020 of 10,000 perceptrons
    assert small["identical-marginals"][0].detail == "2,020 of the paper's 10,000 perceptrons (20%)"
