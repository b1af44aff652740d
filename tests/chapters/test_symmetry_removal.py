"""Chapter 2a end to end in the smoke profile (cache and results redirected to tmp_path)."""

import dataclasses
import math

import matplotlib
import pandas as pd
import pytest
import torch
from scipy import stats

from symlib.book.preconditions import min_p_value
from symlib.book.results import Claim, Kind
from symlib.chapters import get_profile
from symlib.chapters import symmetry_removal as ex

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def results():
    # cache and results go to the session's temporary directories (tests/conftest.py)
    return ex.run(get_profile("02a_symmetry_removal", "smoke"), seed=0)


def test_smoke_run_structure(results):
    claims = [Claim(**c) for c in results["claims"]]
    assert [c.id for c in claims] == ["toy-duplicated-modes", "not-min-mass", "permutations-rare-late",
                                      "identical-marginals", "identical-marginals-optunet"]
    assert all(c.holds is None and "profile sized to judge" in c.verdict for c in claims)  # smoke
    assert all(c.criterion and c.kind is Kind.CLAIM for c in claims)
    assert [e["id"] for e in results["errata"]] == ["sort-key", "grouped-conv-count"]
    assert results["toy"]["n_trained"] == 200
    assert results["mass"]["max_output_change"] < 1e-8
    assert results["optunets"]["canonical_output_change"] < 1e-10
    assert all(r["min-mass"] <= r["mass"] * (1 + 1e-9) for r in results["mass"]["rows"])
    assert results["changes"]["mean_tau"].shape[0] == results["optunets"]["steps_per_epoch"]


def test_toy_removal_keeps_function_and_sorts(results):
    toy = results["toy"]
    assert toy["max_output_change"] < 1e-9
    if toy["n_kept"]:
        assert (toy["sorted"][:, 0] >= toy["sorted"][:, 1]).all()


def test_figures_and_tables(results):
    for fig in (ex.plot_toy(results["toy"]), ex.plot_mass(results["mass"]), ex.plot_kendall(results["changes"])):
        assert fig.axes
        matplotlib.pyplot.close(fig)
    modes = pd.DataFrame(results["modes"])
    assert "ResNet-18 (CIFAR-100)" in set(modes["network"])


def test_kendall_tau():
    p = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 3]])
    q = torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0]])
    torch.testing.assert_close(ex.kendall_tau(p, q), torch.tensor([1.0, -1.0]))
    torch.testing.assert_close(ex.kendall_tau(torch.tensor([0, 1, 2]), torch.tensor([1, 0, 2])),
                               torch.tensor(1 / 3))


def test_marginal_ks_detects_difference():
    gen = torch.Generator().manual_seed(0)
    same = torch.randn(500, 2, 1, generator=gen)
    assert ex.marginal_ks(same, 0.05)["rejected"] == 0.0
    diff = torch.cat([torch.randn(500, 1, 1, generator=gen), 1 + torch.randn(500, 1, 1, generator=gen)], 1)
    assert ex.marginal_ks(diff, 0.05)["rejected"] == 1.0


