"""The JSON API and the dashboard pages over a real seeded history."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_runs_benchmarks_series_changes(seeded_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(seeded_app)
    assert client.get("/healthz").json() == {"status": "ok"}

    runs = client.get("/api/runs").json()
    assert sorted(r["state"] for r in runs) == ["failed", "succeeded", "succeeded"]

    benchmarks = client.get("/api/benchmarks", params={"repo": "acme/kernels"}).json()
    assert sorted(b["name"] for b in benchmarks) == ["test_busy", "test_saxpy"]
    busy = next(b for b in benchmarks if b["name"] == "test_busy")
    assert busy["flops"] == 40000 and busy["bytes"] == 160000

    series = client.get(f"/api/benchmarks/{busy['id']}/series").json()
    points = series["points"]
    assert len(points) == 3
    assert all(p["median"] > 0 and p["n"] >= 15 for p in points)
    assert all(abs(p["achieved_flops"] - 40000 / p["median"]) < 1e-6 * p["achieved_flops"] for p in points)

    changes = client.get("/api/changes").json()
    assert any(c["kind"] == "correctness-failure" and c["state"] == "fixed" for c in changes)
    # Pages of one, followed through their Link headers, list exactly the same changes.
    paged, url = [], "/api/changes?limit=1"
    while url:
        page = client.get(url)
        paged += page.json()
        url = page.headers.get("link", "").partition("<")[2].partition(">")[0]
    assert paged == changes and len(changes) >= 1
    assert client.get("/api/changes", params={"after": changes[-1]["id"]}).json() == []
    assert "link" not in client.get("/api/changes").headers  # the default page holds them all

    run = client.get(f"/api/runs/{runs[-1]['id']}").json()
    assert {s["name"] for s in run["suites"]} == {"correctness", "benchmarks"}
    assert run["device"]["device_class"]


def test_unknown_ids_are_404_not_500(seeded_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(seeded_app)
    assert client.get("/api/runs/999999").status_code == 404
    assert client.get("/api/benchmarks/999999/series").status_code == 404
    assert client.get("/api/runs", params={"repo": "nobody/nothing"}).status_code == 404
    assert client.get("/api/runs", params={"limit": 0}).status_code == 422
    assert client.get("/runs/999999").status_code == 404


def test_dashboard_pages_and_local_plotly(seeded_app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(seeded_app)
    page = client.get("/")
    assert page.status_code == 200
    assert 'src="/static/plotly.min.js"' in page.text and "cdn" not in page.text.lower()
    # The overview lists benchmarks in a table with a server-rendered SVG sparkline each (no per-row Plotly).
    assert page.text.count('<tr class="benchmark-row"') == 2 and page.text.count('<svg class="spark"') == 2
    script = client.get("/static/plotly.min.js")
    assert script.status_code == 200 and len(script.content) > 1_000_000
    run_id = client.get("/api/runs").json()[0]["id"]
    run_page = client.get(f"/runs/{run_id}")
    assert run_page.status_code == 200 and "Measurements" in run_page.text


def test_triage_needs_the_token_and_keeps_a_history(seeded_app, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from roofwatch.service.core.config import get_settings

    client = TestClient(seeded_app)
    change = client.get("/api/changes").json()[0]
    body = {"state": "acknowledged", "note": "looking"}
    monkeypatch.delenv("ROOFWATCH_API_TOKEN", raising=False)
    get_settings.cache_clear()
    assert client.patch(f"/api/changes/{change['id']}", json=body).status_code == 403  # writes disabled

    monkeypatch.setenv("ROOFWATCH_API_TOKEN", "s3cret")
    get_settings.cache_clear()
    assert client.patch(f"/api/changes/{change['id']}", json=body).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert client.patch(f"/api/changes/{change['id']}", json=body, headers=wrong).status_code == 401
    auth = {"Authorization": "Bearer s3cret"}
    assert client.patch("/api/changes/999999", json=body, headers=auth).status_code == 404
    bad = client.patch(f"/api/changes/{change['id']}", json={"state": "ignored"}, headers=auth)
    assert bad.status_code == 422 and "'new', 'acknowledged', 'expected', 'invalid' or 'fixed'" in bad.text

    done = client.patch(f"/api/changes/{change['id']}", json=body, headers=auth).json()
    assert done["state"] == "acknowledged"
    assert done["details"]["triage"][-1] == {**done["details"]["triage"][-1], "from": change["state"],
                                             "to": "acknowledged", "note": "looking"}
    back = client.patch(f"/api/changes/{change['id']}", json={"state": change["state"]}, headers=auth).json()
    assert back["state"] == change["state"] and len(back["details"]["triage"]) == 2
    get_settings.cache_clear()
