"""The suite's own layout: no module under tests/ imports a test module.

What tests share (helpers, fixtures, constants, tables) lives in tests/fixtures/ (or a tier's
conftest.py); a test module only holds tests. Importing one test module from another runs its
module-level code twice under two names, collects nothing new, and couples two files a reader
takes for independent. Every ``tests/**/*.py`` is parsed, so the helpers and conftest files are
held to it too; a string of code a test runs elsewhere (``python -c``) is not read.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def _is_test_module(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] == "tests" and parts[-1].startswith("test_")


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _imported(source: str, module: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every module the code of ``module`` imports: ``from a.b import c``
    gives ``a.b`` and ``a.b.c`` (c may be a module); a relative import is resolved against
    ``module``'s package."""
    package = module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, module)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def _broken_imports() -> list[str]:
    """``file:line imports module`` for every import of a test module under tests/."""
    broken = set()
    for path in TESTS.rglob("*.py"):
        for line, module in _imported(path.read_text(), _module_of(path)):
            if _is_test_module(module):
                broken.add(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return sorted(broken)


def test_no_module_under_tests_imports_a_test_module() -> None:
    broken = _broken_imports()
    assert not broken, "move what they share into tests/fixtures/:\n" + "\n".join(broken)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from tests.unit.test_a import x\n", ["tests.unit.test_a"]),
        ("import tests.integration.test_b\n", ["tests.integration.test_b"]),
        ("from tests.unit import test_c as c\n", ["tests.unit.test_c"]),
        ("from .test_d import y\n", ["tests.unit.test_d"]),
        ("from . import test_e\n", ["tests.unit.test_e"]),
        ("def f():\n    from tests.e2e.test_f import z\n", ["tests.e2e.test_f"]),
        ("from tests.fixtures.vertex import sdk\nimport pytest\n", []),
    ],
)
def test_the_check_sees_each_way_of_importing(source: str, expected: list[str]) -> None:
    """The check itself, on code as if it were tests/unit/test_probe.py: each import form, relative
    ones and one inside a function."""
    imported = {module for _, module in _imported(source, "tests.unit.test_probe")}
    assert sorted(m for m in imported if _is_test_module(m)) == expected
