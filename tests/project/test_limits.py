"""The house's limits (docs/ARCHITECTURE.md), checked on every test run: no module over
600 lines, no function over 60, at most 12 modules at the package's root, and each
package says in its __init__ what it owns and what it may import. The import direction
itself is import-linter's contract (pyproject.toml), run by `make lint`."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "blocklab"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
MAX_ROOT_MODULES = 12


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_over_the_line_limit() -> None:
    over = {
        str(p.relative_to(PACKAGE)): n
        for p in _modules()
        if (n := p.read_text().count("\n")) > MAX_MODULE_LINES
    }
    assert over == {}, f"modules over {MAX_MODULE_LINES} lines: {over}"


def test_no_function_over_the_line_limit() -> None:
    over = []
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    over.append(f"{p.relative_to(PACKAGE)}:{node.lineno} {node.name} {length}")
    assert over == [], f"functions over {MAX_FUNCTION_LINES} lines: {over}"


def test_the_root_holds_only_the_shared_nouns() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def test_every_package_says_what_it_owns_and_may_import() -> None:
    silent = []
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        if "import" not in doc:
            silent.append(init.parent.name)
    assert silent == [], f"packages whose docstring does not say what they may import: {silent}"


def test_the_limit_checks_can_fail(tmp_path: Path) -> None:
    """The function-length walk sees a long function (guards against a check that
    cannot fail)."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    tree = ast.parse(f"def long():\n{body}\n")
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef) and fn.end_lineno is not None
    assert fn.end_lineno - fn.lineno + 1 > MAX_FUNCTION_LINES
