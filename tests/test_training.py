"""The helpers the example scripts share (hf_ctx.tools.scripts, hf_ctx.tools.trainer, hf_ctx.data.subsets; the
scripts' own tests run them end to end)."""

import io
import logging
import subprocess
import sys
import warnings

import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
import torch
import transformers
from datasets import Dataset
from transformers import BertConfig, TrainingArguments

from hf_ctx.data.subsets import first_examples, hold_out_validation
from hf_ctx.tools.scripts import match_special_tokens, parse_config_overrides, setup_logging


def test_config_overrides_are_read_as_json_where_they_parse():
    assert parse_config_overrides("a=1,b=True,c=gelu,d=0.5,e=null, f =false") == {
        "a": 1,
        "b": True,
        "c": "gelu",
        "d": 0.5,
        "e": None,
        "f": False,
    }
    assert parse_config_overrides(None) == {} and parse_config_overrides("") == {}
    with pytest.raises(ValueError, match="key=value .*got 'dropout'"):
        parse_config_overrides("dropout")


def test_config_overrides_take_json_or_key_value_pairs_alike():
    """Every example script reads --config_overrides the same way; both spellings give the same fields."""
    as_json = (
        '{"lstm": {"dim": 512, "projection_dim": 128}, "char_cnn": {"filters": [[1, 32], [2, 32]]}, "dropout": 0.1}'
    )
    as_pairs = "lstm.dim=512,lstm.projection_dim=128,char_cnn.filters=[[1, 32], [2, 32]],dropout=0.1"
    assert (
        parse_config_overrides(as_json)
        == parse_config_overrides(as_pairs)
        == {"lstm": {"dim": 512, "projection_dim": 128}, "char_cnn": {"filters": [[1, 32], [2, 32]]}, "dropout": 0.1}
    )
    assert parse_config_overrides('name="a,b",x=1') == {"name": "a,b", "x": 1}  # commas inside quotes stay
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_config_overrides('{"lstm": {"dim": 512}')
    with pytest.raises(ValueError, match="'lstm' is already given a value"):
        parse_config_overrides("lstm=3,lstm.dim=512")


def test_first_examples_and_held_out_validation():
    data = Dataset.from_dict({"x": list(range(20))})
    assert first_examples(data, None) is data
    assert list(first_examples(data, 3)["x"]) == [0, 1, 2] and len(first_examples(data, 50)) == 20
    train, validation = hold_out_validation(data, None, 10.0, seed=0)
    assert (len(train), len(validation)) == (18, 2) and sorted(list(train["x"]) + list(validation["x"])) == list(
        range(20)
    )
    assert hold_out_validation(data, None, 0, seed=0) == (data, None)
    given = first_examples(data, 2)
    assert hold_out_validation(data, given, 10.0, seed=0) == (data, given)


def test_parse_args_and_set_up_parses_logs_and_seeds(tmp_path):
    import logging
    from dataclasses import dataclass

    import torch
    from transformers import TrainingArguments

    from hf_ctx.tools.scripts import parse_args_and_set_up

    @dataclass
    class ScriptArguments:
        size: int = 1

    logger = logging.getLogger("an_example_script")
    script_args, training_args = parse_args_and_set_up(
        (ScriptArguments, TrainingArguments),
        ["--size", "3", "--output_dir", str(tmp_path), "--seed", "7", "--report_to", "none", "--do_eval"],
        logger,
    )
    assert script_args.size == 3 and training_args.seed == 7
    assert logger.level == logging.INFO and logging.getLogger("hf_ctx").level == logging.INFO
    drawn = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(drawn, torch.rand(3))
    # A run that asks for none of the script's steps would exit 0 having done nothing.
    with pytest.raises(ValueError, match="nothing to do: give --do_train and/or --do_eval$"):
        parse_args_and_set_up(
            (ScriptArguments, TrainingArguments),
            ["--output_dir", str(tmp_path), "--do_predict"],
            logger,
            steps=("do_train", "do_eval"),
        )
    # --fp16 on a CPU would train in float32 without a word; --bf16 takes effect there (bfloat16 autocast).
    cpu = ["--output_dir", str(tmp_path), "--do_train", "--use_cpu", "--report_to", "none"]
    with pytest.raises(ValueError, match=r"^--fp16 has no effect on a CPU .* train in float32"):
        parse_args_and_set_up((ScriptArguments, TrainingArguments), [*cpu, "--fp16"], logger)
    assert parse_args_and_set_up((ScriptArguments, TrainingArguments), [*cpu, "--bf16"], logger)[1].bf16


def test_validation_on_the_training_file_is_a_warning(tmp_path, caplog):
    """`--validation_file` naming the `--train_file` (under another path too) of a run that trains: a warning that
    the scores are of the training text (before: in silence)."""
    from dataclasses import dataclass

    from transformers import TrainingArguments

    from hf_ctx.tools.scripts import parse_args_and_set_up

    @dataclass
    class DataArguments:
        train_file: str | None = None
        validation_file: str | None = None

    (tmp_path / "train.csv").write_text("text,label\na,b\n")
    (tmp_path / "dev.csv").write_text("text,label\na,b\n")  # the same text, another file: not warned of
    logger = logging.getLogger("an_example_script")
    for validation, steps, warned in (
        (tmp_path / "sub" / ".." / "train.csv", ["--do_train"], True),
        (tmp_path / "dev.csv", ["--do_train"], False),
        (tmp_path / "train.csv", ["--do_eval"], False),  # no training: the file is only evaluated on
    ):
        (tmp_path / "sub").mkdir(exist_ok=True)
        caplog.clear()
        argv = ["--train_file", str(tmp_path / "train.csv"), "--validation_file", str(validation), *steps]
        with caplog.at_level(logging.WARNING, logger="an_example_script"):
            parse_args_and_set_up(
                (DataArguments, TrainingArguments),
                [*argv, "--output_dir", str(tmp_path / "out"), "--report_to", "none"],
                logger,
            )
        said = [r.getMessage() for r in caplog.records if "is the --train_file" in r.getMessage()]
        assert said == ([f"--validation_file {validation} is the --train_file: the evaluation scores the text the "
                         "model trains on, not new text; give a held-out file (or --validation_split_percentage, "
                         "where the script takes it)"] if warned else [])  # fmt: skip


