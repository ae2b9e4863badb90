"""Hostile or damaged checkpoint folders, as an attacker handing one over (or a damaged copy) would make them:
each is refused in one line naming the folder or file before anything is built, read or unpickled
(issue 51, item 2; issue 50's model-folder messages). Each case is a function named after what it tries."""

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


class _Hostile:
    """Unpickled, creates `marker`: whether anything of a pickle ran is a file on disk."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def write_hostile_pickle(path, marker, *, zip_format=True):
    """A pickle whose unpickling would create `marker`: `torch.save`'s format, or a plain pickle."""
    payload = {"state": _Hostile(marker)}
    if zip_format:
        torch.save(payload, path)
    else:
        with open(path, "wb") as f:
            pickle.dump(payload, f)


def one_line_refusal(text: str) -> str:
    """The error line of a command's output, asserted to be its only one, without a traceback or torch's advice."""
    assert "Traceback" not in text and "weights_only" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, text
    return errors[0]


def hf_ctx_command(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "hf_ctx.tools.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
    )


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Tiny saved checkpoints of each family: name -> folder."""
    import tiny_checkpoints

    root = tmp_path_factory.mktemp("saved")
    folders = {}
    for name in ("bert_token_classifier", "elmo_bilm", "taglm"):
        model, tokenizer = getattr(tiny_checkpoints, name)(root)
        folders[name] = root / name
        model.save_pretrained(folders[name])
        tokenizer.save_pretrained(folders[name])
    return folders


def copy_of(folder, tmp_path, name="copy"):
    target = tmp_path / name
    shutil.copytree(folder, target)
    return target


# --- pickles ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("zip_format", [True, False], ids=["torch_save", "plain_pickle"])
def test_a_folder_whose_only_weights_are_a_hostile_pytorch_model_bin_is_refused_unread(saved, tmp_path, zip_format):
    """transformers would unpickle it (weights_only refuses the code, in a 10-frame traceback advising
    weights_only=False); hf_ctx refuses the folder before reading it, naming the file."""
    from transformers import AutoModel, AutoModelForTokenClassification

    from hf_ctx import CtxBertForTokenClassification

    folder = copy_of(saved["bert_token_classifier"], tmp_path)
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "executed"
    write_hostile_pickle(folder / "pytorch_model.bin", marker, zip_format=zip_format)
    for load in (CtxBertForTokenClassification.from_pretrained, AutoModelForTokenClassification.from_pretrained):
        with pytest.raises(OSError) as raised:
            load(folder)
        message = str(raised.value)
        assert f"{folder / 'pytorch_model.bin'} is a pickle" in message and "Convert it to safetensors" in message
        assert "weights_only" not in message and "\n" not in message
    with pytest.raises(OSError, match="is a pickle"):
        AutoModel.from_pretrained(folder)
    assert not marker.exists()


def test_a_hostile_pytorch_model_bin_given_to_convert_bert_is_refused_in_one_line(tmp_path):
    """convert-bert reads a transformers BERT's pytorch_model.bin (with weights_only): one holding code is named
    in one line, nothing runs, and torch's weights_only=False advice is not shown."""
    from transformers import BertConfig

    source = tmp_path / "bert"
    BertConfig(
        vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8
    ).save_pretrained(source)
    marker = tmp_path / "executed"
    write_hostile_pickle(source / "pytorch_model.bin", marker)
    result = hf_ctx_command("convert-bert", source, tmp_path / "out", "--weights_only")
    assert result.returncode == 1
    line = one_line_refusal(result.stderr + result.stdout)
    assert "pytorch_model.bin is a pickle" in line and "Convert it to safetensors" in line
    assert not marker.exists() and not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def run_with_checkpoints(tmp_path_factory):
    """A tiny CtxTrainer run with checkpoints at steps 1 and 2 (model, optimizer, scheduler, RNG, state)."""
    from tiny_checkpoints import run_with_two_checkpoints

    return run_with_two_checkpoints(tmp_path_factory.mktemp("run"))


