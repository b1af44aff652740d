import dataclasses

import pytest

from symlib.profiles import CHAPTER_PROFILES, PROFILE_NAMES, get_profile


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
    with pytest.raises(ValueError, match="valid profiles: smoke, quick, paper"):
        get_profile("00_symmetries", "fast")


def test_unknown_chapter_lists_valid_ones():
    with pytest.raises(ValueError, match="00_symmetries"):
        get_profile("99_nope", "quick")


@pytest.mark.parametrize("bad", [3, None, ["quick"]])
def test_profile_of_wrong_type(bad):
    with pytest.raises(TypeError, match="profile must be a string"):
        get_profile("00_symmetries", bad)
