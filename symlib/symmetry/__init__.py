"""The symmetry group of a network, as data, and what it is used for.

- :mod:`~symlib.symmetry.group`: which weight axes each hidden permutation touches
  (:class:`PermutationSpec`, the idea of git re-basin), applying permutations, sign flips and
  positive scalings, sampling group elements, counting equivalent modes, canonicalisation;
- :mod:`~symlib.symmetry.conv_specs`: the specs of OptuNet and ResNet-18;
- :mod:`~symlib.symmetry.minmass`: the minimum scaled network mass (Laurent et al., 2024);
- :mod:`~symlib.symmetry.rebasin`: weight and activation matching (git re-basin) and the number
  of transpositions (Xiao et al., 2023).

Everything public is importable from here: ``from symlib.symmetry import canonicalise,
weight_matching``.
"""

from symlib.symmetry import conv_specs, group, minmass, rebasin
from symlib.symmetry.conv_specs import (
    optunet_permutation_spec,
    resnet_permutation_spec,
)
from symlib.symmetry.group import (
    GroupElement,
    PermutationSpec,
    Symmetry,
    allowed_symmetries,
    apply_group_element,
    canonicalise,
    canonicalising_element,
    centre_output_bias,
    compose,
    discrete_group_order,
    identity_element,
    inverse,
    log10_permutation_group_order,
    mlp_permutation_spec,
    permutation_group_order,
    sample_group_element,
    sample_spec_element,
    shift_output_bias,
    spec_log10_order,
)
from symlib.symmetry.minmass import (
    MassTerms,
    MinMassSolver,
    closed_form_one_hidden,
    mass,
    mass_terms,
    min_mass,
    min_mass_element,
    scales_from_log,
    solve_min_mass,
    solve_min_mass_scipy,
    weight_keys,
)
from symlib.symmetry.rebasin import (
    activation_matching,
    cycles,
    hidden_activations,
    interpolate,
    matching_objective,
    number_of_transpositions,
    permutation_with_not,
    total_not,
    weight_matching,
)

__all__ = [
    "GroupElement",
    "MassTerms",
    "MinMassSolver",
    "PermutationSpec",
    "Symmetry",
    "activation_matching",
    "allowed_symmetries",
    "apply_group_element",
    "canonicalise",
    "canonicalising_element",
    "centre_output_bias",
    "closed_form_one_hidden",
    "compose",
    "conv_specs",
    "cycles",
    "discrete_group_order",
    "group",
    "hidden_activations",
    "identity_element",
    "interpolate",
    "inverse",
    "log10_permutation_group_order",
    "mass",
    "mass_terms",
    "matching_objective",
    "min_mass",
    "min_mass_element",
    "minmass",
    "mlp_permutation_spec",
    "number_of_transpositions",
    "optunet_permutation_spec",
    "permutation_group_order",
    "permutation_with_not",
    "rebasin",
    "resnet_permutation_spec",
    "sample_group_element",
    "sample_spec_element",
    "scales_from_log",
    "shift_output_bias",
    "solve_min_mass",
    "solve_min_mass_scipy",
    "spec_log10_order",
    "total_not",
    "weight_keys",
    "weight_matching",
]
