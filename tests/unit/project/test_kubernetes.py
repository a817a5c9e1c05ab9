"""deploy/kubernetes, the room on Kubernetes, checked offline (no cluster here): `kubectl kustomize` renders the
base, and every object holds what docs/deploy.md promises (probes on Streamlit's health, non-root, requests and
limits, the Redis address the poll reads, selectors that select, a cookie on the route, a slow scale-down). Then the
published checkers: `kubernetes-validate --strict` on the core objects, Gateway API's own schemas on the route, and
`checkov` with no failed check that the base does not explain."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
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
        ("HTTPRoute", "attention-lab"), ("NetworkPolicy", "attention-lab"),
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
    app = rendered[("NetworkPolicy", "attention-lab")]["spec"]
    assert app["podSelector"]["matchLabels"].items() <= pods("attention-lab").items()
    assert [port["port"] for rule in app["ingress"] for port in rule["ports"]] == [8501]  # the container's port
    (to_redis,) = [rule for rule in app["egress"] if "to" in rule]
    assert to_redis["to"][0]["podSelector"]["matchLabels"].items() <= pods("attention-lab-redis").items()
    assert {port["port"] for rule in app["egress"] for port in rule["ports"]} == {6379, 53}  # no way out but these


def test_the_route_sticks_a_browser_to_its_pod_with_a_cookie(rendered) -> None:
    route = rendered[("HTTPRoute", "attention-lab")]
    assert route["spec"]["parentRefs"][0]["name"] == rendered[("Gateway", "attention-lab")]["metadata"]["name"]
    (rule,) = [r for r in route["spec"]["rules"] if r.get("backendRefs")]  # the app's (the other: metrics, none)
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
    which is Debian's redis-server from deploy/redis.Dockerfile, unpublished, with its append-only file on a volume
    (issue 50: a restart lost every room), and the replicas take the client's address from HAProxy's header."""
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
    assert '"--appendonly", "yes"' in dockerfile and '"--dir", "/data"' in dockerfile
    (volume,) = redis["volumes"]
    assert volume.split(":") == ["redis-data", "/data"] and "redis-data" in compose["volumes"]
    assert all(services[name]["environment"]["FORWARDED_ALLOW_IPS"] == "*" for name in replicas)


def test_the_route_keeps_streamlits_metrics_from_visitors(rendered) -> None:
    """Issue 50: /_stcore/metrics was public. A rule of its own, with no backend, forwards nothing; the app's own
    rule is the only one with a backend."""
    route = rendered[("HTTPRoute", "attention-lab")]
    rules = route["spec"]["rules"]
    (blocked,) = [r for r in rules if r["matches"][0]["path"]["value"] == "/_stcore/metrics"]
    assert blocked["matches"][0]["path"]["type"] == "PathPrefix" and not blocked.get("backendRefs")
    assert [r["matches"][0]["path"]["value"] for r in rules if r.get("backendRefs")] == ["/"]


def test_the_recipes_keep_the_rooms_redis_in_an_append_only_file() -> None:
    """Issue 50: supervisord's Redis ran with no file, so killing it lost every room."""
    conf = (ROOT / "deploy" / "supervisord.conf").read_text()
    (command,) = [line for line in conf.splitlines() if line.startswith("command=") and "REDIS_SERVER" in line]
    assert "--appendonly yes" in command and "--dir %(ENV_LAB_REDIS_DIR)s" in command
    assert 'export LAB_REDIS_DIR="${LAB_REDIS_DIR:-$LAB_LOG_DIR/redis}"' in (ROOT / "deploy" / "run.sh").read_text()


# The published checkers. They live in a virtual environment of their own (.ci/run makes .venv-checks from
# harness/kubernetes-checks.txt, whose digests pin every file): checkov's hundred packages stay out of the app's
# lock. Elsewhere the tests skip, and under CI they fail, so a CI run cannot pass by skipping them.
CHECKS = ROOT / ".venv-checks" / "bin"
GATEWAY_SCHEMAS = ROOT / "tests" / "data" / "gateway-api"  # scripts/gateway_schemas.py vendors them


