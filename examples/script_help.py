"""`--help` of the example scripts at once, before torch is imported.

A script's options are dataclasses whose help names hf_ctx's registries (families, presets, tag schemes, GLUE
tasks), and importing anything from hf_ctx registers its models with transformers' Auto classes, which loads torch
and transformers: 5 to 12 s on a busy 2-core machine, and transformers' `TrainingArguments` adds some 130 options
that bury the script's own. So each script's first lines call `answer_help_at_once`: `--help` prints the script's
own options, then the training options hf_ctx adds or changes, from the text `python examples/script_help.py`
wrote from the scripts' argument classes into `examples/help/<script>.txt` (`tests/test_script_help.py` fails
when one is out of date); `--help_all` goes on to the full parser, every `TrainingArguments` option included.

Standard library only: it runs before anything else is imported.
"""

import sys
from pathlib import Path

HELP_FOLDER = Path(__file__).resolve().parent / "help"
ALL_OPTIONS = "--help_all"
# The width of the help texts, in characters: fixed, so that a text is the same wherever it was written.
WIDTH = 100


def answer_help_at_once(module_name: str, script: str) -> None:
    """What every script calls before its imports, with its `__name__` and `__file__`: run as a program (not
    imported), with `-h` or `--help` it prints its help text and exits; with `--help_all` the full parser answers
    (`--help_all` becomes `--help`)."""
    if module_name != "__main__":
        return
    arguments = sys.argv[1:]
    if ALL_OPTIONS in arguments:
        sys.argv[1 + arguments.index(ALL_OPTIONS)] = "--help"
    elif "-h" in arguments or "--help" in arguments:
        print(help_file(script).read_text(encoding="utf-8"), end="")
        raise SystemExit(0)


def help_file(script: str) -> Path:
    """Where the help text of `script` (its path or name) is kept."""
    return HELP_FOLDER / f"{Path(script).stem}.txt"


# --- writing the texts (imports the scripts, so torch and transformers) ------------------------------------------


def help_text(module) -> str:
    """The `--help` text of an example script, from its module: the first line of its docstring, its
    `ARGUMENT_CLASSES` (the training arguments last, of which only the fields it declares itself), and where the
    rest of the options are."""
    import argparse
    import dataclasses

    script = f"{module.__name__}.py"
    *own, training = module.ARGUMENT_CLASSES
    groups = [(_title(cls), cls, dataclasses.fields(cls)) for cls in own]
    if dataclasses.is_dataclass(training) and training.__name__ == "CtxTrainingArguments":
        added = set(training.__dict__.get("__annotations__", {}))  # the fields it adds, or gives other defaults
        fields = [f for f in dataclasses.fields(training) if f.name in added]
        groups.append(("training options that hf_ctx adds or changes", training, fields))
        epilog = (
            "Besides these, every option of transformers' TrainingArguments (--output_dir, --do_train, --do_eval, "
            "--do_predict, --num_train_epochs, --max_steps, --learning_rate, --per_device_train_batch_size, --seed, "
            f"--resume_from_checkpoint, --push_to_hub, ...): python {script} {ALL_OPTIONS} lists them all (it "
            "loads torch first: several seconds)."
        )
    else:  # a script whose options are all its own
        groups.append((_title(training), training, dataclasses.fields(training)))
        epilog = None
    parser = argparse.ArgumentParser(
        prog=script,
        usage=f"python {script} [options]",
        description=(module.__doc__ or "").strip().splitlines()[0],
        epilog=epilog,
        add_help=False,
        formatter_class=lambda prog: argparse.HelpFormatter(prog, width=WIDTH, max_help_position=32),
    )
    for title, _, fields in groups:
        group = parser.add_argument_group(title)
        for f in fields:
            if f.type in (bool, "bool"):  # a flag
                group.add_argument(f"--{f.name}", action="store_true", help=_help(f))
            else:
                group.add_argument(f"--{f.name}", metavar=f.name.upper(), help=_help(f))
    more = f"; {ALL_OPTIONS}: every option, TrainingArguments' too" if epilog else ""
    parser.add_argument_group("help").add_argument("-h", "--help", action="store_true", help="this text" + more)
    return parser.format_help()


def _title(cls) -> str:
    """An argument class's group title: ModelArguments -> "model options"; EndToEndArguments -> "options"."""
    kind = cls.__name__.removesuffix("Arguments").lower()
    return f"{kind} options" if kind in ("model", "data") else "options"


def _help(field) -> str:
    """A field's help and its default (where it has one that its help does not already say); `%` kept literal
    for argparse."""
    import dataclasses

    default = field.default
    if default is dataclasses.MISSING and field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    text = field.metadata.get("help", "")
    if default is True:
        text += f" (on by default; --no_{field.name} turns it off)"
    elif default not in (None, False, dataclasses.MISSING) and "default" not in text:
        text += f" (default: {default})"
    return text.replace("%", "%%")


def main() -> None:
    """Write examples/help/<script>.txt for every example script."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import importlib

    HELP_FOLDER.mkdir(exist_ok=True)
    for name in SCRIPTS:
        help_file(name).write_text(help_text(importlib.import_module(name)), encoding="utf-8")
        print(f"wrote {help_file(name)}")


# The example scripts whose `--help` answers at once.
SCRIPTS = ("end_to_end", "pretrain_bert", "pretrain_elmo", "run_glue", "run_ner", "run_qa", "run_swag")


if __name__ == "__main__":
    main()
