"""Results from a team's own CI: every corpus format read, broken files refused, uploads analysed and reported.

The result files are real ones from ``../shared/corpus/formats`` (read in place, never copied);
the repository is a real git repository that has never heard of roofwatch, and GitHub is the fake
server on loopback, which checks every request against GitHub's REST description.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlmodel import func, select
from support.fake_github import FakeGitHub
from support.sample_repo import commit, init
from support.tests_support import roofwatch

from roofwatch.result_files.uploads import UploadFormatError, read_results
from roofwatch.service.core import embedded

REPO = "acme/legacy-kernels"
TOKEN = "upload-token"
PDFMINER = "pytest-benchmark/pdfminer.six/Linux-CPython-3.12-64bit"
QUTIP = "pytest-benchmark/qutip-benchmark/Linux-CPython-3.10-64bit"


def corpus_files(corpus: Path) -> list[Path]:
    root = corpus / "formats"
    return sorted(p for p in root.rglob("*.json")
                  if p.name not in ("machine.json", "benchmarks.json") and "reader" not in p.parts)


def test_every_result_file_in_the_corpus_is_read(shared_corpus: Path) -> None:
    files = corpus_files(shared_corpus)
    assert len(files) >= 45
    formats: dict[str, int] = {}
    for path in files:
        if path.name == "ffff17d4-conda-py3.9.json":
            continue  # every benchmark of that run failed: checked below
        parsed = read_results(path, device_class="Quadro GV100" if "nvbench" in path.parts else None)
        formats[parsed.format] = formats.get(parsed.format, 0) + 1
        assert parsed.format == path.relative_to(shared_corpus / "formats").parts[0]
        for m in parsed.measurements:
            assert m.median > 0 and m.min <= m.median * (1 + 1e-9) and m.n >= 1, (path, m)
    assert formats == {"pytest-benchmark": 38, "asv": 11, "google-benchmark": 1, "nvbench": 2}


def test_values_match_what_the_files_say(shared_corpus: Path) -> None:
    formats = shared_corpus / "formats"
    google = read_results(formats / "google-benchmark/googlecpp_output.json")
    assert [(m.name, m.median) for m in google.measurements] == [
        ("fib_10", pytest.approx(214.98980114547953e-9)), ("fib_20", pytest.approx(27455.600415007055e-9))]
    nv = read_results(formats / "nvbench/test_ref.json", device_class="quadro gv100")
    simple = next(m for m in nv.measurements if m.name == "simple")
    assert simple.median == pytest.approx(0.0010034715849794225) and simple.n == 499
    assert nv.devices == ["Quadro GV100"]
    assert {m.params for m in nv.measurements if m.name == "copy_sweep_grid_shape"} >= {"BlockSize=64,NumBlocks=64"} or \
        any("BlockSize" in m.params for m in nv.measurements)
    django = read_results(next((formats / "asv/django-asv/ubuntu-latest").glob("a7af1e27-*.json")))
    first = next(m for m in django.measurements if m.name.endswith("time_multi_value_dict"))
    assert first.median == pytest.approx(0.2551691109999865) and len(first.samples) == 10
    legacy = read_results(next((formats / "asv/asv-legacy-v1-example_results/cheetah").glob("fcf8c079-*.json")))
    assert legacy.format == "asv" and legacy.measurements  # v1 layout with a bare NaN, upgraded by asv
    bidict = read_results(formats / "pytest-benchmark/bidict/Linux-CPython-3.12-64bit/baseline.json")
    assert len(bidict.measurements) == 69


def _broken(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_broken_files_get_clear_errors(shared_corpus: Path, tmp_path: Path) -> None:
    formats = shared_corpus / "formats"
    whole = (formats / f"{PDFMINER}/0001_baseline.json").read_text()
    cases = [
        (_broken(tmp_path, "truncated.json", whole[: len(whole) // 2]), "auto", None, "not valid JSON"),
        (_broken(tmp_path, "list.json", "[1, 2]"), "auto", None, "holds a JSON object"),
        (_broken(tmp_path, "foreign.json", '{"results": []}'), "auto", None, "cannot tell the format"),
        (_broken(tmp_path, "fmt.json", "{}"), "criterion", None, "unknown format 'criterion'"),
        (formats / f"{PDFMINER}/0001_baseline.json", "google-benchmark", None, "real_time"),
        (_broken(tmp_path, "gb.json", json.dumps({"context": {}, "benchmarks": [{"name": "x", "real_time": "fast"}]})),
         "auto", None, "positive number"),
        (formats / "nvbench/test_ref.json", "auto", None, "choose one with --device-class"),
        (formats / "nvbench/test_ref.json", "auto", "NVIDIA H100", "device mismatch"),
        (next((formats / "asv/django-asv/ubuntu-latest").glob("ffff17d4-*.json")), "auto", None, "failed or missing"),
        (_broken(tmp_path, "binary.json", ""), "auto", None, "not valid JSON"),
        (tmp_path / "missing.json", "auto", None, "no such file"),
    ]
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    for path, fmt, device, message in cases:
        with pytest.raises(UploadFormatError, match=message if message != "not valid JSON" or path.name != "binary.json" else "UTF-8"):
            read_results(path, fmt, device)


@pytest.fixture
def legacy_repo(tmp_path: Path) -> dict[str, str]:
    """A repository with no [tool.roofwatch] anywhere: main base → docs, and a feature commit."""
    repo = tmp_path / "legacy"
    init(repo)
    shas = {"base": commit(repo, "Add kernels", {"kernel.py": "def f():\n    return 1\n"}, 1),
            "head": commit(repo, "Faster kernels", {"kernel.py": "def f():\n    return 2\n"}, 2)}
    shas["path"] = str(repo)
    return shas


@pytest.fixture
def upload_client(roofwatch_env: Path, fake_github: FakeGitHub, legacy_repo: dict[str, str],
                  monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from support.environment import _reset_caches

    for name, value in {"GITHUB_TOKEN": FakeGitHub.STATIC_TOKEN, "GITHUB_API_URL": fake_github.url,
                        "API_TOKEN": TOKEN, "PUBLIC_URL": "http://roofwatch.test"}.items():
        monkeypatch.setenv(f"ROOFWATCH_{name}", value)
    _reset_caches()
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.records.repositories import register

    migrate()
    with session_scope() as session:
        register(session, REPO, legacy_repo["path"], "main")
    with TestClient(create_app()) as client:
        yield client


def _post(client: TestClient, path: Path, token: str = TOKEN, **params: object):  # type: ignore[no-untyped-def]
    return client.post("/api/results", params={"repo": REPO, **params}, content=path.read_bytes(),
                       headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})


def _counts() -> tuple[int, int]:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import Measurement, Run

    with session_scope() as session:
        return (session.exec(select(func.count()).select_from(Run)).one(),
                session.exec(select(func.count()).select_from(Measurement)).one())


def test_uploads_are_stored_analysed_and_reported_on_the_pull_request(
        upload_client: TestClient, fake_github: FakeGitHub, legacy_repo: dict[str, str], shared_corpus: Path) -> None:
    formats = shared_corpus / "formats"
    baseline = formats / f"{PDFMINER}/0001_baseline.json"
    device = {"device_class": "NVIDIA H100 80GB HBM3"}

    assert _post(upload_client, baseline, token="wrong", commit=legacy_repo["base"], **device).status_code == 401
    for params, status, message in [
        ({"commit": "0" * 40}, 400, "is not a commit of acme/legacy-kernels"),
        ({"commit": legacy_repo["head"], "pr": 5}, 400, "needs --base"),
        ({"commit": legacy_repo["head"], "pr": 5, "base": legacy_repo["base"]}, 400, "no uploaded results for the base"),
        ({"commit": legacy_repo["base"], "format": "asv"}, 400, "asv"),
    ]:
        answer = _post(upload_client, baseline, **device, **params)
        assert answer.status_code == status and message in answer.json()["detail"], answer.text
    assert _counts() == (0, 0)  # nothing half-stored
    assert upload_client.post("/api/results", params={"repo": "acme/nope", "commit": "HEAD", **device}, content=baseline.read_bytes(),
                              headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404

    stored = _post(upload_client, baseline, commit=legacy_repo["base"], **device)
    assert stored.status_code == 200, stored.text
    body = stored.json()
    assert body["created"] and body["format"] == "pytest-benchmark" and body["measurements"] == 9
    assert _post(upload_client, baseline, commit=legacy_repo["base"], **device).json()["created"] is False
    assert _counts() == (1, 9)
    run = upload_client.get(f"/api/runs/{body['run_id']}").json()
    assert run["run"]["trigger"] == "upload" and run["run"]["state"] == "succeeded"
    assert run["device"]["device_class"] == "NVIDIA H100 80GB HBM3" and len(run["measurements"]) == 9
    assert upload_client.get("/").status_code == 200

    qutip = sorted((formats / QUTIP).glob("*.json"))
    assert _post(upload_client, qutip[0], commit=legacy_repo["base"], **device).status_code == 200
    mismatch = _post(upload_client, qutip[1], commit=legacy_repo["head"], pr=5, base=legacy_repo["base"],
                     device_class="NVIDIA H200")
    assert mismatch.status_code == 400 and "device mismatch" in mismatch.json()["detail"]

    pr = _post(upload_client, qutip[1], commit=legacy_repo["head"], pr=5, base=legacy_repo["base"], **device)
    assert pr.status_code == 200, pr.text
    # Two autosaved qutip runs of the same commit: the 2 benchmarks both hold change +0.9 % and -0.1 %,
    # far inside the threshold of single runs whose run-to-run noise nobody has measured yet. The
    # head's file lacks the base's other 10, so the check is not green until that is accepted.
    assert pr.json()["verdict"] == "missing"
    assert embedded.REPORTS.drain(120), "the reports were not delivered"  # embedded: the reporter's lane
    (status,) = fake_github.statuses(REPO, legacy_repo["head"])
    assert status["state"] == "failure" and status["target_url"].startswith("http://roofwatch.test/compare/")
    assert status["description"].startswith("10 benchmarks of the base missing on the head: bench_steadystate[")
    (comment,) = fake_github.comments(REPO, 5)
    assert "uploaded, not re-measured" in comment["body"] and "Uploaded, not re-measured." in comment["body"]
    assert "Missing on the head (10)" in comment["body"] and "not in the head's uploaded results" in comment["body"]
    assert "±50.0 %" in comment["body"]
    # Stored as an A/B's verdicts are: q-values adjusted over the upload's benchmarks, and the smallest
    # change it could report (no rounds, no power) is each benchmark's threshold.
    results = upload_client.get(f"/api/comparisons/{pr.json()['comparison_id']}").json()["results"]
    assert len(results) == 2 and all(r["direction"] == "none" for r in results)
    assert all(r["q_value"] >= r["p_value"] and r["mde_pct"] == r["threshold_pct"] == 50.0 for r in results), results

    accepted = upload_client.post(f"/api/comparisons/{pr.json()['comparison_id']}/accept-missing",
                                  json={"by": "release manager"}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["comparison"]["verdict"] == "no-change"
    assert embedded.REPORTS.drain(120)
    assert fake_github.statuses(REPO, legacy_repo["head"])[-1]["state"] == "success"
    (comment,) = fake_github.comments(REPO, 5)
    assert "accepted by `release manager (api-token)`" in comment["body"]
    assert fake_github.violations == []


def _with_samples(template: Path, dest: Path, samples: dict[str, list[float]]) -> Path:
    """``template``'s pytest-benchmark file with only the benchmarks named, each holding these samples."""
    data = json.loads(template.read_text())
    kept = []
    for bench in data["benchmarks"]:
        if bench["name"] in samples:
            values = samples[bench["name"]]
            ordered = sorted(values)
            bench["stats"].update(data=values, min=ordered[0], max=ordered[-1], median=statistics.median(values),
                                  mean=statistics.fmean(values), rounds=len(values))
            kept.append(bench)
    data["benchmarks"] = kept
    dest.write_text(json.dumps(data))
    return dest


