"""Pure parsers for the NVIDIA binary tools' text: resource usage and the SASS instruction mix.

``cuobjdump -res-usage`` prints one line per function::

    Function add:
      REG:30 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:576 TEXTURE:0 SURFACE:0 SAMPLER:0

``nvdisasm`` prints one instruction per line as ``/*0040*/  @!P0 LDG.E R0, desc[UR4][R6.64] ;``.
The classes below are what a kernel engineer looks at when a kernel slows down: did the
tensor-core instructions survive, did loads turn into spills, did math move to another type.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_RES_LINE = re.compile(r"Function\s+(\S+?):\s*\n\s*((?:[A-Z_]+(?:\[\d+\])?:\d+\s*)+)")
_RES_FIELD = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")


@dataclass(frozen=True)
class ResourceUsage:
    registers: int
    stack_bytes: int
    static_shared_bytes: int
    local_bytes: int  # spill space per thread


def parse_resource_usage(text: str) -> dict[str, ResourceUsage]:
    """Each function's resource line from ``cuobjdump -res-usage``, by function name."""
    usage: dict[str, ResourceUsage] = {}
    for name, fields in _RES_LINE.findall(text):
        values = {key: int(value) for key, value in _RES_FIELD.findall(fields)}
        usage[name] = ResourceUsage(values.get("REG", 0), values.get("STACK", 0), values.get("SHARED", 0),
                                    values.get("LOCAL", 0))
    return usage


# Opcode (before the first '.') → class. Checked in order; the first predicate that matches wins.
_FP_TYPES = {"HADD2": "fp16", "HMUL2": "fp16", "HFMA2": "fp16", "HMNMX2": "fp16",
             "FADD": "fp32", "FMUL": "fp32", "FFMA": "fp32", "FMNMX": "fp32", "FADD32I": "fp32",
             "FMUL32I": "fp32", "FFMA32I": "fp32", "DADD": "fp64", "DMUL": "fp64", "DFMA": "fp64"}
_CLASSES: dict[str, frozenset[str]] = {
    "mma": frozenset({"HMMA", "IMMA", "DMMA", "BMMA", "QMMA", "OMMA"}),  # mma.sync (Ampere-style)
    "wgmma": frozenset({"HGMMA", "IGMMA", "QGMMA", "BGMMA"}),  # Hopper warpgroup MMA
    "tcgen05_mma": frozenset({"UTCHMMA", "UTCIMMA", "UTCQMMA", "UTCOMMA", "UTCMMA"}),  # Blackwell
    "global_load": frozenset({"LDG"}),
    "global_store": frozenset({"STG"}),
    "shared_load": frozenset({"LDS", "LDSM"}),
    "shared_store": frozenset({"STS", "STSM"}),
    "async_copy": frozenset({"LDGSTS", "LDGDEPBAR"}),  # cp.async (Ampere)
    "tma": frozenset({"UTMALDG", "UTMASTG", "UTMAPF", "UTMACCTL", "UBLKCP", "UTMAREDG"}),
    "local_load": frozenset({"LDL"}),  # spills read back
    "local_store": frozenset({"STL"}),  # spills written
    "atomic": frozenset({"ATOM", "ATOMG", "ATOMS", "RED", "REDG"}),
    "barrier": frozenset({"BAR", "SYNCS", "MEMBAR", "ARRIVES", "DEPBAR"}),
    "special_function": frozenset({"MUFU"}),
    "conversion": frozenset({"F2F", "F2FP", "F2I", "I2F", "I2FP", "F2IP"}),
}
INSTRUCTION_CLASSES = ("mma", "wgmma", "tcgen05_mma", "global_load", "global_store", "shared_load",
                       "shared_store", "async_copy", "tma", "local_load", "local_store", "atomic", "barrier",
                       "fp64", "fp32", "fp16", "bf16", "special_function", "conversion")
# Classes whose appearance or disappearance changes what a kernel is: they flag a change even
# before a GPU has timed it.
TENSOR_CORE_CLASSES = ("mma", "wgmma", "tcgen05_mma")


def classify(mnemonic: str) -> str | None:
    """The class of one SASS mnemonic such as ``HFMA2.BF16_V2`` or ``LDG.E.128``; None when unclassed."""
    opcode, _, modifiers = mnemonic.partition(".")
    if opcode in _FP_TYPES:
        kind = _FP_TYPES[opcode]
        if kind == "fp16" and "F32" in modifiers.split("."):
            return "conversion"  # HADD2.F32: ptxas's idiom for widening a half to float
        return "bf16" if kind == "fp16" and "BF16" in modifiers else kind
    for name, opcodes in _CLASSES.items():
        if opcode in opcodes:
            return name
    return None


def instruction_mix(disassembly: str) -> tuple[int, dict[str, int]]:
    """Total SASS instructions and the count per class (only classes that occur)."""
    mnemonics = _INSTRUCTION.findall(disassembly)
    counts = Counter(cls for cls in map(classify, mnemonics) if cls is not None)
    return len(mnemonics), {name: counts[name] for name in INSTRUCTION_CLASSES if counts[name]}
