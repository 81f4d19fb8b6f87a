"""Exact comparison of compiled kernels and the decisions drawn from it: table-driven."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from roofwatch.service.analysis.compiled import BinaryVerdict, binary_verdict, confirm_timing_change, diff, for_tests


@dataclass(frozen=True)
class Art:
    kernel: str = "kernels.matmul._matmul_kernel"
    specialization: str = "bf16, BLOCK_M=128, w8 s3"
    target: str = "sm_90"
    status: str = "compiled"
    reason: str = ""
    registers: int | None = 168
    spill_bytes: int | None = 0
    shared_bytes: int | None = 65536
    instructions: dict[str, int] = field(default_factory=lambda: {"wgmma": 64, "fp32": 100})
    sass_hash: str = "a" * 64
    toolchain: str = "triton 3.9.0, ptxas 12.9.86"
    tests: list[str] = field(default_factory=lambda: ["test_matmul[4096-bf16]"])


BASE = Art()


@pytest.mark.parametrize(("head", "line", "flags"), [
    (replace(BASE, sass_hash="b" * 64, registers=232, spill_bytes=96, instructions={"fp32": 100}),
     "_matmul_kernel[bf16, BLOCK_M=128, w8 s3] sm_90: registers 168 → 232, spills 0 B → 96 B, wgmma 64 → 0",
     ("spills appeared (96 B per thread)", "wgmma instructions disappeared")),
    (replace(BASE, sass_hash="b" * 64, instructions={"wgmma": 64, "fp32": 40, "bf16": 60}),
     "_matmul_kernel[bf16, BLOCK_M=128, w8 s3] sm_90: fp32 100 → 40, bf16 0 → 60",
     ("math moved from fp32 to a narrower type",)),
    (replace(BASE, sass_hash="b" * 64),
     "_matmul_kernel[bf16, BLOCK_M=128, w8 s3] sm_90: same counts, different SASS", ()),
    (replace(BASE, specialization="bf16, BLOCK_M=256, w8 s3", sass_hash="b" * 64, shared_bytes=131072),
     "_matmul_kernel[bf16, BLOCK_M=128, w8 s3 → bf16, BLOCK_M=256, w8 s3] sm_90: shared 65536 B → 131072 B", ()),
    (replace(BASE, specialization="bf16, BLOCK_M=512, w8 s3", status="failed", reason="out of resource: shared memory"),
     "_matmul_kernel[bf16, BLOCK_M=128, w8 s3 → bf16, BLOCK_M=512, w8 s3] sm_90: no longer compiles: "
     "out of resource: shared memory", ("no longer compiles",)),
])
def test_diff_lines_and_flags(head: Art, line: str, flags: tuple[str, ...]) -> None:
    [found] = diff([BASE], [head])
    assert (found.line(), found.flags, found.matters) == (line, flags, bool(flags))


def test_identical_binaries_have_no_diff_and_unpairable_specializations_stay_apart() -> None:
    assert diff([BASE], [replace(BASE)]) == []
    other = replace(BASE, specialization="fp16, BLOCK_M=64, w4 s3", tests=["test_other"])
    kinds = [(d.specialization, d.kind) for d in diff([BASE], [other])]
    assert kinds == [("bf16, BLOCK_M=128, w8 s3", "removed"), ("fp16, BLOCK_M=64, w4 s3", "added")]


def test_for_tests_keeps_the_kernels_a_benchmark_launched() -> None:
    other = replace(BASE, kernel="kernels.copy._copy_kernel", tests=["test_copy[1M-fp32]"])
    assert for_tests([BASE, other], ["test_copy[1M-fp32]"]) == [other]


@pytest.mark.parametrize(("base", "head", "identical"), [
    ([BASE], [BASE], True),
    ([BASE], [replace(BASE, sass_hash="c" * 64)], False),
    ([], [BASE], None),  # nothing to compare with
    ([BASE], [replace(BASE, toolchain="triton 3.10.0, ptxas 12.9.86")], None),  # another compiler: a new epoch
])
def test_binary_verdict(base: list[Art], head: list[Art], identical: bool | None) -> None:
    assert binary_verdict(base, head).identical is identical


@pytest.mark.parametrize(("identical", "change_pct", "threshold_pct", "report", "says"), [
    (True, 5.0, 4.0, False, "held back: 5.0 % < 8.0 %"),
    (True, -9.0, 4.0, True, "reported anyway: 9.0 % ≥ 8.0 %"),
    (True, 5.0, None, False, "held back"),
    (False, 5.0, 4.0, True, "compiled code changed"),
    (None, 5.0, 4.0, True, ""),
])
def test_confirm_timing_change(identical: bool | None, change_pct: float, threshold_pct: float | None,
                               report: bool, says: str) -> None:
    verdict = BinaryVerdict(identical, [] if identical is not False else diff([BASE], [replace(BASE, sass_hash="d")]),
                            ("sm_90",))
    decision = confirm_timing_change(verdict, change_pct, threshold_pct)
    assert decision.report is report and says in decision.note
