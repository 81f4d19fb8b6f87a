"""Layouts as a test dimension: the same logical tensors, each in a physical layout of its own.

A kernel that addresses one tensor with another tensor's stride (input rows with the output's
row stride, K with Q's head stride, the sin table with the cos table's) passes every test in
which all the tensors of a call share one layout, as they do when every test makes them the same
way. In a model they do not: a KV cache is laid out unlike q, rotary tables are slices of wider
caches, gate and up come from different projections, outputs are fresh while inputs are views.

``layout_cases`` turns a table of the layouts each tensor of a call may take into test cases in
which every tensor takes each of its layouts at least once and the tensors of a case differ
from each other; ``LayoutCase.input`` and ``LayoutCase.output`` then put a tensor into its layout:

``contiguous``
    a fresh row-major tensor (followed by ``GUARD`` elements, as ``guarded`` places them).
``padded``
    a view into a buffer larger in every dimension, starting past its first element: every
    stride differs from the row-major one, as for a slice of a wider tensor or a cache.
``permuted``
    the leading dimensions stored in reverse order, the last one innermost, padded: a
    ``(batch, heads, seq, dim)`` tensor stored as ``(seq, heads, batch, dim)``, with batch and
    head strides unlike a row-major tensor's (as a KV cache's are unlike q's). Below three
    dimensions it is ``padded``.
``transposed``
    the last two dimensions swapped in memory (column-major for a matrix), padded: the last
    dimension is not unit-stride. A 1-D tensor is ``strided``.
``strided``
    every other element of a padded buffer along the last dimension (stride 2 there).

Padding grows with a tensor's position in the case (its slot), so no two tensors of one shape in
a case have the same strides unless both are ``contiguous``. The buffer around a view holds ``fill``: a
finite canary for inputs (a lane that reads outside its tensor reads a wrong value) and NaN for
outputs, which ``Placed.assert_outside_intact`` checks afterwards (a lane that writes outside
its tensor shows). A kernel that cannot take a layout must refuse it with a clear error instead
of misreading it; a test lists those layouts and checks the refusal.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from roofwatch.checks import GUARD, INPUT_CANARY

__all__ = ["LAYOUTS", "LayoutCase", "Placed", "layout_cases", "place"]

LAYOUTS: tuple[str, ...] = ("contiguous", "padded", "permuted", "transposed", "strided")


@dataclass(frozen=True)
class Placed:
    """A tensor in its layout: ``tensor`` is a view into ``buffer``, whose other elements
    held ``fill`` when it was placed."""

    tensor: torch.Tensor
    buffer: torch.Tensor
    layout: str
    _outside: torch.Tensor = field(repr=False)  # bool mask of the buffer elements outside the view
    _fill: float = field(repr=False)

    def assert_outside_intact(self, name: str) -> None:
        """Fail if the kernel changed any element of the buffer outside ``tensor``."""
        outside = self.buffer[self._outside]
        changed = ~outside.isnan() if math.isnan(self._fill) else outside != self._fill
        if changed.any():
            raise AssertionError(
                f"wrote outside {name} ({self.layout}, strides {self.tensor.stride()}): {int(changed.sum())} "
                f"of the {outside.numel()} elements around it changed (first now {outside[changed][0].item()!r})"
            )


def _storage_order(ndim: int, layout: str) -> list[int]:
    """Dimensions from outermost to innermost in memory."""
    dims = list(range(ndim))
    if layout == "permuted" and ndim >= 3:
        return dims[-2::-1] + [ndim - 1]
    if layout == "transposed" and ndim >= 2:
        return dims[:-2] + [ndim - 1, ndim - 2]
    return dims


def _geometry(shape: Sequence[int], layout: str, slot: int) -> tuple[list[int], int, int]:
    """``(strides, offset, buffer elements)`` of a ``shape`` tensor in ``layout`` at ``slot``."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; expected one of {LAYOUTS}")
    ndim = len(shape)
    if layout == "transposed" and ndim < 2:
        layout = "strided"
    padding = 0 if layout == "contiguous" else 1 + slot
    order = _storage_order(ndim, layout)
    strides = [0] * ndim
    if ndim:
        # The innermost dimension: every element (every other one when strided), then padding.
        inner = order[-1]
        strides[inner] = 2 if layout == "strided" else 1
        stride = strides[inner] * shape[inner] + padding
        for dim in reversed(order[:-1]):
            strides[dim] = stride
            stride *= shape[dim] + padding
    offset = padding
    last = offset + sum((size - 1) * s for size, s in zip(shape, strides)) if all(shape) else offset
    return strides, offset, last + 1 + GUARD


def place(x: torch.Tensor, layout: str, *, slot: int = 0, fill: float = float("nan")) -> Placed:
    """``x``'s values in ``layout`` (see the module docstring), in a buffer otherwise holding ``fill``.

    ``slot`` sets the padding (``1 + slot`` elements per dimension) so that tensors placed at
    different slots get different strides.
    """
    strides, offset, size = _geometry(x.shape, layout, slot)
    buffer = torch.full((size,), fill, dtype=x.dtype, device=x.device)
    view = buffer.as_strided(x.shape, strides, offset)
    view.copy_(x)
    outside = torch.ones(size, dtype=torch.bool, device=x.device)
    outside.as_strided(x.shape, strides, offset).fill_(False)
    return Placed(view, buffer, layout, outside, fill)


@dataclass(frozen=True)
class LayoutCase:
    """One assignment of a layout to each tensor of a call; ``str(case)`` is its test id."""

    layouts: tuple[tuple[str, str], ...]  # (tensor name, layout), in slot order

    def __str__(self) -> str:
        return ",".join(f"{name}={layout}" for name, layout in self.layouts)

    def layout(self, name: str) -> str:
        """The layout ``name`` takes in this case."""
        return dict(self.layouts)[name]

    def input(self, name: str, x: torch.Tensor, fill: float = INPUT_CANARY) -> Placed:
        """Input ``x`` in the layout this case gives ``name``, surrounded by a finite canary."""
        return place(x, self.layout(name), slot=self._slot(name), fill=fill)

    def output(self, name: str, like: torch.Tensor, fill: float = float("nan")) -> Placed:
        """A ``fill`` (NaN) tensor shaped like ``like`` in the layout this case gives ``name``."""
        return place(torch.full_like(like, fill), self.layout(name), slot=self._slot(name), fill=fill)

    def _slot(self, name: str) -> int:
        return [n for n, _ in self.layouts].index(name)


def layout_cases(layouts: Mapping[str, Sequence[str]]) -> list[LayoutCase]:
    """Cases for a call whose tensors may take the given layouts, each tensor independently.

    ``layouts`` maps each tensor's name to the layouts it may take (those the kernel computes
    right). Case ``i`` gives the ``j``-th tensor its layout number ``(i + j) mod k``, ``k`` being
    how many it has: each tensor takes each of its layouts at least once, and two tensors with
    the same list take the same layout in a case only when their positions in ``layouts`` are
    ``k`` or a multiple of it apart. There are as many cases as the longest list.
    """
    if not layouts or any(not options for options in layouts.values()):
        raise ValueError("every tensor needs at least one layout")
    for name, options in layouts.items():
        unknown = set(options) - set(LAYOUTS)
        if unknown:
            raise ValueError(f"unknown layouts {sorted(unknown)} for {name}; expected some of {LAYOUTS}")
    count = max(len(options) for options in layouts.values())
    return [
        LayoutCase(tuple((name, options[(i + j) % len(options)]) for j, (name, options) in enumerate(layouts.items())))
        for i in range(count)
    ]
