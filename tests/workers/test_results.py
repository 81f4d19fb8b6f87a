"""Result-file parsers against files real pytest and pytest-benchmark wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.tests_support import pytest_env

from roofwatch.common.envelope import OutcomeRecord
from roofwatch.common.errors import ResultFileError
from roofwatch.common.sampling import SAMPLE_LIMIT
from roofwatch.result_files.suite_results import parse_benchmark_json, parse_junit

BENCH_CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "formats" / "pytest-benchmark"
CORPUS_FILES = sorted(BENCH_CORPUS.rglob("*.json")) if BENCH_CORPUS.is_dir() else []

TINY_SUITE = """\
import pytest


def test_passes(record_property):
    record_property("max_abs_err", 0.00125)
    record_property("max_rel_err", "nan")
    record_property("beyond_half_ulp", 0.25)
    assert 1 + 1 == 2


def test_fails():
    assert 2 + 2 == 5, "arithmetic is broken"


@pytest.mark.skip(reason="no GPU here")
def test_skipped():
    pass


def test_bench(benchmark):
    benchmark.extra_info.update(flops=1000, bytes=8000, dtype="fp32", shape="10x100", note=[1])
    benchmark(sum, range(100))
"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One real pytest run writing both a JUnit XML and a benchmark JSON file."""
    folder = tmp_path_factory.mktemp("tiny-suite")
    (folder / "test_tiny.py").write_text(TINY_SUITE)
    junit, bench = folder / "junit.xml", folder / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "test_tiny.py", "-q", "-p", "no:cacheprovider",
         f"--junitxml={junit}", f"--benchmark-json={bench}",
         "--benchmark-min-rounds=5", "--benchmark-max-time=0.01", "--benchmark-warmup=off"],
        cwd=folder, env=pytest_env(), capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # exactly: some tests failed
    return junit, bench


def by_name(outcomes: list[OutcomeRecord]) -> dict[str, OutcomeRecord]:
    return {o.test_id.rsplit("::", 1)[1]: o for o in outcomes}


def test_junit_outcomes_messages_and_properties(reports: tuple[Path, Path]) -> None:
    outcomes = by_name(parse_junit(reports[0]))

    assert {name: o.outcome for name, o in outcomes.items()} == {
        "test_passes": "passed", "test_fails": "failed", "test_skipped": "skipped", "test_bench": "passed",
    }
    assert outcomes["test_passes"].test_id == "test_tiny::test_passes"
    assert outcomes["test_passes"].max_abs_err == 0.00125
    assert outcomes["test_passes"].max_rel_err is None  # "nan" is not a usable error bound
    assert outcomes["test_passes"].beyond_half_ulp == 0.25
    assert outcomes["test_passes"].message == ""
    assert "arithmetic is broken" in outcomes["test_fails"].message
    assert "assert (2 + 2) == 5" in outcomes["test_fails"].message
    assert outcomes["test_fails"].max_abs_err is None
    assert "no GPU here" in outcomes["test_skipped"].message
    assert all(o.duration_s >= 0 for o in outcomes.values())


def test_a_test_failing_then_erroring_in_teardown_is_one_outcome(tmp_path: Path) -> None:
    # pytest writes such a test twice (its call, then its teardown), as flash-linear-attention's tests did
    # on a CPU; stored twice, the run's results could not be stored at all.
    (tmp_path / "test_twice.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef broken():\n    yield\n    raise RuntimeError('teardown broke')\n\n"
        "def test_twice(broken):\n    assert 1 == 2, 'call broke'\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=junit.xml"],
                   cwd=tmp_path, env=pytest_env(), capture_output=True, text=True, timeout=120, check=False)
    assert (tmp_path / "junit.xml").read_text().count("<testcase ") == 2

    [outcome] = parse_junit(tmp_path / "junit.xml")

    assert (outcome.test_id, outcome.outcome) == ("test_twice::test_twice", "failed")
    assert "call broke" in outcome.message and "teardown broke" in outcome.message