@pytest.mark.parametrize("planted", ["optimizer.pt", "scheduler.pt", "rng_state.pth"])
def test_resuming_from_a_checkpoint_with_a_hostile_training_state_pickle_is_refused_naming_it(
    run_with_checkpoints, tmp_path, planted
):
    """The Trainer reads these with weights_only (nothing ran) but failed in a traceback advising
    weights_only=False; the resume is refused before training, naming the file; 'latest' too."""
    output_dir = copy_of(run_with_checkpoints.args.output_dir, tmp_path, "run")
    marker = tmp_path / "executed"
    write_hostile_pickle(output_dir / "checkpoint-2" / planted, marker)
    from hf_ctx.tools.trainer import resolve_resume_checkpoint

    checks = run_with_checkpoints._checkpoint_checks()
    for resume in (
        lambda: run_with_checkpoints.train(resume_from_checkpoint=str(output_dir / "checkpoint-2")),
        lambda: resolve_resume_checkpoint("latest", output_dir, **checks),
    ):
        with pytest.raises(ValueError) as raised:
            resume()
        message = str(raised.value)
        assert message.startswith(f"{output_dir / 'checkpoint-2' / planted} is a pickle"), message
        assert "weights_only" not in message and "\n" not in message
        # The way on for a training state is another start (it has no safetensors form to convert to).
        assert "Convert it to safetensors" not in message, message
        assert message.endswith("without --resume_from_checkpoint (--model_name_or_path reads model.safetensors only)")
    assert not marker.exists()


def test_a_hostile_training_args_bin_is_never_read_on_resume(run_with_checkpoints, tmp_path):
    """training_args.bin is a pickle of the run's arguments that the Trainer writes and never reads: a hostile
    one neither runs nor keeps a resume from checking the files it does read (held)."""
    from hf_ctx.tools.trainer import resolve_resume_checkpoint

    output_dir = copy_of(run_with_checkpoints.args.output_dir, tmp_path, "run")
    marker = tmp_path / "executed"
    write_hostile_pickle(output_dir / "checkpoint-2" / "training_args.bin", marker)
    checks = run_with_checkpoints._checkpoint_checks()
    assert resolve_resume_checkpoint("latest", output_dir, **checks) == str(output_dir / "checkpoint-2")
    assert not marker.exists()


def test_the_trainers_own_training_state_pickles_pass_the_check(run_with_checkpoints):
    """The check refuses what torch's weights-only unpickler refuses, not the Trainer's own files (numpy RNG
    state included)."""
    from hf_ctx.tools.trainer import check_training_state_pickles

    checkpoint = os.path.join(run_with_checkpoints.args.output_dir, "checkpoint-2")
    assert {"optimizer.pt", "scheduler.pt", "rng_state.pth"} <= set(os.listdir(checkpoint))
    assert check_training_state_pickles(checkpoint) == checkpoint


# --- sizes that set memory, bounded by the weights before the model is built ----------------------------------


def edited_copy(folder, tmp_path, change, name="edited"):
    """A copy of the checkpoint `folder` whose config.json `change` (a function of the dict) edited."""
    target = copy_of(folder, tmp_path, name)
    config = json.loads((target / "config.json").read_text())
    change(config)
    (target / "config.json").write_text(json.dumps(config))
    return target


DEEP_CONFIGS = {
    "bert_num_hidden_layers": (
        "bert_token_classifier",
        "num_hidden_layers",
        lambda c: c.update(num_hidden_layers=10**6),
    ),
    "bert_intermediate_size": (
        "bert_token_classifier",
        "intermediate_size",
        lambda c: c.update(intermediate_size=10**6),
    ),
    "bert_max_position_embeddings": (
        "bert_token_classifier",
        "max_position_embeddings",
        lambda c: c.update(max_position_embeddings=10**7),
    ),
    "elmo_highway_layers": ("elmo_bilm", "char_cnn.n_highway", lambda c: c["char_cnn"].update(n_highway=10**6)),
    "elmo_lstm_layers": ("elmo_bilm", "lstm.n_layers", lambda c: c["lstm"].update(n_layers=10**6)),
    "elmo_lstm_width": ("elmo_bilm", "lstm.dim", lambda c: c["lstm"].update(dim=10**6)),
    "elmo_convolutions": ("elmo_bilm", "char_cnn.filters", lambda c: c["char_cnn"].update(filters=[[1, 4]] * 1000)),
    "elmo_vocabulary": ("elmo_bilm", "vocab_size", lambda c: c.update(vocab_size=10**9)),
    "taglm_bilm_highway_layers": (
        "taglm",
        "bilm_config.char_cnn.n_highway",
        lambda c: c["bilm_config"]["char_cnn"].update(n_highway=10**6),
    ),
    "taglm_word_vocabulary": ("taglm", "vocab_size", lambda c: c.update(vocab_size=10**9)),
}


