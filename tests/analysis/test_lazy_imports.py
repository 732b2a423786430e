"""scipy's modules the analysis imports inside functions are imported ahead by a resident
process (blocklab.analysis.lazy_imports), so that a summary forked at each watched update
does not import them again; and none of them is imported by merely loading the report."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import blocklab.analysis
from blocklab.analysis import lazy_imports

ANALYSIS = Path(blocklab.analysis.__file__).parent


def _imported_in_functions(tree: ast.Module) -> set[str]:
    """The scipy modules that function bodies of `tree` import."""
    found = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.split(".")[0] == "scipy"}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("scipy"):
                # `from scipy import integrate` imports the module scipy.integrate
                module = node.module or ""
                found |= (
                    {f"{module}.{a.name}" for a in node.names} if module == "scipy" else {module}
                )
    return found


def test_every_scipy_module_imported_in_an_analysis_function_is_imported_ahead() -> None:
    found = set()
    for path in sorted(ANALYSIS.glob("*.py")):
        found |= _imported_in_functions(ast.parse(path.read_text(), str(path)))
    assert found, "no function-level scipy import found: the scan is broken"
    assert found <= set(lazy_imports.MODULES), sorted(found - set(lazy_imports.MODULES))


def test_a_resident_imports_them_and_loading_the_report_does_not() -> None:
    script = (
        "import sys\n"
        "from blocklab.report.resident import Resident\n"
        "from blocklab.analysis.lazy_imports import MODULES\n"
        "print(sorted(m for m in MODULES if m in sys.modules))\n"
        "Resident()\n"
        "print(sorted(m for m in MODULES if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    ).stdout.splitlines()
    assert out == ["[]", str(sorted(lazy_imports.MODULES))]


def test_no_module_of_blocklab_imports_scipy_stats() -> None:
    """scipy.stats takes 0.5 s to import, in every command and every forked summary: the
    tails blocklab needs (t, F, binomial) come from scipy.special, held to scipy.stats by
    tests in tests/analysis (test_stationarity, test_stats)."""
    package = ANALYSIS.parent
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                names = [module, *(f"{module}.{a.name}" for a in node.names)]
            if any(n == "scipy.stats" or n.startswith("scipy.stats.") for n in names):
                found.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    assert found == []