def test_benchmark_json_from_a_real_run(reports: tuple[Path, Path]) -> None:
    [measurement] = parse_benchmark_json(reports[1])
    raw = json.loads(reports[1].read_text())["benchmarks"][0]

    assert measurement.name == "test_bench"
    assert measurement.median == raw["stats"]["median"] > 0
    assert measurement.n == raw["stats"]["rounds"] >= 5
    # Every round up to the reservoir's size, a seeded uniform subset of them (in order) beyond it.
    assert len(measurement.samples) == min(measurement.n, SAMPLE_LIMIT)
    assert _is_subsequence(measurement.samples, raw["stats"]["data"])
    assert measurement.min <= measurement.median
    assert (measurement.flops, measurement.bytes) == (1000.0, 8000.0)
    assert (measurement.dtype, measurement.shape) == ("fp32", "10x100")
    # Only scalars survive into extra_info; a list would not be comparable across runs.
    assert measurement.extra_info == {"flops": 1000, "bytes": 8000, "dtype": "fp32", "shape": "10x100"}


@pytest.mark.parametrize("content", [
    pytest.param("<testsuites><testsuite>", id="truncated"),
    pytest.param("this is not xml", id="not-xml"),
    pytest.param("", id="empty"),
    pytest.param('<?xml version="1.0"?><coverage line-rate="1"/>', id="wrong-root"),
])
def test_unreadable_junit_is_a_result_file_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(content)
    with pytest.raises(ResultFileError):
        parse_junit(path)


def test_wrong_root_names_the_element(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text("<coverage/>")
    with pytest.raises(ResultFileError, match="<coverage>"):
        parse_junit(path)


def test_missing_junit_is_a_result_file_error(tmp_path: Path) -> None:
    with pytest.raises(ResultFileError, match="no JUnit XML written at junit.xml"):
        parse_junit(tmp_path / "junit.xml")


def test_single_testsuite_root_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text('<testsuite><testcase classname="a.b" name="t" time="0.5">'
                    '<error message="boom">trace</error></testcase></testsuite>')
    [outcome] = parse_junit(path)
    assert (outcome.test_id, outcome.outcome, outcome.message, outcome.duration_s) == (
        "a.b::t", "error", "boom\ntrace", 0.5)


@pytest.mark.parametrize(("content", "match"), [
    pytest.param("not json", "not JSON", id="not-json"),
    pytest.param("", "no benchmark JSON written", id="empty"),
    pytest.param('{"machine_info": {}}', "no 'benchmarks' list", id="no-benchmarks"),
    pytest.param('[{"name": "x"}]', "no 'benchmarks' list", id="list-root"),
    pytest.param('{"benchmarks": [{"name": "x"}]}', "lacks name/stats", id="no-stats"),
    pytest.param('{"benchmarks": [{"name": "x", "stats": {"median": "fast"}}]}', "median must be a positive",
                 id="stats-not-numbers"),
    pytest.param('{"benchmarks": ["x"]}', "lacks name/stats", id="entry-not-object"),
])
def test_unreadable_benchmark_json_is_a_result_file_error(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bench.json"
    path.write_text(content)
    with pytest.raises(ResultFileError, match=match):
        parse_benchmark_json(path)


def test_missing_benchmark_json_is_a_result_file_error(tmp_path: Path) -> None:
    with pytest.raises(ResultFileError):
        parse_benchmark_json(tmp_path / "bench.json")


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, id=str(p.relative_to(BENCH_CORPUS))) for p in CORPUS_FILES]
    or [pytest.param(None, id="corpus-absent")],
)
def test_third_party_benchmark_files_parse(path: Path | None, shared_corpus: Path) -> None:
    # shared_corpus skips (or, under CI, fails) when ../shared is absent.
    assert path is not None, f"no pytest-benchmark files under {shared_corpus}"
    raw = json.loads(path.read_text(encoding="utf-8"))["benchmarks"]
    measurements = parse_benchmark_json(path)

    assert len(measurements) == len(raw) > 0
    for measurement, entry in zip(measurements, raw):
        assert measurement.name == entry["name"]
        assert measurement.median == entry["stats"]["median"] > 0
        assert measurement.n >= 1
        assert measurement.min <= measurement.median


def _is_subsequence(part: list[float], whole: list[float]) -> bool:
    values = iter(whole)
    return all(any(x == y for y in values) for x in part)


def test_a_benchmark_with_many_rounds_keeps_its_statistics_and_a_bounded_reproducible_reservoir(
        tmp_path: Path) -> None:
    data = [1e-6 * (1 + (i % 97) / 97) for i in range(50_000)] + [float("nan")]
    entry = {"name": "test_tiny[4]", "stats": {"median": 1.5e-6, "mean": 1.5e-6, "min": 1e-6, "iqr": 5e-7,
                                               "rounds": 50_000, "data": data}}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"machine_info": {}, "benchmarks": [entry, {**entry, "name": "test_tiny[8]"}]}))

    first, second = parse_benchmark_json(path)
    again, _ = parse_benchmark_json(path)

    assert (first.n, first.median, len(first.samples)) == (50_000, 1.5e-6, SAMPLE_LIMIT)
    assert first.samples == again.samples  # seeded: a file read twice gives the same samples
    assert first.samples != second.samples  # by the benchmark's name, so series do not share one draw
    assert _is_subsequence(first.samples, data[:-1])