@pytest.fixture
def restore_logging():
    """setup_logging changes process-wide state: put transformers' verbosity and the warning filters back."""
    import datasets

    verbosity = transformers.utils.logging.get_verbosity()
    bars = transformers.utils.logging.is_progress_bar_enabled(), datasets.is_progress_bar_enabled()
    with warnings.catch_warnings():
        yield
    transformers.utils.logging.set_verbosity(verbosity)
    # Output to a file (as under pytest) turns the progress bars off.
    if bars[0]:
        transformers.utils.logging.enable_progress_bar()
    if bars[1]:
        datasets.enable_progress_bars()


def test_setup_logging_keeps_the_libraries_quiet_unless_asked(tmp_path, restore_logging):
    transformers.utils.logging.set_verbosity_warning()  # transformers' own default
    script_logger = logging.getLogger("a_script")
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    setup_logging(args, script_logger)
    assert transformers.utils.logging.get_verbosity() == logging.WARNING  # no config dumps, no "Saving ..." lines
    assert script_logger.level == logging.INFO and logging.getLogger("hf_ctx").level == logging.INFO
    assert args.dataloader_pin_memory is False  # no accelerator: pinning does nothing but warn
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        setup_logging(args, script_logger)
        warnings.warn(
            "LSTM with projections is not supported with oneDNN. Using default implementation.",
            UserWarning,
            stacklevel=2,
        )
    assert len(caught) == 1  # no warning is hidden: the one above is avoided where it arose (hf_ctx.layers)

    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", log_level="error")
    setup_logging(args, script_logger)
    assert transformers.utils.logging.get_verbosity() == logging.ERROR and script_logger.level == logging.ERROR
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", log_level="info")
    setup_logging(args, script_logger)
    assert transformers.utils.logging.get_verbosity() == logging.INFO