def test_a_head_whose_own_samples_spread_wide_is_not_green(upload_client: TestClient, fake_github: FakeGitHub,
                                                          legacy_repo: dict[str, str], shared_corpus: Path,
                                                          tmp_path: Path) -> None:
    # The head is twice as slow on one benchmark, and four of its ten runs slower still: their spread puts the
    # noise threshold at about ±175 %. Within it, but far beyond the 5 % that counts, that is no "no change".
    template = sorted((shared_corpus / "formats" / QUTIP).glob("*.json"))[0]
    names = [b["name"] for b in json.loads(template.read_text())["benchmarks"]][:2]
    steady = [0.020 * (1 + 0.004 * ((i * 7) % 5 - 2)) for i in range(10)]
    slow = [2 * v for v in steady[:6]] + [3.6 * v for v in steady[6:]]
    device = {"device_class": "NVIDIA H100 80GB HBM3"}
    base = _with_samples(template, tmp_path / "base.json", {names[0]: steady, names[1]: steady})
    head = _with_samples(template, tmp_path / "head.json", {names[0]: slow, names[1]: list(reversed(steady))})
    assert _post(upload_client, base, commit=legacy_repo["base"], **device).status_code == 200
    pr = _post(upload_client, head, commit=legacy_repo["head"], pr=7, base=legacy_repo["base"], **device)
    assert pr.status_code == 200, pr.text
    assert pr.json()["verdict"] == "inconclusive"
    results = {r["benchmark"]: r for r in
               upload_client.get(f"/api/comparisons/{pr.json()['comparison_id']}").json()["results"]}
    assert results[names[0]]["direction"] == "inconclusive" and results[names[0]]["threshold_pct"] > 150
    assert results[names[0]]["change_pct"] == pytest.approx(100, abs=5)
    assert results[names[1]]["direction"] == "none"
    assert embedded.REPORTS.drain(120), "the reports were not delivered"
    (status,) = fake_github.statuses(REPO, legacy_repo["head"])
    assert status["state"] == "pending"  # neutral: a commit status knows no grey, and never green
    (comment,) = fake_github.comments(REPO, 7)
    assert "Inconclusive (1): not a green check" in comment["body"]
    assert "two single runs cannot tell it from a change" in comment["body"]
    assert "(run-to-run noise not yet known)" in comment["body"]  # one earlier upload: no spread to read
    page = upload_client.get(f"/compare/{pr.json()['comparison_id']}")
    assert page.status_code == 200 and "inconclusive" in page.text
    assert fake_github.violations == []


