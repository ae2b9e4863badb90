"""Every option of every entry point (the example scripts, the experiments, every `hf-ctx` command) declares its
kind, and each is fed the hostile values of its kind: 0, -1, 10^9 where it sets memory, the empty string, a line
break, a folder where a file goes, a file where a folder goes, a dangling link, a missing path.

The values come from this file's own table (`HOSTILE`, by kind), not from the kinds' checks. Each must end the
run with status 1 and one line on stderr that names the option, without a traceback or the usage: through each
script's own `main(argv)` in-process (a subprocess per value would take the suite minutes: the checks run at
parse time, before anything is loaded), and as a handful of real subprocesses.
"""

import dataclasses
import importlib
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import transformers

from hf_ctx.tools import cli, option_kinds, scripts
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.option_kinds import TRAINING_OPTION_KINDS, Kind, declared_kind
from hf_ctx.tools.trainer import CtxTrainingArguments

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES, EXPERIMENTS = ROOT / "examples", ROOT / "examples" / "experiments"
for folder in (EXAMPLES, EXPERIMENTS):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

# The scripts whose options are dataclasses (HfArgumentParser), and those with an argparse parser of their own.
DATACLASS_SCRIPTS = ("end_to_end", "pretrain_bert", "pretrain_elmo", "run_glue", "run_ner", "run_qa", "run_swag")
# The benchmarks too, but gpu_window.py and gpu_window_data.py: they import nothing of hf_ctx or torch, so that
# the window's driver runs, and records a step's failure, even where those imports fail; theirs is argparse's.
BENCHMARKS = (
    "bert_speed",
    "bilm_cache_speed",
    "bilm_step",
    "cpu_threads",
    "elmo_embed_speed",
    "elmo_lstm_speed",
    "inductor_fusion",
    "op_counts",
)
ARGPARSE_SCRIPTS = ("bert_glue_conll", "elmo_taglm", "probe_elmo_layers", "render_results", *BENCHMARKS)
CLI_COMMANDS = ("convert-bert", "train-tokenizer", "convert-elmo", "embed")
# transformers' own number options hf_ctx leaves alone: the launcher sets it.
LAUNCHER_SET = {"local_rank"}


# --- every option declares its kind --------------------------------------------------------------------------


def script_kinds(name: str) -> dict[str, Kind | None]:
    """Field name -> declared kind (None: none) of an example script's own options."""
    module = importlib.import_module(name)
    kinds = {}
    for cls in module.ARGUMENT_CLASSES:
        if issubclass(cls, transformers.TrainingArguments):
            continue
        for field in dataclasses.fields(cls):
            kinds[field.name] = declared_kind(field)
    return kinds


class _Captured(Exception):
    pass


def argparse_parser(name: str, monkeypatch):
    """The parser an argparse script builds in its `main`: caught as it parses, before it runs."""
    module = importlib.import_module(name)
    captured = []

    def capture(self, args=None, namespace=None):
        captured.append(self)
        raise _Captured

    with monkeypatch.context() as patch:
        patch.setattr(option_kinds.CheckedArgumentParser, "parse_known_args", capture)
        with pytest.raises(_Captured):
            module.main([])
    return captured[0]


def cli_parsers() -> dict:
    parser = cli.build_parser()
    (commands,) = [action for action in parser._actions if action.dest == "command"]
    return {name: commands.choices[name] for name in CLI_COMMANDS}


def argparse_kinds(parser) -> dict[str, Kind | None]:
    """Option -> kind of an argparse parser's actions (flags, help and --debug left out: they take no value)."""
    kinds = {}
    for action in parser._actions:
        if action.nargs == 0 or action.dest in ("help", "debug"):
            continue
        kinds[option_kinds.action_name(action)] = action.type if isinstance(action.type, Kind) else None
    return kinds