def test_match_special_tokens_leaves_the_trainer_nothing_to_align(tmp_path):
    """transformers' own `align_special_tokens` (what Trainer.train runs) finds nothing to change, so no warning."""
    from tiny_checkpoints import taglm
    from transformers.testing_utils import CaptureLogger
    from transformers.trainer_utils import align_special_tokens

    model, tokenizer = taglm(tmp_path)
    assert getattr(model.config, "pad_token_id", None) != tokenizer.pad_token_id  # what the warning was about
    match_special_tokens(model, tokenizer)
    assert (model.config.pad_token_id, model.config.bos_token_id, model.config.eos_token_id) == (
        tokenizer.pad_token_id,
        tokenizer.bos_token_id,
        tokenizer.eos_token_id,
    )
    with CaptureLogger(transformers.utils.logging.get_logger("transformers.trainer_utils")) as captured:
        align_special_tokens(model, tokenizer)
    assert "PAD/BOS/EOS" not in captured.out


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A tiny run with checkpoints at steps 1 and 2 (model, tokenizer, optimizer, scheduler, RNG, state)."""
    from tiny_checkpoints import run_with_two_checkpoints

    return run_with_two_checkpoints(tmp_path_factory.mktemp("checkpoints"))


@pytest.mark.parametrize(
    "removed", ["scheduler.pt", "rng_state.pth", "trainer_state.json", "model.safetensors", "tokenizer.json"]
)
def test_resuming_from_an_incomplete_checkpoint_names_the_missing_file(checkpoints, tmp_path, removed):
    """A kill while saving leaves checkpoint-N with files missing; without scheduler.pt or the RNG state the
    Trainer resumed silently and trained differently, and other files failed with unrelated errors."""
    import shutil

    from hf_ctx.tools.trainer import missing_checkpoint_files

    output_dir = tmp_path / "run"
    shutil.copytree(checkpoints.args.output_dir, output_dir)
    checkpoint = output_dir / "checkpoint-2"
    (checkpoint / removed).unlink()
    checks = checkpoints._checkpoint_checks()
    assert missing_checkpoint_files(checkpoint, **checks) == [removed]
    assert missing_checkpoint_files(output_dir / "checkpoint-1", **checks) == []
    with pytest.raises(ValueError, match=rf"checkpoint-2 is an incomplete checkpoint .*: missing {removed}\."):
        checkpoints.train(resume_from_checkpoint=str(checkpoint))


@pytest.mark.parametrize("damaged", ["model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json"])
def test_resuming_from_a_truncated_checkpoint_names_the_damaged_file(checkpoints, tmp_path, damaged):
    """A truncated file (a full disk, a copy cut short) was a bare SafetensorError or PytorchStreamReader error."""
    import os
    import shutil

    from hf_ctx.tools.trainer import resolve_resume_checkpoint

    output_dir = tmp_path / "run"
    shutil.copytree(checkpoints.args.output_dir, output_dir)
    path = output_dir / "checkpoint-2" / damaged
    os.truncate(path, path.stat().st_size // 2)
    with pytest.raises(ValueError, match=rf"checkpoint-2 .*: {damaged} \(.*\) is incomplete or corrupt"):
        checkpoints.train(resume_from_checkpoint=str(output_dir / "checkpoint-2"))
    checks = checkpoints._checkpoint_checks()
    assert resolve_resume_checkpoint("latest", output_dir, **checks) == str(output_dir / "checkpoint-1")


def test_resuming_from_the_latest_checkpoint_skips_an_incomplete_one(checkpoints, tmp_path, caplog):
    import dataclasses
    import shutil
    from pathlib import Path
    from unittest import mock

    from hf_ctx.tools.trainer import CtxTrainer, resolve_resume_checkpoint

    output_dir = tmp_path / "run"
    shutil.copytree(checkpoints.args.output_dir, output_dir)
    (output_dir / "checkpoint-2" / "optimizer.pt").unlink()
    checks = checkpoints._checkpoint_checks()
    with caplog.at_level("WARNING", logger="hf_ctx.tools.trainer"):
        for latest in ("latest", True):
            assert resolve_resume_checkpoint(latest, output_dir, **checks) == str(output_dir / "checkpoint-1")
    assert "skipping the incomplete checkpoint" in caplog.text and "missing optimizer.pt" in caplog.text
    (output_dir / "checkpoint-1" / "rng_state.pth").unlink()
    with pytest.raises(ValueError, match=r"no complete checkpoint-N folder in .* \(found 2 incomplete ones\)"):
        resolve_resume_checkpoint("latest", output_dir, **checks)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_resume_checkpoint(output_dir / "checkpoint-7", output_dir, **checks)
    assert resolve_resume_checkpoint(None, output_dir) is None

    (output_dir / "checkpoint-1" / "rng_state.pth").write_bytes(
        (Path(checkpoints.args.output_dir) / "checkpoint-1" / "rng_state.pth").read_bytes()
    )
    # The Trainer itself: resumes from checkpoint-1 and trains step 2 again.
    trainer = CtxTrainer(
        model=checkpoints.model,
        args=dataclasses.replace(checkpoints.args, output_dir=str(output_dir)),
        train_dataset=checkpoints.train_dataset,
        processing_class=checkpoints.processing_class,
    )
    with mock.patch.object(CtxTrainer, "_load_from_checkpoint", wraps=trainer._load_from_checkpoint) as load:
        trainer.train(resume_from_checkpoint="latest")
    assert load.call_args.args[0] == str(output_dir / "checkpoint-1") and trainer.state.global_step == 2


def test_a_checkpoint_from_an_earlier_hf_ctx_is_not_incomplete_for_lacking_a_newer_code_file(tmp_path):
    """An ElmoTokenizer saves copies of hf_ctx's modules (remote code); a checkpoint saved before a module was
    added lacks it. Resuming runs the installed code, so only the tokenizer's own files are expected."""
    from transformers import TrainingArguments

    from hf_ctx import ElmoConfig, ElmoForBiLM, ElmoTokenizer
    from hf_ctx.tools.trainer import CtxTrainer

    tokenizer = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "cat"])
    config = ElmoConfig(
        char_cnn={"filters": [[1, 4]], "embedding": {"dim": 4}, "n_highway": 1},
        lstm={"dim": 8, "projection_dim": 4, "n_layers": 1},
        vocab_size=tokenizer.vocab_size,
    )
    trainer = CtxTrainer(
        model=ElmoForBiLM(config),
        args=TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True),
        processing_class=tokenizer,
    )
    tokenizer.save_pretrained(tmp_path / "saved")
    assert any(path.suffix == ".py" for path in (tmp_path / "saved").iterdir())  # the code does travel
    files = trainer._checkpoint_checks()["tokenizer_files"]
    assert files and "vocab.txt" in files and not [name for name in files if name.endswith(".py")]


def test_saving_draws_no_progress_bar(checkpoints, tmp_path, capsys):
    """A checkpoint save is quick; transformers' "Writing model shards" bar was three lines of noise per save."""
    import transformers

    transformers.utils.logging.enable_progress_bar()  # a script run by an earlier test (output to a file) turned it off
    checkpoints._save(str(tmp_path / "saved"))
    assert "Writing model shards" not in capsys.readouterr().err
    assert (tmp_path / "saved" / "model.safetensors").is_file()
    assert transformers.utils.logging.is_progress_bar_enabled()  # other bars (datasets' map) still show


