"""The API reference pages: generated, current, and every public name documented once."""

import importlib
from collections import Counter

from symlib.book import apidoc


def test_committed_pages_are_the_generated_ones():
    assert apidoc.write(check=True) == [], "run `python -m symlib.book.apidoc` and commit book/api/"


def test_every_public_name_is_documented_once_at_its_public_home():
    homes = Counter()
    for name in apidoc.PAGES:
        for module, exclude in apidoc.documented(name):
            module, _, flag = module.partition("|")
            if flag == "no-members":
                continue
            mod = importlib.import_module(module)
            names = getattr(mod, "__all__", None) or [n for n, v in vars(mod).items()
                                                     if not n.startswith("_") and getattr(v, "__module__", None) == module]
            for n in names:
                obj = getattr(mod, n, None)
                if obj is None or isinstance(obj, type(importlib)):  # submodules are pages' own blocks
                    continue
                if n not in exclude:
                    homes[id(obj), n] += 1
    twice = [n for (_, n), count in homes.items() if count > 1]
    assert not twice, f"documented more than once: {twice}"
    # a re-exported function is documented on its package, not on its module
    assert "min_mass" in dict(apidoc.documented("symmetry"))["symlib.symmetry.minmass"]