@pytest.mark.parametrize("name", DATACLASS_SCRIPTS)
def test_every_option_of_each_script_declares_its_kind(name):
    kinds = script_kinds(name)
    assert len(kinds) >= 10
    assert [option for option, kind in kinds.items() if kind is None] == []


def test_every_number_option_of_the_training_arguments_has_a_kind():
    """The `TrainingArguments` the scripts share: every number (and hf_ctx's own) has a kind in the table, which
    names only fields there are."""
    hints = typing.get_type_hints(CtxTrainingArguments)
    fields = {field.name: field for field in dataclasses.fields(CtxTrainingArguments) if field.init}
    numbers = {name for name in fields if int in typing.get_args(hints[name]) + (hints[name],)} | {
        name for name in fields if float in typing.get_args(hints[name]) + (hints[name],)
    }
    assert numbers - LAUNCHER_SET - set(TRAINING_OPTION_KINDS) == set()
    assert set(TRAINING_OPTION_KINDS) - set(fields) == set()
    assert {"learning_rate", "num_train_epochs", "max_steps", "output_dir", "per_device_train_batch_size"} <= set(
        TRAINING_OPTION_KINDS
    )


@pytest.mark.parametrize("name", ARGPARSE_SCRIPTS)
def test_every_option_of_each_experiment_declares_its_kind(name, monkeypatch):
    kinds = argparse_kinds(argparse_parser(name, monkeypatch))
    assert [option for option, kind in kinds.items() if kind is None] == []


def test_every_option_of_each_hf_ctx_command_declares_its_kind():
    for command, parser in cli_parsers().items():
        kinds = argparse_kinds(parser)
        assert len(kinds) >= 2, command
        assert [option for option, kind in kinds.items() if kind is None] == [], command


def test_an_option_without_a_kind_is_found():
    """The declaration test can fail: a field without a kind is reported."""

    @dataclasses.dataclass
    class Arguments:
        batch_size: int = dataclasses.field(default=8, metadata={"help": "no kind"})
        lowercase: bool = False

    assert {f.name: declared_kind(f) for f in dataclasses.fields(Arguments)} == {
        "batch_size": None,
        "lowercase": option_kinds.FLAG,
    }


# --- hostile values of each kind -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """A file, a folder, a dangling link and a missing path, for the path kinds."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "a_file.txt").write_text("a line\n")
    (root / "a_folder").mkdir()
    (root / "a_model").mkdir()  # what a model option accepts before it loads anything: a folder with a config.json
    (root / "a_model" / "config.json").write_text('{"model_type": "hf_ctx_elmo"}\n')
    (root / "dangling").symlink_to(root / "nowhere")
    return {
        "file": str(root / "a_file.txt"),
        "folder": str(root / "a_folder"),
        "model": str(root / "a_model"),
        "dangling link": str(root / "dangling"),
        "missing path": str(root / "missing" / "path"),
        "below a file": str(root / "a_file.txt" / "sub"),
    }


