"""The Docker deployment: docker-compose.yml, Dockerfile, .env.example, .dockerignore.

The compose file is validated against the Compose Specification's JSON schema, which ships inside
the ``docker-compose==1.29.2`` wheel; ``scripts/test.sh`` downloads that wheel once into
``.cache/compose-spec/`` and the schema is read straight out of it. Without the wheel the schema
tests skip (under ``CI=true`` they fail). The other tests check what a schema cannot: GPU workers
hold no credentials, every ``ROOFWATCH_*`` name is a real setting, dependencies wait for health,
volumes are declared, each GPU worker reserves its own GPU, and suites run as ``suite``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from support.environment import IN_CI

from roofwatch.common.settings import WorkerSettings
from roofwatch.service.core.config import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERIGNORE = ROOT / ".dockerignore"
SPEC_DIR = ROOT / ".cache" / "compose-spec"
SPEC_MEMBER = "compose/config/compose_spec.json"

# Read by docker compose for interpolation only, never by roofwatch: the gpu.<class> queue name.
INTERPOLATION_ONLY = {"ROOFWATCH_DEVICE_CLASS"}
SUITE_USER = "suite"

_NAME = re.compile(r"\bROOFWATCH_[A-Z0-9_]+\b")
# ${NAME, ${NAME:-default}, ${NAME-default}; not $${...}, which compose passes on as ${...}.
_INTERPOLATED = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)")
# The innermost expression: a default holding no braces, so nested defaults resolve inside out.
_EXPRESSION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^{}]*))?\}")


def is_credential(name: str) -> bool:
    return name in ("ROOFWATCH_DATABASE_URL", "ROOFWATCH_API_TOKEN") or name.startswith("ROOFWATCH_GITHUB_")


# --- reading the files -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The compose file with anchors and merge keys resolved, as compose sees it before interpolation."""
    document = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(document, dict)
    return document


@pytest.fixture(scope="module")
def compose_spec() -> dict[str, Any]:
    wheels = sorted(SPEC_DIR.glob("docker_compose-1.29.2-*.whl"))
    if not wheels:
        message = (f"no docker-compose 1.29.2 wheel in {SPEC_DIR.relative_to(ROOT)}: the Compose Specification "
                   "schema ships inside it; ./scripts/test.sh downloads it")
        if IN_CI:
            pytest.fail(message + " — CI must validate docker-compose.yml")
        pytest.skip(message)
    with zipfile.ZipFile(wheels[0]) as wheel:
        return json.loads(wheel.read(SPEC_MEMBER))


def validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """The schema says draft 2019-09, as ``http://json-schema.org/draft/2019-09/schema#``, an id
    jsonschema does not recognise (``validator_for`` would fall back to 2020-12 with a warning)."""
    assert "draft/2019-09" in schema["$schema"]
    jsonschema.Draft201909Validator.check_schema(schema)
    return jsonschema.Draft201909Validator(schema)


def dotenv(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def operator_env() -> dict[str, str]:
    """``.env.example`` as an operator fills it: every empty secret set (tokens as it says: 64 hex digits)."""
    def filled(name: str) -> str:
        return hashlib.sha256(name.encode()).hexdigest() if name.endswith(("_TOKEN", "_SECRET")) else f"{name.lower()}-value"
    return {name: value or filled(name) for name, value in dotenv(ENV_EXAMPLE).items()}


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's interpolation of ``${NAME}``, ``${NAME:-default}``, ``${NAME-default}`` and ``$$``."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, operator, default = match.groups()
        if operator == ":-":
            return env.get(name) or default
        if operator == "-":
            return env.get(name, default)
        return env.get(name, "")

    text = value.replace("$$", "\0")
    while (resolved := _EXPRESSION.sub(substitute, text)) != text:
        text = resolved
    assert "${" not in text, f"interpolation this test does not model: {value!r}"
    return text.replace("\0", "$")


def environment(service: dict[str, Any]) -> dict[str, Any]:
    entries = service.get("environment") or {}
    if isinstance(entries, list):
        return dict(entry.partition("=")[::2] for entry in entries)
    return dict(entries)


def env_files(service: dict[str, Any]) -> list[str]:
    files = service.get("env_file") or []
    return [files] if isinstance(files, str) else list(files)


def command(service: dict[str, Any]) -> list[str]:
    value = service.get("command") or []
    return value.split() if isinstance(value, str) else [str(part) for part in value]


def roofwatch_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: service for name, service in compose["services"].items()
            if str(service.get("image", "")).startswith("roofwatch:")}


