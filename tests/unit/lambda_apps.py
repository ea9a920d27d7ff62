"""A function's ``app`` module loaded from its file (the functions are no package) and a Lambda context
for calling its handler as Lambda would, decorators and all."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_app(function: str, suffix: str) -> ModuleType:
    """``functions/<function>/app.py`` as a new module, ``<function>_app_<suffix>``."""
    spec = importlib.util.spec_from_file_location(
        f"{function}_app_{suffix}", ROOT / f"functions/{function}/app.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class LambdaContext:
    function_name: str = "spillway-ml-fn"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:eu-west-1:123456789012:function:spillway-ml-fn"
    aws_request_id: str = "req-1"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 60_000