def test_an_empty_benchmarks_list_is_no_measurements(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    path.write_text('{"machine_info": {"node": "x"}, "benchmarks": []}')
    assert parse_benchmark_json(path) == []


# -- bounded: strings, time, and how many benchmarks ---------------------------------------------------

MB = 1024 * 1024


def tiny_benchmarks(path: Path, count: int, nan: bool = False) -> Path:
    """``count`` benchmarks of one round each, written one at a time (a 1,000,000-entry file is 70 MB)."""
    median = "NaN" if nan else "0.001"
    with path.open("w") as out:
        out.write('{"machine_info": {}, "benchmarks": [')
        for index in range(count):
            out.write(("," if index else "") + f'{{"name": "b{index}", "stats": {{"median": 0.001, "mean": 0.001, '
                      f'"iqr": 0, "data": [0.001, {median}]}}}}')
        out.write("]}")
    return path


def test_a_long_string_is_refused_after_reading_little_of_it(tmp_path: Path) -> None:
    # A 96 MB name: ijson alone took 14 s on a 32 MB string and grows with its square.
    path = tmp_path / "bench.json"
    with path.open("wb") as out:
        out.write(b'{"benchmarks": [{"name": "test_')
        for _ in range(96):
            out.write(b"a" * MB)
        out.write(b'", "stats": {"median": 0.001, "mean": 0.001}}]}')
    with pytest.raises(ResultFileError, match=r"holds a string longer than 64 KiB \(65536 bytes\)"):
        parse_benchmark_json(path)


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    from roofwatch.common.limits import BENCHMARK_FILE_LIMIT

    path = tmp_path / "bench.json"
    with path.open("wb") as out:  # sparse: no disk is written
        out.truncate(BENCHMARK_FILE_LIMIT + 1)
    with pytest.raises(ResultFileError, match=f"is {BENCHMARK_FILE_LIMIT + 1} bytes, over the 1 GiB limit"):
        parse_benchmark_json(path)


@pytest.mark.parametrize("nan", [False, True], ids=["strict", "with-NaN"])
def test_more_benchmarks_than_the_limit_are_refused_naming_it(tmp_path: Path, nan: bool,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOFWATCH_MAX_BENCHMARKS", "40")
    assert len(parse_benchmark_json(tiny_benchmarks(tmp_path / "at.json", 40, nan))) == 40
    with pytest.raises(ResultFileError) as refused:
        parse_benchmark_json(tiny_benchmarks(tmp_path / "past.json", 41, nan))
    assert "more than 40 benchmarks" in str(refused.value)
    assert "split the suite, or raise ROOFWATCH_MAX_BENCHMARKS" in str(refused.value)


@pytest.mark.parametrize("nan", [False, True], ids=["strict", "with-NaN"])
def test_memory_stays_flat_in_the_benchmark_count(tmp_path: Path, nan: bool) -> None:
    """Python's allocations while reading 2,000 and 200,000 benchmarks under a limit of 1,000.

    Streamed, the same; a file with NaN is held whole (at most ``RESULT_FILE_LIMIT``) and made
    strict as it is read, so it adds its size, never the entries past the limit.
    """
    import tracemalloc

    peaks, sizes = [], []
    for count in (2_000, 200_000):
        path = tiny_benchmarks(tmp_path / f"{count}.json", count, nan)
        sizes.append(path.stat().st_size)
        tracemalloc.start()
        with pytest.raises(ResultFileError, match="more than 1,000 benchmarks"):
            parse_benchmark_json(path, max_benchmarks=1_000)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    small, large = peaks
    # Holding every entry of the larger file would take about 100 times as much as the smaller.
    assert large < 1.5 * small + (1.2 * sizes[1] if nan else 0), (peaks, sizes)


def test_reading_stops_at_the_deadline(tmp_path: Path) -> None:
    import time

    path = tiny_benchmarks(tmp_path / "bench.json", 10)
    with pytest.raises(ResultFileError, match=r"not read within the time its suite had left \(0 s\)"):
        parse_benchmark_json(path, deadline=time.monotonic(), budget_s=0.0)