def test_gpu_defaults_apply_on_cuda_only_and_never_over_a_given_option():
    from types import SimpleNamespace

    import torch

    from hf_ctx.tools.scripts import apply_gpu_defaults

    def arguments(device):
        return SimpleNamespace(
            device=torch.device(device),
            per_device_train_batch_size=8,
            per_device_eval_batch_size=8,
            train_sampling_strategy="random",
        )

    cpu = arguments("cpu")
    assert apply_gpu_defaults(cpu, [], per_device_train_batch_size=32, group_by_length=True) == {}
    assert cpu.per_device_train_batch_size == 8 and cpu.train_sampling_strategy == "random"

    gpu = arguments("cuda")
    gpu.per_device_train_batch_size = 16  # as the parser sets it from the command line below
    applied = apply_gpu_defaults(
        gpu,
        ["--per_device_train_batch_size=16", "--do_train"],
        per_device_train_batch_size=32,
        per_device_eval_batch_size=32,
        group_by_length=True,
    )
    assert applied == {"per_device_eval_batch_size": 32, "train_sampling_strategy": "group_by_length"}
    assert gpu.per_device_train_batch_size == 16  # the command line's value stays
    assert (gpu.per_device_eval_batch_size, gpu.train_sampling_strategy) == (32, "group_by_length")

    chosen = arguments("cuda")
    assert apply_gpu_defaults(chosen, ["--train_sampling_strategy", "random"], group_by_length=True) == {}


def test_max_train_minutes_stops_training_cleanly_at_the_end_of_a_step(tmp_path, monkeypatch):
    """--max_train_minutes: a run given more steps than fit stops at the first step that ends past the limit, and
    the Trainer finishes as at --max_steps (state saved, the step count in it); a limit of 0 is refused."""
    from tiny_checkpoints import WORDS, bert_sequence_classifier

    import hf_ctx.tools.trainer as training

    model, tokenizer = bert_sequence_classifier(tmp_path)
    data = Dataset.from_dict({"text": [" ".join(WORDS[:4])] * 8, "label": [0, 1] * 4})
    data = data.map(lambda b: tokenizer(b["text"], padding="max_length", max_length=8), batched=True)
    clock = iter(range(0, 10_000, 60))  # each reading of the clock one minute later: start, then a minute a step
    monkeypatch.setattr(training, "monotonic", lambda: next(clock))
    (args,) = transformers.HfArgumentParser(training.CtxTrainingArguments).parse_args_into_dataclasses(
        args=["--output_dir", str(tmp_path / "run"), "--use_cpu", "--report_to", "none", "--max_steps", "50"]
        + ["--per_device_train_batch_size", "2", "--max_train_minutes", "3", "--disable_tqdm", "true"]
    )
    trainer = training.CtxTrainer(model=model, args=args, train_dataset=data.remove_columns("text"))
    result = trainer.train()
    assert result.global_step == 3  # minutes 1, 2, 3 after the start: stopped at the third step, not the 50th
    assert trainer.state.global_step == 3
    with pytest.raises(ValueError, match="--max_train_minutes must be a positive number, got 0"):
        training.CtxTrainingArguments(output_dir=str(tmp_path), max_train_minutes=0)


@pytest.mark.parametrize(
    "warmup, scheduler, warned",
    [("50", "linear", True), ("20", "cosine", True), ("19", "linear", False), ("0.5", "linear", False)]
    + [("50", "constant", False)],
)
def test_a_warm_up_as_long_as_the_run_is_a_warning(warmup, scheduler, warned, tmp_path, caplog):
    """--warmup_steps of at least the run's steps: the learning rate would never reach --learning_rate (before:
    in silence). The constant schedule has no warm-up; a share below 1 is a part of the run."""
    import hf_ctx.tools.trainer as training

    (args,) = transformers.HfArgumentParser(training.CtxTrainingArguments).parse_args_into_dataclasses(
        args=["--output_dir", str(tmp_path), "--use_cpu", "--report_to", "none", "--warmup_steps", warmup]
        + ["--lr_scheduler_type", scheduler]
    )
    trainer = training.CtxTrainer(model=torch.nn.Linear(2, 2), args=args)
    with caplog.at_level(logging.WARNING, logger="hf_ctx.tools.trainer"):
        trainer.create_optimizer_and_scheduler(num_training_steps=20)
    said = [r.getMessage() for r in caplog.records if "warms up" in r.getMessage()]
    expected = f"--warmup_steps {warmup} warms up over {warmup} steps, the run has 20: the learning rate never "
    assert said == ([expected + "reaches --learning_rate 5e-05; give fewer warm-up steps (a number below 1 is a "
                     "share of the run, e.g. 0.1)"] if warned else [])  # fmt: skip


def test_prediction_keeps_the_examples_order_when_training_groups_batches_by_length(tmp_path):
    """`group_by_length` (the scripts' GPU default) made `Trainer` batch evaluation and prediction by length too,
    and return the predictions in that order: run_glue wrote test predictions to other rows, run_ner stopped with
    "sentence 0 has 13 words but 16 predictions". They come back in the examples' order."""
    from tiny_checkpoints import WORDS, bert_sequence_classifier

    from hf_ctx.tools.trainer import CtxTrainer, CtxTrainingArguments

    model, tokenizer = bert_sequence_classifier(tmp_path)
    lengths = [1, 9, 2, 8, 3, 7, 4, 6, 5, 9, 1, 8]  # sentences of every length, in no order
    labels = [0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 0, 0]  # the rows' order, as the model's two classes can write it
    data = Dataset.from_dict({"text": [" ".join(WORDS[:n]) for n in lengths], "label": labels})
    data = data.map(lambda b: tokenizer(b["text"]), batched=True, remove_columns="text")
    grouped = {"train_sampling_strategy": "group_by_length"}
    if not hasattr(TrainingArguments, "train_sampling_strategy"):  # transformers before 5.2x: the flag
        grouped = {"group_by_length": True}
    args = CtxTrainingArguments(
        output_dir=str(tmp_path / "run"), use_cpu=True, report_to="none", per_device_eval_batch_size=4, **grouped
    )
    output = CtxTrainer(model=model, args=args, processing_class=tokenizer).predict(data)
    assert output.label_ids.tolist() == labels  # each row's prediction beside its own example


