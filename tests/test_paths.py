"""hf_ctx.tools.paths: a name that is no local folder is refused before any data is loaded, with one line that
says so first (offline the Hub is never asked, online one existence check decides: a fake Hub); an output folder
that holds an earlier run is refused, or cleared as --overwrite_output_dir or --resume_from_checkpoint say."""

from types import SimpleNamespace

import end_to_end
import pretrain_bert
import pretrain_elmo
import pytest
import run_glue
import run_ner
import run_qa
import run_swag
from huggingface_hub import HfApi, constants
from huggingface_hub.errors import RepositoryNotFoundError

from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script
from hf_ctx.tools.paths import check_local_path, earlier_run_outputs, prepare_output_dir


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """The Hub as the test sets it: `hub.models` exist, `hub.reachable` says whether it answers; every question
    asked is recorded in `hub.asked`. The Hub cache is an empty folder."""

    class FakeHub:
        models, reachable, asked = set(), True, []

    def auth_check(api, repo_id, **kwargs):
        FakeHub.asked.append(repo_id)
        if not FakeHub.reachable:
            raise ConnectionError("Name or service not known")
        if repo_id not in FakeHub.models:
            answer = SimpleNamespace(headers={}, request=None, status_code=404, url=repo_id, reason_phrase="")
            raise RepositoryNotFoundError("404 Client Error", response=answer)

    monkeypatch.setattr(HfApi, "auth_check", auth_check)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return FakeHub