def checker(name: str) -> str:
    found = (CHECKS / name) if (CHECKS / name).exists() else shutil.which(name)
    if found is None:
        reason = f"no {name} (python3 -m venv .venv-checks && .venv-checks/bin/pip install --require-hashes -r "
        reason += "harness/kubernetes-checks.txt)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and the Kubernetes checks cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    return str(found)


@pytest.fixture(scope="module")
def rendered_file(tmp_path_factory) -> Path:
    """The base as `kubectl kustomize` renders it (where kubectl is), else as rendered here, in one file."""
    kubectl = shutil.which("kubectl")
    path = tmp_path_factory.mktemp("kustomize") / "base.yaml"
    if kubectl:
        out = subprocess.run([kubectl, "kustomize", str(BASE)], capture_output=True, text=True, timeout=120, check=True)
        path.write_text(out.stdout)
    else:
        path.write_text(yaml.safe_dump_all(render_here()))
    return path


@pytest.mark.thorough
def test_kubernetes_validate_strict_accepts_every_core_object(rendered_file) -> None:
    out = subprocess.run(
        [checker("kubernetes-validate"), "--strict", str(rendered_file)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr
    core = [
        d for d in yaml.safe_load_all(rendered_file.read_text()) if d and "gateway.networking" not in d["apiVersion"]
    ]
    passed = [line for line in out.stdout.splitlines() if " passed for resource " in line]
    assert len(passed) == len(core) >= 8, out.stdout
    # Gateway API's kinds are not among its schemas: the next test holds them to Gateway API's own.
    assert {line.split("kind ")[1].split()[0] for line in out.stdout.splitlines() if "find schema" in line} <= {
        "Gateway",
        "HTTPRoute",
    }


def strict(schema: dict) -> dict:
    """A CRD's structural schema as `--strict` reads it: an object with declared properties takes no others."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                if not node.get("x-kubernetes-preserve-unknown-fields"):
                    node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def gateway_schema(kind: str) -> dict:
    document = json.loads((GATEWAY_SCHEMAS / f"{kind.lower()}.json").read_text())
    assert document["kind"] == kind and "gateway-api v1.6.1" in document["source"]
    return strict(document["openAPIV3Schema"])


@pytest.mark.parametrize("kind", ["Gateway", "HTTPRoute"])
def test_the_route_holds_to_gateway_apis_own_schema(rendered, kind) -> None:
    (doc,) = [d for (k, _), d in rendered.items() if k == kind]
    assert doc["apiVersion"] == "gateway.networking.k8s.io/v1"
    jsonschema.validate(doc, gateway_schema(kind))


def test_gateway_apis_schema_refuses_a_route_it_does_not_know() -> None:
    """The check above can fail: a misspelt field or a wrong cookie type is refused."""
    route = next(d for d in render_here() if d["kind"] == "HTTPRoute")
    schema = gateway_schema("HTTPRoute")
    misspelt = copy.deepcopy(route)
    misspelt["spec"]["rules"][0]["sessionPersistence"]["cookieName"] = "attention-lab-pod"
    wrong = copy.deepcopy(route)
    wrong["spec"]["rules"][0]["sessionPersistence"]["type"] = "Cookies"
    for bad in (misspelt, wrong):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


@pytest.mark.thorough
def test_checkov_fails_no_check_and_every_skip_says_why(rendered_file, tmp_path) -> None:
    out = subprocess.run(
        [checker("checkov"), "-f", str(rendered_file), "--framework", "kubernetes", "--skip-download", "-o", "json"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    report = json.loads(out.stdout)
    results = report["results"]
    failed = [(c["check_id"], c["resource"]) for c in results["failed_checks"]]
    assert failed == [], failed
    assert report["summary"]["passed"] >= 150
    for check in results["skipped_checks"]:  # an annotation checkov.io/skipN: CHECK=why
        assert len(check["check_result"].get("suppress_comment", "")) > 20, check["check_id"]