def test_max_train_cpu_minutes_counts_training_cpu_time_not_validation(tmp_path, monkeypatch):
    """--max_train_cpu_minutes: the clock is this process's CPU time less the spans spent validating (between a
    step's end and `on_evaluate`); training stops at the first step past the limit, and every log line carries
    `train_cpu_minutes`. A limit of 0 is refused; CtxTrainer installs the callback when the flag is given."""
    from transformers import TrainerControl, TrainerState

    import hf_ctx.tools.trainer as training

    now = [0.0]
    monkeypatch.setattr(training, "process_time", lambda: now[0])
    limit = training.TrainingCPUTimeLimit(minutes=2)
    state, control = TrainerState(), TrainerControl()
    limit.on_train_begin(None, state, control)
    now[0] = 60.0  # a minute of training
    assert not limit.on_step_end(None, state, control).should_training_stop
    now[0] = 600.0  # nine minutes validating: not counted
    limit.on_evaluate(None, state, control)
    logs = {"loss": 1.0}
    state.log_history.append({**logs, "step": 1})
    limit.on_log(None, state, control, logs=logs)
    assert logs["train_cpu_minutes"] == state.log_history[-1]["train_cpu_minutes"] == 1.0
    now[0] = 700.0  # a validation's line is logged before on_evaluate: it gets the minutes of its step
    validation = {"eval_loss": 1.0}
    limit.on_log(None, state, control, logs=validation)
    assert validation["train_cpu_minutes"] == 1.0
    limit.on_evaluate(None, state, control)
    now[0] = 730.0  # half a minute more: 1.5 minutes of training
    assert not limit.on_step_end(None, state, control).should_training_stop
    now[0] = 761.0  # 2.02 minutes of training
    assert limit.on_step_end(None, state, control).should_training_stop
    with pytest.raises(ValueError, match="--max_train_cpu_minutes must be a positive number, got 0"):
        training.CtxTrainingArguments(output_dir=str(tmp_path), max_train_cpu_minutes=0)

    from tiny_checkpoints import bert_sequence_classifier

    model, _ = bert_sequence_classifier(tmp_path)
    args = training.CtxTrainingArguments(output_dir=str(tmp_path / "run"), use_cpu=True, max_train_cpu_minutes=5)
    trainer = training.CtxTrainer(model=model, args=args)
    assert any(isinstance(c, training.TrainingCPUTimeLimit) for c in trainer.callback_handler.callbacks)


def diverging_trainer(folder, logging_steps: int):
    """A tiny BERT classifier at learning rate 1e30, saving every step: its weights are NaN after step 2."""
    from tiny_checkpoints import bert_sequence_classifier, cat_sentences

    from hf_ctx.tools.trainer import CtxTrainer

    model, tokenizer = bert_sequence_classifier(folder)
    data = cat_sentences(tokenizer, 32)
    args = TrainingArguments(
        output_dir=str(folder / "run"),
        max_steps=8,
        per_device_train_batch_size=4,
        learning_rate=1e30,
        save_steps=1,
        logging_steps=logging_steps,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    return CtxTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)


def checkpoint_folders(trainer):
    import os

    return sorted(name for name in os.listdir(trainer.args.output_dir) if name.startswith("checkpoint-"))


@pytest.mark.parametrize("logging_steps", [1, 100], ids=["logged-each-step", "caught-at-save"])
def test_a_diverging_run_stops_by_name_keeping_only_finite_checkpoints(tmp_path, logging_steps):
    """Seen in the log (a NaN gradient norm) or, where nothing is logged before the save, at the save: one named
    error, and no checkpoint of NaN weights (they would load, and predict, as NaN)."""
    from hf_ctx import CtxBertForSequenceClassification

    trainer = diverging_trainer(tmp_path, logging_steps)
    expected = (
        r"^training diverged at step 2 \(grad_norm nan; 33 weight tensor\(s\) hold NaN .*checkpoint-1 .* is kept\. "
        r"Lower --learning_rate \(now 1e\+30\)"
        if logging_steps == 1
        else r"^step 2: the weights bert\.\S+ hold \d+ NaN .*checkpoint-2 is not written"
    )
    with pytest.raises(ValueError, match=expected):
        trainer.train()
    assert checkpoint_folders(trainer) == ["checkpoint-1"]  # no checkpoint-2, not even an empty folder
    loaded = CtxBertForSequenceClassification.from_pretrained(tmp_path / "run" / "checkpoint-1")
    assert all(torch.isfinite(tensor).all() for tensor in loaded.state_dict().values())
    with pytest.raises(ValueError, match=r"the weights .* NaN .*is not written"):
        trainer.save_model(str(tmp_path / "final"))  # the end of a run saves through the same check
    assert not (tmp_path / "final").exists()