@pytest.mark.parametrize("case", sorted(DEEP_CONFIGS))
def test_a_config_asking_for_more_layers_or_width_than_its_weights_hold_is_refused_before_building(
    saved, tmp_path, case
):
    """num_hidden_layers 10^6 (or 10^6 highway layers) built the layers for > 90 s before any check; now the
    safetensors header bounds each declared size, naming the folder's config.json, the field and the weights."""
    from transformers import AutoModelForTokenClassification

    import hf_ctx

    family, field, change = DEEP_CONFIGS[case]
    folder = edited_copy(saved[family], tmp_path, change)
    model_class = {"bert_token_classifier": hf_ctx.CtxBertForTokenClassification, "elmo_bilm": hf_ctx.ElmoForBiLM}.get(
        family, hf_ctx.TagLMForTokenClassification
    )
    loaders = [model_class.from_pretrained]
    if family != "elmo_bilm":
        loaders.append(AutoModelForTokenClassification.from_pretrained)
    for load in loaders:
        with pytest.raises(ValueError) as raised:
            load(folder)
        message = str(raised.value)
        assert message.startswith(f"cannot load {folder}: {folder / 'config.json'} has {field}="), message
        assert "model.safetensors holds" in message and "\n" not in message


def test_the_sizes_in_weights_declarations_match_each_familys_saved_weights(saved):
    """Every declared size is found in the weights of a model of its family and equals the config's value: a
    renamed tensor would silently switch the check off."""
    import hf_ctx
    from hf_ctx.model_size import _config_value, safetensors_shapes, size_in_weights

    configs = {
        "bert_token_classifier": hf_ctx.CtxBertConfig,
        "elmo_bilm": hf_ctx.ElmoConfig,
        "taglm": hf_ctx.TagLMConfig,
    }
    for family, config_class in configs.items():
        config = config_class.from_pretrained(saved[family])
        _, shapes = safetensors_shapes(saved[family])
        for field, (pattern, axis) in config_class.sizes_in_weights.items():
            if family == "elmo_bilm" and field == "task_hidden_size":
                continue  # a biLM has no task LSTM
            held = size_in_weights(shapes, pattern, axis)
            assert held is not None and held[0] == _config_value(config, field), (family, field, held)


def test_a_deep_elmo_config_given_to_hf_ctx_embed_is_one_line(embeds_of_edited_configs):
    folder, status, printed = embeds_of_edited_configs["deep"]
    assert status == 1
    line = one_line_refusal(printed)
    assert "char_cnn.n_highway=1000000" in line and str(folder / "config.json") in line
    assert not Path(f"{folder}.hdf5").exists()


# --- a model_type that lies -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "family, lie", [("elmo_bilm", "hf_ctx_bert"), ("bert_token_classifier", "hf_ctx_elmo"), ("taglm", "hf_ctx_elmo")]
)
def test_a_model_type_edited_to_another_hf_ctx_familys_is_named_with_its_config_json(saved, tmp_path, family, lie):
    """An ELMo folder claiming to be a BERT failed with `classifier_dropout must be in [0, 1), got None`,
    naming neither the folder, config.json nor the type; now its auto_map (the class that saved it) gives it
    away, through AutoModel and through the family's own class."""
    from transformers import AutoModel

    import hf_ctx

    folder = edited_copy(saved[family], tmp_path, lambda c: c.update(model_type=lie))
    own_class = {"elmo_bilm": hf_ctx.ElmoForBiLM, "bert_token_classifier": hf_ctx.CtxBertForTokenClassification}
    for load in (AutoModel.from_pretrained, own_class.get(family, hf_ctx.TagLMForTokenClassification).from_pretrained):
        with pytest.raises(ValueError) as raised:
            load(folder)
        message = str(raised.value)
        assert message.startswith(f"{folder / 'config.json'} has model_type {lie!r}, but was saved by "), message
        assert "\n" not in message


def test_a_family_class_given_another_familys_folder_names_the_type_and_the_file(saved):
    """CtxBertModel.from_pretrained on an (honest) ELMo folder: transformers warned "You are using a model of
    type ..." twice and failed on a field; now one error naming config.json and both types."""
    from hf_ctx import CtxBertModel

    folder = saved["elmo_bilm"]
    with pytest.raises(
        ValueError, match=rf"^{folder / 'config.json'} has model_type 'hf_ctx_elmo', not 'hf_ctx_bert'"
    ):
        CtxBertModel.from_pretrained(folder)


