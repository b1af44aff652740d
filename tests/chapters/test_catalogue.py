"""The chapter catalogue: every chapter's profiles, looked up by name."""

import dataclasses

import pytest

from symlib.book.profiles import PROFILE_NAMES
from symlib.chapters import CHAPTERS, all_profiles, chapter_module, get_profile

CHAPTER_PROFILES = all_profiles()


def test_every_chapter_has_all_three_frozen_profiles():
    for chapter, profiles in CHAPTER_PROFILES.items():
        assert tuple(profiles) == PROFILE_NAMES, chapter
        for profile in profiles.values():
            assert dataclasses.is_dataclass(profile)
            field = dataclasses.fields(profile)[0].name
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(profile, field, None)


def test_lookup():
    assert get_profile("00_symmetries", "quick") is CHAPTER_PROFILES["00_symmetries"]["quick"]


def test_unknown_profile_lists_valid_ones():
    with pytest.raises(ValueError, match="valid profiles: smoke, quick, full, paper"):
        get_profile("00_symmetries", "fast")


def test_unknown_chapter_lists_valid_ones():
    with pytest.raises(ValueError, match="00_symmetries"):
        get_profile("99_nope", "quick")


@pytest.mark.parametrize("bad", [3, None, ["quick"]])
def test_profile_of_wrong_type(bad):
    with pytest.raises(TypeError, match="profile must be a string"):
        get_profile("00_symmetries", bad)


def test_every_notebook_has_a_chapter_package_and_back():
    from pathlib import Path

    notebooks = {p.stem for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9]*.md")}
    assert notebooks == set(CHAPTERS)
    for chapter in CHAPTERS:
        module = chapter_module(chapter)
        assert module.PROFILES is CHAPTER_PROFILES[chapter]
        # every chapter is declared through the chapter contract (symlib.book.chapter)
        from symlib.book.chapter import Chapter

        declared = getattr(module, "CHAPTER", None)
        assert isinstance(declared, Chapter), f"{chapter} is not declared through the chapter contract"
        assert declared.name == chapter and declared.profiles is CHAPTER_PROFILES[chapter]
        assert not hasattr(module, "run"), f"{chapter} still has a run function beside its declaration"
