"""Sizes that expose every term: inputs on which a wrong formula cannot pass for the right one.

A case catches a wrong term only where that term moves the output by more than the tolerance.
A label-smoothing weight of eps / (V - 1) instead of eps / V differs by eps / V**2 per element:
at V >= 1000 that is under any absolute tolerance, so a suite of large vocabularies passes the
wrong kernel. The same holds for an eps next to a large mean square, a mean over n - 1 at large
n, a bias next to large outputs.

``assert_exposes`` checks a case's inputs against such alternatives: what a kernel with one
term wrong would compute, evaluated by the reference (in fp64) on those inputs. Each must lie
further from the right result than ``margin`` times the case's bound somewhere, so that a
kernel computing it fails the case even after its own rounding (at most half an ulp, within
any bound of two ulps or more when ``margin`` is 2). A test that checks a kernel on the inputs
and also calls ``assert_exposes`` on them states which wrong terms it would catch, and fails
if a change of sizes or values makes one of them vanish.
"""

from collections.abc import Mapping

import torch

from roofwatch.tolerances import Tolerance

__all__ = ["assert_exposes"]


def assert_exposes(
    expected: torch.Tensor, alternatives: Mapping[str, torch.Tensor], tolerance: Tolerance, margin: float = 2.0
) -> dict[str, float]:
    """Check that each alternative result is told apart from ``expected`` under ``tolerance``.

    Args:
        expected: the right result on the case's inputs, ideally fp64; finite.
        alternatives: by name (the wrong term, e.g. ``"eps / (V - 1)"``), what a kernel with
            that term wrong would compute on the same inputs, shaped like ``expected``.
        tolerance: the element-wise bound the case holds the kernel to.
        margin: how many times the bound the largest difference must reach.

    Returns:
        For each alternative, its largest difference from ``expected`` in units of the bound
        (``inf`` where it is NaN/Inf and ``expected`` is not: that fails any check).

    Raises:
        AssertionError: naming every alternative that no element separates by ``margin``.
    """
    want = expected.detach().to(torch.float64)
    if not torch.isfinite(want).all():
        raise AssertionError("the right result contains NaN/Inf; the case's inputs are invalid")
    bound = tolerance.atol + tolerance.rtol * want.abs()
    reach: dict[str, float] = {}
    for name, alternative in alternatives.items():
        if alternative.shape != want.shape:
            raise AssertionError(f"{name}: shape {tuple(alternative.shape)} != expected {tuple(want.shape)}")
        other = alternative.detach().to(torch.float64)
        if not torch.isfinite(other).all():
            reach[name] = float("inf")
            continue
        reach[name] = float(((other - want).abs() / bound).max()) if want.numel() else 0.0
    hidden = {name: value for name, value in reach.items() if not value >= margin}
    if hidden:
        described = ", ".join(f"{name!r} (at most {value:.3g} x the bound)" for name, value in hidden.items())
        raise AssertionError(
            f"these inputs cannot tell {len(hidden)} wrong formula(s) from the right result under "
            f"atol={tolerance.atol:g} rtol={tolerance.rtol:g} with margin {margin:g}: {described}; "
            "pick sizes or values where the term matters"
        )
    return reach