def test_the_cli_uploads_and_refuses_bad_input(roofwatch_env: Path, legacy_repo: dict[str, str],
                                               shared_corpus: Path) -> None:
    env = {"ROOFWATCH_DATA_DIR": str(roofwatch_env)}
    roofwatch(["repo", "add", REPO, "--clone-url", legacy_repo["path"]], env)
    nvbench = shared_corpus / "formats/nvbench/test_cmp.json"
    done = roofwatch(["upload", str(nvbench), "--repo", REPO, "--commit", legacy_repo["base"],
                      "--device-class", "Quadro GP100", "--output", "json"], env)
    out = json.loads(done.stdout)
    assert out["format"] == "nvbench" and out["device_class"] == "Quadro GP100" and out["measurements"] == 44
    bad = roofwatch(["upload", str(nvbench), "--repo", REPO, "--commit", legacy_repo["head"]], env, check=False)
    assert bad.returncode == 2 and "choose one with --device-class" in bad.stderr
    gone = roofwatch(["upload", str(nvbench), "--repo", REPO, "--commit", "no-such-ref",
                      "--device-class", "Quadro GP100"], env, check=False)
    assert gone.returncode == 2 and "is not a commit of" in gone.stderr


@pytest.mark.parametrize(("head_samples", "verdict", "status"), [
    ("same", "no-change", 0),
    ("only the first", "missing", 1),  # the head's file lacks the base's second benchmark
    ("spread wide", "inconclusive", 3),
])
def test_a_pull_request_upload_exits_as_its_check_reads(roofwatch_env: Path, legacy_repo: dict[str, str],
                                                        shared_corpus: Path, tmp_path: Path, head_samples: str,
                                                        verdict: str, status: int) -> None:
    """A CI step running `roofwatch upload --pr` fails where the pull request's check is not green, and exits 3
    where it is undecided, as `roofwatch compare` does for the same verdict."""
    template = sorted((shared_corpus / "formats" / QUTIP).glob("*.json"))[0]
    names = [b["name"] for b in json.loads(template.read_text())["benchmarks"]][:2]
    steady = [0.020 * (1 + 0.004 * ((i * 7) % 5 - 2)) for i in range(10)]
    wide = [2 * v for v in steady[:6]] + [3.6 * v for v in steady[6:]]  # as in the API's spread-wide case
    heads = {"same": {names[0]: steady, names[1]: steady}, "only the first": {names[0]: steady},
             "spread wide": {names[0]: wide, names[1]: steady}}
    base = _with_samples(template, tmp_path / "base.json", {names[0]: steady, names[1]: steady})
    head = _with_samples(template, tmp_path / "head.json", heads[head_samples])
    env = {"ROOFWATCH_DATA_DIR": str(roofwatch_env)}
    device = ["--device-class", "NVIDIA H100 80GB HBM3"]
    roofwatch(["repo", "add", REPO, "--clone-url", legacy_repo["path"]], env)
    roofwatch(["upload", str(base), "--repo", REPO, "--commit", legacy_repo["base"], *device], env)
    done = roofwatch(["upload", str(head), "--repo", REPO, "--commit", legacy_repo["head"], *device,
                      "--pr", "9", "--base", legacy_repo["base"], "--output", "json"], env, check=False)
    assert json.loads(done.stdout)["verdict"] == verdict, done.stdout + done.stderr
    assert done.returncode == status


