"""Each kernel family's large-index case catches a 32-bit offset (GPU only).

One plant per family drops the ``.to(tl.int64)`` that keeps a row, token, batch or block
offset in 64 bits, so ``offset * stride`` is computed in int32 and wraps past 2**31 elements.
Each planted copy of ``kernels/`` runs its family's case of
``suites/correctness/test_large_index.py``, compiled, in a process of its own (a wrapped
offset may fault, and a faulted CUDA context fails everything after it): the case must fail,
saying that rows differ from the small copy's or that the device faulted. The same cases on
an unmodified copy must pass, so a failure is the plant's doing.

On a CPU only the plants are checked: each still matches its kernel exactly once.
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.planted_kernels import Plant, finish_cases, planted_tree, start_cases

CASES = "suites/correctness/test_large_index.py::test_offsets_past_2_31"
# What a wrapped offset shows as: rows that differ, a fault, or (matmul) a large error.
SIGNS = ("differ from the small copy's", "illegal memory access", "max abs err", "misaligned address",
         "CUDA error")
# Planted processes at once: the largest case needs ~16 GiB, an H100 has 80.
CONCURRENT = 3


def _plant(family: str, module: str, find: str, replace: str) -> Plant:
    return Plant(name=f"{family}-32-bit-offset", module=module, find=find, replace=replace,
                 case=f"{CASES}[{family}]", message="")


PLANTS = [
    _plant("copy", "copy.py",
           "    # int64 offsets: the probes run on 2**28+ elements, and pid * BLOCK passes 2**31 bytes.\n"
           "    start = tl.program_id(0).to(tl.int64) * BLOCK\n",
           "    start = tl.program_id(0) * BLOCK\n"),
    _plant("softmax", "softmax.py",
           "    # int64 row offsets: rows * stride passes 2**31 elements on large activations.\n"
           "    row = tl.program_id(0).to(tl.int64)\n",
           "    row = tl.program_id(0)\n"),
    _plant("cross_entropy", "cross_entropy.py",
           "    # int64 row offsets: tokens * vocab passes 2**31 elements at 16k tokens x 128k vocab.\n"
           "    row = tl.program_id(0).to(tl.int64)\n",
           "    row = tl.program_id(0)\n"),
    # The backward: the kernel whose row loop is the newest.
    _plant("rmsnorm", "rmsnorm.py",
           "    pid = tl.program_id(0).to(tl.int64)\n    row_start = pid * rows_per_program\n"
           "    row_end = tl.minimum(row_start + rows_per_program, n_rows)\n    cols = tl.arange(0, BLOCK)\n"
           "    mask = cols < n_cols\n    w = tl.load(",
           "    pid = tl.program_id(0)\n    row_start = pid * rows_per_program\n"
           "    row_end = tl.minimum(row_start + rows_per_program, n_rows)\n    cols = tl.arange(0, BLOCK)\n"
           "    mask = cols < n_cols\n    w = tl.load("),
    _plant("layernorm", "layernorm.py",
           "    # int64 row offsets: rows * stride passes 2**31 elements on large activations.\n"
           "    row = tl.program_id(0).to(tl.int64)\n    cols = tl.arange(0, BLOCK)\n",
           "    row = tl.program_id(0)\n    cols = tl.arange(0, BLOCK)\n"),
    _plant("rotary", "rotary.py",
           "    token = tl.program_id(0).to(tl.int64)\n",
           "    token = tl.program_id(0)\n"),
    _plant("swiglu", "swiglu.py",
           "    # 65535. int64 because a contiguous input runs as a single row of every element.\n"
           "    pid = tl.program_id(0).to(tl.int64)\n",
           "    pid = tl.program_id(0)\n"),
    _plant("quant", "quant.py",
           "    row = tl.program_id(0).to(tl.int64)\n    x_row = x_ptr + row * x_row_stride\n"
           "    q_row = q_ptr + row * q_row_stride\n",
           "    row = tl.program_id(0)\n    x_row = x_ptr + row * x_row_stride\n    q_row = q_ptr + row * q_row_stride\n"),
    _plant("matmul", "matmul.py",
           "    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M).to(tl.int64)\n",
           "    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)\n"),
    _plant("attention", "attention.py",
           "    off_z = (off_hz // num_heads).to(tl.int64)\n",
           "    off_z = off_hz // num_heads\n"),
]


def test_every_family_has_a_plant_and_each_applies(tmp_path: Path) -> None:
    from suites.correctness.test_large_index import CASES as LARGE

    assert sorted(plant.case.rpartition("[")[2].rstrip("]") for plant in PLANTS) == sorted(c.family for c in LARGE)
    for plant in PLANTS:
        planted_tree(tmp_path / plant.name, [plant])  # asserts that the plant matches exactly once


def _failure(case: ET.Element) -> str | None:
    for tag in ("failure", "error"):
        found = case.find(tag)
        if found is not None:
            return f"{found.get('message', '')}\n{found.text or ''}"
    return None


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="2**31 elements need a GPU")
def test_each_32_bit_offset_is_caught_and_the_clean_kernels_pass(tmp_path: Path) -> None:
    clean = planted_tree(tmp_path / "clean", [])
    clean_junit = tmp_path / "clean.xml"
    results = finish_cases(start_cases(clean, [CASES], clean_junit, interpret=False), clean_junit, len(PLANTS))
    for name, case in results.items():
        assert case.find("skipped") is None, f"{name} was skipped on the unmodified kernels"
        assert _failure(case) is None, f"{name} fails on the unmodified kernels: {_failure(case)}"

    missed, running = [], list[tuple[Plant, Path, subprocess.Popen[str]]]()
    pending = list(PLANTS)
    while pending or running:
        while pending and len(running) < CONCURRENT:
            plant = pending.pop(0)
            tree = planted_tree(tmp_path / plant.name, [plant])
            junit = tmp_path / f"{plant.name}.xml"
            running.append((plant, junit, start_cases(tree, [plant.case], junit, interpret=False)))
        plant, junit, process = running.pop(0)
        report = _failure(next(iter(finish_cases(process, junit, 1).values())))
        if report is None or not any(sign in report for sign in SIGNS):
            missed.append(f"{plant.name}: {'passed' if report is None else report[-600:]}")
    assert not missed, "planted 32-bit offsets went unnoticed:\n" + "\n".join(missed)
