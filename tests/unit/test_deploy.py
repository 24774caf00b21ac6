"""The deployment files match the code: queues, settings, single beat, auth, graceful shutdown."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT
from voxqueue.celery_config import celery_config
from voxqueue.cli_settings_doc import every_name
from voxqueue.redis_conn import sentinel_address
from voxqueue.settings import QUEUES, DashboardSettings, RedisSettings, Settings
from voxqueue.up.process_table import (
    DEFAULT_PROCESSES,
    FLOWER_MAX_TASKS,
    FLOWER_NO_EVENTS_ASK,
    HEARTBEAT_S,
)

DEPLOY = ROOT / "deploy"


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_compose_has_one_worker_service_per_queue():
    services = compose()["services"]
    for queue in QUEUES:
        command = services[f"worker-{queue}"]["command"]
        assert command[:4] == ["celery", "-A", "workers", "worker"]
        assert flag(command, "-Q") == queue
        assert flag(command, "--prefetch-multiplier") == "1" and "-E" in command
        assert flag(command, "--heartbeat-interval") == str(HEARTBEAT_S)  # as `up` runs them
        assert flag(command, "-P") == "threads"  # I/O-bound with cloud providers
        replicas = services[f"worker-{queue}"].get("deploy", {}).get("replicas", 1)
        assert replicas == DEFAULT_PROCESSES.get(queue, 1)
    workers = [name for name, s in services.items() if "worker" in s.get("command", [])]
    assert sorted(workers) == sorted(f"worker-{q}" for q in QUEUES)


def test_compose_offline_override_uses_processes_for_models():
    override = yaml.safe_load((DEPLOY / "docker-compose.offline.yml").read_text())["services"]
    for queue in ("stt", "tts"):
        command = override[f"worker-{queue}"]["command"]
        assert flag(command, "-Q") == queue and flag(command, "-P") == "prefork"
    assert override["worker-tts"]["deploy"]["replicas"] == 1


def test_compose_redis_flower_and_beat():
    doc = compose()
    services = doc["services"]
    redis_cmd = " ".join(services["redis"]["command"])
    assert "--appendonly yes" in redis_cmd and "--maxmemory-policy noeviction" in redis_cmd
    # The password: a secret from REDIS_PASSWORD, into a config file, and REDISCLI_AUTH.
    assert doc["secrets"]["redis_password"] == {"environment": "REDIS_PASSWORD"}
    assert services["redis"]["secrets"] == ["redis_password"]
    entrypoint = " ".join(services["redis"]["entrypoint"])
    assert "requirepass" in entrypoint and "/run/secrets/redis_password" in entrypoint
    assert "exec docker-entrypoint.sh redis-server" in entrypoint  # the image drops to redis
    assert "REDISCLI_AUTH=" in " ".join(services["redis"]["healthcheck"]["test"])
    beats = [n for n, s in services.items() if "beat" in s.get("command", [])]
    assert beats == ["beat"] and services["beat"]["deploy"]["replicas"] == 1
    from voxqueue.up.process_table import BEAT_SCHEDULER

    assert BEAT_SCHEDULER in services["beat"]["command"]
    assert "FLOWER_BASIC_AUTH" in services["flower"]["environment"]
    assert services["flower"]["ports"] == ["127.0.0.1:5555:5555"]
    # A day of turns in its task list, as `voxqueue up` runs it (its own default is 10,000).
    assert f"--max_tasks={FLOWER_MAX_TASKS}" in services["flower"]["command"]
    assert FLOWER_NO_EVENTS_ASK in services["flower"]["command"]  # idle workers stay asleep
    assert DashboardSettings.model_fields["flower_max_tasks"].default == FLOWER_MAX_TASKS


def test_compose_environment_names_are_real_settings_and_shutdown_is_graceful():
    services = compose()["services"]
    fields = every_name()
    soft = celery_config(Settings())["worker_soft_shutdown_timeout"]
    for name, service in services.items():
        for var in service.get("environment", {}):
            if var.startswith("VOXQUEUE_"):
                assert var in fields, f"{name}: {var} is not a setting"
        if "worker" in service.get("command", []):
            assert service["environment"]["REMAP_SIGTERM"] == "SIGQUIT"
            assert int(service["stop_grace_period"].rstrip("s")) > soft


CANARY = "canary-Redis-pw-41"


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's variable substitution: ``${VAR}``, ``${VAR:-default}``, ``${VAR:?error}``,
    ``$VAR`` and ``$$`` (a literal ``$``, left for the container's shell)."""
    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$$"
        name = m.group(1) or m.group(3)
        return env.get(name, m.group(2)[2:] if m.group(2) and m.group(2).startswith(":-") else "")

    return re.sub(r"\$\$|\$\{(\w+)(:[-?][^}]*)?\}|\$(\w+)", one, text)


