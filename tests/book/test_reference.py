import pytest

from symlib.book.reference import PAPERS
from symlib.chapters import reported
from symlib.chapters.constrained_models.paper import REPORTED as POURZANJANI
from symlib.chapters.posterior_mmd.paper import REPORTED as LAURENT
from symlib.chapters.rebasin_hmc.paper import REPORTED as XIAO
from symlib.chapters.sgm_vi.paper import REPORTED as GELBERG

REPORTED = LAURENT | GELBERG | POURZANJANI | XIAO


def test_every_table_is_rectangular_and_cited():
    for key, table in REPORTED.items():
        assert table.paper in PAPERS, key
        assert table.where and key.startswith(table.paper + "/")
        assert all(len(row) == len(table.columns) for row in table.rows), key
        assert table.frame().shape == (len(table.rows), len(table.columns))


def test_spot_values_match_the_papers():
    t1 = reported("laurent2024/table1_mnist").frame().set_index(["modes", "method"])
    assert t1.loc[("multi", "DE"), "FPR95"] == 12.8
    assert reported("xiao2023/table1").frame().iloc[2, 3] == 82.34


def test_unknown_key():
    with pytest.raises(KeyError, match="known:"):
        reported("nope")
