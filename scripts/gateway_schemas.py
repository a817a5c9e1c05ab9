"""Vendor Gateway API's Gateway and HTTPRoute schemas for the Kubernetes base's offline check.

kubernetes-validate holds the core API's schemas only; the route (deploy/kubernetes/route.yaml) is a Gateway API
object, whose schema ships in that project's CRDs. This keeps each CRD's v1 openAPIV3Schema, less its prose, with
where it came from and the source file's SHA-256, in tests/data/gateway-api/ (read by
tests/unit/project/test_kubernetes.py).

    python scripts/gateway_schemas.py TAG COMMIT path/to/gateway-api
"""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
KINDS = {"Gateway": "gateways", "HTTPRoute": "httproutes"}


def without_prose(node):
    """The schema with every `description` text left out (a property that is called description is kept)."""
    if isinstance(node, dict):
        return {k: without_prose(v) for k, v in node.items() if not (k == "description" and isinstance(v, str))}
    if isinstance(node, list):
        return [without_prose(v) for v in node]
    return node


def main(tag: str, commit: str, checkout: Path) -> None:
    for kind, plural in KINDS.items():
        path = f"config/crd/experimental/gateway.networking.k8s.io_{plural}.yaml"
        raw = subprocess.run(
            ["git", "-C", checkout, "show", f"{commit}:{path}"], capture_output=True, check=True
        ).stdout
        crd = yaml.safe_load(raw)
        assert crd["spec"]["names"]["kind"] == kind, path
        (v1,) = [version for version in crd["spec"]["versions"] if version["name"] == "v1"]
        document = {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": kind,
            "source": f"kubernetes-sigs/gateway-api {tag} ({commit}) {path}",
            "source_sha256": hashlib.sha256(raw).hexdigest(),
            "openAPIV3Schema": without_prose(v1["schema"]["openAPIV3Schema"]),
        }
        out = ROOT / "tests" / "data" / "gateway-api" / f"{kind.lower()}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(document, separators=(",", ":"), sort_keys=True) + "\n")
        print(out.relative_to(ROOT), out.stat().st_size, "bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
