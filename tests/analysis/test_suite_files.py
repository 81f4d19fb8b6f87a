"""Events on a series whose suite runs files from outside the commit, and the stretches change detection reads."""

from __future__ import annotations

from roofwatch.service.analysis.history import Point, steps
from roofwatch.service.analysis.suite_files import FilesPoint, digest, events, stretch_around

A = {"digest": "aaaaaaaaaa", "paths": ["bench/"], "commit": "1" * 40}
B = {"digest": "bbbbbbbbbb", "paths": ["bench/"], "commit": "2" * 40}


def _points(*records: dict[str, object]) -> list[FilesPoint]:
    return [FilesPoint(i + 1, f"{i + 1:040d}", 100 + i, record) for i, record in enumerate(records)]


def test_an_event_is_each_point_whose_files_differ_from_the_point_before() -> None:
    found = events(_points(A, A, B, B, A))
    assert [(e.position, e.run_id, digest(e.before), digest(e.after)) for e in found] == [
        (3, 102, "aaaaaaaaaa", "bbbbbbbbbb"), (5, 104, "bbbbbbbbbb", "aaaaaaaaaa")]
    assert found[0].as_dict() == {"kind": "benchmark-files", "position": 3, "sha": f"{3:040d}", "run_id": 102,
                                  "before": A, "after": B}
    assert found[0].said() == "benchmark files aaaaaaaaaa → bbbbbbbbbb"
    assert events(_points(A, A, A)) == [] and events([]) == []


def test_the_same_files_at_another_commit_are_no_event_and_the_commits_own_files_are_a_content_too() -> None:
    # A newer REF holding the same files (same digest, another commit) keeps the series as it was.
    assert events(_points(A, {**A, "commit": "3" * 40})) == []
    # A suite that starts taking its files from outside: its benchmark changed too.
    [event] = events(_points({}, {}, A))
    assert (event.position, event.before, event.said()) == (3, {}, "benchmark files of the commit → aaaaaaaaaa")


def test_a_page_edge_is_compared_with_the_point_before_the_page() -> None:
    page = _points(B, B)
    assert [e.position for e in events(page, before=A)] == [1]
    assert events(page, before=B) == [] and events(page) == []


def test_detection_reads_only_the_stretch_of_the_newly_measured_points_files() -> None:
    keys = ["a", "a", "b", "b", "b", "a"]
    assert stretch_around(list(range(6)), keys, 0) == [0, 1]
    assert stretch_around(list(range(6)), keys, 3) == [2, 3, 4]
    assert stretch_around(list(range(6)), keys, 5) == [5]
    assert stretch_around(list(range(3)), ["", "", ""], 1) == [0, 1, 2]  # one content: the whole series


def test_a_tenfold_step_where_the_files_changed_is_no_step_in_either_stretch() -> None:
    points = [Point(i, f"{i:040d}", 1.0 if i <= 5 else 10.0, files="a" if i <= 5 else "b") for i in range(1, 11)]
    assert [s.bad.position for s in steps(points, newly_measured={6}, higher_is_better=False)] == [6]
    keys = [p.files for p in points]
    assert steps(stretch_around(points, keys, 5), newly_measured={6}, higher_is_better=False) == []
    assert steps(stretch_around(points, keys, 4), newly_measured={5}, higher_is_better=False) == []