def _made_up(**change):
    """Results where every claim holds: a symmetric raw toy posterior, 99 % of runs kept,
    OptuNets at 95 % accuracy, a mass ratio of 0.8, permutations 20x rarer late, KS tests
    rejecting at their level before removal and always after (for the toy)."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(1000, 2, generator=gen)
    raw = torch.cat([a, a.flip(-1)])  # every mode twice: exactly symmetric
    toy = {"raw": raw, "sorted": raw.sort(-1, descending=True).values, "n_kept": 2000, "n_trained": 2020,
           "separable": True}
    ks = {"toy hidden layer, raw": {"rejected": 0.04, "tests": 3},
          "toy hidden layer, canonical": {"rejected": 1.0, "tests": 3},
          "OptuNet conv2, raw": {"rejected": 0.05, "tests": 500},
          "OptuNet conv2, canonical": {"rejected": 0.1, "tests": 500}}
    res = {"toy": toy, "ks": ks, "mass": {"rows": [{"mass": 1.0, "min-mass": 0.8}] * 24},
           "changes": {"per_epoch": torch.tensor([0.2, 0.2, 0.1, 0.05, 0.02, 0.01, 0.01, 0.01]),
                       "n_networks": 24},
           "optunets": {"accuracy": torch.full((24,), 0.95)}}
    for path, value in change.items():
        *outer, last = path.split("__")
        target = res
        for k in outer:
            target = target[k]
        target[last] = value
    return res


def _verdicts(res, config=None):
    config = config or get_profile("02a_symmetry_removal", "quick")
    return {c["id"]: Claim(**c) for c in ex.claims(res, config)}


def test_each_criterion_on_made_up_results():
    v = _verdicts(_made_up())
    assert all(c.holds is True for c in v.values()), {k: c.verdict for k, c in v.items()}
    raw = torch.tensor([[2.0, 1.0]] * 1000)  # one mode, never its permuted copy
    assert _verdicts(_made_up(toy__raw=raw))["toy-duplicated-modes"].holds is False
    one_at_min = [{"mass": 1.0, "min-mass": 0.8}] * 23 + [{"mass": 1.0, "min-mass": 0.995}]
    assert _verdicts(_made_up(mass__rows=one_at_min))["not-min-mass"].holds is False  # "always": every network
    flat = torch.tensor([0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.06, 0.05])  # late = early / 2
    assert _verdicts(_made_up(changes__per_epoch=flat))["permutations-rare-late"].holds is False
    toy_ks = {"rejected": 0.3, "tests": 3}
    ks = _made_up()["ks"]
    assert _verdicts(_made_up(ks={**ks, "toy hidden layer, raw": toy_ks}))["identical-marginals"].holds is False
    assert _verdicts(_made_up(ks={**ks, "toy hidden layer, canonical": {"rejected": 0.2, "tests": 3}})
                     )["identical-marginals"].holds is False
    assert _verdicts(_made_up(ks={**ks, "OptuNet conv2, raw": {"rejected": 0.2, "tests": 500}})
                     )["identical-marginals-optunet"].holds is False


def test_unmet_preconditions_give_not_judged():
    # 0.5 < 90 % of 95.3 %: every claim about trained OptuNets is withheld, the toy's are not
    v = _verdicts(_made_up(optunets__accuracy=torch.full((24,), 0.5)))
    for cid in ("not-min-mass", "permutations-rare-late", "identical-marginals-optunet"):
        assert v[cid].holds is None and "median OptuNet test accuracy" in v[cid].verdict, v[cid].verdict
    assert v["toy-duplicated-modes"].holds is True and v["identical-marginals"].holds is True
    few = _verdicts(_made_up(toy__n_kept=1500))  # 74 % of runs kept, the paper keeps 99 %
    assert few["toy-duplicated-modes"].holds is None and "toy runs" in few["toy-duplicated-modes"].verdict
    mixed = _verdicts(_made_up(toy__separable=False))
    assert mixed["identical-marginals"].holds is None and "separable" in mixed["identical-marginals"].verdict
    three = _verdicts(_made_up(optunets__accuracy=torch.full((3,), 0.95)))  # KS with 3 vs 3 cannot reach 0.05
    assert three["identical-marginals-optunet"].holds is None
    assert "KS test" in three["identical-marginals-optunet"].verdict
    assert three["not-min-mass"].holds is True
    smoke = _verdicts(_made_up(), get_profile("02a_symmetry_removal", "smoke"))
    assert all(c.holds is None and "profile" in c.verdict for c in smoke.values())


def test_ks_min_p_against_the_exact_count():
    # fully separated samples: the only ordering as extreme, of C(n + m, n), on each side
    for n, m in ((3, 3), (4, 4), (5, 7)):
        assert ex.ks_min_p(n, m) == pytest.approx(2 / math.comb(n + m, n))
        assert ex.ks_min_p(n, m) == pytest.approx(min_p_value("mannwhitney", n, m))
    assert ex.ks_min_p(3, 3) > 0.05 > ex.ks_min_p(5, 5)
    assert stats.ks_2samp([0, 1, 2], [3, 4, 5]).pvalue == pytest.approx(ex.ks_min_p(3, 3))


def test_errata_name_the_paper_and_the_correction():
    errata = {e["id"]: e for e in ex.errata()}
    assert "maximum" in errata["sort-key"]["paper_says"] and "first" in errata["sort-key"]["correction"]
    assert "172,800" in errata["grouped-conv-count"]["correction"]  # 2 x 5! x 5! x 3!


def test_robustness_tables_on_made_up_sweep():
    config = get_profile("02a_symmetry_removal", "quick")
    main = _made_up()
    raw = torch.tensor([[2.0, 1.0]] * 1000)
    sweep = [
        {"field": "toy_means", "value": "near", "choice": "toy class means", "stage": "toy",
         "config": config, "results": {"toy": {**main["toy"], "separable": False}, "ks": {}}},
        {"field": "toy_epochs", "value": 5, "choice": "toy epochs", "stage": "toy", "config": config,
         "results": {"toy": {**main["toy"], "raw": raw}, "ks": {}}},
    ]
    tables = ex.robustness_tables(main, sweep, config)
    assert set(tables) == {"toy-duplicated-modes", "identical-marginals"}  # the OptuNet claims are untouched
    t = tables["toy-duplicated-modes"]
    assert t["verdict"].tolist() == ["holds", "not judged", "does not hold"]
    assert ex.depends_on(t) == "depends on toy epochs; holds with this profile; not judged with toy_means = near"
    assert ex.depends_on(tables["identical-marginals"]) == (
        "holds under every setting judged; not judged with toy_means = near")


def test_smoke_robustness_stage(results):
    config = get_profile("02a_symmetry_removal", "smoke")
    sweep = ex.robustness(config, seed=0)
    assert [(s["field"], s["stage"]) for s in sweep] == [("toy_means", "toy"), ("optunet_momentum", "optunets")]
    assert sweep[0]["config"].toy_means == config.robustness[0][1]
    assert not torch.equal(sweep[0]["results"]["toy"]["raw"], results["toy"]["raw"])  # other data, other nets
    assert sweep[1]["config"].optunet_momentum == 0.0
    assert not torch.equal(sweep[1]["results"]["optunets"]["params"]["W1"], results["optunets"]["params"]["W1"])
    tables = ex.robustness_tables(results, sweep, config)
    assert set(tables) == {c["id"] for c in results["claims"]}
    assert all(len(t) == 2 for t in tables.values())  # the run and the one setting of its stage
    with pytest.raises(ValueError, match="not one of"):
        ex.robustness(dataclasses.replace(config, robustness=(("optunet_lr", 1.0),)), seed=0)
