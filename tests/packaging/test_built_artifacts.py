"""What `sam build` produced runs on its own: each handler imports with only its function, the layer
and the runtime's boto3 on sys.path, under Python 3.13; the layer stays slim.

Runs after `make build` (part of `make test`); skipped when nothing has been built.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spillway.local.cfn import load_template
from spillway.local.lambda_sandbox import (
    import_closure,
    import_handler,
    package_modules,
    python313,
    runtime_stub,
    tree_size,
)

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / ".aws-sam" / "build"
LAYER = BUILD / "SpillwayLayer"
FUNCTIONS = sorted(p.parent for p in BUILD.glob("*Function/app.py")) if BUILD.is_dir() else []
PYTHON = python313()

pytestmark = [
    pytest.mark.skipif(not LAYER.is_dir(), reason="no .aws-sam/build: run `make build`"),
    pytest.mark.skipif(PYTHON is None, reason="no Python 3.13 here (the Lambda runtime)"),
]


def test_every_function_of_the_template_was_built() -> None:
    resources = load_template(ROOT / "template.yaml")["Resources"]
    declared = {
        n
        for n, r in resources.items()
        if isinstance(r, dict) and r.get("Type") == "AWS::Serverless::Function"
    }
    assert len(declared) >= 5  # observe, plan, scale, drain, interrupt
    assert {p.name for p in FUNCTIONS} == declared


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda p: p.name)
def test_handler_imports_from_the_function_and_layer_alone(function: Path) -> None:
    assert PYTHON is not None
    result = import_handler(PYTHON, function, LAYER, runtime_stub(), kube=True)
    assert result["python"].startswith("3.13")
    assert result["stray"] == [], f"loaded from outside the function, layer and runtime: {result['stray']}"


def test_layer_is_slim_and_ships_bytecode() -> None:
    python = LAYER / "python"
    assert tree_size(LAYER) < 80 * 2**20
    assert not (python / "kubernetes" / "aio").exists()
    assert not (python / "botocore").exists()  # the runtime's own pair is used
    assert list((python / "spillway" / "planner" / "__pycache__").glob("*.cpython-313.pyc"))
    assert (python / "kubernetes" / "client" / "api" / "core_v1_api.pyc").is_file()


def test_layer_ships_exactly_the_modules_the_handlers_import() -> None:
    """Nothing a Lambda cannot load (the local stack, the simulator, the CLI); nothing it needs missing."""
    python = LAYER / "python"
    wanted = import_closure([f / "app.py" for f in FUNCTIONS], python)
    shipped = package_modules(python)
    assert "spillway.planner" in wanted and "spillway.act.drain" in wanted
    assert sorted(wanted - shipped) == [], "imported by a handler but not in the layer"
    assert sorted(shipped - wanted) == [], "in the layer but no handler imports it: add it to DROP_OWN"
