"""hf_ctx.training, the helpers the example scripts share (the scripts' own tests run them end to end)."""

import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
from datasets import Dataset

from hf_ctx.training import first_examples, hold_out_validation, parse_config_overrides, training_data_name


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


def test_the_examples_train_with_fused_adamw(tmp_path):
    """The examples keep `TrainingArguments`' default optimizer, PyTorch's fused AdamW (one kernel for the
    update of all parameters), on CPU as on GPU."""
    from torch import nn
    from transformers import HfArgumentParser, Trainer, TrainingArguments

    (training_args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
        args=["--output_dir", str(tmp_path), "--report_to", "none"])
    assert training_args.optim == "adamw_torch_fused"
    trainer = Trainer(model=nn.Linear(3, 2), args=training_args)
    assert trainer.create_optimizer().defaults["fused"] is True
