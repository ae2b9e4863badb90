"""hf_ctx's layers, as docs/design.md draws them, checked on every import in the package, those inside functions
included:

    0  hf_ctx/*.py            a checkpoint's code (travels as remote code): imports only layer 0, single-dot
    1  hf_ctx/data/, metrics/ reading and preparing data, metrics: layers 0 and 1
    2  hf_ctx/tools/          registry, checks, pipelines, training, cards, Hub, converters, CLI: layers 0 to 2
    3  hf_ctx/__init__.py     the public names and the Auto registration: anything
       hf_ctx/allennlp.py     AllenNLP's ELMo API for AllenNLP's users: anything

A module imports only its own layer or lower ones, and no chain of imports leads back to where it started.
"""

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hf_ctx"
# What a checkpoint's code may import besides itself: what a user who loads it as remote code has anyway.
CHECKPOINT_THIRD_PARTY = {"numpy", "torch", "transformers"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1 or module == "hf_ctx.allennlp":
        return 3  # the front doors: hf_ctx/__init__.py, hf_ctx/allennlp.py
    if parts[1] in ("data", "metrics"):
        return 1
    if parts[1] == "tools":
        return 2
    return 0


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_of(module: str) -> list[tuple[str, int, int]]:
    """(imported hf_ctx module, line, relative level) for every import statement of `module`, at any depth."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # `from . import modeling_bert` imports the submodule; `from .layers import ScalarMix` the module.
            targets = [
                (f"{base}.{alias.name}", node.level) for alias in node.names if f"{base}.{alias.name}" in MODULES
            ]
            targets = targets or [(base, node.level)]
        else:
            continue
        found += [(name, node.lineno, level) for name, level in targets if name.split(".")[0] == "hf_ctx"]
        found += [(name, node.lineno, -1) for name, level in targets if name.split(".")[0] != "hf_ctx"]
    return found


def test_every_module_imports_only_its_own_layer_or_lower_ones():
    upward = [
        f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} (layer {layer(module)}) imports {name} (layer {layer(name)})"
        for module in MODULES
        for name, line, level in imports_of(module)
        if level >= 0 and name in MODULES and layer(name) > layer(module)
    ]
    assert upward == []


def test_the_imports_have_no_cycle():
    graph = {
        module: {name for name, _, level in imports_of(module) if level >= 0 and name in MODULES} for module in MODULES
    }
    # The package's __init__ runs before any of its modules; an import of a module from it is no cycle.
    graph["hf_ctx"] = set()
    cycles, state = [], {}

    def visit(module, path):
        state[module] = "open"
        for name in sorted(graph[module]):
            if state.get(name) == "open":
                cycles.append(" -> ".join(path[path.index(name) :] + [name]))
            elif name not in state:
                visit(name, path + [name])
        state[module] = "done"

    for module in MODULES:
        if module not in state:
            visit(module, [module])
    assert cycles == []


@pytest.mark.parametrize("module", [m for m in MODULES if layer(m) == 0])
def test_a_checkpoints_code_imports_itself_with_single_dots_and_only_what_remote_code_users_have(module):
    """Remote code copies a module's single-dot imports beside it, and nothing else (docs/design.md)."""
    allowed = set(sys.stdlib_module_names) | CHECKPOINT_THIRD_PARTY
    for name, line, level in imports_of(module):
        where = f"{MODULES[module].name}:{line}"
        if level == -1:
            assert name.split(".")[0] in allowed, f"{where} imports {name}, which a remote-code user may lack"
        else:
            assert level == 1 and layer(name) == 0, f"{where} imports {name}: only single-dot imports of layer 0"


def test_the_checker_sees_imports_inside_functions_and_resolves_relative_ones(tmp_path):
    """The checks above read what they claim to: an import inside a function, and `..` from a subpackage."""
    found = {name: level for name, _, level in imports_of("hf_ctx.data.pretraining")}
    assert found["hf_ctx.data.wordpiece"] == 1  # imported inside a function
    found = {name: level for name, _, level in imports_of("hf_ctx.tools.families")}
    assert found["hf_ctx.modeling_bert"] == 2  # `from .. import ..., modeling_bert, ...`
    assert layer("hf_ctx.tools.families") == 2 and layer("hf_ctx.data.glue") == 1 and layer("hf_ctx.crf") == 0
    assert layer("hf_ctx.allennlp") == 3 and layer("hf_ctx") == 3