TEXT_VALUES = ["", "\n", "two\nlines"]
COUNT_VALUES = ["0", "-1", "", "x", "1.5"]
# kind name (or its start) -> the hostile values it must refuse; paths are named, filled in by `places`.
HOSTILE = {
    "positive count up to": [*COUNT_VALUES, "1000000000"],
    "positive count": COUNT_VALUES,
    "count or 0": ["-1", "", "x"],
    "finite number": ["nan", "inf", "-inf", "", "x"],
    "positive number": ["0", "-1", "nan", "inf", ""],
    "rate": ["-1e-3", "nan", "inf", ""],
    "number of at least 0": ["-1", "nan", "inf", ""],
    "probability above 0": ["0", "1", "-1", "nan"],
    "probability": ["-1", "1", "nan", ""],
    "decay in [0, 1)": ["-1", "1", "nan"],
    "percentage above 0": ["0", "100", "-1", "nan"],
    "percentage": ["-1", "100", "nan"],
    "seed": ["-1", "4294967296", "", "x"],
    "steps, or -1": ["0", "-2", "", "x"],
    "one line of text or none": ["two\nlines"],
    "one line of text": TEXT_VALUES,
    "existing files or glob patterns": [*TEXT_VALUES, "folder", "dangling link", "missing path", "folder/*.nothing"],
    "existing file": [*TEXT_VALUES, "folder", "dangling link", "missing path"],
    "existing folder": [*TEXT_VALUES, "file", "dangling link", "missing path"],
    "output folder": [*TEXT_VALUES, "file", "dangling link", "below a file"],
    "output file": [*TEXT_VALUES, "folder", "dangling link", "below a file"],
    "model name or path": [*TEXT_VALUES, "file", "folder", "dangling link", "missing path"],
    "tokenizer name or path": [*TEXT_VALUES, "file", "dangling link", "missing path"],
    "preset, config file": [*TEXT_VALUES, "dangling link", "missing path"],
    "dataset name or path": [*TEXT_VALUES, "dangling link", "missing path"],
    "word vectors": [*TEXT_VALUES, "dangling link", "missing path"],
    "one of a set": ["", "\n", "not-one-of-them"],
    "flag": ["maybe"],
}


def hostile_values(kind: Kind, places: dict) -> list[str]:
    (values,) = [values for start, values in HOSTILE.items() if kind.name.startswith(start)][:1]
    out = []
    for value in values:
        if value.startswith("folder/"):
            out.append(os.path.join(places["folder"], value.removeprefix("folder/")))
        else:
            out.append(places.get(value, value))
    return out


def assert_one_line_naming(option: str, code, err: str, what: str) -> None:
    assert code == 1, f"{what}: exit {code}, stderr {err!r}"
    lines = err.splitlines()
    assert len(lines) == 1, f"{what}: {err!r}"
    assert lines[0].startswith("error: ") and option.lstrip("-") in lines[0], f"{what}: {err!r}"
    assert "Traceback" not in err and "usage:" not in err


class _Parsed(Exception):
    """Raised where a hostile value was parsed without a word: the case fails before the run starts any work."""


def stop_after_parsing_with(monkeypatch):
    for parser_class in (scripts.OptionParser, option_kinds.CheckedArgumentParser):
        parse = parser_class.parse_known_args

        def parse_then_stop(self, args=None, namespace=None, parse=parse):
            parse(self, args, namespace)
            raise _Parsed(f"parsed without an error: {args}")

        monkeypatch.setattr(parser_class, "parse_known_args", parse_then_stop)


@pytest.fixture
def stop_after_parsing(monkeypatch):
    stop_after_parsing_with(monkeypatch)


def run_in_process(main, argv, capsys):
    capsys.readouterr()
    try:
        run_script(main, argv)
        code = 0
    except SystemExit as exit:
        code = exit.code
    return code, capsys.readouterr().err


def dataclass_cases(name: str) -> list[tuple[str, Kind]]:
    """(option, kind) of a script's own options; the `TrainingArguments` table through run_glue.py only (every
    script parses them with the same parser)."""
    module = importlib.import_module(name)
    kinds = scripts.OptionParser(module.ARGUMENT_CLASSES).option_kinds
    own = {f"--{option}" for option, kind in script_kinds(name).items()}
    return [
        (option, kind)
        for option, kind in kinds.items()
        if kind is not option_kinds.FLAG and (option in own or name == "run_glue")
    ]


@pytest.mark.parametrize("name", DATACLASS_SCRIPTS)
def test_each_script_refuses_hostile_values_of_each_option_in_one_line(name, places, capsys, stop_after_parsing):
    main = importlib.import_module(name).main
    tried = 0
    for option, kind in dataclass_cases(name):
        for value in hostile_values(kind, places):
            code, err = run_in_process(main, [option, value], capsys)
            assert_one_line_naming(option, code, err, f"{name} {option} {value!r}")
            tried += 1
    assert tried >= 40