def test_offline_a_missing_folder_is_said_to_be_missing_and_the_hub_is_not_asked(hub, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(FileNotFoundError) as error:
        check_local_path("runs/does-not-exist", "--model_name_or_path")
    assert str(error.value) == (
        "no folder 'runs/does-not-exist' (and the Hub is not tried offline), given for --model_name_or_path"
    )
    assert hub.asked == []


def test_online_a_name_neither_on_disk_nor_on_the_hub_is_refused(hub):
    with pytest.raises(FileNotFoundError) as error:
        check_local_path("runs/does-not-exist", "--tokenizer_name")
    assert str(error.value) == (
        "'runs/does-not-exist' is neither a local folder nor a model on the Hub, given for --tokenizer_name"
    )
    hub.models = {"owner/model"}
    check_local_path("owner/model", "--model_name_or_path")  # on the Hub: transformers downloads it
    assert hub.asked == ["runs/does-not-exist", "owner/model"]
    hub.reachable = False
    with pytest.raises(
        FileNotFoundError, match=r"^no folder 'owner/model', and on the Hub: ConnectionError: Name or "
    ):
        check_local_path("owner/model", "--model_name_or_path")


def test_local_folders_hub_cache_and_paths_that_cannot_be_hub_ids(hub, tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    check_local_path(tmp_path)  # exists
    (tmp_path / "hub-cache" / "models--owner--cached").mkdir(parents=True)
    check_local_path("owner/cached", "--model_name_or_path")  # downloaded before: loads offline
    for path in (str(tmp_path / "missing"), "./missing", "a/b/c"):  # no Hub id has this form: the Hub is never asked
        with pytest.raises(FileNotFoundError, match=rf"^no folder '{path}', given for --config_name$"):
            check_local_path(path, "--config_name")
    assert hub.asked == []


def test_a_size_preset_as_config_name_is_no_path(hub, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    kinds.CONFIG.check("--config_name", "mini")
    with pytest.raises(FileNotFoundError, match="^no folder 'mini'"):
        kinds.MODEL.check("--tokenizer_name", "mini")  # not a preset of tokenizers


def test_a_script_refuses_a_missing_model_folder_before_loading_any_data(hub, monkeypatch, tmp_path, capsys, caplog):
    """The training file is missing too: the folder's error comes first, so no data was read; it is the only
    thing the script says."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    argv = ["--model_name_or_path", "runs/does-not-exist", "--train_file", str(tmp_path / "missing.txt")]
    argv += ["--do_train", "--output_dir", str(tmp_path / "out")]
    with pytest.raises(SystemExit):
        run_script(run_ner.main, argv)
    printed = capsys.readouterr()
    assert (
        caplog.records == []
        and printed.out == ""
        and printed.err
        == (
            "error: no folder 'runs/does-not-exist' (and the Hub is not tried offline), given for --model_name_or_path\n"
        )
    )


# --- an output folder that holds an earlier run ------------------------------------------------------------

CARD = "---\nlibrary_name: transformers\ntags:\n- hf_ctx\n- bert\n---\n\n# out\n"


def _earlier_run(folder, *names, card=CARD):
    """A folder as an earlier run left it: `names` (files, or folders ending in "/"), and an hf_ctx model card."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).mkdir() if name.endswith("/") else (folder / name).write_text("x")
    if card is not None:
        (folder / "README.md").write_text(card)
    return folder


def test_a_folder_holding_an_earlier_run_is_refused_by_name_with_the_ways_on(tmp_path):
    out = _earlier_run(tmp_path / "out", "config.json", "model.safetensors", "checkpoint-20/", "checkpoint-100/")
    with pytest.raises(ValueError) as error:
        prepare_output_dir(out)
    assert str(error.value) == (
        f"--output_dir {out} holds a trained model (model.safetensors, README.md); pass --overwrite_output_dir to "
        "replace it, --resume_from_checkpoint latest to continue its training from checkpoint-100, or give another "
        "--output_dir"
    )
    results = _earlier_run(tmp_path / "results", "eval_results.json", "predictions_test.txt", card=None)
    with pytest.raises(ValueError, match=r"holds the results of an earlier run \(eval_results.json, predictions_test"):
        prepare_output_dir(results)
    # New, empty, or holding only a tokenizer, a user's README and files of its own: nothing to refuse.
    mine = _earlier_run(tmp_path / "mine", "vocab.txt", "tokenizer_config.json", "notes.txt", card="# my notes\n")
    for folder in (tmp_path / "new", tmp_path, mine):
        prepare_output_dir(folder)
    assert earlier_run_outputs(mine) == {"model": [], "checkpoints": [], "results": []}


def test_overwrite_removes_the_earlier_runs_outputs_and_resume_only_its_results(tmp_path):
    earlier = ("config.json", "vocab.txt", "notes.txt", "model.safetensors", "checkpoint-5/", "all_results.json")
    earlier += ("eval_results.json", "predictions_validation.txt", "training_curves.png", "SST-2.tsv")
    out = _earlier_run(tmp_path / "resumed", *earlier)
    prepare_output_dir(out, resume=True)
    kept = {"config.json", "vocab.txt", "notes.txt", "model.safetensors", "checkpoint-5", "README.md"}
    assert {p.name for p in out.iterdir()} == kept
    out = _earlier_run(tmp_path / "replaced", *earlier)
    prepare_output_dir(out, overwrite=True)
    assert {p.name for p in out.iterdir()} == {"config.json", "vocab.txt", "notes.txt"}


SCRIPTS_THAT_TRAIN = {
    "run_glue": (run_glue, ["--task_name", "rte", "--data_dir", "glue", "--model_type", "bert"]),
    "run_ner": (run_ner, ["--model_type", "taglm", "--train_file", "eng.train"]),
    "run_qa": (run_qa, ["--model_type", "bert", "--train_file", "train.json"]),
    "run_swag": (run_swag, ["--model_type", "bert", "--train_file", "train.csv"]),
    "pretrain_bert": (pretrain_bert, ["--train_file", "corpus.txt"]),
    "pretrain_elmo": (pretrain_elmo, ["--train_file", "corpus.txt"]),
}


def _data_files_in(folder, monkeypatch) -> None:
    """The data files the scripts' arguments below name, in `folder` (the current folder): there, so that their
    options' kinds pass, and junk, so that a check after reading them would fail otherwise."""
    monkeypatch.chdir(folder)
    (folder / "glue").mkdir()
    for name in ("eng.train", "train.json", "train.csv", "corpus.txt"):
        (folder / name).write_text("junk\n")


@pytest.mark.parametrize("script", [*SCRIPTS_THAT_TRAIN, "end_to_end"])
def test_every_script_refuses_to_train_over_a_finished_model_before_reading_anything(script, tmp_path, monkeypatch):
    _data_files_in(tmp_path, monkeypatch)
    out = _earlier_run(tmp_path / "out", "config.json", "model.safetensors", "eval_results.json")
    if script == "end_to_end":
        _earlier_run(out / "tagger", "config.json", "model.safetensors")
        with pytest.raises(ValueError, match=rf"^--output_dir {out / 'tagger'} holds a trained model .*another"):
            end_to_end.main(["--output_dir", str(out)])
        assert not (out / "data").exists() and not (out / "bilm").exists()  # refused before the first stage
        return
    module, arguments = SCRIPTS_THAT_TRAIN[script]
    with pytest.raises(ValueError, match=rf"^--output_dir {out} holds a trained model .*--overwrite_output_dir"):
        module.main([*arguments, "--do_train", "--output_dir", str(out), "--report_to", "none"])
    assert (out / "model.safetensors").read_text() == "x"


def test_a_run_never_writes_over_the_model_it_reads_even_when_told_to_overwrite(tmp_path, monkeypatch):
    """--overwrite_output_dir removes an earlier run's weights: into the folder of --model_name_or_path it would
    remove the model the run starts from, so that is refused first, by name."""
    _data_files_in(tmp_path, monkeypatch)
    model = _earlier_run(tmp_path / "model", "model.safetensors")
    (model / "config.json").write_text('{"model_type": "hf_ctx_bert"}')
    arguments = ["--model_name_or_path", str(model), "--train_file", "eng.train", "--do_train", "--report_to", "none"]
    with pytest.raises(ValueError, match=rf"^output folder {model} is --model_name_or_path; writing there would"):
        run_ner.main([*arguments, "--output_dir", str(model), "--overwrite_output_dir"])
    assert (model / "model.safetensors").read_text() == "x"


# (script, options, the error): every option refused by name before any data is read (the data file holds no
# data, so a check that came later would name the file instead). tests/hostile/test_options.py tries every option.
HOSTILE_OPTIONS = [
    ("run_glue", ["--max_train_samples", "0"], r"^--max_train_samples must be a positive integer, got 0$"),
    ("run_glue", ["--max_train_samples", "-1"], r"^--max_train_samples must be a positive integer, got -1$"),
    ("run_glue", ["--max_eval_samples", "0"], r"^--max_eval_samples must be a positive integer"),
    ("run_glue", ["--max_predict_samples", "-1"], r"^--max_predict_samples must be a positive integer"),
    ("run_glue", ["--pad_to_multiple_of", "0"], r"^--pad_to_multiple_of must be a positive integer"),
    ("run_glue", ["--preprocessing_num_workers", "-1"], r"^--preprocessing_num_workers must be a positive"),
    ("run_glue", ["--per_device_train_batch_size", "0"], r"^--per_device_train_batch_size must be a positive integer"),
    ("run_glue", ["--gradient_accumulation_steps", "0"], r"^--gradient_accumulation_steps must be a positive integer"),
    ("run_glue", ["--learning_rate", "nan"], r"^--learning_rate must be a finite number of at least 0, got nan"),
    ("run_glue", ["--learning_rate", "-1"], r"^--learning_rate must be a finite number of at least 0, got -1"),
    ("run_glue", ["--weight_decay", "inf"], r"^--weight_decay must be a finite number"),
    ("run_glue", ["--num_train_epochs", "-1"], r"^--num_train_epochs must be a finite number of at least 0"),
    ("run_glue", ["--num_train_epochs", "0"], r"^--num_train_epochs 0 trains nothing"),
    ("run_ner", ["--batch_eval_metrics"], r"^--batch_eval_metrics: the example scripts score the whole evaluation"),
    ("pretrain_bert", ["--batch_eval_metrics"], r"^--batch_eval_metrics: the example scripts score the whole"),
    ("run_glue", ["--adam_beta1", "1"], r"^--adam_beta1 must be in \[0, 1\)"),
    ("run_glue", ["--ignore_mismatched_sizes"], r"^--ignore_mismatched_sizes needs --model_name_or_path"),
    (
        "run_ner",
        ["--num_columns", "-1"],
        r"^--num_columns must be 0 \(read from the first line\) or a positive integer, got -1",
    ),
    ("run_ner", ["--train_sample_seed", "3"], r"^--train_sample_seed draws the --max_train_samples sentences"),
    (
        "run_ner",
        ["--max_train_samples", "5", "--train_sample_seed", "-1"],
        r"^--train_sample_seed must be an integer in \[0, 2\*\*32\)",
    ),
    (
        "run_qa",
        ["--doc_stride", "-1"],
        r"^--doc_stride must be 0 \(windows that do not overlap\) or a positive integer",
    ),
    ("run_qa", ["--null_score_diff_threshold", "nan"], r"^--null_score_diff_threshold must be a finite number"),
    ("run_swag", ["--ending_columns", "ending0,ending0,ending1"], r"the column\(s\) \['ending0'\] are named for two"),
    ("run_swag", ["--context_column", "label"], r"the column\(s\) \['label'\] are named for two roles"),
    ("pretrain_bert", ["--max_train_samples", "0"], r"^--max_train_samples must be a positive integer"),
    ("pretrain_bert", ["--validation_split_percentage", "-5"], r"^--validation_split_percentage must be a percentage"),
    ("pretrain_elmo", ["--validation_split_percentage", "nan"], r"^--validation_split_percentage must be a percent"),
    ("run_ner", ["--validation_split_percentage", "100"], r"^--validation_split_percentage must be a percentage"),
    ("run_ner", ["--word_min_count", "0"], r"^--word_min_count must be a positive integer, got 0"),
    ("pretrain_elmo", ["--max_eval_samples", "-2"], r"^--max_eval_samples must be a positive integer"),
]


EVALUATION_WITHOUT_DATA = [
    ("run_glue", "train.csv", "text,label\na b,x\n", "--validation_file"),
    ("run_swag", "train.csv", "", "--validation_file"),
    ("run_ner", "train.txt", "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n", "a validation split"),
    ("pretrain_elmo", "train.txt", "a b c\n", "validation data"),
    ("pretrain_bert", "train.txt", "a b c\n", "validation data"),
]


@pytest.mark.parametrize(
    "script, name, text, needed", EVALUATION_WITHOUT_DATA, ids=[s for s, *_ in EVALUATION_WITHOUT_DATA]
)
def test_evaluation_asked_by_eval_strategy_without_data_names_that_option(script, name, text, needed, tmp_path):
    """`--eval_strategy steps` (which makes transformers set do_eval) without validation data: the error names
    it (before: `--do_eval needs ...`, an option the command line did not hold)."""
    import importlib

    train = tmp_path / name
    train.write_text(text)
    argv = ["--train_file", str(train), "--do_train", "--output_dir", str(tmp_path / "out"), "--report_to", "none"]
    argv += ["--model_type", "bert"] if script.startswith("run_") else []
    argv += ["--validation_split_percentage", "0"] if script.startswith("pretrain_") else []
    with pytest.raises(ValueError, match=rf"^--eval_strategy steps needs .*{needed}"):
        importlib.import_module(script).main([*argv, "--eval_strategy", "steps", "--eval_steps", "5"])


@pytest.mark.parametrize(
    "script, options, error", HOSTILE_OPTIONS, ids=[f"{s}-{'_'.join(o)}" for s, o, _ in HOSTILE_OPTIONS]
)
def test_a_hostile_option_is_refused_by_name_before_any_data_is_read(script, options, error, tmp_path):
    import importlib

    no_data = tmp_path / "no_data.csv"
    no_data.write_text("")
    argv = ["--train_file", str(no_data), "--do_train", "--output_dir", str(tmp_path / "out"), "--report_to", "none"]
    argv += ["--model_type", "bert"] if script.startswith("run_") else []
    with pytest.raises(ValueError, match=error):
        importlib.import_module(script).main([*argv, *options])
