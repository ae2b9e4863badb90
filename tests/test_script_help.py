"""examples/script_help.py: `--help` of every example script answers before torch and transformers are imported,
with the script's own options first, from texts that match the scripts' argument classes."""

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import script_help

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("name", script_help.SCRIPTS)
def test_the_help_text_is_the_one_the_scripts_arguments_give(name):
    written = script_help.help_file(name).read_text(encoding="utf-8")
    assert written == script_help.help_text(importlib.import_module(name)), (
        f"{script_help.help_file(name)} is out of date: python examples/script_help.py writes it again"
    )


@pytest.mark.parametrize("name", script_help.SCRIPTS)
def test_help_answers_before_torch_is_imported_with_the_scripts_own_options_first(name):
    """Run as a program, the script prints its help and exits having imported neither torch nor transformers (they
    take 5-12 s on a busy machine); its own options come before the training options."""
    script = EXAMPLES / f"{name}.py"
    probe = textwrap.dedent(
        f"""
        import runpy, sys
        sys.argv = [{str(script)!r}, "--help"]
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
        except SystemExit as exit:
            print("exit", exit.code)
        print("imported", "torch" in sys.modules, "transformers" in sys.modules)
        """
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=EXAMPLES, timeout=60)
    lines = result.stdout.splitlines()
    assert lines[-2:] == ["exit 0", "imported False False"], result.stderr
    assert lines[0] == f"usage: python {name}.py [options]"
    text = " ".join(result.stdout.split())
    first_option = next(line.split()[0] for line in lines if line.startswith("  --"))
    module = importlib.import_module(name)
    own = [field for cls in module.ARGUMENT_CLASSES[:1] for field in cls.__dataclass_fields__]
    assert first_option == f"--{own[0]}"
    if name != "end_to_end":
        assert text.index(" model options: ") < text.index(" training options that hf_ctx adds or changes: ")
        assert "--overwrite_output_dir" in text and f"python {name}.py --help_all lists them all" in text


def test_help_all_goes_on_to_the_full_parser_and_an_imported_script_answers_nothing(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["run_ner.py", "--train_file", "x", "--help_all"])
    script_help.answer_help_at_once("__main__", "run_ner.py")  # returns: the script goes on to its full parser
    assert sys.argv == ["run_ner.py", "--train_file", "x", "--help"]
    monkeypatch.setattr(sys, "argv", ["run_ner.py", "--do_train"])
    script_help.answer_help_at_once("__main__", "run_ner.py")  # no help asked: nothing happens
    assert sys.argv == ["run_ner.py", "--do_train"]
    # end_to_end.py imports run_ner: its --help is end_to_end's own, not run_ner's.
    monkeypatch.setattr(sys, "argv", ["end_to_end.py", "--help"])
    script_help.answer_help_at_once("run_ner", "run_ner.py")
    assert sys.argv == ["end_to_end.py", "--help"]


@pytest.mark.parametrize("name", ["run_ner", "run_glue", "run_qa", "run_swag"])
def test_config_name_offers_the_presets_of_the_families_that_model_type_offers(name):
    """run_qa.py's `--config_name` named ELMo's presets and "taglm's []" although its `--model_type` takes bert alone."""
    import ast
    import re

    from hf_ctx.tools.families import MODEL_FAMILIES

    fields = importlib.import_module(name).ModelArguments.__dataclass_fields__
    offered = ast.literal_eval(fields["model_type"].metadata["help"].split("one of ", 1)[1])
    with_presets = re.findall(r"(\w+)'s \[", fields["config_name"].metadata["help"])
    assert with_presets == [family for family in offered if MODEL_FAMILIES[family].presets] and with_presets