# `hf-ctx embed FOLDER TEXT OUT` for each folder given, in one process with stdin closed: each command's exit
# status and what it printed.
EMBED_EACH = """
import contextlib, io, json, sys
from hf_ctx.tools.cli import main
text, answers = sys.argv[1], {}
for folder in sys.argv[2:]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        try:
            main(["embed", folder, text, folder + ".hdf5"])
            status = 0
        except SystemExit as exit:
            status = exit.code
    answers[folder] = [status, printed.getvalue()]
print(json.dumps(answers))
"""
UNKNOWN_TYPES = ["bert", "hf_ctx_elmo_v2"]


@pytest.fixture(scope="module")
def embeds_of_edited_configs(saved, tmp_path_factory):
    """`hf-ctx embed` of copies of the ELMo folder whose config.json was edited: each model_type of
    UNKNOWN_TYPES, and "deep" (a million highway layers); name -> (folder, exit status, what it printed)."""
    tmp_path = tmp_path_factory.mktemp("embed_types")
    edits = {lie: lambda c, lie=lie: c.update(model_type=lie) for lie in UNKNOWN_TYPES}
    edits["deep"] = lambda c: c["char_cnn"].update(n_highway=10**6)
    folders = {name: edited_copy(saved["elmo_bilm"], tmp_path, edit, name) for name, edit in edits.items()}
    text = tmp_path / "text.txt"
    text.write_text("red cat runs\n")
    result = subprocess.run(
        [sys.executable, "-c", EMBED_EACH, str(text), *map(str, folders.values())],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=240,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout.splitlines()[-1])
    return {name: (folder, *answers[str(folder)]) for name, folder in folders.items()}


@pytest.mark.parametrize("lie", UNKNOWN_TYPES)
def test_a_model_type_edited_to_transformers_or_an_unknown_type_is_refused_by_hf_ctx_embed_without_a_prompt(
    embeds_of_edited_configs, lie
):
    """An unknown model_type made transformers ask "Do you wish to run the custom code? [y/N]" (the folder's
    auto_map names hf_ctx's code); 'bert' would load transformers' BERT with random weights. The entry points
    read config.json first and name it."""
    folder, status, printed = embeds_of_edited_configs[lie]
    assert status == 1 and "[y/N]" not in printed
    line = one_line_refusal(printed)
    assert str(folder / "config.json") in line and repr(lie) in line, line
    assert not Path(f"{folder}.hdf5").exists()


PLAIN_LOAD = """
import sys
import hf_ctx
from transformers import AutoConfig, AutoModel, AutoModelForTokenClassification, AutoTokenizer, pipeline
for folder in sys.argv[1:]:
    print("folder:", folder)
    for load in (AutoConfig, AutoModel, AutoModelForTokenClassification):
        try:
            load.from_pretrained(folder)
        except ValueError as error:
            print("refused:", error)
    AutoTokenizer.from_pretrained(folder)
    print("tokenizer loaded")
"""
EDITED_TYPES = [("bert_token_classifier", "hf_ctx_elmo_v2"), ("taglm", "hf_ctx_elmo_v2"), ("elmo_bilm", "bert")]


