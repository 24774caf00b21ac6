"""Write ``voxqueue.yaml``: Kubernetes manifests generated from the code's queue table.

    python deploy/k8s/generate.py        # rewrite the manifests
    python deploy/k8s/generate.py --check  # exit 1 when they are out of date (tests run this)

One Deployment and one KEDA ScaledObject (on the queue's Redis list length) per queue; beat as a
single replica; Flower and the exporter. Secrets come from the Secret ``voxqueue-secrets``
(keys: redis-url, redis-password, openai-api-key, elevenlabs-api-key, flower-basic-auth) as
environment variables, never in a command line; a provider key goes only to the workers of the
queues that call that provider (``PROVIDER_KEYS``).

A Redis that fails over (docs/failover.md): a ``sentinel://`` redis-url, with the optional keys
redis-master (its master set name) and redis-sentinel-password; KEDA's triggers then take its
``redis-sentinel`` scaler (``sentinelMaster``, ``addresses``) in place of ``redis``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from voxqueue.settings import QUEUES, DashboardSettings, GatewaySettings
from voxqueue.up.process_table import (
    BEAT_SCHEDULER,
    DEFAULT_POOLS,
    DEFAULT_PROCESSES,
    FLOWER_MAX_TASKS,
    FLOWER_NO_EVENTS_ASK,
    HEARTBEAT_S,
)

OUT = Path(__file__).with_name("voxqueue.yaml")
IMAGE = "voxqueue-workers:latest"
SOFT_SHUTDOWN_S = 10
#: KEDA: scale each queue on its list length (most replicas, list length per replica); keep at
#: least the processes ``voxqueue up`` runs, so a turn never waits for a pod.
SCALING = {"stt": (10, 5), "agent": (10, 10), "tools": (10, 10), "tts": (20, 5),
           "monitor": (2, 20)}


#: The provider keys (variable, key in the Secret) each queue's workers need; every other pod
#: (tools, monitor, beat, Flower, the exporter) gets none.
PROVIDER_KEYS: dict[str, list[tuple[str, str]]] = {
    "stt": [("OPENAI_API_KEY", "openai-api-key")],
    "agent": [("OPENAI_API_KEY", "openai-api-key")],
    "tts": [("ELEVENLABS_API_KEY", "elevenlabs-api-key")],
}


def secret(name: str, key: str, optional: bool = False) -> dict[str, Any]:
    """An environment variable from the Secret ``voxqueue-secrets``."""
    ref: dict[str, Any] = {"name": "voxqueue-secrets", "key": key}
    if optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}


def env() -> list[dict[str, Any]]:
    """What every pod gets: the Redis URL (with its password; with Sentinel, the master's name
    and the sentinels' password) and the soft shutdown signal."""
    return [
        secret("VOXQUEUE_REDIS_URL", "redis-url"),
        # With a sentinel:// URL (docs/failover.md); absent from the Secret otherwise.
        secret("VOXQUEUE_REDIS_MASTER", "redis-master", optional=True),
        secret("VOXQUEUE_REDIS_SENTINEL_PASSWORD", "redis-sentinel-password", optional=True),
        {"name": "REMAP_SIGTERM", "value": "SIGQUIT"},
    ]


def deployment(name: str, command: list[str], replicas: int = 1, *, recreate: bool = False,
               extra_env: list[dict[str, Any]] | None = None,
               port: int | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name, "image": IMAGE, "command": command, "env": env() + (extra_env or []),
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                      "limits": {"memory": "1Gi"}},
    }
    if port is not None:
        container["ports"] = [{"containerPort": port}]
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": "voxqueue", "component": name}},
        "template": {
            "metadata": {"labels": {"app": "voxqueue", "component": name}},
            "spec": {
                # Above the soft shutdown timeout: SIGTERM requeues running tasks first.
                "terminationGracePeriodSeconds": SOFT_SHUTDOWN_S + 20,
                "securityContext": {"runAsNonRoot": True, "runAsUser": 10001},
                "containers": [container],
            },
        },
    }
    if recreate:
        spec["strategy"] = {"type": "Recreate"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"voxqueue-{name}", "labels": {"app": "voxqueue"}},
            "spec": spec}


