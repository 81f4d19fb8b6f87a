"""Compiled-code tracking: every Triton kernel a suite launches, compiled ahead of time for the
GPUs a repository targets, with the numbers kernel engineers read when a kernel slows down.

Triton compiles for a GPU it does not have, so this works on a CPU-only worker too:

    launches   record each kernel launch's specialization (types, constexprs, warps, stages)
    targets    the GPUs to compile for and their per-block limits (``roofwatch.suite_config.targets``,
               which a suite's configuration reads too; copied in beside the plugin)
    sass       pure parsers for ``cuobjdump -res-usage`` and ``nvdisasm`` output
    toolchain  one specialization × one target → an artifact (registers, spills, shared, SASS mix, hash)
    plugin     the pytest plugin a ``kind = "compile"`` suite runs under
"""