def test_a_flag_given_a_value_that_is_not_true_or_false_is_one_line(capsys, stop_after_parsing):
    import run_ner

    code, err = run_in_process(run_ner.main, ["--use_crf", "maybe"], capsys)
    assert_one_line_naming("--use_crf", code, err, "--use_crf maybe")


# Valid values of the options the argparse entry points require, for the cases that vary another option.
def argparse_base(name: str, places: dict) -> dict[str, str]:
    out = os.path.join(places["folder"], "out")
    return {
        "bert_glue_conll": {"--preset": "smoke", "--data_dir": places["folder"], "--output_dir": out},
        "elmo_taglm": {"--preset": "smoke", "--data_dir": places["folder"], "--output_dir": out},
        "probe_elmo_layers": {"--bilm": places["model"], "--data_dir": places["folder"], "--output_dir": out},
        "render_results": {},
        **dict.fromkeys(BENCHMARKS, {}),
        "cpu_threads": {"case": "alone"},
        "convert-bert": {"src_dir": places["folder"], "out_dir": out},
        "train-tokenizer": {"files": places["file"], "--output_dir": out},
        "convert-elmo": {"options_json": places["file"], "weights_hdf5": places["file"], "output_dir": out},
        "embed": {"model": places["model"], "input_file": places["file"], "output_file": out + ".hdf5"},
    }[name]


def argparse_argv(base: dict[str, str], option: str, value: str) -> list[str]:
    """The command line of `base` with `option` set to `value`: positionals first, in order, then options."""
    given = {**base, option: value}
    positionals = [value for name, value in given.items() if not name.startswith("-")]
    options = [item for name, value in given.items() if name.startswith("-") for item in (name, value)]
    return [*positionals, *options]


@pytest.mark.parametrize("name", ARGPARSE_SCRIPTS)
def test_each_experiment_refuses_hostile_values_of_each_option_in_one_line(name, places, capsys, monkeypatch):
    main = importlib.import_module(name).main
    base = argparse_base(name, places)
    options = argparse_kinds(argparse_parser(name, monkeypatch)).items()
    stop_after_parsing_with(monkeypatch)
    for option, kind in options:
        for value in hostile_values(kind, places):
            code, err = run_in_process(main, argparse_argv(base, option, value), capsys)
            assert_one_line_naming(option, code, err, f"{name} {option} {value!r}")


def test_a_list_option_naming_a_value_twice_is_refused_in_one_line(places, capsys, monkeypatch):
    """`--seeds 0 0` started each seed's jobs twice, racing into one folder until one stopped on the other's lock
    (elmo_taglm, bert_glue_conll), or reported one seed as two (probe_elmo_layers); the same for every list option
    of these parsers (`--tasks`, `--arms`; files twice are `unique_files`' to refuse, under any of their names)."""
    stop_after_parsing_with(monkeypatch)
    cases = [(name, "--seeds", ["1", "1"]) for name in ("elmo_taglm", "bert_glue_conll", "probe_elmo_layers")]
    cases += [("bert_glue_conll", "--tasks", ["rte", "conll", "rte"]), ("elmo_taglm", "--arms", ["full", "full"])]
    for name, option, values in cases:
        argv = [item for pair in argparse_base(name, places).items() for item in pair] + [option, *values]
        code, err = run_in_process(importlib.import_module(name).main, argv, capsys)
        assert (code, err) == (1, f"error: {option} lists {values[-1]} twice: give each value once\n"), argv


@pytest.mark.parametrize("command", CLI_COMMANDS)
def test_each_hf_ctx_command_refuses_hostile_values_of_each_option_in_one_line(
    command, places, capsys, stop_after_parsing
):
    base = argparse_base(command, places)
    tried = 0
    for option, kind in argparse_kinds(cli_parsers()[command]).items():
        for value in hostile_values(kind, places):
            argv = [command, *argparse_argv(base, option, value)]
            capsys.readouterr()
            with pytest.raises(SystemExit) as exit:
                cli.main(argv)
            assert_one_line_naming(option, exit.value.code, capsys.readouterr().err, " ".join(map(repr, argv)))
            tried += 1
    assert tried >= 8


