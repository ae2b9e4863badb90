"""README.md, CONTRIBUTING.md and docs/*.md name only what exists: every repository path they write (in backticks,
in links, in the layout of docs/design.md), every `hf_ctx.…` name and every module-relative name
(`input_checks.check_label_range`) imports; the layer-0 import table of docs/design.md is the modules' imports; and
CONTRIBUTING.md's rule of where a module's tests are holds for every module."""

import ast
import importlib
import re
import subprocess
from pathlib import Path

import pytest
from test_import_layers import layer

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
FILES = set(
    subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
)
FOLDERS = {str(parent) for name in FILES for parent in Path(name).parents if str(parent) != "."}
TOP = {name.split("/")[0] for name in FILES}
# Paths that name another project's files (transformers' examples, the official SQuAD script), not this one's.
ELSEWHERE = {"examples/pytorch/multiple-choice/run_swag.py", "evaluate-v1.1.py"}
CODE, LINK = re.compile(r"`([^`\n]+)`"), re.compile(r"\]\(([^)#\s]+)")
HF_CTX_NAME = re.compile(r"\bhf_ctx(?:\.[A-Za-z_]\w*)+")
# Heads of dotted names that are not hf_ctx module-relative names: hf_ctx itself (matched in full above) and AllenNLP,
# whose `allennlp.modules.elmo` the migration guide quotes (hf_ctx's drop-in is written `hf_ctx.allennlp`).
NOT_HF_CTX = {"hf_ctx", "allennlp"}
PLACEHOLDER = re.compile(r"[<>{}]|\.\.\.|(^|[/_])X([._/]|$)")  # docs/results/<date>.json, hf_ctx/configuration_X.py


def line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def resolves(dotted: str) -> bool:
    """Whether `dotted` (a module, or a module and attributes) imports."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def path_exists(name: str) -> bool:
    """A repository file or folder, by its path or, for a short form (`tools/paths.py`, `run_ner.py`), by the end of
    its path; a pytest node id (`tests/test_x.py::test_y`) also needs its test."""
    name, _, test = name.partition("::")
    name = name.rstrip("/")
    if "*" in name:
        return any(Path(found).relative_to(ROOT) for found in ROOT.glob(name))
    found = [f for f in FILES | FOLDERS if f == name or f.endswith("/" + name)]
    if not test or not found:
        return bool(found)
    return f"def {test}(" in (ROOT / found[0]).read_text(encoding="utf-8")


def written_paths(doc: Path) -> list[tuple[int, str]]:
    """(line, path) of the repository paths `doc` writes in backticks and relative links."""
    text, paths = doc.read_text(encoding="utf-8"), []
    for match in [*CODE.finditer(text), *LINK.finditer(text)]:
        for word in re.split(r"[\s,()=]+", match.group(1)):
            word = word.strip("'\":;").rstrip(".")  # a leading dot is part of a path (.ci/run)
            if not word or "://" in word or word.startswith(("/", "../", "~", "$", "-")) or PLACEHOLDER.search(word):
                continue
            is_link = match.re is LINK
            if is_link and (doc.parent / word).exists():
                continue
            in_repository = "/" in word and word.split("/")[0] in TOP
            if is_link or in_repository or re.fullmatch(r"[\w./-]+\.(py|sh)(::\w+)?", word):
                paths.append((line_of(text, match.start()), word))
    return paths


def layout_paths() -> list[str]:
    """The files and folders of docs/design.md's layout, by indentation: `hf_ctx/` then `  data/` then `    bilm.py`
    is hf_ctx/data/bilm.py; a line may list several files; descriptions (2+ spaces after) are left out."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    block = text[text.index("## Layout") :].split("```")[1]
    parents, paths = [], []
    for line in block.splitlines():
        indent, body = len(line) - len(line.lstrip(" ")), line.strip()
        names = []
        for segment in re.split(r"\s{2,}", body):
            if not re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", segment) or not (segment.endswith("/") or "." in segment):
                break
            names.append(segment)
        if indent > 8 or not names:  # a description's second line, or a comment
            continue
        parents = [(level, folder) for level, folder in parents if level < indent]
        paths += ["".join(folder for _, folder in parents) + name for name in names]
        if len(names) == 1 and names[0].endswith("/"):
            parents.append((indent, names[0]))
    return paths


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.name)
def test_every_repository_path_a_doc_writes_exists(doc):
    missing = [f"{doc.name}:{line} {path}" for line, path in written_paths(doc) if path not in ELSEWHERE]
    assert [entry for entry in missing if not path_exists(entry.split(" ", 1)[1])] == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.name)
