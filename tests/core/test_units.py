"""One sign convention, in the plotted metric, with human units: ``roofwatch.service.core.units``."""

from __future__ import annotations

import pytest

from roofwatch.service.core.units import (
    byte_size,
    change_in_metric,
    change_text,
    interval_text,
    level_text,
    metric_kind,
    quantity,
    seconds,
)


@pytest.mark.parametrize(("unit", "flops", "bytes_moved", "kind"), [
    ("s", 2e9, 1e8, "flops"),       # 20 FLOP/byte: compute-bound, read as throughput
    ("s", 1e8, 1e8, "bytes"),       # 1 FLOP/byte: memory-bound, read as bandwidth
    ("s", 1e9, None, "flops"),
    ("s", None, 4e6, "bytes"),
    ("s", None, None, "time"),      # no declared work: its time
    ("ops/s", 1e9, 1e8, "raw"),     # another unit: its own value
])
def test_the_metric_a_benchmark_is_plotted_in(unit: str, flops: float | None, bytes_moved: float | None,
                                             kind: str) -> None:
    assert metric_kind(unit, flops, bytes_moved) == kind


@pytest.mark.parametrize(("time_pct", "kind", "said"), [
    (100.0, "bytes", "bandwidth −50.0 %"),    # twice the time: half the bandwidth, the line falls
    (-78.1, "flops", "throughput +357 %"),    # a 4.6× speed-up reads as the line rises
    (30.0, "bytes", "bandwidth −23.1 %"),
    (30.0, "time", "time +30.0 %"),           # a time chart: the time's own sign
    (-5.0, "raw", "value −5.0 %"),
    (None, "bytes", ""),
    (float("nan"), "time", ""),
])
def test_a_change_is_said_with_the_sign_of_the_plotted_line(time_pct: float | None, kind: str, said: str) -> None:
    assert change_text(time_pct, kind) == said


def test_an_interval_is_converted_bound_by_bound_and_kept_in_order() -> None:
    assert interval_text(25.0, 35.0, "bytes") == "[−25.9, −20.0]"
    assert interval_text(25.0, 35.0, "time") == "[+25.0, +35.0]"
    assert interval_text(None, 35.0, "bytes") == ""
    assert change_in_metric(-100.0, "flops") is None  # no time left: no finite throughput ratio


@pytest.mark.parametrize(("value", "text"), [
    (0.004185, "4.19 ms"), (1.145e-2, "11.4 ms"), (9.997e-4, "1.00 ms"), (2.5e-7, "250 ns"), (3.0, "3.00 s"),
    (1234.0, "1,234 s"),
])
def test_durations_read_in_the_unit_that_suits_them(value: float, text: str) -> None:
    assert seconds(value) == text


@pytest.mark.parametrize(("value", "unit", "shown"), [
    (512, "B", "512 B"),
    (1023, "B", "1,023 B"),
    (1024, "B", "1.00 KiB"),
    (1.5 * 2**20, "B", "1.50 MiB"),
    (12 * 2**30, "B", "12.0 GiB"),
    (2**20 - 1, "B", "1.00 MiB"),  # rounded before the unit is chosen: never "1.02e+03 KiB"
    (4.19e-3, "s", "4.19 ms"),
    (1234.5, "ops/s", "1,234 ops/s"),  # another unit: its own value
    (0.25, "", "0.25"),
])
def test_a_quantity_reads_in_its_unit(value: float, unit: str, shown: str) -> None:
    assert quantity(value, unit) == shown


def test_byte_sizes_are_binary() -> None:
    assert byte_size(8 * 2**20) == "8.00 MiB" and byte_size(0) == "0 B"


@pytest.mark.parametrize(("confidence", "label"), [
    (0.99, "99 %"), (0.95, "95 %"), (0.998, "99.8 %"),
    (1 - 0.01 * 3 / 48, "99.9 %"),  # a change's adjusted level: 99.9375 %, never rounded up to "100 %"
    (0.99996, "99.9 %"), (0.9975, "99.7 %"),
])
def test_a_confidence_level_as_labels_say_it(confidence: float, label: str) -> None:
    assert level_text(confidence) == label


def test_every_ab_label_reads_the_one_constant() -> None:
    from roofwatch.ab import abtest

    assert abtest.CONFIDENCE == 1 - abtest.DEFAULT_ALPHA and level_text(abtest.CONFIDENCE) == "99 %"
    assert abtest.change_confidence(3, 48) == pytest.approx(1 - abtest.DEFAULT_ALPHA * 3 / 48)
    assert abtest.change_confidence(0, 10) == pytest.approx(1 - abtest.DEFAULT_ALPHA / 10)  # as if one of ten