# --- as a user starts them -------------------------------------------------------------------------------------


def test_hostile_options_as_real_commands_print_one_line(places):
    """Three of them as a user starts them (at once: each loads torch): a negative rate, a file
    as --output_dir, a folder where hf-ctx embed reads its text."""
    cases = [
        (["examples/run_glue.py", "--learning_rate", "-1e-3"], "--learning_rate"),  # a value, refused by its kind
        (["examples/run_ner.py", "--do_train", "--output_dir", places["file"]], "--output_dir"),
        (["hf_ctx_cli.py", "embed", places["model"], places["folder"], "out.hdf5"], "input_file"),
    ]
    environment = {key: value for key, value in os.environ.items() if key != "HF_CTX_DEBUG"}
    environment["PYTHONPATH"] = str(ROOT)
    started = [
        subprocess.Popen(
            [sys.executable, *args],
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args, _ in cases
    ]
    for (args, named), process in zip(cases, started):
        _, err = process.communicate(timeout=300)
        assert_one_line_naming(named, process.returncode, err, " ".join(args))


def test_a_negative_rate_after_an_equals_sign_is_refused_by_its_kind(capsys, stop_after_parsing):
    import run_glue

    code, err = run_in_process(run_glue.main, ["--learning_rate=-1e-3"], capsys)
    assert (code, err) == (1, "error: --learning_rate must be a finite number of at least 0, got -0.001\n")


def test_a_list_starting_with_a_negative_number_is_a_value():
    """`--bilm_layers -2,-1` (layers counted from the top) is the option's value; before, argparse read the list as
    an option of its own ("expected one argument") and only `--bilm_layers=-2,-1` worked."""
    import run_ner

    from hf_ctx.tools.scripts import parse_options

    model_args, *_ = parse_options(run_ner.ARGUMENT_CLASSES, ["--bilm_layers", "-2,-1", "--output_dir", "out"])
    assert model_args.bilm_layers == "-2,-1"
    assert run_ner.bilm_layer_list(model_args.bilm_layers) == [-2, -1]


# --- an input the run would not read -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "option", "steps"),
    [
        ("run_glue", "--test_file", ["--do_train"]),
        ("run_glue", "--validation_file", ["--do_train"]),
        ("run_ner", "--test_file", ["--do_eval"]),
        ("run_qa", "--train_file", ["--do_predict"]),
        ("run_swag", "--test_file", ["--do_train"]),
        ("pretrain_bert", "--validation_file", ["--do_train"]),
        ("pretrain_elmo", "--validation_file", ["--do_train"]),
    ],
)
def test_a_file_without_the_step_that_reads_it_is_refused_naming_the_flag(name, option, steps, places, capsys):
    main = importlib.import_module(name).main
    out = os.path.join(places["folder"], f"unread_{name}")
    code, err = run_in_process(main, [*steps, "--output_dir", out, option, places["file"]], capsys)
    assert_one_line_naming(option, code, err, f"{name} {option} with {steps}")
    assert "--do_" in err and not os.path.exists(out)  # refused before anything is written


def test_a_validation_file_with_an_evaluation_strategy_is_read(places, capsys):
    """--eval_strategy steps evaluates during training (transformers turns --do_eval on): not an ignored input."""
    import run_glue

    from hf_ctx.tools.option_kinds import check_inputs_are_read

    parsed = {"validation_file": places["file"]}
    check_inputs_are_read(run_glue.ARGUMENT_CLASSES[:-1], parsed, {"do_train": True, "do_eval": True})
    with pytest.raises(ValueError, match="--validation_file is read only with --do_eval"):
        check_inputs_are_read(run_glue.ARGUMENT_CLASSES[:-1], parsed, {"do_train": True, "do_eval": False})