def compose_files() -> list[dict]:
    env = {"REDIS_PASSWORD": CANARY, "FLOWER_BASIC_AUTH": f"admin:{CANARY}",
           "OPENAI_API_KEY": CANARY, "ELEVENLABS_API_KEY": CANARY}
    return [yaml.safe_load(interpolate((DEPLOY / name).read_text(), env))
            for name in ("docker-compose.yml", "docker-compose.offline.yml")]


def argv_lists(service: dict) -> list[str]:
    """What a service puts on command lines: entrypoint, command, healthcheck test."""
    parts = [service.get("entrypoint"), service.get("command"),
             service.get("healthcheck", {}).get("test")]
    return [" ".join(p) if isinstance(p, list) else str(p) for p in parts if p]


def test_no_password_on_any_command_line_in_compose():
    """``ps`` shows argv: the Redis password must be in none, not even through a variable that
    the container's shell would expand into one."""
    doc = compose_files()[0]
    assert CANARY in doc["services"]["worker-stt"]["environment"]["VOXQUEUE_REDIS_URL"]
    for text in (t for d in compose_files() for s in d["services"].values() for t in argv_lists(s)):
        assert CANARY not in text
        assert "REDIS_PASSWORD" not in text  # e.g. redis-cli -a "$REDIS_PASSWORD"
        assert not re.search(r"--requirepass|redis-cli[^|]*\s(-a|--pass|--user)\s", text), text


def test_no_password_in_kubernetes_commands():
    docs = list(yaml.safe_load_all((DEPLOY / "k8s" / "voxqueue.yaml").read_text()))
    for dep in (d for d in docs if d["kind"] == "Deployment"):
        for container in dep["spec"]["template"]["spec"]["containers"]:
            from_secrets = {e["name"] for e in container["env"]
                            if "secretKeyRef" in e.get("valueFrom", {})}
            argv = " ".join(container.get("command", []) + container.get("args", []))
            assert not set(re.findall(r"\$\((\w+)\)", argv)) & from_secrets, argv
            assert "requirepass" not in argv and "redis://" not in argv
    auth = next(d for d in docs if d["kind"] == "TriggerAuthentication")
    assert auth["spec"]["secretTargetRef"][0]["key"] == "redis-password"


PROVIDER_KEYS = {"OPENAI_API_KEY", "ELEVENLABS_API_KEY"}
NEEDS = {"stt": {"OPENAI_API_KEY"}, "agent": {"OPENAI_API_KEY"}, "tts": {"ELEVENLABS_API_KEY"}}


def test_provider_keys_only_reach_the_workers_that_call_providers():
    docs = list(yaml.safe_load_all((DEPLOY / "k8s" / "voxqueue.yaml").read_text()))
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert {"voxqueue-flower", "voxqueue-exporter", "voxqueue-beat",
            "voxqueue-gateway"} <= set(deployments)
    for name, dep in deployments.items():
        container = dep["spec"]["template"]["spec"]["containers"][0]
        keys = {e["name"] for e in container["env"]} & PROVIDER_KEYS
        queue = name.removeprefix("voxqueue-worker-") if "-worker-" in name else ""
        assert keys == NEEDS.get(queue, set()), name
    services = compose()["services"]
    for name, service in services.items():
        keys = set(service.get("environment", {})) & PROVIDER_KEYS
        assert keys == NEEDS.get(name.removeprefix("worker-"), set()), name


