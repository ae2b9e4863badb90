"""hf_ctx.training, the helpers the example scripts share (the scripts' own tests run them end to end)."""

import logging
import warnings

import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
import transformers
from datasets import Dataset
from transformers import TrainingArguments

from hf_ctx.training import (
    evaluation_data,
    first_examples,
    hold_out_validation,
    match_special_tokens,
    parse_config_overrides,
    setup_logging,
    training_data_name,
)


def test_config_overrides_are_read_as_json_where_they_parse():
    assert parse_config_overrides("a=1,b=True,c=gelu,d=0.5,e=null, f =false") == {
        "a": 1, "b": True, "c": "gelu", "d": 0.5, "e": None, "f": False}
    assert parse_config_overrides(None) == {} and parse_config_overrides("") == {}
    with pytest.raises(ValueError, match="key=value, got 'dropout'"):
        parse_config_overrides("dropout")


def test_first_examples_and_held_out_validation():
    data = Dataset.from_dict({"x": list(range(20))})
    assert first_examples(data, None) is data
    assert list(first_examples(data, 3)["x"]) == [0, 1, 2] and len(first_examples(data, 50)) == 20
    train, validation = hold_out_validation(data, None, 10.0, seed=0)
    assert (len(train), len(validation)) == (18, 2) and sorted(list(train["x"]) + list(validation["x"])) == list(range(20))
    assert hold_out_validation(data, None, 0, seed=0) == (data, None)
    given = first_examples(data, 2)
    assert hold_out_validation(data, given, 10.0, seed=0) == (data, given)


def test_training_data_is_named_by_dataset_or_file_names():
    assert training_data_name("wikitext", ["/data/a.txt"]) == "wikitext"
    assert training_data_name(None, ["/data/a.txt", "b.txt"]) == "a.txt, b.txt"
    assert training_data_name(None, "/data/eng.train") == "eng.train"


def test_evaluation_data_names_files_held_out_parts_and_hub_splits(tmp_path):
    assert evaluation_data(None, ["/data/eng.testa"], ["/data/eng.train"]) == {"eval_dataset_name": "eng.testa"}
    train = Dataset.from_dict({"text": [str(i) for i in range(20)]}, split="train")
    _, held_out = hold_out_validation(train, None, 10, seed=0)
    assert evaluation_data(None, None, ["/data/corpus.txt"], held_out, 10) == {
        "eval_dataset_name": "10% of corpus.txt held out from training"}
    assert evaluation_data("wikitext", None, None, held_out, 5) == {
        "eval_dataset_name": "5% of wikitext held out from training"}
    validation = Dataset.from_dict({"text": ["a"]}, split="validation")
    assert evaluation_data("eriktks/conll2003", None, None, validation) == {
        "eval_dataset_name": "eriktks/conll2003", "eval_dataset_id": "eriktks/conll2003"}
    assert evaluation_data(str(tmp_path), None, None, validation)["eval_dataset_name"] == tmp_path.name
    assert evaluation_data(None, None, ["train.txt"]) == {}
    assert training_data_name(str(tmp_path), None) == tmp_path.name


@pytest.fixture
def restore_logging():
    """setup_logging changes process-wide state: put transformers' verbosity and the warning filters back."""
    verbosity = transformers.utils.logging.get_verbosity()
    with warnings.catch_warnings():
        yield
    transformers.utils.logging.set_verbosity(verbosity)


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
        setup_logging(args, script_logger)  # after simplefilter: the targeted filter goes in front of it
        warnings.warn("LSTM with projections is not supported with oneDNN. Using default implementation.", UserWarning)
        warnings.warn("another warning", UserWarning)
    assert [str(w.message) for w in caught] == ["another warning"]

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
        tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id)
    with CaptureLogger(transformers.utils.logging.get_logger("transformers.trainer_utils")) as captured:
        align_special_tokens(model, tokenizer)
    assert "PAD/BOS/EOS" not in captured.out


def test_gpu_defaults_apply_on_cuda_only_and_never_over_a_given_option():
    from types import SimpleNamespace

    import torch

    from hf_ctx.training import apply_gpu_defaults

    def arguments(device):
        return SimpleNamespace(device=torch.device(device), per_device_train_batch_size=8,
                               per_device_eval_batch_size=8, train_sampling_strategy="random")

    cpu = arguments("cpu")
    assert apply_gpu_defaults(cpu, [], per_device_train_batch_size=32, group_by_length=True) == {}
    assert cpu.per_device_train_batch_size == 8 and cpu.train_sampling_strategy == "random"

    gpu = arguments("cuda")
    gpu.per_device_train_batch_size = 16  # as the parser sets it from the command line below
    applied = apply_gpu_defaults(gpu, ["--per_device_train_batch_size=16", "--do_train"],
                                 per_device_train_batch_size=32, per_device_eval_batch_size=32, group_by_length=True)
    assert applied == {"per_device_eval_batch_size": 32, "train_sampling_strategy": "group_by_length"}
    assert gpu.per_device_train_batch_size == 16  # the command line's value stays
    assert (gpu.per_device_eval_batch_size, gpu.train_sampling_strategy) == (32, "group_by_length")

    chosen = arguments("cuda")
    assert apply_gpu_defaults(chosen, ["--train_sampling_strategy", "random"], group_by_length=True) == {}
