"""Every third-party module the test suite imports (in tests/, in the examples and experiments it runs, and in
hf_ctx itself) is installed by `pip install -e ".[test]"`: it belongs to a distribution that install_requires or
the `test` extra of pyproject.toml names, or to one of their dependencies. An import that only some tests need is
allowed where those tests skip without it (`pytest.importorskip`) or where the code catches its ImportError."""

import ast
import importlib.metadata
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

tomllib = pytest.importorskip("tomllib", reason="reads pyproject.toml with Python 3.11's tomllib")

REPO = Path(__file__).resolve().parents[1]
# What the tests import or run: the package, the tests, and the example and experiment scripts.
CHECKED_FOLDERS = ["hf_ctx", "tests", "examples"]


def declared_distributions(pyproject: Path, extra: str = "test") -> set[str]:
    """The dependencies and the `extra` of pyproject.toml, with everything they depend on (canonical names)."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    lines = project["dependencies"] + project["optional-dependencies"][extra]
    pending = [Requirement(line).name for line in lines]
    declared = set()
    while pending:
        name = canonicalize_name(pending.pop())
        if name in declared:
            continue
        declared.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue  # declared but not installed here: its own dependencies are unknown, not needed
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return declared


def _optional_nodes(tree: ast.AST) -> tuple[set[str], set[int]]:
    """(modules named in `pytest.importorskip("...")`, ids of import nodes inside `try: ... except ImportError`)."""
    skipped, guarded = set(), set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "importorskip"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            skipped.add(str(node.args[0].value).split(".")[0])
        if isinstance(node, ast.Try):
            caught = {
                name.id if isinstance(name, ast.Name) else getattr(name, "attr", "")
                for handler in node.handlers
                for name in (handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type])
                if name is not None
            }
            if caught & {"ImportError", "ModuleNotFoundError"}:
                guarded |= {id(inner) for part in node.body for inner in ast.walk(part)}
    return skipped, guarded


def imported_modules(path: Path) -> dict[str, int]:
    """Top-level module -> first line, for every absolute import in `path` that no skip or guard makes optional."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skipped, guarded = _optional_nodes(tree)
    found = {}
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in skipped:
                found.setdefault(top, node.lineno)
    return found


def undeclared_imports(files: list[Path], declared: set[str], local: set[str]) -> list[str]:
    """'file:line imports X (from distribution D, not declared)' for each third-party import not provided."""
    distributions = importlib.metadata.packages_distributions()
    problems = []
    for path in files:
        for module, line in imported_modules(path).items():
            if module in sys.stdlib_module_names or module in local or module == "__future__":
                continue
            provided_by = {canonicalize_name(d) for d in distributions.get(module, [])}
            if not provided_by & declared:
                source = ", ".join(sorted(provided_by)) or "no installed distribution"
                problems.append(
                    f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{line} imports "
                    f"{module} ({source}), which neither install_requires nor the test extra provides"
                )
    return problems


def local_modules() -> set[str]:
    """Modules of this repository itself (the package, the CLI module, the scripts and test helpers)."""
    names = {"hf_ctx", "hf_ctx_cli"}
    for folder in CHECKED_FOLDERS + ["benchmarks"]:
        names |= {path.stem for path in (REPO / folder).rglob("*.py")}
    return names


def test_every_third_party_import_of_the_tests_is_installed_by_the_test_extra():
    files = [path for folder in CHECKED_FOLDERS for path in sorted((REPO / folder).rglob("*.py"))]
    assert len(files) > 50
    problems = undeclared_imports(files, declared_distributions(REPO / "pyproject.toml"), local_modules())
    assert not problems, "\n".join(problems)


def test_the_check_finds_an_undeclared_import_and_accepts_a_skipped_one(tmp_path):
    """Experiment code imports matplotlib only where an extra the tests install provides it."""
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\ndependencies = ["transformers"]\n'
        '[project.optional-dependencies]\ntest = ["pytest"]\nexperiments = ["matplotlib"]\n'
    )
    declared = declared_distributions(pyproject)
    assert {"transformers", "pytest", "numpy"} <= declared and "matplotlib" not in declared  # numpy: transitive
    report = tmp_path / "report.py"
    report.write_text("import json\nimport numpy\n\ndef plot():\n    import matplotlib.pyplot as plt\n")
    [problem] = undeclared_imports([report], declared, local=set())
    assert "report.py:5 imports matplotlib (matplotlib)" in problem
    report.write_text('import pytest\n\nplt = pytest.importorskip("matplotlib.pyplot")\n')
    assert undeclared_imports([report], declared, local=set()) == []
    report.write_text("try:\n    import matplotlib\nexcept ImportError:\n    matplotlib = None\n")
    assert undeclared_imports([report], declared, local=set()) == []
    report.write_text("import not_a_module_anywhere\n")
    assert "no installed distribution" in undeclared_imports([report], declared, local=set())[0]