# --- public Python arguments -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """A tiny ELMo biLM, an ELMo tagger and a BERT tagger with a CRF, saved."""
    sys.path.insert(0, str(ROOT / "tests"))
    import tiny_checkpoints

    root = tmp_path_factory.mktemp("models")
    folders = {}
    for name, build in (
        ("bilm", tiny_checkpoints.elmo_bilm),
        ("elmo_tagger", tiny_checkpoints.elmo_crf_tagger),
        ("bert_tagger", tiny_checkpoints.bert_crf_tagger),
    ):
        folder = root / name
        folder.mkdir()
        model, tokenizer = build(folder)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[name] = str(folder)
    return folders


def test_public_python_arguments_of_a_wrong_kind_are_one_error_naming_them(tiny_models, tmp_path):
    """Each call gets one ValueError or TypeError whose message names the argument (before: a KeyError 'BAD', an
    OverflowError of the tokenizer, torch's "Invalid device string", or a string embedded character by character
    as if each were a word)."""
    from transformers import pipeline

    from hf_ctx import SubwordTokenClassificationPipeline, WordTokenClassificationPipeline, allennlp
    from hf_ctx.tools.embed import ElmoEmbedder

    text = tmp_path / "text.txt"
    text.write_text("a b c\n")
    embedder = ElmoEmbedder(tiny_models["bilm"], device="cpu")
    words = pipeline(
        "token-classification", model=tiny_models["elmo_tagger"], pipeline_class=WordTokenClassificationPipeline
    )
    subwords = pipeline(
        "token-classification", model=tiny_models["bert_tagger"], pipeline_class=SubwordTokenClassificationPipeline
    )
    cases = [
        ("device", lambda: ElmoEmbedder(tiny_models["bilm"], device="gpu9")),
        ("sentences", lambda: embedder.embed_batch("a sentence")),
        ("sentences[1]", lambda: embedder.embed_batch([["a"], "b c"])),
        ("sentences", lambda: embedder.embed_batch(None)),
        ("batch_size", lambda: embedder.embed_file(text, tmp_path / "out.hdf5", batch_size=True, progress=False)),
        ("batch_size", lambda: embedder.embed_file(text, tmp_path / "out.hdf5", batch_size=0, progress=False)),
        ("dropout", lambda: allennlp.Elmo(tiny_models["bilm"], None, 1, dropout=1.5)),
        ("requires_grad", lambda: allennlp.Elmo(tiny_models["bilm"], None, 1, requires_grad="yes")),
        ("num_output_representations", lambda: allennlp.Elmo(tiny_models["bilm"], None, "2")),
        ("batch_size", lambda: list(allennlp.ElmoEmbedder(tiny_models["bilm"]).embed_sentences([["a"]], 0))),
        ("aggregation_strategy", lambda: words("a b", aggregation_strategy="bad")),
        ("ignore_labels", lambda: words("a b", ignore_labels="O")),
        ("delimiter", lambda: words(["a", "b"], is_split_into_words=True, delimiter=3)),
        ("is_split_into_words", lambda: words("a b", is_split_into_words="yes")),
        ("input", lambda: words(123)),
        ("aggregation_strategy", lambda: subwords("a b", aggregation_strategy="bad")),
        ("stride", lambda: subwords("a b", stride=-1)),
        ("ignore_labels", lambda: subwords("a b", ignore_labels="O")),
        ("input", lambda: subwords(None)),
    ]
    for argument, call in cases:
        with pytest.raises((ValueError, TypeError)) as raised:
            call()
        message = " ".join(str(raised.value).split())
        assert argument in message, f"{argument}: {type(raised.value).__name__}: {message}"
    assert not (tmp_path / "out.hdf5").exists()
