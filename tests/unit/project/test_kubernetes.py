"""deploy/kubernetes, the room on Kubernetes, checked offline (no cluster here): `kubectl kustomize` renders the
base, and every object holds what docs/deploy.md promises (probes on Streamlit's health, non-root, requests and
limits, the Redis address the poll reads, selectors that select, a cookie on the route, a slow scale-down)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import server.poll

ROOT = Path(__file__).resolve().parents[3]
BASE = ROOT / "deploy" / "kubernetes"


def files() -> list[dict]:
    """The base's own files, parsed (every document of every file)."""
    return [doc for path in sorted(BASE.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]


def render_here() -> list[dict]:
    """What `kubectl kustomize` makes of this base, for a machine without kubectl (Debian has no package of it): the
    listed files with the kustomization's labels and image names applied, the only transformations it uses."""
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    assert set(kustomization) <= {"apiVersion", "kind", "labels", "resources", "images"}, "render_here lags the base"
    docs = [d for name in kustomization["resources"] for d in yaml.safe_load_all((BASE / name).read_text()) if d]
    images = {i["name"]: f"{i['newName']}:{i['newTag']}" for i in kustomization.get("images", [])}
    for doc in docs:
        for entry in kustomization.get("labels", []):
            doc["metadata"].setdefault("labels", {}).update(entry["pairs"])
        template = doc.get("spec", {}).get("template", {}).get("spec", {})
        for container in template.get("containers", []):
            container["image"] = images.get(container["image"], container["image"])
    return docs


@pytest.fixture(scope="module", params=["kubectl", "here"])
def rendered(request) -> dict[tuple[str, str], dict]:
    if request.param == "kubectl":
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            pytest.skip("no kubectl on PATH (the same checks run on the base rendered here)")
        out = subprocess.run([kubectl, "kustomize", str(BASE)], capture_output=True, text=True, timeout=120, check=True)
        docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    else:
        docs = render_here()
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_rendering_here_matches_kubectl() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl on PATH to compare with")
    out = subprocess.run([kubectl, "kustomize", str(BASE)], capture_output=True, text=True, timeout=120, check=True)
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}
    assert by_name == {(d["kind"], d["metadata"]["name"]): d for d in render_here()}


def test_every_file_of_the_base_parses_and_is_listed_in_the_kustomization() -> None:
    listed = set(yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert all("apiVersion" in d and "kind" in d for d in files())


def test_the_base_renders_every_object(rendered) -> None:
    assert set(rendered) == {
        ("Deployment", "attention-lab"), ("Service", "attention-lab"), ("PodDisruptionBudget", "attention-lab"),
        ("HorizontalPodAutoscaler", "attention-lab"), ("Deployment", "attention-lab-redis"),
        ("Service", "attention-lab-redis"), ("NetworkPolicy", "attention-lab-redis"), ("Gateway", "attention-lab"),
        ("HTTPRoute", "attention-lab"),
    }  # fmt: skip
    assert all(d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "attention-lab" for d in rendered.values())


def containers(deployment: dict) -> list[dict]:
    return deployment["spec"]["template"]["spec"]["containers"]


def test_the_app_is_probed_on_streamlits_health_runs_unprivileged_and_is_bounded(rendered) -> None:
    app = rendered[("Deployment", "attention-lab")]
    (c,) = containers(app)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/_stcore/health", "port": "http"}, probe
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 60  # torch's import on a cold node
    pod = app["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] != 0
    assert c["securityContext"]["allowPrivilegeEscalation"] is False and c["securityContext"]["readOnlyRootFilesystem"]
    assert c["resources"]["limits"]["memory"] == "690Mi"  # what server/budget.py keeps the app under
    assert {"cpu", "memory"} <= set(c["resources"]["requests"])
    assert pod["terminationGracePeriodSeconds"] > c["lifecycle"]["preStop"]["sleep"]["seconds"]
    env = {e["name"]: e["value"] for e in c["env"]}
    redis_service = rendered[("Service", "attention-lab-redis")]
    assert (
        env[server.poll.ENV]
        == f"redis://{redis_service['metadata']['name']}:{redis_service['spec']['ports'][0]['port']}/0"
    )


def test_every_selector_selects_the_pods_it_names(rendered) -> None:
    def pods(name: str) -> dict:
        return rendered[("Deployment", name)]["spec"]["template"]["metadata"]["labels"]

    for name in ("attention-lab", "attention-lab-redis"):
        selector = rendered[("Service", name)]["spec"]["selector"]
        assert selector.items() <= pods(name).items(), name
        deployment = rendered[("Deployment", name)]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= pods(name).items()
    pdb = rendered[("PodDisruptionBudget", "attention-lab")]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pods("attention-lab").items()
    allowed = rendered[("NetworkPolicy", "attention-lab-redis")]["spec"]["ingress"][0]["from"][0]["podSelector"]
    assert allowed["matchLabels"].items() <= pods("attention-lab").items()
    assert allowed["matchLabels"].items() - pods("attention-lab-redis").items()  # not Redis itself


def test_the_route_sticks_a_browser_to_its_pod_with_a_cookie(rendered) -> None:
    route = rendered[("HTTPRoute", "attention-lab")]
    assert route["spec"]["parentRefs"][0]["name"] == rendered[("Gateway", "attention-lab")]["metadata"]["name"]
    (rule,) = route["spec"]["rules"]
    assert rule["sessionPersistence"]["type"] == "Cookie" and rule["sessionPersistence"]["sessionName"]
    service = rendered[("Service", "attention-lab")]
    assert rule["backendRefs"] == [{"name": service["metadata"]["name"], "port": service["spec"]["ports"][0]["port"]}]


def test_the_autoscaler_scales_in_slowly_and_keeps_what_the_budget_allows(rendered) -> None:
    hpa = rendered[("HorizontalPodAutoscaler", "attention-lab")]
    assert hpa["spec"]["scaleTargetRef"]["name"] == "attention-lab"
    down = hpa["spec"]["behavior"]["scaleDown"]
    assert down["stabilizationWindowSeconds"] >= 900  # websockets never rebalance
    pdb = rendered[("PodDisruptionBudget", "attention-lab")]
    assert hpa["spec"]["minReplicas"] > pdb["spec"]["maxUnavailable"]


def test_compose_shares_the_polls_rooms_through_its_own_redis() -> None:
    """compose.yaml: every replica reads the poll's Redis at the address the compose network gives the redis service,
    which is Debian's redis-server from deploy/redis.Dockerfile, unpublished and writing nothing to disk."""
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    replicas = [name for name, s in services.items() if s.get("image") == "localhost/attention-lab:latest"]
    assert len(replicas) >= 2, services
    for name in replicas:
        url = services[name]["environment"][server.poll.ENV]
        assert url.startswith("redis://redis:"), (name, url)
        assert "redis" in services[name]["depends_on"]
    redis = services["redis"]
    assert "ports" not in redis and redis["build"]["dockerfile"] == "deploy/redis.Dockerfile"
    dockerfile = (ROOT / redis["build"]["dockerfile"]).read_text()
    assert "redis-server" in dockerfile and '"--save", ""' in dockerfile and "USER redis" in dockerfile
