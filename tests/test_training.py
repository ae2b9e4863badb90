"""hf_ctx.training, the helpers the example scripts share (the scripts' own tests run them end to end)."""

import pytest
from datasets import Dataset
from transformers import BertConfig

from hf_ctx.training import first_examples, hold_out_validation, parse_config_overrides, training_data_name


def test_config_overrides_are_read_as_json_where_they_parse():
    assert parse_config_overrides("a=1,b=True,c=gelu,d=0.5,e=null, f =false") == {
        "a": 1, "b": True, "c": "gelu", "d": 0.5, "e": None, "f": False}
    assert parse_config_overrides(None) == {} and parse_config_overrides("") == {}
    with pytest.raises(ValueError, match="key=value .*got 'dropout'"):
        parse_config_overrides("dropout")


def test_config_overrides_take_json_or_key_value_pairs_alike():
    """Every example script reads --config_overrides the same way; both spellings give the same fields."""
    as_json = '{"lstm": {"dim": 512, "projection_dim": 128}, "char_cnn": {"filters": [[1, 32], [2, 32]]}, "dropout": 0.1}'
    as_pairs = "lstm.dim=512,lstm.projection_dim=128,char_cnn.filters=[[1, 32], [2, 32]],dropout=0.1"
    assert parse_config_overrides(as_json) == parse_config_overrides(as_pairs) == {
        "lstm": {"dim": 512, "projection_dim": 128}, "char_cnn": {"filters": [[1, 32], [2, 32]]}, "dropout": 0.1}
    assert parse_config_overrides('name="a,b",x=1') == {"name": "a,b", "x": 1}  # commas inside quotes stay
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_config_overrides('{"lstm": {"dim": 512}')
    with pytest.raises(ValueError, match="'lstm' is already given a value"):
        parse_config_overrides("lstm=3,lstm.dim=512")


def test_one_registry_names_the_model_families():
    from hf_ctx import CtxBertConfig, ElmoConfig, TagLMConfig
    from hf_ctx.families import MODEL_FAMILIES, model_family
    from hf_ctx.model_card import build_model_card

    assert tuple(MODEL_FAMILIES) == ("bert", "elmo", "taglm")
    assert [model_family(c()) for c in (CtxBertConfig, ElmoConfig, TagLMConfig)] == ["bert", "elmo", "taglm"]
    with pytest.raises(ValueError, match="'bert' is not an hf_ctx model type .*convert-bert"):
        model_family(BertConfig())
    with pytest.raises(ValueError, match=r"unknown model_family 'gpt'; choose one of \('bert', 'elmo', 'taglm'\)"):
        build_model_card("gpt", None, model_id="m", dataset_name="d")


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


def test_parse_args_and_set_up_parses_logs_and_seeds(tmp_path):
    import logging
    from dataclasses import dataclass

    import torch
    from transformers import TrainingArguments

    from hf_ctx.training import parse_args_and_set_up

    @dataclass
    class ScriptArguments:
        size: int = 1

    logger = logging.getLogger("an_example_script")
    script_args, training_args = parse_args_and_set_up(
        (ScriptArguments, TrainingArguments),
        ["--size", "3", "--output_dir", str(tmp_path), "--seed", "7", "--report_to", "none"], logger)
    assert script_args.size == 3 and training_args.seed == 7
    assert logger.level == logging.INFO and logging.getLogger("hf_ctx").level == logging.INFO
    drawn = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(drawn, torch.rand(3))