def test_the_gateway_is_shipped_as_the_devices_way_in():
    docs = list(yaml.safe_load_all((DEPLOY / "k8s" / "voxqueue.yaml").read_text()))
    (gateway,) = [d for d in docs if d["kind"] == "Deployment"
                  and d["metadata"]["name"] == "voxqueue-gateway"]
    container = gateway["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["voxqueue", "gateway"]
    assert gateway["spec"]["replicas"] >= 2
    assert any(d["kind"] == "Service" and d["metadata"]["name"] == "voxqueue-gateway"
               for d in docs)
    service = compose()["services"]["gateway"]
    assert service["command"][:2] == ["voxqueue", "gateway"]
    assert "gateway" in (DEPLOY / "Dockerfile.workers").read_text()


def test_compose_serves_the_gateway_over_tls_and_caps_redis_memory():
    """Tokens never cross the network in clear from compose's gateway, and Redis has a memory
    cap with noeviction (refuse writes at the cap, never drop a queued job or a turn)."""
    doc = compose()
    gateway = doc["services"]["gateway"]["command"]
    assert flag(gateway, "--certfile") == "/run/secrets/gateway_cert"
    assert flag(gateway, "--keyfile") == "/run/secrets/gateway_key"
    assert set(doc["secrets"]) >= {"gateway_cert", "gateway_key"}
    redis_cmd = doc["services"]["redis"]["command"]
    assert flag(redis_cmd, "--maxmemory") and flag(redis_cmd, "--maxmemory-policy") == "noeviction"


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker client")
def test_docker_compose_config_accepts_the_file():
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("docker compose plugin not installed")
    env = {"REDIS_PASSWORD": "x", "FLOWER_BASIC_AUTH": "a:b", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["docker", "compose", "-f", str(DEPLOY / "docker-compose.yml"),
                           "config", "-q"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_kubernetes_manifests_are_generated_from_the_code():
    done = subprocess.run([sys.executable, str(DEPLOY / "k8s" / "generate.py"), "--check"],
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, "run python deploy/k8s/generate.py"
    docs = list(yaml.safe_load_all((DEPLOY / "k8s" / "voxqueue.yaml").read_text()))
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    scaled = {d["spec"]["scaleTargetRef"]["name"]: d for d in docs if d["kind"] == "ScaledObject"}
    soft = celery_config(Settings())["worker_soft_shutdown_timeout"]
    for queue in QUEUES:
        dep = deployments[f"voxqueue-worker-{queue}"]
        pod = dep["spec"]["template"]["spec"]
        assert flag(pod["containers"][0]["command"], "-Q") == queue
        assert pod["terminationGracePeriodSeconds"] > soft
        env = {e["name"]: e for e in pod["containers"][0]["env"]}
        assert env["REMAP_SIGTERM"]["value"] == "SIGQUIT"
        # Kubernetes expands $(VAR) only for variables the container declares: the pod's name
        # from the downward API gives every replica its own worker name.
        command = pod["containers"][0]["command"]
        assert flag(command, "-n") == f"{queue}@$(POD_NAME)"
        assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        assert "secretKeyRef" in env["VOXQUEUE_REDIS_URL"]["valueFrom"]
        spec = scaled[f"voxqueue-worker-{queue}"]["spec"]
        trigger = spec["triggers"][0]
        assert trigger["type"] == "redis" and trigger["metadata"]["listName"] == queue
        assert dep["spec"]["replicas"] == spec["minReplicaCount"] == DEFAULT_PROCESSES.get(
            queue, 1)
    for dep in deployments.values():
        container = dep["spec"]["template"]["spec"]["containers"][0]
        declared = {e["name"] for e in container["env"]}
        used = set(re.findall(r"\$\((\w+)\)", " ".join(container["command"])))
        assert used <= declared, f"{dep['metadata']['name']}: {used - declared} not declared"
    beat = deployments["voxqueue-beat"]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"]["type"] == "Recreate"
    assert "voxqueue-beat" not in scaled


def test_grafana_dashboard_queries_metrics_the_exporter_has():
    from voxqueue.observability.metrics import TurnMetrics

    known = {m.name for m in TurnMetrics().registry.collect()}
    dashboard = json.loads((DEPLOY / "grafana" / "voxqueue-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 8
    for expr in exprs:
        names = {re.sub(r"_(bucket|count|sum|total)$", "", n)
                 for n in re.findall(r"voxqueue_[a-z_]+", expr)}
        assert names and names <= known, expr


def test_the_wyoming_server_is_shipped_for_home_assistant():
    service = compose()["services"]["wyoming"]
    assert service["command"][:2] == ["voxqueue", "wyoming"]
    assert flag(service["command"], "--uri") == "tcp://0.0.0.0:10300"
    assert "10300:10300" in service["ports"]
    assert "wyoming" in (DEPLOY / "Dockerfile.workers").read_text()
    # Unset, it answers only this machine (no LAN host) and its turns have no side effects.
    from voxqueue.wyoming.guard import allowed, networks

    env = yaml.safe_load(interpolate((DEPLOY / "docker-compose.yml").read_text(), {}))[
        "services"]["wyoming"]["environment"]
    allow = networks(env["VOXQUEUE_WYOMING_ALLOW"])
    assert allowed(("127.0.0.1", 1), allow)
    assert not any(allowed((lan, 1), allow) for lan in ("192.168.1.10", "10.0.0.5",
                                                         "172.17.0.1"))
    assert env["VOXQUEUE_WYOMING_TOOLS"] == ""


@pytest.mark.parametrize("unit", ["voxqueue-wyoming.service", "voxqueue-satellite.service",
                                  "voxqueue-edge.service"])
def test_systemd_units_run_real_commands_with_real_settings(unit):
    text = (DEPLOY / "systemd" / unit).read_text()
    (start,) = re.findall(r"^ExecStart=/opt/voxqueue/bin/voxqueue (\w+)", text, re.M)
    done = subprocess.run([sys.executable, "-m", "voxqueue.cli", start, "--help"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    fields = every_name()
    for var in re.findall(r"^#\s+(VOXQUEUE_\w+)=", text, re.M):
        assert var in fields, f"{unit}: {var} is not a setting"


DEVICE_COMMANDS = ("edge", "satellite")


@pytest.mark.parametrize("unit", ["voxqueue-edge.service", "voxqueue-satellite.service"])
def test_device_units_reach_the_server_through_the_gateway_without_the_redis_password(unit):
    """A device holds its own token, revocable on its own; the Redis password would give it
    every device's turns, memory and announcements."""
    text = (DEPLOY / "systemd" / unit).read_text()
    (start,) = re.findall(r"^ExecStart=/opt/voxqueue/bin/voxqueue (\w+)(.*)$", text, re.M)
    assert start[0] in DEVICE_COMMANDS and "--trusted-host" not in start[1]
    variables = dict(re.findall(r"^#\s+(VOXQUEUE_\w+)=(\S*)", text, re.M))
    assert {"VOXQUEUE_GATEWAY_URL", "VOXQUEUE_DEVICE_TOKEN"} <= set(variables)
    assert variables["VOXQUEUE_GATEWAY_URL"].startswith("https://")
    assert "VOXQUEUE_REDIS_URL" not in text and "VOXQUEUE_EDGE_DIRECT_REDIS" not in variables
    assert not re.search(r"rediss?://|PASSWORD", text), unit


def test_no_device_in_compose_kubernetes_or_the_edge_image_holds_the_redis_password():
    dockerfile = (DEPLOY / "Dockerfile.edge").read_text()
    assert "REDIS" not in dockerfile and "--trusted-host" not in dockerfile
    for doc in compose_files():
        for name, service in doc["services"].items():
            command = service.get("command") or []
            if command[:2] in (["voxqueue", c] for c in DEVICE_COMMANDS):
                assert "VOXQUEUE_REDIS_URL" not in service.get("environment", {}), name
                assert "VOXQUEUE_GATEWAY_URL" in service.get("environment", {}), name
    docs = list(yaml.safe_load_all((DEPLOY / "k8s" / "voxqueue.yaml").read_text()))
    for dep in (d for d in docs if d["kind"] == "Deployment"):
        for container in dep["spec"]["template"]["spec"]["containers"]:
            if container["command"][:2] in (["voxqueue", c] for c in DEVICE_COMMANDS):
                assert "VOXQUEUE_REDIS_URL" not in {e["name"] for e in container["env"]}


def test_compose_sentinel_override_points_every_process_at_the_sentinels():
    base = compose()
    sentinel = yaml.safe_load((DEPLOY / "docker-compose.sentinel.yml").read_text())
    uses_redis = {name for name, service in base["services"].items()
                  if "VOXQUEUE_REDIS_URL" in (service.get("environment") or {})}
    assert uses_redis and uses_redis <= set(sentinel["services"]), \
        "every process that reaches Redis follows the sentinels"
    sentinels = [n for n in sentinel["services"] if n.startswith("sentinel-")]
    assert len(sentinels) == 3
    for name in uses_redis:
        env = sentinel["services"][name]["environment"]
        url = env["VOXQUEUE_REDIS_URL"].replace("${REDIS_PASSWORD:?set REDIS_PASSWORD}", "pw")
        settings = Settings(redis=RedisSettings(url=url, master=env["VOXQUEUE_REDIS_MASTER"]))
        address = sentinel_address(settings)
        assert address is not None and address.password == "pw"
        assert sorted(h for h, _ in address.sentinels) == sorted(sentinels)
    script = " ".join(sentinel["services"]["sentinel-1"]["entrypoint"])
    master = sentinel["services"]["worker-agent"]["environment"]["VOXQUEUE_REDIS_MASTER"]
    assert f"sentinel monitor {master} redis 6379 2" in script  # two of three agree
    assert "auth-pass" in script
    replica = " ".join(sentinel["services"]["redis-replica"]["entrypoint"])
    assert "replicaof redis 6379" in replica and "masterauth" in replica
    assert "masterauth" in " ".join(sentinel["services"]["redis"]["entrypoint"]), \
        "the old primary follows the new one when it comes back"
    assert "--appendfsync" in sentinel["services"]["redis-replica"]["command"]
    # As the failover tests' servers (testkit/sentinel.py SYNC_AT_ONCE): a replica syncs at once.
    for server in ("redis", "redis-replica"):
        assert "repl-diskless-sync-delay 0" in " ".join(sentinel["services"][server]["entrypoint"])
    assert "down-after-milliseconds voxqueue 3000" in script  # the failover tests' DOWN_AFTER_MS
