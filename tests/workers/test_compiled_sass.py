"""The NVIDIA tools' text parsed into numbers: table-driven, from real tool output."""

from __future__ import annotations

import pytest

from roofwatch.suite_config.targets import UnknownTarget, max_threads, parse_targets
from roofwatch.workers.compiled.sass import classify, instruction_mix, parse_resource_usage

RES_USAGE = """
Resource usage:
 Common:
  GLOBAL:0
 Function _matmul_kernel:
  REG:168 STACK:16 SHARED:0 LOCAL:96 CONSTANT[0]:944 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function add:
  REG:30 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:576 TEXTURE:0 SURFACE:0 SAMPLER:0
"""

DISASSEMBLY = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R17, SR_CTAID.X ;
        /*0160*/              @!P0 LDG.E R0, desc[UR4][R6.64] ;
        /*0170*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24 ;
        /*0180*/               @P1 STG.E.128 desc[UR4][R2.64], R8 ;
        /*0190*/                   HFMA2.BF16_V2 R3, R4, R5, -RZ ;
        /*01a0*/                   HADD2.F32 R7, -RZ, R6.H0_H0 ;
        /*01b0*/                   FFMA R9, R9, R10, R11 ;
        /*01c0*/                   STL [R1+0x4], R9 ;
        /*01d0*/                   SYNCS.ARRIVE.TRANS64.RED.A1T0 RZ, [UR8], RZ ;
        /*01e0*/                   EXIT ;
"""


def test_resource_usage_per_function() -> None:
    usage = parse_resource_usage(RES_USAGE)
    assert usage["_matmul_kernel"].registers == 168
    assert (usage["_matmul_kernel"].local_bytes, usage["_matmul_kernel"].stack_bytes) == (96, 16)
    assert usage["add"].static_shared_bytes == 1024


@pytest.mark.parametrize(("mnemonic", "expected"), [
    ("HGMMA.64x128x16.F32.BF16", "wgmma"),
    ("HMMA.16816.F32.BF16", "mma"),
    ("UTCHMMA", "tcgen05_mma"),
    ("LDG.E.128", "global_load"),
    ("STG.E", "global_store"),
    ("LDSM.16.M88.4", "shared_load"),
    ("STS.128", "shared_store"),
    ("LDGSTS.E.BYPASS.128", "async_copy"),
    ("UTMALDG.2D", "tma"),
    ("LDL", "local_load"),
    ("STL.64", "local_store"),
    ("BAR.SYNC.DEFER_BLOCKING", "barrier"),
    ("FFMA", "fp32"),
    ("HFMA2", "fp16"),
    ("HFMA2.BF16_V2", "bf16"),
    ("HADD2.F32", "conversion"),
    ("DFMA", "fp64"),
    ("MUFU.EX2", "special_function"),
    ("F2FP.BF16.F32.PACK_AB", "conversion"),
    ("IMAD.WIDE", None),
])
def test_classify(mnemonic: str, expected: str | None) -> None:
    assert classify(mnemonic) == expected


def test_instruction_mix_counts_predicated_instructions() -> None:
    total, mix = instruction_mix(DISASSEMBLY)
    assert total == 11
    assert mix == {"wgmma": 1, "global_load": 1, "global_store": 1, "local_store": 1, "barrier": 1, "fp32": 1,
                   "bf16": 1, "conversion": 1}


def test_targets() -> None:
    assert [t.name for t in parse_targets("sm_90, sm_80,sm_90a")] == ["sm_90", "sm_80"]
    assert parse_targets(["sm_100"])[0].max_shared_bytes == 232448
    with pytest.raises(UnknownTarget, match="unknown compile target 'gfx942'"):
        parse_targets("gfx942")
    assert max_threads(64) == 1024 and max_threads(255) == 256 and max_threads(168) == 384