#: The pod's name from the downward API: Kubernetes expands ``$(POD_NAME)`` in a command only
#: for a variable the container declares (the runtime's HOSTNAME is not one).
POD_NAME = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}


def worker(queue: str) -> dict[str, Any]:
    pool, concurrency = DEFAULT_POOLS[queue]
    return deployment(f"worker-{queue}", [
        "celery", "-A", "workers", "worker", "-Q", queue, "-n", f"{queue}@$(POD_NAME)",
        "-P", pool, "-c", str(concurrency), "--prefetch-multiplier", "1", "-E",
        "--heartbeat-interval", str(HEARTBEAT_S)],
        replicas=DEFAULT_PROCESSES.get(queue, 1), extra_env=[*provider_env(queue), POD_NAME])


def provider_env(queue: str) -> list[dict[str, Any]]:
    """The provider keys of ``queue``'s workers (optional: an offline provider needs none)."""
    return [secret(name, key, optional=True) for name, key in PROVIDER_KEYS.get(queue, [])]


def scaled_object(queue: str) -> dict[str, Any]:
    high, per_replica = SCALING[queue]
    low = DEFAULT_PROCESSES.get(queue, 1)
    return {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": f"voxqueue-{queue}"},
        "spec": {
            "scaleTargetRef": {"name": f"voxqueue-worker-{queue}"},
            "minReplicaCount": low, "maxReplicaCount": high,
            "triggers": [{
                "type": "redis",
                "metadata": {"address": "redis.voxqueue.svc:6379", "listName": queue,
                             "listLength": str(per_replica), "databaseIndex": "0"},
                "authenticationRef": {"name": "voxqueue-redis"},
            }],
        },
    }


def manifests() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [{
        "apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
        "metadata": {"name": "voxqueue-redis"},
        "spec": {"secretTargetRef": [{"parameter": "password", "name": "voxqueue-secrets",
                                      "key": "redis-password"}]},
    }]
    for queue in QUEUES:
        docs += [worker(queue), scaled_object(queue)]
    docs.append(deployment("beat", ["celery", "-A", "workers", "beat", "-S", BEAT_SCHEDULER],
                           replicas=1, recreate=True))
    flower_auth = {"name": "FLOWER_BASIC_AUTH", "valueFrom": {"secretKeyRef": {
        "name": "voxqueue-secrets", "key": "flower-basic-auth"}}}
    docs.append(deployment("flower", ["celery", "-A", "workers", "flower", "--port=5555",
                                      "--address=0.0.0.0", f"--max_tasks={FLOWER_MAX_TASKS}",
                                      FLOWER_NO_EVENTS_ASK],
                           extra_env=[flower_auth], port=5555))
    port = DashboardSettings().metrics_port
    docs.append(deployment("exporter", ["voxqueue", "exporter", "--address", "0.0.0.0"],
                           port=port))
    # The devices' only way in (put TLS in front: an Ingress, or --certfile/--keyfile).
    gateway_port = GatewaySettings().port
    docs.append(deployment("gateway", ["voxqueue", "gateway", "--host", "0.0.0.0"],
                           replicas=2, port=gateway_port))
    for name, p in (("flower", 5555), ("exporter", port), ("gateway", gateway_port)):
        docs.append({"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": f"voxqueue-{name}"},
                     "spec": {"selector": {"app": "voxqueue", "component": name},
                              "ports": [{"port": p, "targetPort": p}]}})
    return docs


def render() -> str:
    header = "# Generated by deploy/k8s/generate.py from the code's queue table: do not edit.\n"
    return header + yaml.safe_dump_all(manifests(), sort_keys=False)


def main() -> None:
    text = render()
    if "--check" in sys.argv:
        sys.exit(0 if OUT.exists() and OUT.read_text() == text else 1)
    OUT.write_text(text)


if __name__ == "__main__":
    main()