def test_a_few_non_finite_logs_with_finite_weights_are_tolerated_then_stop_the_run():
    """Skipped fp16 overflow steps log an infinite gradient norm while the weights stay finite."""
    from transformers import TrainerControl, TrainerState

    from hf_ctx.tools.trainer import NONFINITE_LOGS_TOLERATED, NonFiniteTrainingCallback

    callback, model = NonFiniteTrainingCallback(), torch.nn.Linear(2, 2)
    args, state = TrainingArguments(output_dir="unused", report_to=[]), TrainerState(global_step=9)
    for _ in range(2):
        for _ in range(NONFINITE_LOGS_TOLERATED - 1):
            callback.on_log(args, state, TrainerControl(), logs={"loss": 0.5, "grad_norm": float("inf")}, model=model)
        callback.on_log(args, state, TrainerControl(), logs={"loss": 0.5, "grad_norm": 1.0}, model=model)  # resets
    with pytest.raises(ValueError, match=rf"step 9 \(loss nan, grad_norm inf; {NONFINITE_LOGS_TOLERATED} logged"):
        for _ in range(NONFINITE_LOGS_TOLERATED):
            logs = {"loss": float("nan"), "grad_norm": float("inf")}
            callback.on_log(args, state, TrainerControl(), logs=logs, model=model)


def test_the_examples_keep_at_most_two_checkpoints_unless_told(tmp_path, capsys):
    """CtxTrainingArguments' default bounds the disk: a run saving every step keeps the 2 latest checkpoints,
    `--save_total_limit` sets another number (0: all), and `--help` says so."""
    from pathlib import Path

    from tiny_checkpoints import bert_sequence_classifier

    from hf_ctx.tools.trainer import CtxTrainer, CtxTrainingArguments

    parser = transformers.HfArgumentParser(CtxTrainingArguments)
    model, tokenizer = bert_sequence_classifier(tmp_path)
    data = Dataset.from_dict(tokenizer(["the cat sat"] * 8, padding="max_length", max_length=8).data)
    data = data.add_column("label", [0, 1] * 4)

    def checkpoints_left(*options):
        output_dir = tmp_path / ("run" + "".join(options))
        (args,) = parser.parse_args_into_dataclasses(
            args=["--output_dir", str(output_dir), "--use_cpu", "--report_to", "none", "--disable_tqdm", "true"]
            + ["--max_steps", "4", "--per_device_train_batch_size", "2", "--save_steps", "1", *options]
        )
        CtxTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer).train()
        return sorted(p.name for p in Path(output_dir).glob("checkpoint-*"))

    assert checkpoints_left() == ["checkpoint-3", "checkpoint-4"]
    assert checkpoints_left("--save_total_limit", "3") == ["checkpoint-2", "checkpoint-3", "checkpoint-4"]
    assert len(checkpoints_left("--save_total_limit", "0")) == 4
    with pytest.raises(SystemExit):
        parser.parse_args_into_dataclasses(args=["--help"])
    assert "keep at most this many checkpoint-N folders" in " ".join(capsys.readouterr().out.split())


def test_logging_and_evaluation_steps_scale_with_the_run_unless_given(tmp_path):
    """Without --logging_steps a run logs its loss LOGGED_POINTS times whatever its length (transformers' 500
    steps log nothing in a shorter run); with --eval_strategy steps and no --eval_steps it evaluates EVALUATIONS
    times, and --load_best_model_at_end saves at each evaluation. Given steps stay as given."""
    from tiny_checkpoints import bert_sequence_classifier

    from hf_ctx.tools.trainer import EVALUATIONS, LOGGED_POINTS, CtxTrainer, CtxTrainingArguments

    parser = transformers.HfArgumentParser(CtxTrainingArguments)
    model, tokenizer = bert_sequence_classifier(tmp_path)
    data = Dataset.from_dict(tokenizer(["the cat sat"] * 8, padding="max_length", max_length=8).data)
    data = data.add_column("label", [0, 1] * 4)

    def logged(steps, *options):
        (args,) = parser.parse_args_into_dataclasses(
            args=["--output_dir", str(tmp_path / f"run{steps}"), "--use_cpu", "--report_to", "none"]
            + ["--max_steps", str(steps), "--per_device_train_batch_size", "2", "--save_strategy", "no"]
            + ["--disable_tqdm", "true", *options]
        )
        trainer = CtxTrainer(model=model, args=args, train_dataset=data, eval_dataset=data, processing_class=tokenizer)
        trainer.train()
        history = trainer.state.log_history
        return [e["step"] for e in history if "loss" in e], [e["step"] for e in history if "eval_loss" in e]

    assert logged(7)[0] == [1, 2, 3, 4, 5, 6, 7]  # a short run: its loss at every step
    losses, evaluations = logged(120, "--eval_strategy", "steps")
    assert len(losses) == 120 / 3 and len(evaluations) == EVALUATIONS  # every ceil(120 / 50) = 3 and 12 steps
    assert LOGGED_POINTS == 50 and logged(10, "--logging_steps", "5")[0] == [5, 10]

    def arguments(*options):
        return parser.parse_args_into_dataclasses(args=["--output_dir", str(tmp_path), *options])[0]

    best = arguments("--eval_strategy", "steps", "--save_strategy", "steps", "--load_best_model_at_end")
    assert (best.logging_steps, best.eval_steps, best.save_steps) == (1 / LOGGED_POINTS, 1 / EVALUATIONS, 0.1)
    assert (arguments().save_steps, arguments("--eval_steps", "20").eval_steps) == (500, 20)


