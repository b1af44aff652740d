import pytest
import torch

from symlib.book import runtime
from symlib.chapters.symmetries import PROFILES


def test_auto_and_cpu():
    assert runtime.resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert runtime.resolve_device("auto").type == expected
    assert runtime.resolve_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.parametrize("name", ["gpu", "cuda0", "tpu", ""])
def test_unknown_device_lists_valid(name):
    with pytest.raises(ValueError, match="valid: 'auto', 'cpu', 'cuda'"):
        runtime.resolve_device(name)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize("name", ["cuda", "cuda:0", "CUDA"])
def test_cuda_without_gpu_names_the_fix(name):
    with pytest.raises(ValueError, match="sees no CUDA GPU.*use device='cpu' or 'auto'"):
        runtime.resolve_device(name)


@pytest.mark.parametrize("bad", [0, 1.5, None])
def test_device_of_wrong_type(bad):
    with pytest.raises(TypeError, match="device must be a string"):
        runtime.resolve_device(bad)


@pytest.mark.parametrize("bad", ["0", 1.0, True, None])
def test_seed_of_wrong_type(bad):
    with pytest.raises(TypeError, match="seed must be a non-negative integer"):
        runtime.check_seed(bad)


def test_negative_seed():
    with pytest.raises(ValueError):
        runtime.check_seed(-1)


def test_start_validates_everything_and_opens_a_ledger():
    run = runtime.start("00_symmetries", PROFILES, profile="smoke", seed=3, device="cpu")
    assert run.seed == 3 and run.device == torch.device("cpu") and run.results.profile == "smoke"
    a, b = run.generator(), run.generator()
    assert torch.equal(torch.rand(3, generator=a), torch.rand(3, generator=b))
    with pytest.raises(ValueError, match="valid profiles"):
        runtime.start("00_symmetries", PROFILES, profile="papr", seed=0, device="cpu")
    with pytest.raises(TypeError):
        runtime.start("00_symmetries", PROFILES, profile="quick", seed="0", device="cpu")


def test_torch_threads_restores_even_on_error():
    before = torch.get_num_threads()
    with runtime.torch_threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), runtime.torch_threads(1):
        assert torch.get_num_threads() == 1
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


def test_seed_leaves_room_for_the_chapters_seed_arithmetic():
    # the issue: 10**17 passed and then overflowed in chapter 5 (seed * 1000 + 2)
    assert runtime.check_seed(2**32 - 1) == 2**32 - 1
    torch.Generator().manual_seed((2**32 - 1) * 1000 + 5)  # chapter 5's largest derived seed fits
    for seed in (2**32, 10**17, 2**63, 99999999999999999999999):
        with pytest.raises(ValueError, match="seed must be below 2\\*\\*32 .*seed \\* 1000"):
            runtime.check_seed(seed)
    with pytest.raises(ValueError, match="below 2\\*\\*32"):
        runtime.start("00_symmetries", PROFILES, profile="smoke", seed=10**17, device="cpu")


def test_start_fails_at_once_when_results_cannot_be_written(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SYMLIB_RESULTS", str(blocker))
    with pytest.raises(OSError, match="set SYMLIB_RESULTS to a writable directory"):
        runtime.start("00_symmetries", PROFILES, profile="smoke", seed=0, device="cpu")
    assert blocker.read_text() == "not a directory"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_a_gpu_run_can_be_rerendered_from_its_cache_without_a_gpu(monkeypatch):
    with pytest.raises(ValueError, match="sees no CUDA GPU"):
        runtime.resolve_device("cuda")
    monkeypatch.setenv("SYMLIB_CACHED_ONLY", "1")
    assert runtime.resolve_device("cuda") == torch.device("cuda")  # a cache key and a label, nothing runs


def test_the_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(runtime.BUDGET_ENV, raising=False)
    assert runtime.budget_from_env() is None and runtime.piece_deadline() is None
    monkeypatch.setenv(runtime.BUDGET_ENV, "90")
    assert runtime.budget_from_env() == 90.0
    for bad in ("soon", "0", "-5"):
        monkeypatch.setenv(runtime.BUDGET_ENV, bad)
        with pytest.raises(ValueError, match=runtime.BUDGET_ENV):
            runtime.budget_from_env()


def test_the_deadline_counts_from_the_piece_start(monkeypatch):
    """``$SYMLIB_BUDGET_S`` seconds from ``$SYMLIB_PIECE_START`` (from now when unset), so that a
    stage starting late in a piece gets only what is left of it."""
    import time

    monkeypatch.setenv(runtime.BUDGET_ENV, "90")
    monkeypatch.delenv(runtime.PIECE_START_ENV, raising=False)
    before = time.time()
    assert before + 90 <= runtime.piece_deadline() <= time.time() + 90
    monkeypatch.setenv(runtime.PIECE_START_ENV, "1000.5")
    assert runtime.piece_deadline() == 1090.5
    monkeypatch.setenv(runtime.PIECE_START_ENV, "yesterday")
    with pytest.raises(ValueError, match=runtime.PIECE_START_ENV):
        runtime.piece_deadline()


def test_start_hands_the_deadline_to_every_stage(monkeypatch, tmp_path):
    """The run layer reads the budget once; the chapter's stages get it as ``ctx.deadline``."""
    from dataclasses import dataclass

    from symlib.book.chapter import Chapter, Stage

    @dataclass(frozen=True)
    class P:
        a: int = 1

    seen = []
    chapter = Chapter(name="99_deadline", paper="none", profiles={"smoke": P()}, claims=lambda r: [], stages=(
        Stage("s", lambda ctx: seen.append(ctx.deadline) or 1, fields=("a",), cache=False),
        Stage("fan", lambda ctx, item: seen.append((item, ctx.deadline)) or item, fields=("a",), cache=False,
              items=lambda config: [1, 2])))
    monkeypatch.setenv("SYMLIB_RESULTS", str(tmp_path))
    monkeypatch.setenv(runtime.BUDGET_ENV, "30")
    monkeypatch.setenv(runtime.PIECE_START_ENV, "2000.0")
    run = runtime.start(chapter.name, chapter.profiles, profile="smoke", seed=0, device="cpu")
    assert run.deadline == 2030.0
    chapter.compute(run)
    monkeypatch.delenv(runtime.BUDGET_ENV)
    chapter.compute(runtime.start(chapter.name, chapter.profiles, profile="smoke", seed=0, device="cpu"))
    assert seen == [2030.0, (1, 2030.0), (2, 2030.0), None, (1, None), (2, None)]
