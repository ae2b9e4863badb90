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