def test_a_family_trains_at_its_own_learning_rate_unless_one_is_given(tmp_path, caplog):
    """The registry's default for the model's family and task, said once; --learning_rate wins; a family or a
    model without a default keeps transformers' 5e-5 and says so."""
    from hf_ctx import CtxBertConfig, ElmoConfig, TagLMConfig
    from hf_ctx.tools.families import MODEL_FAMILIES
    from hf_ctx.tools.scripts import apply_learning_rate_default

    def rate_and_lines(config, task, *options):
        argv = ["--output_dir", str(tmp_path), "--report_to", "none", "--do_train", *options]
        (args,) = transformers.HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(args=argv)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hf_ctx.tools.scripts"):
            apply_learning_rate_default(args, argv, config, task)
        return args.learning_rate, [r.getMessage() for r in caplog.records]

    taglm = MODEL_FAMILIES["taglm"].learning_rates["token_classification"]
    rate, [line] = rate_and_lines(TagLMConfig(), "token_classification")
    assert rate == taglm != 5e-5
    said, _, rest = line.removeprefix("learning rate ").partition(":")
    assert float(said) == taglm and "e-" in said  # spelled as on a command line: 1e-2
    assert rest == " hf_ctx's default for TagLM token classification; --learning_rate sets another"
    assert rate_and_lines(TagLMConfig(), "token_classification", "--learning_rate", "3e-3") == (3e-3, [])
    assert rate_and_lines(TagLMConfig(), "token_classification", "--learning_rate=3e-3") == (3e-3, [])
    assert rate_and_lines(TagLMConfig(), "token_classification", "--learning-rate", "3e-3") == (3e-3, [])
    assert rate_and_lines(ElmoConfig(), "pretraining")[0] == MODEL_FAMILIES["elmo"].learning_rates["pretraining"]
    assert "multiple_choice" not in MODEL_FAMILIES["bert"].learning_rates
    assert rate_and_lines(CtxBertConfig(), "multiple_choice") == (
        5e-5,
        [
            "learning rate 5e-5: transformers' default (hf_ctx has none for BERT multiple choice); "
            "--learning_rate sets another"
        ],
    )
    rate, lines = rate_and_lines(BertConfig(), "sequence_classification")  # a transformers BERT
    assert rate == 5e-5 and "hf_ctx has none for a bert model" in lines[0]
    # A pretrained checkpoint wider than the sweeps' models keeps 5e-5 (a published BERT-base would be wrecked by
    # BERT mini's rate); a new model of that width takes the rate.
    bert = MODEL_FAMILIES["bert"].learning_rates["token_classification"]
    assert rate_and_lines(CtxBertConfig.from_preset("mini"), "token_classification")[0] == bert != 5e-5
    rate, [line] = rate_and_lines(CtxBertConfig.from_preset("base"), "token_classification")
    assert rate == 5e-5 and line == (
        "learning rate 5e-5: transformers' default (hf_ctx's 1e-3 for BERT token classification was "
        "measured on models up to 256 wide, and this one is 768); --learning_rate sets another"
    )
    args = transformers.HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
        args=["--output_dir", str(tmp_path), "--do_train"]
    )[0]
    apply_learning_rate_default(args, ["--do_train"], CtxBertConfig.from_preset("base"), "token_classification", True)
    assert args.learning_rate == bert
    predicting = TrainingArguments(output_dir=str(tmp_path), report_to="none", do_predict=True)
    apply_learning_rate_default(predicting, ["--do_predict"], TagLMConfig(), "token_classification")
    assert predicting.learning_rate == 5e-5  # a run that does not train is left alone


def test_progress_in_a_file_is_a_line_a_tenth_with_the_latest_loss_and_a_line_per_evaluation(capsys):
    """No line per step and none per logged loss: 100 steps with the loss logged every 25 and an evaluation at step
    50 give a line each tenth, carrying the latest loss (a tenth whose step logs a loss waits for it; one with an
    evaluation is the evaluation's line); the final summary and a later evaluation's log are the scripts' to
    print."""
    from types import SimpleNamespace

    from hf_ctx.tools.trainer import ProgressLinesCallback

    callback = ProgressLinesCallback()
    state = SimpleNamespace(global_step=0, max_steps=100, is_world_process_zero=True)
    callback.on_train_begin(None, state, None)
    for step in range(1, 101):
        state.global_step = step
        control = SimpleNamespace(should_log=step % 25 == 0, should_evaluate=step == 50)
        callback.on_step_end(None, state, control)
        if control.should_log:
            logs = {"loss": step / 1000, "learning_rate": 1e-3, "epoch": step / 100}
            callback.on_log(None, state, control, logs=logs)
        if control.should_evaluate:
            callback.on_log(None, state, control, logs={"eval_loss": 0.5, "eval_f1": 0.25, "epoch": 0.5})
    callback.on_log(None, state, None, logs={"train_runtime": 1.0, "train_loss": 0.5})
    callback.on_train_end(None, state, None)
    callback.on_log(None, state, None, logs={"eval_loss": 0.5})
    lines = capsys.readouterr().out.splitlines()
    steps = [int(line.removeprefix("step ").split("/")[0]) for line in lines]
    assert steps == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]  # at step 50 the evaluation's line is the tenth's
    assert lines[0].startswith("step 10/100 (10%), ") and lines[0].endswith(" s left")  # no loss logged yet
    assert lines[2].endswith(" s left, loss 0.025")
    assert lines[4].endswith(", loss 0.05: {'eval_loss': '0.5', 'eval_f1': '0.25', 'epoch': '0.5'}")
    assert lines[-1].startswith("step 100/100 (100%), ") and lines[-1].endswith(" s left, loss 0.1")