def test_an_uploaded_file_is_stored_redacted(roofwatch_env: Path, legacy_repo: dict[str, str],
                                             shared_corpus: Path, tmp_path: Path) -> None:
    """A team's result file is text from its CI: a token or a credentialed URL in it is never stored."""
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import Benchmark, Run

    token = "ghp_" + "A1b2C3d4E5" * 4
    data = json.loads((shared_corpus / "formats" / PDFMINER / "0001_baseline.json").read_text())
    first = data["benchmarks"][0]
    first["name"] = first["fullname"] = f"test_fetch[https://ci:{token}@git.example.com/acme.git]"
    leaky = tmp_path / "leaky.json"
    leaky.write_text(json.dumps(data))
    env = {"ROOFWATCH_DATA_DIR": str(roofwatch_env)}
    roofwatch(["repo", "add", REPO, "--clone-url", legacy_repo["path"]], env)
    roofwatch(["upload", str(leaky), "--repo", REPO, "--commit", legacy_repo["base"],
               "--device-class", "NVIDIA H100 80GB HBM3"], env)
    with session_scope() as session:
        names = [b.name for b in session.exec(select(Benchmark)).all()]
        logs = [r.log_excerpt for r in session.exec(select(Run)).all()]
    assert len(names) == len(data["benchmarks"])
    assert any("https://***@git.example.com" in name for name in names)
    assert token not in repr(names) + repr(logs)
