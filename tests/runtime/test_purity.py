"""runtime/ is sans-I/O: it imports neither Ray nor asyncio and reads neither the clock nor
randomness (STYLE.md, "What shoal should take", 11-12). Checked on the source of every module."""
import ast
import pathlib

import pytest

RUNTIME = pathlib.Path(__file__).resolve().parents[2] / "runtime"
FORBIDDEN_MODULES = {"ray", "asyncio", "random", "secrets", "uuid", "time", "datetime", "threading", "pickle"}
FORBIDDEN_CALLS = {"time.time", "time.monotonic", "time.perf_counter", "datetime.now", "uuid.uuid4",
                   "os.urandom", "random.random"}


def sources():
    return sorted(RUNTIME.rglob("*.py"))


def imported_modules(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def called_names(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            value = node.func.value
            if isinstance(value, ast.Name):
                yield f"{value.id}.{node.func.attr}"
            elif isinstance(value, ast.Attribute):
                yield f"{value.attr}.{node.func.attr}"


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(RUNTIME)))
def test_runtime_module_is_sans_io(path):
    tree = ast.parse(path.read_text(), str(path))
    assert not set(imported_modules(tree)) & FORBIDDEN_MODULES
    assert not set(called_names(tree)) & FORBIDDEN_CALLS