def test_at_a_terminal_the_bar_shows_the_latest_loss_and_evaluations_are_lines():
    from types import SimpleNamespace

    from hf_ctx.tools.trainer import ProgressBarCallback

    class Bar:
        def __init__(self):
            self.postfix, self.written = None, []

        def set_postfix(self, refresh=True, **values):
            self.postfix = values

        def write(self, text):
            self.written.append(text)

    callback, state = ProgressBarCallback(), SimpleNamespace(is_world_process_zero=True)
    callback.training_bar = Bar()
    callback.on_log(None, state, None, logs={"loss": 0.51234, "learning_rate": 1e-3, "epoch": 0.5})
    callback.on_log(None, state, None, logs={"eval_loss": 0.25, "epoch": 0.5})
    assert callback.training_bar.postfix == {"loss": "0.5123"}
    assert callback.training_bar.written == ["{'eval_loss': '0.25', 'epoch': '0.5'}"]


def test_output_to_a_file_gets_progress_lines_and_no_terminal_codes(tmp_path, restore_logging):
    """Under pytest stderr is no terminal, as in a log file: the Trainer reports with ProgressLinesCallback, and
    transformers' colour codes (its LOAD REPORT) are taken out of what its logger writes."""
    from transformers import ProgressCallback

    from hf_ctx.tools.trainer import CtxTrainer, ProgressLinesCallback, progress_to_terminal

    assert not progress_to_terminal()
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    setup_logging(args, logging.getLogger("a_script"))
    handler = transformers.utils.logging._default_handler  # where transformers' records go (stderr)
    written = io.StringIO()
    stream = handler.setStream(written)
    try:
        logging.getLogger("transformers.modeling_utils").warning("\x1b[1mBertModel LOAD REPORT\x1b[0m from: x")
    finally:
        handler.setStream(stream)
    assert written.getvalue().endswith("BertModel LOAD REPORT from: x\n") and "\x1b" not in written.getvalue()
    callbacks = CtxTrainer(model=torch.nn.Linear(2, 2), args=args).callback_handler.callbacks
    assert any(isinstance(c, ProgressLinesCallback) for c in callbacks)
    assert not any(isinstance(c, ProgressCallback) for c in callbacks)


def test_unpad_inputs_false_keeps_the_padded_path():
    """`unpad_inputs=false` (`--config_overrides unpad_inputs=false` in the scripts) turns off BERT's default
    unpadding: the layers then compute every position, padding included (zeros there when unpadded)."""
    from hf_ctx import CtxBertConfig, CtxBertModel

    model = CtxBertModel(CtxBertConfig.from_preset("tiny", vocab_size=20)).eval()
    input_ids, attention_mask = torch.randint(1, 20, (2, 6)), torch.tensor([[1] * 6, [1] * 3 + [0] * 3])
    outputs = {}
    for unpad_inputs in (True, False):
        model.config.unpad_inputs = unpad_inputs
        with torch.no_grad():
            outputs[unpad_inputs] = model(input_ids, attention_mask).last_hidden_state
    assert not outputs[True][1, 3:].any() and outputs[False][1, 3:].abs().amax(-1).min() > 0
    torch.testing.assert_close(outputs[False][attention_mask.bool()], outputs[True][attention_mask.bool()])


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=False)
def test_torch_compile_leaves_torchs_dynamic_shape_setting_alone(tmp_path):
    """--torch_compile on a model with unpad_inputs changes no global torch setting: a plain compiled BERT keeps
    unpadding by itself (`hf_ctx::true_positions`; test_modeling_bert.py's compile tests)."""
    from hf_ctx import CtxBertConfig, CtxBertForSequenceClassification
    from hf_ctx.tools.trainer import CtxTrainer, CtxTrainingArguments

    config = CtxBertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    args = CtxTrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", torch_compile=True)
    CtxTrainer(model=CtxBertForSequenceClassification(config), args=args)
    assert config.unpad_inputs and torch._dynamo.config.capture_dynamic_output_shape_ops is False


def test_config_overrides_with_a_config_class_refuse_a_field_it_has_not():
    from hf_ctx import CtxBertConfig, ElmoConfig

    assert parse_config_overrides("hidden_size=64,num_labels=3", CtxBertConfig) == {"hidden_size": 64, "num_labels": 3}
    assert parse_config_overrides("lstm.dim=64", ElmoConfig) == {"lstm": {"dim": 64}}  # sections: the config's checks
    with pytest.raises(ValueError, match=r"sets \['hiden_size'\], which CtxBertConfig has no field for; its fields: "):
        parse_config_overrides("hiden_size=64", CtxBertConfig)  # a typo, which a config would keep unused
    with pytest.raises(ValueError, match=r"sets \['dim'\], which BertConfig has no field"):
        parse_config_overrides('{"dim": 3}', BertConfig)


def test_a_huggingface_hub_warning_is_printed_once(tmp_path):
    """huggingface_hub's warnings (the retries of an offline run) went to its own handler and to the root one that
    setup_logging installs: each line came twice. A fresh process, as a script runs."""
    probe = (
        "import logging; from transformers import TrainingArguments; from hf_ctx.tools.scripts import setup_logging\n"
        f"setup_logging(TrainingArguments(output_dir={str(tmp_path)!r}, use_cpu=True, report_to='none'), "
        "logging.getLogger('probe'))\n"
        "logging.getLogger('huggingface_hub.utils._http').warning('Retrying in 1s [Retry 1/5].')\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (result.stdout + result.stderr).count("Retrying in 1s [Retry 1/5].") == 1