def test_every_hf_ctx_name_a_doc_writes_imports(doc):
    """`hf_ctx.data.glue_tasks.GLUE_TASKS` anywhere in the text; `input_checks.check_label_range` or
    `data.conll.read_conll` in backticks, named from a module (or subpackage) of hf_ctx whose name is unique."""
    text = doc.read_text(encoding="utf-8")
    modules = {}
    for name in FILES:
        if name.startswith("hf_ctx/") and name.endswith(".py"):
            module = name[:-3].replace("/", ".").removesuffix(".__init__")
            modules.setdefault(module.rsplit(".", 1)[-1], set()).add(module)
    names = [(line_of(text, m.start()), m.group(0)) for m in HF_CTX_NAME.finditer(text)]
    for match in CODE.finditer(text):
        head, dot, rest = match.group(1).partition(".")
        dotted = re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", match.group(1))
        if (
            dotted
            and head not in NOT_HF_CTX
            and len(modules.get(head, ())) == 1
            and not rest.endswith(("py", "md", "json"))
        ):
            names.append((line_of(text, match.start()), f"{next(iter(modules[head]))}.{rest}"))
    assert [f"{doc.name}:{line} {name}" for line, name in names if not resolves(name)] == []


def test_every_file_and_folder_of_the_design_layout_exists():
    paths = layout_paths()
    assert len(paths) > 80 and "hf_ctx/data/bilm.py" in paths and "hf_ctx/tools/families.py" in paths
    assert [path for path in paths if not (ROOT / path).exists()] == []


def test_every_module_of_hf_ctx_examples_and_benchmarks_is_in_the_design_layout():
    """The layout lists each module by its path (a package's __init__.py aside), so a new module is added to it."""
    listed = set(layout_paths())
    modules = [
        name
        for name in FILES
        if name.endswith(".py")
        and name.split("/")[0] in ("hf_ctx", "examples", "benchmarks")
        and not name.endswith("__init__.py")
    ]
    assert sorted(name for name in modules if name not in listed) == []


def test_models_configs_tokenizers_and_their_layers_sit_flat_in_hf_ctx():
    """A checkpoint's code loads as remote code: its modules are files of hf_ctx/ itself, never of a subpackage."""
    nested = [n for n in FILES if re.fullmatch(r"hf_ctx/.+/(configuration|modeling|tokenization)_\w+\.py", n)]
    assert nested == []


def test_the_layer_0_import_table_is_the_modules_imports():
    """Each row of docs/design.md's table: the layer-0 modules named in its first cell import exactly the modules of
    its second cell (single-dot imports), "nothing" for none."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    table = text[text.index("| module | imports from hf_ctx |") :].split("\n\n")[0].splitlines()[2:]
    documented = {}
    for row in table:
        modules, imports = (cell.strip() for cell in row.strip("|").split("|"))
        for module in re.findall(r"`(\w+)\.py`", modules):
            documented[module] = set() if imports == "nothing" else set(re.findall(r"`\.(\w+)`", imports))
    actual = {}
    for path in sorted((ROOT / "hf_ctx").glob("*.py")):
        if path.stem != "__init__" and layer(f"hf_ctx.{path.stem}") == 0:  # not the front doors (allennlp.py)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            actual[path.stem] = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1}
    assert documented == actual


def test_each_module_is_tested_where_contributing_says():
    """CONTRIBUTING.md: hf_ctx/X.py (or hf_ctx/data/X.py, hf_ctx/tools/X.py) is tested in tests/test_X.py, or, where
    there is none, in the test file of its row in the table; a row names modules that exist and have no file of
    their own."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    table = {}
    for test, modules in re.findall(r"^\| `(tests/test_\w+\.py)` \| (.+) \|$", text, re.MULTILINE):
        table.update(dict.fromkeys(re.findall(r"`(hf_ctx/[\w/]+\.py)`", modules), test))
    modules = sorted(
        n for n in FILES if n.startswith("hf_ctx/") and n.endswith(".py") and not n.endswith("__init__.py")
    )
    own = {name: f"tests/test_{Path(name).stem}.py" for name in modules}
    assert [name for name in modules if own[name] not in FILES and table.get(name) not in FILES] == []
    assert [name for name in table if name not in modules or own[name] in FILES] == []
