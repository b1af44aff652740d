"""Named random streams (symlib.book.streams): distinct names never share a stream, one name is
one stream in every process, and the derivation is pinned."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from symlib.book import streams
from symlib.book.streams import Stream, check_distinct

NAMES = [
    ("05_rebasin_hmc", "vi", "init"),
    ("05_rebasin_hmc", "vi", "mc-noise"),
    ("05_rebasin_hmc", "not", "init"),
    ("05_rebasin_hmc", "ensemble", "init"),
    ("06_synthesis", "gold", "hmc"),
    ("06_synthesis", "gold", "init"),
    ("03_sgm_vi", "mnist", "minibatches"),
    ("a-b", "c", "d"),
    ("a", "b-c", "d"),  # a joined "a-b-c-d" would make these two one name
]


def _draws(stream: Stream) -> dict:
    return {
        "seed63": stream.seed63(),
        "stan_seed": stream.stan_seed(),
        "torch": torch.randint(0, 2**31, (3,), generator=stream.torch()).tolist(),
        "numpy": stream.numpy().integers(0, 2**31, 3).tolist(),
    }


def test_golden_values_pin_the_derivation():
    # a change of encode(), DERIVATION or the bit slicing changes every chapter's numbers:
    # update these only together with the stages' versions (issue 27, step 5)
    stream = Stream(0, "05_rebasin_hmc", "vi", "init")
    assert streams.encode(0, "05_rebasin_hmc", "vi", "init") == (
        b'{"chapter":"05_rebasin_hmc","derivation":"symlib.streams/1","purpose":"init","seed":0,"stage":"vi"}'
    )
    assert stream.digest.hex() == "08cf2e4da0d7af62eb4e3317023065f07f8a5228642a2a44abc3dff179e8ed86"
    assert _draws(stream) == {
        "seed63": 317388491714189233,
        "stan_seed": 1973885323,
        "torch": [1461560333, 874282677, 1913194509],
        "numpy": [1659567130, 990196386, 1395955998],
    }


def test_same_name_same_stream_in_another_process():
    names = [(7, *n) for n in NAMES[:3]]
    code = (
        "import json, sys, torch\n"
        "from symlib.book.streams import Stream\n"
        "out = []\n"
        "for n in json.loads(sys.argv[1]):\n"
        "    s = Stream(*n)\n"
        "    out.append({'seed63': s.seed63(), 'stan_seed': s.stan_seed(),\n"
        "                'torch': torch.randint(0, 2**31, (3,), generator=s.torch()).tolist(),\n"
        "                'numpy': s.numpy().integers(0, 2**31, 3).tolist()})\n"
        "print(json.dumps(out))\n"
    )
    # another hash seed: nothing may depend on Python's randomised str hash
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    run = subprocess.run([sys.executable, "-c", code, json.dumps(names)], capture_output=True, text=True,
                         env=env, check=True, timeout=120)
    assert json.loads(run.stdout) == [_draws(Stream(*n)) for n in names]


def test_fresh_generators_restart_the_stream_and_touch_no_global_state():
    stream = Stream(3, "06_synthesis", "gold", "hmc")
    torch.manual_seed(0)
    np.random.seed(0)
    before_torch, before_numpy = torch.get_rng_state(), np.random.get_state()[1].copy()
    first, second = stream.torch(), stream.torch()
    assert torch.equal(torch.rand(5, generator=first), torch.rand(5, generator=second))
    assert np.array_equal(stream.numpy().random(5), stream.numpy().random(5))
    assert torch.equal(torch.get_rng_state(), before_torch)
    assert np.array_equal(np.random.get_state()[1], before_numpy)


def test_no_two_names_share_a_stream_over_many_seeds():
    # 1000 consecutive seeds and the seeds an arithmetic scheme derives (seed * 1000 + k), each
    # with every name: all seed63 distinct, so seed s / purpose p never aliases seed s' / p'
    seeds = sorted(set(range(1000)) | {s * 1000 + k for s in range(5) for k in range(5)})
    all_streams = [Stream(seed, *name) for seed in seeds for name in NAMES]
    seed63s = [s.seed63() for s in all_streams]
    assert len(set(seed63s)) == len(all_streams)
    assert all(0 <= v < 2**63 for v in seed63s)
    assert all(0 <= s.stan_seed() < 2**31 for s in all_streams[:2000])


def test_chapter_5_aliasing_cannot_happen():
    # chapter 5 seeds its VI initial means and its VI Monte Carlo noise both with seed * 1000 + 2,
    # and the NoT run of seed 1 draws the ensemble's stream: named streams keep all apart
    chapter = "05_rebasin_hmc"
    named = [Stream(seed, chapter, stage, purpose)
             for seed in range(3)
             for stage, purpose in [("vi", "init"), ("vi", "mc-noise"), ("not", "init"), ("ensemble", "init")]]
    check_distinct(named)
    draws = {s.name: tuple(torch.rand(4, generator=s.torch()).tolist()) for s in named}
    assert len(set(draws.values())) == len(named)
    assert Stream(0, chapter, "vi", "init").seed63() != Stream(1002, chapter, "vi", "init").seed63()


def test_each_field_changes_the_stream():
    base = Stream(0, "c", "s", "p")
    for changed in (Stream(1, "c", "s", "p"), Stream(0, "c2", "s", "p"), Stream(0, "c", "s2", "p"),
                    Stream(0, "c", "s", "p2"), Stream(0, "s", "c", "p"), Stream(0, "c", "p", "s")):
        assert changed.digest != base.digest
        assert changed.seed63() != base.seed63() and changed.stan_seed() != base.stan_seed()


def test_check_distinct_names_the_streams_that_coincide():
    a = Stream(0, "05_rebasin_hmc", "vi", "init")
    with pytest.raises(ValueError, match=r"seed 0 / 05_rebasin_hmc / vi / init.*coincide \(same name"):
        check_distinct([a, Stream(0, "05_rebasin_hmc", "vi", "mc-noise"), Stream(0, "05_rebasin_hmc", "vi", "init")])
    with pytest.raises(ValueError, match="coincide"):
        check_distinct([a, a])
    with pytest.raises(TypeError, match="Stream objects"):
        check_distinct([a, 5])
    check_distinct(Stream(0, *n) for n in NAMES)


def test_module_functions_are_the_stream_methods():
    name = (4, "03_sgm_vi", "mnist", "minibatches")
    stream = Stream(*name)
    assert streams.seed63(*name) == stream.seed63()
    assert streams.stan_seed(*name) == stream.stan_seed()
    assert torch.equal(torch.rand(3, generator=streams.torch_generator(*name)), torch.rand(3, generator=stream.torch()))
    assert np.array_equal(streams.numpy_generator(*name).random(3), stream.numpy().random(3))


def test_torch_generator_is_on_the_device_asked():
    assert Stream(0, "c", "s", "p").torch(torch.device("cpu")).device == torch.device("cpu")
    with pytest.raises(ValueError, match="cannot make a torch.Generator on device 'nonsense'.*seed 0 / c / s / p"):
        Stream(0, "c", "s", "p").torch("nonsense")


@pytest.mark.parametrize(("seed", "error", "match"), [
    (True, TypeError, "seed must be a non-negative int; got True of type bool"),
    (1.0, TypeError, "of type float"),
    ("0", TypeError, "of type str"),
    (-1, ValueError, r"seed must be in \[0, 2\*\*64\); got -1"),
    (2**64, ValueError, "got 18446744073709551616"),
])
def test_bad_seed_is_refused_clearly(seed, error, match):
    with pytest.raises(error, match=match):
        Stream(seed, "c", "s", "p")


@pytest.mark.parametrize(("field", "value", "error", "match"), [
    ("chapter", None, TypeError, "stream chapter must be a string; got None"),
    ("stage", "", ValueError, "stream stage must be a non-empty string"),
    ("purpose", " init", ValueError, "without surrounding whitespace; got ' init'"),
    ("purpose", 3, TypeError, "stream purpose must be a string; got 3 of type int"),
])
def test_bad_name_is_refused_clearly(field, value, error, match):
    fields = {"seed": 0, "chapter": "c", "stage": "s", "purpose": "p", field: value}
    with pytest.raises(error, match=match):
        Stream(**fields)


def test_a_stream_is_a_value():
    assert Stream(0, "c", "s", "p") == Stream(0, "c", "s", "p")
    assert len({Stream(0, "c", "s", "p"), Stream(0, "c", "s", "p")}) == 1
    with pytest.raises(AttributeError):
        Stream(0, "c", "s", "p").seed = 1  # frozen: a stream's name cannot drift after it is made
