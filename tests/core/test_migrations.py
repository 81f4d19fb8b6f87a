"""Alembic is the only way the schema is made, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel
from support.environment import engine_for

import roofwatch.service.core.models  # noqa: F401
from roofwatch.service.core.db import downgrade, migrate

TABLES = {"repository", "commit", "device", "run", "suiteexecution", "benchmark",
          "measurement", "testoutcome", "change", "webhookdelivery", "alembic_version"}


def test_upgrade_creates_every_table(database_url: str) -> None:
    migrate(database_url)
    engine = engine_for(database_url)
    assert TABLES <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_migrations_match_the_models(database_url: str) -> None:
    """A model change without a migration fails here, not in production."""
    migrate(database_url)
    engine = engine_for(database_url)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    engine.dispose()
    assert diff == []


def test_upgrade_is_idempotent_and_downgrade_reverses(database_url: str) -> None:
    migrate(database_url)
    migrate(database_url)
    downgrade(database_url, "base")
    engine = engine_for(database_url)
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    engine.dispose()
    migrate(database_url)


def test_downgrading_below_64_bit_installation_ids_forgets_only_those(database_url: str) -> None:
    """0011 widened installation_id; going back cannot keep an id beyond 32 bits, and must not fail on it."""
    from sqlalchemy import text

    migrate(database_url)
    engine = engine_for(database_url)
    names = ("acme/wide-id", "acme/narrow-id")
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM repository WHERE full_name IN (:a, :b)"), {"a": names[0], "b": names[1]})
        for name, installation in zip(names, (2**63 - 1, 4242), strict=True):
            connection.execute(text(
                "INSERT INTO repository (full_name, clone_url, default_branch, trust_policy, installation_id, "
                "created_at) VALUES (:name, '/nonexistent', 'main', 'collaborators', :installation, "
                "CURRENT_TIMESTAMP)"), {"name": name, "installation": installation})
    downgrade(database_url, "0009")
    with engine.begin() as connection:
        ids = dict(connection.execute(text("SELECT full_name, installation_id FROM repository "
                                           "WHERE full_name IN (:a, :b)"), {"a": names[0], "b": names[1]}).all())
        assert ids == {"acme/wide-id": None, "acme/narrow-id": 4242}
        connection.execute(text("DELETE FROM repository WHERE full_name IN (:a, :b)"), {"a": names[0], "b": names[1]})
    engine.dispose()
    migrate(database_url)


def test_0016_joins_the_content_named_series_of_a_suite_into_one_and_keeps_their_digests(database_url: str) -> None:
    """Suites with laid-over files were stored as ``<name>@<digest>``, one series per content; after 0016
    they are ``<name>``, one series whose points keep the digest as an event, not a name."""
    from sqlalchemy import text

    from roofwatch.service.core.fingerprint import benchmark_fingerprint

    migrate(database_url)
    downgrade(database_url, "0015")
    engine = engine_for(database_url)
    name, old, new = "acme/outside-bench", "1a2b3c4d5e", "6f7a8b9c0d"
    sha = "c" * 40

    def one(connection: Any, sql: str, **values: Any) -> int:
        return int(connection.execute(text(sql + " RETURNING id"), values).scalar_one())

    with engine.begin() as connection:
        repository = one(connection, "INSERT INTO repository (full_name, clone_url, default_branch, trust_policy, "
                                     "created_at) VALUES (:name, '/x', 'main', 'everyone', CURRENT_TIMESTAMP)", name=name)
        device = one(connection, "INSERT INTO device (fingerprint, device_class, uuid, driver, cuda, torch_version, "
                                 "triton_version, peak_flops, peaks_source, hostname, environment_shifts, created_at) "
                                 "VALUES (:fp, 'cpu', '', '', '', '', '', '{}', 'none', '', 0, CURRENT_TIMESTAMP)",
                     fp=f"fp-{repository}")
        runs, benchmarks = [], {}
        for position, digest in enumerate((old, old, new), start=1):
            commit = one(connection, 'INSERT INTO "commit" (repository_id, sha, parents, author, message, position) '
                                     "VALUES (:r, :sha, '[]', '', '', :p)", r=repository, sha=f"{position:040d}",
                         p=position)
            run = one(connection, 'INSERT INTO run (repository_id, commit_id, "trigger", state, idempotency_key, '
                                  "log_excerpt, error, created_at, device_id, suites_source, analysis_state, "
                                  "analysis_error) VALUES (:r, :c, 'manual', 'succeeded', :key, '', '', "
                                  "CURRENT_TIMESTAMP, :d, '', 'done', '')",
                      r=repository, c=commit, key=f"{name}-{position}", d=device)
            runs.append(run)
            connection.execute(text(
                "INSERT INTO suiteexecution (run_id, name, kind, status, reason, duration_s, output_tail) "
                "VALUES (:run, :name, 'benchmark', 'passed', :reason, 1.0, '')"),
                {"run": run, "name": f"benchmarks@{digest}",
                 "reason": f"suite files bench/ from /srv/bench at HEAD ({sha}), content {digest}"})
            connection.execute(text(
                "INSERT INTO testoutcome (run_id, suite, test_id, outcome, message, duration_s) "
                "VALUES (:run, :suite, 'bench/test_x.py::test_x', 'passed', '', 0.1)"),
                {"run": run, "suite": f"benchmarks@{digest}"})
            for suite, unit in ((f"benchmarks@{digest}", "s"), (f"benchmarks@{digest}:memory", "B")):
                if suite not in benchmarks:
                    benchmarks[suite] = one(
                        connection, "INSERT INTO benchmark (fingerprint, repository_id, suite, name, params, dtype, "
                                    "shape, impl, device_class, unit, higher_is_better) VALUES (:fp, :r, :suite, "
                                    "'test_x', '', '', '', '', 'cpu', :unit, false)",
                        fp=benchmark_fingerprint(name, suite, "test_x", "", "", "cpu"), r=repository, suite=suite,
                        unit=unit)
                connection.execute(text(
                    "INSERT INTO measurement (run_id, benchmark_id, samples, median, iqr, min, mean, n, cv) "
                    "VALUES (:run, :b, '[]', :median, 0, :median, :median, 5, 0)"),
                    {"run": run, "b": benchmarks[suite], "median": float(position)})
        for suite, benchmark in benchmarks.items():  # as ingest kept it: each series' newest run
            newest = runs[-1] if new in suite else runs[1]
            connection.execute(text("INSERT INTO latestmeasurement (benchmark_id, run_id, median, iqr, n) "
                                    "VALUES (:b, :run, 1.0, 0, 5)"), {"b": benchmark, "run": newest})
        connection.execute(text(
            'INSERT INTO "change" (repository_id, benchmark_id, suite, kind, phase, state, details, created_at) '
            "VALUES (:r, :b, :suite, 'perf-regression', 'confirmed', 'new', '{}', CURRENT_TIMESTAMP)"),
            {"r": repository, "b": benchmarks[f"benchmarks@{new}"], "suite": f"benchmarks@{new}"})

    migrate(database_url)
    with engine.begin() as connection:
        series = connection.execute(text(
            "SELECT id, suite, fingerprint FROM benchmark WHERE repository_id = :r ORDER BY id"),
            {"r": repository}).all()
        assert [(suite, fp) for _, suite, fp in series] == [
            (suite, benchmark_fingerprint(name, suite, "test_x", "", "", "cpu"))
            for suite in ("benchmarks", "benchmarks:memory")]
        timing, memory = (row.id for row in series)
        assert timing == benchmarks[f"benchmarks@{old}"]  # the oldest series is the one the others join
        points = connection.execute(text("SELECT benchmark_id, run_id, median FROM measurement "
                                         "WHERE run_id IN (:a, :b, :c) ORDER BY benchmark_id, run_id"),
                                    dict(zip("abc", runs, strict=True))).all()
        assert [tuple(p) for p in points] == [(b, run, float(i)) for b in (timing, memory)
                                              for i, run in enumerate(runs, start=1)]
        latest = connection.execute(text("SELECT benchmark_id, run_id FROM latestmeasurement "
                                         "WHERE benchmark_id IN (:t, :m) ORDER BY benchmark_id"),
                                    {"t": timing, "m": memory}).all()
        assert [tuple(row) for row in latest] == [(timing, runs[-1]), (memory, runs[-1])]
        executions = connection.execute(text("SELECT name, suite_files FROM suiteexecution WHERE run_id IN (:a, :b, :c) "
                                             "ORDER BY run_id"), dict(zip("abc", runs, strict=True))).all()
        files = [json.loads(f) if isinstance(f, str) else f for _, f in executions]
        assert {n for n, _ in executions} == {"benchmarks"}
        assert [f["digest"] for f in files] == [old, old, new]
        assert files[0] == {"digest": old, "paths": ["bench/"], "repository": "/srv/bench", "ref": "HEAD",
                            "commit": sha}
        assert connection.execute(text("SELECT DISTINCT suite FROM testoutcome WHERE run_id IN (:a, :b, :c)"),
                                  dict(zip("abc", runs, strict=True))).scalars().all() == ["benchmarks"]
        assert connection.execute(text('SELECT benchmark_id, suite FROM "change" WHERE repository_id = :r'),
                                  {"r": repository}).one() == (timing, "benchmarks")
        assert connection.execute(text("SELECT DISTINCT branch FROM run WHERE repository_id = :r"),
                                  {"r": repository}).scalars().all() == [""]
        in_runs = f"IN ({', '.join(map(str, runs))})"
        for sql in (f"DELETE FROM latestmeasurement WHERE benchmark_id IN ({timing}, {memory})",
                    f'DELETE FROM "change" WHERE repository_id = {repository}',
                    f"DELETE FROM measurement WHERE run_id {in_runs}", f"DELETE FROM testoutcome WHERE run_id {in_runs}",
                    f"DELETE FROM suiteexecution WHERE run_id {in_runs}",
                    f"DELETE FROM benchmark WHERE repository_id = {repository}",
                    f"DELETE FROM run WHERE repository_id = {repository}",
                    f'DELETE FROM "commit" WHERE repository_id = {repository}', f"DELETE FROM device WHERE id = {device}",
                    f"DELETE FROM repository WHERE id = {repository}"):
            connection.execute(text(sql))
    engine.dispose()