def gpu_devices(service: dict[str, Any]) -> list[dict[str, Any]]:
    reservations = service.get("deploy", {}).get("resources", {}).get("reservations", {})
    return list(reservations.get("devices") or [])


def gpu_workers(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    workers = {name: service for name, service in compose["services"].items()
               if "--gpu" in command(service) or gpu_devices(service)}
    assert workers, "docker-compose.yml defines no GPU worker"
    return workers


def container_env(service: dict[str, Any]) -> dict[str, str]:
    """What a container's process environment holds: its env_file (.env from .env.example), then environment."""
    dotenv_file = operator_env()  # also what compose interpolates with
    values: dict[str, str] = {}
    for name in env_files(service):
        assert name == ".env", f"unexpected env_file {name}"
        values.update(dotenv_file)
    values.update({key: "" if value is None else str(value)
                   for key, value in interpolate(environment(service), dotenv_file).items()})
    return values


def joined_dockerfile() -> str:
    """The Dockerfile with continuation lines joined, one instruction per line."""
    return re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())


# --- the Compose Specification ------------------------------------------------------------------

def test_compose_file_matches_the_compose_specification(compose: dict[str, Any],
                                                        compose_spec: dict[str, Any]) -> None:
    errors = sorted(validator(compose_spec).iter_errors(compose), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)


@pytest.mark.parametrize("break_it", [
    pytest.param(lambda doc: doc["services"]["api"].update(healthcheck_url="/healthz"), id="unknown-service-key"),
    pytest.param(lambda doc: doc["services"]["api"].update(ports="oops"), id="ports-not-a-list"),
    pytest.param(lambda doc: doc["services"]["api"].update(depends_on={"postgres": {"condition": "healthy"}}),
                 id="unknown-condition"),
    pytest.param(lambda doc: doc.update(service={}), id="unknown-top-level-key"),
])
def test_the_schema_rejects_a_broken_document(compose: dict[str, Any], compose_spec: dict[str, Any],
                                              break_it: Any) -> None:
    document = copy.deepcopy(compose)
    break_it(document)
    assert not validator(compose_spec).is_valid(document)


# --- what the schema cannot see -----------------------------------------------------------------

def test_gpu_workers_hold_no_credentials(compose: dict[str, Any]) -> None:
    for name, service in gpu_workers(compose).items():
        assert not env_files(service), f"{name}: an env_file would bring the service's secrets (.env holds them)"
        env = environment(service)
        held = [key for key in env if is_credential(key)]
        assert not held, f"{name} holds {held}"
        referenced = [var for value in env.values() for var in _INTERPOLATED.findall(str(value)) if is_credential(var)]
        assert not referenced, f"{name} interpolates {referenced}"
        assert env.get("ROOFWATCH_BROKER_URL"), f"{name} needs the broker"


def test_every_roofwatch_variable_is_a_setting() -> None:
    settings = {f"ROOFWATCH_{field.upper()}" for field in Settings.model_fields}
    named = set(_NAME.findall(COMPOSE.read_text())) | set(_NAME.findall(ENV_EXAMPLE.read_text()))
    unknown = sorted(named - settings - INTERPOLATION_ONLY)
    assert not unknown, f"not fields of roofwatch.service.core.config.Settings: {unknown}"
    assert not INTERPOLATION_ONLY & settings, "an interpolation-only variable became a setting: update this test"