@pytest.fixture(scope="module")
def plain_loads(saved, tmp_path_factory):
    """What PLAIN_LOAD printed for each folder of EDITED_TYPES (one process for all, stdin closed):
    (family, lie) -> (folder, its lines); and the whole output."""
    tmp_path = tmp_path_factory.mktemp("plain_loads")
    folders = {
        case: edited_copy(saved[case[0]], tmp_path, lambda c, lie=case[1]: c.update(model_type=lie), "_".join(case))
        for case in EDITED_TYPES
    }
    result = subprocess.run(
        [sys.executable, "-c", PLAIN_LOAD, *map(str, folders.values())],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=240,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "[y/N]" not in output and "custom code" not in output, output
    parts = result.stdout.split("folder: ")[1:]
    assert len(parts) == len(folders), output
    return {case: (folder, part.splitlines()[1:]) for (case, folder), part in zip(folders.items(), parts)}, output


@pytest.mark.parametrize("family, lie", EDITED_TYPES)
def test_plain_transformers_loads_of_an_edited_hf_ctx_folder_never_ask_to_run_its_code(plain_loads, family, lie):
    """transformers' own `AutoConfig`/`AutoModel*`/`AutoTokenizer.from_pretrained` after `import hf_ctx`, with
    stdin closed as in a job: a type it does not know made it ask "Do you wish to run the custom code? [y/N]" (the
    folder's auto_map names hf_ctx's code), and 'bert' built transformers' BERT from an hf_ctx folder (random
    weights). Now each load names config.json and both types in one line, and never prompts; the tokenizer loads."""
    (folder, lines), output = plain_loads[0][(family, lie)], plain_loads[1]
    refusals = [line for line in lines if line.startswith("refused:")]
    assert len(refusals) == 3, output
    for line in refusals:
        assert f"{folder / 'config.json'} has model_type {lie!r}, but was saved by " in line
    assert lines[-1] == "tokenizer loaded", output


# --- tokenizer files against the model they ship with ---------------------------------------------------------


def test_a_taglm_tagger_whose_vocab_txt_was_cut_is_refused_naming_the_file_and_both_sizes(saved, tmp_path):
    """A vocab.txt cut to part of its words loaded silently, and every word after the cut got another id (the
    tagger's scores changed by up to 0.53)."""
    from hf_ctx import ElmoTokenizer, TagLMConfig
    from hf_ctx.tools.families import check_tokenizer_fits

    folder = copy_of(saved["taglm"], tmp_path)
    words = (folder / "vocab.txt").read_text().splitlines()
    (folder / "vocab.txt").write_text("\n".join(words[:8]) + "\n")
    config = TagLMConfig.from_pretrained(folder)
    with pytest.raises(ValueError) as raised:
        check_tokenizer_fits(config, ElmoTokenizer.from_pretrained(folder), None, folder)
    assert str(raised.value).startswith(
        f"the tokenizer of {folder} has 8 words (vocab.txt) but the model's word vocabulary has {len(words)}"
    )
    check_tokenizer_fits(config, ElmoTokenizer.from_pretrained(saved["taglm"]), None, saved["taglm"])  # whole: fits


def test_a_model_folder_whose_tokenizer_files_do_not_fit_is_refused_by_from_pretrained(saved, tmp_path):
    """Plain `from_pretrained` of a folder (no script) loaded a TagLM whose vocab.txt was cut, and a BERT whose
    tokenizer.json holds more ids than the model has rows, silently; now one line names the file and both sizes."""
    from transformers import AutoModelForTokenClassification

    taglm = copy_of(saved["taglm"], tmp_path, "taglm")
    words = (taglm / "vocab.txt").read_text().splitlines()
    (taglm / "vocab.txt").write_text("\n".join(words[:8]) + "\n")
    with pytest.raises(ValueError) as raised:
        AutoModelForTokenClassification.from_pretrained(taglm)
    message = str(raised.value)
    assert message.startswith(f"the tokenizer of {taglm} has 8 words (vocab.txt) but the model's word vocabulary")
    assert "\n" not in message and str(len(words)) in message
    bert = copy_of(saved["bert_token_classifier"], tmp_path, "bert")
    tokenizer_file = json.loads((bert / "tokenizer.json").read_text())
    rows = json.loads((bert / "config.json").read_text())["vocab_size"]
    tokenizer_file["model"]["vocab"].update({f"extra{i}": rows + i for i in range(3)})
    (bert / "tokenizer.json").write_text(json.dumps(tokenizer_file))
    with pytest.raises(ValueError, match=rf"the tokenizer of {bert} has {rows + 3} tokens \(tokenizer.json\) but"):
        AutoModelForTokenClassification.from_pretrained(bert)
    for name in ("taglm", "bert_token_classifier"):  # the folders as saved load
        AutoModelForTokenClassification.from_pretrained(saved[name])


def test_a_pipeline_given_another_tokenizer_checks_it_against_the_model(saved, tmp_path):
    """`pipeline(task, model=<folder or model>, tokenizer=<another>)` and hf_ctx's QA pipeline built from a model
    and a tokenizer did not check the tokenizer: a TagLM tagged with a cut vocabulary (every later word another
    id), a BERT read ids past its rows."""
    from tiny_checkpoints import bert_tokenizer
    from transformers import AutoModelForTokenClassification, BertTokenizer, pipeline

    from hf_ctx import (
        CtxBertConfig,
        CtxBertForQuestionAnswering,
        ElmoTokenizer,
        SubwordTokenClassificationPipeline,
        WordTokenClassificationPipeline,
    )
    from hf_ctx.tools.question_answering import QuestionAnsweringPipeline

    cut = tmp_path / "cut"
    words = ElmoTokenizer.from_pretrained(saved["taglm"]).words
    ElmoTokenizer(vocab=words[:8]).save_pretrained(cut)
    for model in (saved["taglm"], AutoModelForTokenClassification.from_pretrained(saved["taglm"])):
        with pytest.raises(ValueError, match=r"has 8 words \(vocab.txt\) but the model's word vocabulary has"):
            pipeline(
                "token-classification",
                model=model,
                tokenizer=ElmoTokenizer.from_pretrained(cut),
                pipeline_class=WordTokenClassificationPipeline,
            )
    bigger = bert_tokenizer(tmp_path)
    small = CtxBertConfig.from_preset("tiny", vocab_size=len(bigger) - 5, max_position_embeddings=32)
    with pytest.raises(ValueError, match=rf"has {len(bigger)} tokens \(tokenizer.json, vocab.txt\) but the model"):
        QuestionAnsweringPipeline(CtxBertForQuestionAnswering(small), bigger)
    tagger = AutoModelForTokenClassification.from_pretrained(saved["bert_token_classifier"])
    other = BertTokenizer(vocab={"[UNK]": 0} | {f"w{i}": i for i in range(1, tagger.config.vocab_size + 2)})
    with pytest.raises(ValueError, match="tokens \\(tokenizer.json, vocab.txt\\) but the model only"):
        pipeline(
            "token-classification", model=tagger, tokenizer=other, pipeline_class=SubwordTokenClassificationPipeline
        )
    # the model's own tokenizer passes
    pipeline("token-classification", model=saved["taglm"], pipeline_class=WordTokenClassificationPipeline)


# --- folders that are no model, and local paths that do not exist --------------------------------------------


def test_a_folder_that_is_not_a_model_is_named_with_what_it_lacks(tmp_path):
    """transformers said "Should have a `model_type` key in its config.json" of a folder without one."""
    from hf_ctx.tools import option_kinds as kinds
    from hf_ctx.tools.question_answering import QuestionAnsweringPipeline

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a model\n")
    expected = r"no config.json there, so it does not look like a model folder \(it holds notes.txt\)"
    with pytest.raises(ValueError, match=rf"^--model_name_or_path {folder}: {expected}"):
        kinds.MODEL.check("--model_name_or_path", str(folder))
    with pytest.raises(ValueError, match=rf"^model {folder}: {expected}"):
        QuestionAnsweringPipeline.from_pretrained(str(folder))


@pytest.mark.parametrize("name", ["./runs/x", "runs/x/", "/abs/missing/path", "~/x", "a/b/c", "../runs/x"])
def test_a_name_that_looks_like_a_local_path_but_does_not_exist_is_a_missing_folder(name):
    """Not a Hub connection failure ("We couldn't connect to 'https://huggingface.co'") nor "Repo id must be in
    the form": the scripts' paths, the QA pipeline and convert-bert say the folder is missing."""
    from hf_ctx.tools import option_kinds as kinds
    from hf_ctx.tools.convert_bert import convert_bert_checkpoint
    from hf_ctx.tools.question_answering import QuestionAnsweringPipeline

    for option, kind in [
        ("model_name_or_path", kinds.MODEL),
        ("tokenizer_name", kinds.TOKENIZER),
        ("bilm_name_or_path", kinds.MODEL),
    ]:
        with pytest.raises(FileNotFoundError, match=rf"^no folder {re.escape(repr(name))}, given for --{option}$"):
            kind.check(f"--{option}", name)
    with pytest.raises(FileNotFoundError, match=rf"^no folder {re.escape(repr(name))}, given for model$"):
        QuestionAnsweringPipeline.from_pretrained(name)
    with pytest.raises(FileNotFoundError, match=rf"^no folder {re.escape(repr(name))}: convert-bert converts"):
        convert_bert_checkpoint(name, "/nonexistent/out")


@pytest.mark.parametrize(
    "content",
    ['{"version": "1.0", "model": {"type": "WordPiece"}}', '{"added_tokens": []}', "[1, 2]", '{"vocab": {"a": 0}}'],
    ids=["model_without_fields", "added_tokens_only", "a_list", "a_vocabulary_dict"],
)
def test_a_tokenizer_json_of_the_wrong_structure_is_named_in_one_line(saved, tmp_path, content):
    """Valid JSON that is no `tokenizers` file gave `KeyError: 'added_tokens'` (or a TypeError) in a traceback."""
    from hf_ctx.tools.loading import load_tokenizer

    folder = copy_of(saved["bert_token_classifier"], tmp_path)
    (folder / "tokenizer.json").write_text(content)
    with pytest.raises(ValueError) as raised:
        load_tokenizer(folder)
    assert str(raised.value).startswith(f"tokenizer: {folder / 'tokenizer.json'} is not a tokenizer file")
    assert "\n" not in str(raised.value)
