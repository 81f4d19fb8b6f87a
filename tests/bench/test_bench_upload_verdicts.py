"""``bench.upload_verdicts``: uploads replayed on the real H200 processes of the corpus."""

from __future__ import annotations

from pathlib import Path

from bench import upload_verdicts


def test_the_corpus_holds_eight_processes_a_side_of_six_benchmarks(shared_corpus: Path) -> None:
    processes = upload_verdicts.load(shared_corpus / "gpu-h200" / "rmsnorm-ab-rounds.tgz")
    # the harness stops sampling once a benchmark converged: 10 to 2,000 samples a process
    assert [(p.side, p.index) for p in processes] == [(s, i) for s in ("fw", "main") for i in range(1, 9)]
    assert all(len(p.samples) == 6 and all(len(s) >= 10 for s in p.samples.values()) for p in processes)


def test_every_ordered_pair_is_one_upload_judged_on_every_benchmark(shared_corpus: Path) -> None:
    tallies, uploads = upload_verdicts.replay(upload_verdicts.load(shared_corpus / "gpu-h200" / "rmsnorm-ab-rounds.tgz"))
    assert uploads["main vs main"][1] == 8 * 7 and uploads["main vs fewer warps"][1] == 8 * 8
    for (arm, _name), tally in tallies.items():
        assert sum(tally.verdicts.values()) == uploads[arm][1]
        assert min(tally.thresholds) >= 5.0  # never under min_effect
    # identical code on both sides: the unchanged looped kernels, one level in every process, are never called
    looped = tallies[("main vs main", "test_rmsnorm[forward-triton-4096x16384-bf16]")].verdicts
    assert looped["regression"] == looped["improvement"] == 0
    # the 16 -> 4 warps slowdown of the backward kernel lies within the noise of single runs, and is said to:
    # inconclusive, not "none" (all 64 uploads turned green on it while "none" stood for "within the noise")
    slowed = tallies[("main vs fewer warps", "test_rmsnorm[backward-triton-8192x8192-bf16]")].verdicts
    assert slowed["none"] <= 2 and slowed["inconclusive"] >= 60