def test_interpolation_only_variables_never_reach_a_container(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        assert not INTERPOLATION_ONLY & set(environment(service)), name


def test_every_variable_compose_interpolates_is_documented_for_the_operator() -> None:
    lines = ENV_EXAMPLE.read_text().splitlines()
    documented: dict[str, int] = {}
    for index, line in enumerate(lines):
        match = re.match(r"#?\s*([A-Z][A-Z0-9_]*)=", line)
        if match:
            documented.setdefault(match.group(1), index)
    missing = sorted(set(_INTERPOLATED.findall(COMPOSE.read_text())) - set(documented))
    assert not missing, f"docker-compose.yml interpolates {missing}, which .env.example does not explain"
    for name, index in documented.items():
        assert index > 0 and lines[index - 1].startswith("#"), f".env.example: {name} has no comment above it"
    for name, value in dotenv(ENV_EXAMPLE).items():
        if is_credential(name) or name.endswith("_PASSWORD"):
            assert value == "", f".env.example must leave the secret {name} empty"
    assert "secrets.token_hex" in ENV_EXAMPLE.read_text(), ".env.example should say how to generate secrets"


def container_settings(service: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                       extra: dict[str, str] | None = None) -> WorkerSettings:
    """What the container's roofwatch reads: a GPU worker its ``WorkerSettings`` alone, the rest ``Settings``."""
    for key in [key for key in os.environ if key.startswith("ROOFWATCH_")]:
        monkeypatch.delenv(key)
    for key, value in (container_env(service) | (extra or {})).items():
        monkeypatch.setenv(key, value)
    gpu_only = "--gpu" in command(service) or bool(gpu_devices(service))
    return (WorkerSettings if gpu_only else Settings)(_env_file=None)  # type: ignore[call-arg]


def test_each_container_environment_is_accepted_by_settings(compose: dict[str, Any],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Each container's settings load: a GPU worker in production without any of the service's credentials."""
    loaded: dict[str, Any] = {}
    for name, service in roofwatch_services(compose).items():
        loaded[name] = container_settings(service, monkeypatch)
    for name in gpu_workers(compose):
        assert type(loaded[name]) is WorkerSettings and not hasattr(loaded[name], "database_url")
        assert loaded[name].suite_user == SUITE_USER
        assert loaded[name].broker_url == "redis://:redis_password-value@redis:6379/0"
    service_side = {name: settings for name, settings in loaded.items() if name not in gpu_workers(compose)}
    assert service_side, "no api / cpu-worker / beat"
    for name, settings in service_side.items():
        assert settings.environment == "production", name
        assert settings.sqlalchemy_url.startswith("postgresql+psycopg://roofwatch:"), name
        assert settings.broker_url == loaded[next(iter(gpu_workers(compose)))].broker_url, name
    assert {settings.log_format for settings in loaded.values()} == {"json"}


def test_dependencies_wait_for_healthy_services(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        depends_on = service.get("depends_on") or {}
        assert isinstance(depends_on, dict), f"{name}: the list form of depends_on does not wait for health"
        for target, condition in depends_on.items():
            assert target in services, f"{name} depends on an undefined service {target}"
            assert condition.get("condition") == "service_healthy", f"{name} -> {target}"
            assert services[target].get("healthcheck"), f"{name} waits for {target}, which has no healthcheck"
    for name in ("postgres", "redis", "api"):
        assert services[name].get("healthcheck"), name
    assert "api" in services["cpu-worker"]["depends_on"], "the cpu worker needs the migrations the api applies"


def test_api_migrates_before_it_serves_and_reports_health(compose: dict[str, Any]) -> None:
    api = compose["services"]["api"]
    script = " ".join(command(api))
    assert script.index("roofwatch db upgrade") < script.index("roofwatch serve --host 0.0.0.0 --port 8000")
    probe = " ".join(api["healthcheck"]["test"])
    assert "urllib" in probe and "/healthz" in probe
    assert "8000:8000" in api["ports"]


def test_redis_keeps_queued_work_across_a_restart(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    assert "--appendonly yes" in " ".join(command(redis))
    assert any(str(volume).endswith(":/data") for volume in redis["volumes"])
    assert "redis-cli ping" in " ".join(redis["healthcheck"]["test"])


def test_named_volumes_are_declared_and_used(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    used: dict[str, set[str]] = {}
    for name, service in compose["services"].items():
        for volume in service.get("volumes") or []:
            if isinstance(volume, dict):
                source = volume.get("source", "") if volume.get("type", "volume") == "volume" else ""
            else:
                source = str(volume).split(":", 1)[0]
            if source and not source.startswith((".", "/", "~", "$")):
                used.setdefault(source, set()).add(name)
    assert not set(used) - declared, f"volumes used but not declared: {sorted(set(used) - declared)}"
    assert not declared - set(used), f"volumes declared but unused: {sorted(declared - set(used))}"
    for name in gpu_workers(compose):
        caches = [volume for volume, users in used.items() if name in users]
        assert caches and all(used[volume] == {name} for volume in caches), f"{name} needs its own checkout cache"


def test_each_gpu_worker_reserves_its_own_nvidia_gpu(compose: dict[str, Any]) -> None:
    seen_ids: set[str] = set()
    seen_names: set[str] = set()
    for name, service in gpu_workers(compose).items():
        devices = gpu_devices(service)
        assert len(devices) == 1, f"{name}: one device reservation"
        device = devices[0]
        assert device.get("driver") == "nvidia" and "gpu" in device.get("capabilities", []), name
        ids = device.get("device_ids") or []
        assert len(ids) == 1 and not seen_ids & set(ids), f"{name}: one GPU of its own, got {ids}"
        seen_ids |= set(ids)
        argv = command(service)
        assert argv[0] == "worker" and argv[argv.index("--gpu") + 1] == "0", \
            f"{name}: the one GPU a container sees is index 0"
        worker_name = argv[argv.index("--name") + 1]
        assert worker_name not in seen_names, f"{name}: worker names must be unique"
        seen_names.add(worker_name)
        queues = argv[argv.index("--queues") + 1]
        assert all(queue.startswith("gpu.") for queue in queues.split(",")), f"{name} serves only GPU queues"
        assert service.get("image") == "roofwatch:cuda", name


def test_suites_run_as_the_unprivileged_suite_user(compose: dict[str, Any]) -> None:
    dockerfile = joined_dockerfile()
    useradd = [line for line in dockerfile.splitlines() if re.search(rf"useradd\b[^&]*\s{SUITE_USER}(\s|$)", line)]
    assert useradd, f"the Dockerfile does not create the user {SUITE_USER}"
    assert re.search(rf"useradd [^&]*--shell /usr/sbin/nologin {SUITE_USER}\b", useradd[0]), "no login shell"
    for name, service in gpu_workers(compose).items():
        assert environment(service).get("ROOFWATCH_SUITE_USER") == SUITE_USER, name
        assert service.get("user") == "root", f"{name} must be root to switch to {SUITE_USER}"
    for name, service in roofwatch_services(compose).items():
        if name not in gpu_workers(compose):
            assert service.get("user") != "root", f"{name} has no reason to run as root"


def test_dockerfile_builds_cpu_and_cuda_images(compose: dict[str, Any]) -> None:
    dockerfile = joined_dockerfile()
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.MULTILINE)
    assert re.search(r"^ARG TORCH_INDEX_URL=https://download\.pytorch\.org/whl/cu\d+$", dockerfile, re.MULTILINE)
    assert re.search(r"^ARG TORCH_SPEC=torch==[\d.]+$", dockerfile, re.MULTILINE)
    assert re.search(r'^ENTRYPOINT \["roofwatch"\]$', dockerfile, re.MULTILINE)
    assert "pip install /opt/roofwatch/src" in dockerfile or "pip install ." in dockerfile
    for name, service in roofwatch_services(compose).items():
        args = (service.get("build") or {}).get("args") or {}
        cpu = args.get("TORCH_INDEX_URL") == "https://download.pytorch.org/whl/cpu"
        assert cpu == (name not in gpu_workers(compose)), f"{name}: CPU image iff it never runs a kernel"


def test_the_image_leaves_local_state_and_secrets_out() -> None:
    ignored = {line.strip() for line in DOCKERIGNORE.read_text().splitlines()}
    # Settings reads ./.env too: an image must never carry one.
    assert {".env", ".venv", ".git", ".cache", "test-artifacts"} <= ignored


def test_every_roofwatch_process_runs_in_production_gpu_workers_first(compose: dict[str, Any],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Production is what refuses ROOFWATCH_SANDBOX=unconfined, and GPU workers are where suites run."""
    from pydantic import ValidationError

    for name, service in roofwatch_services(compose).items():
        assert container_settings(service, monkeypatch).environment == "production", name
    for name, service in gpu_workers(compose).items():
        with pytest.raises(ValidationError, match="refusing to run suites without the sandbox in production"):
            container_settings(service, monkeypatch, {"ROOFWATCH_SANDBOX": "unconfined"})
