"""The versions pyproject.toml allows are the tested ones: each lower bound of what `pip install -e ".[test]"`
installs is the version `.ci/oldest.txt` pins (the set .ci/run tests beside the newest releases), the README names
that set, and the GPU window carries its wheels at that set's versions."""

from pathlib import Path

import gpu_window_data
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

tomllib = pytest.importorskip("tomllib", reason="reads pyproject.toml with Python 3.11's tomllib")

REPO = Path(__file__).resolve().parents[1]


def oldest_pins() -> dict[str, Version]:
    """Canonical name -> version of each `name==version` line of .ci/oldest.txt."""
    pins = {}
    for line in (REPO / ".ci" / "oldest.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            requirement = Requirement(line)
            [specifier] = requirement.specifier
            assert specifier.operator == "==", f".ci/oldest.txt: {line!r} is not a pin (name==version)"
            pins[canonicalize_name(requirement.name)] = Version(specifier.version)
    return pins


def declared_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [Requirement(line) for line in project["dependencies"] + project["optional-dependencies"]["test"]]


def test_every_lower_bound_is_the_oldest_tested_version():
    pins, wrong = oldest_pins(), []
    for requirement in declared_requirements():
        bounds = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==")]
        pinned = pins.get(canonicalize_name(requirement.name))
        if len(bounds) != 1 or pinned != bounds[0]:
            wrong.append(f"{requirement} (.ci/oldest.txt: {pinned})")
    assert wrong == [], "lower bounds that .ci/oldest.txt does not pin: " + "; ".join(wrong)


def test_the_readme_names_the_oldest_tested_versions():
    pins, readme = oldest_pins(), (REPO / "README.md").read_text(encoding="utf-8")
    line = next(line for line in readme.splitlines() if line.startswith("Tested by CI on"))
    for name in ("torch", "transformers", "accelerate", "datasets"):
        assert f"{name} {pins[name]}" in line, name


def test_the_gpu_window_carries_the_oldest_tested_versions():
    carried = gpu_window_data.oldest_supported(gpu_window_data.WHEELS + gpu_window_data.SOURCE_ONLY)
    pins = oldest_pins()
    assert all(pins[canonicalize_name(name)] == Version(version) for name, version in (w.split("==") for w in carried))
    assert {"tokenizers", "datasets", "evaluate", "seqeval"} <= {w.split("==")[0] for w in carried}
