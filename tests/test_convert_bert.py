"""`hf-ctx convert-bert`: what it refuses (before writing anything), the tokenizer it carries, and the model
card that names the source. The converted model's parity with transformers is in test_modeling_bert.py."""

import json
import re

import pytest
import torch
import transformers
from huggingface_hub import ModelCard
from transformers import AutoModel, BertConfig

import hf_ctx.tools.cli
from hf_ctx import CtxBertModel
from hf_ctx.tools.convert_bert import checkpoint_name, convert_bert_checkpoint, convert_bert_config

SMALL = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 37,
}


def test_convert_rejects_what_it_cannot_represent(tmp_path):
    with pytest.raises(ValueError, match="decoder"):
        convert_bert_config(BertConfig(is_decoder=True))
    with pytest.raises(FileNotFoundError, match="config.json"):
        convert_bert_checkpoint(tmp_path, tmp_path / "out")


def test_convert_carries_the_tokenizer(tmp_path, capfd):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s"]
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "vocab.txt").write_text("\n".join(vocab) + "\n")
    transformers.BertTokenizer(vocab=str(tmp_path / "src" / "vocab.txt")).save_pretrained(tmp_path / "src")
    transformers.BertModel(BertConfig(**{**SMALL, "vocab_size": len(vocab)})).save_pretrained(tmp_path / "src")
    capfd.readouterr()
    hf_ctx.tools.cli.main(["convert-bert", str(tmp_path / "src"), str(tmp_path / "out")])
    # One line: before, transformers' "Loading weights" and "Writing model shards" bars for a one-file model.
    assert capfd.readouterr() == (f"wrote hf_ctx checkpoint to {tmp_path / 'out'}\n", "")
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "out")
    assert tokenizer("hello worlds")["input_ids"] == [2, 5, 6, 7, 3]
    assert isinstance(AutoModel.from_pretrained(tmp_path / "out"), CtxBertModel)


def _source_with_tokenizer(folder, architecture="BertForSequenceClassification"):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s"]
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    transformers.BertTokenizer(vocab=str(folder / "vocab.txt")).save_pretrained(folder)
    getattr(transformers, architecture)(BertConfig(**{**SMALL, "vocab_size": len(vocab)})).save_pretrained(folder)


def test_convert_refuses_a_source_without_tokenizer_and_keeps_the_one_in_the_output(tmp_path):
    """transformers 5 loads a 5-token BertTokenizer from a folder without tokenizer files: refused, by name."""
    _source_with_tokenizer(tmp_path / "good")
    hf_ctx.tools.cli.main(["convert-bert", str(tmp_path / "good"), str(tmp_path / "out")])
    before = (tmp_path / "out" / "tokenizer.json").read_bytes()
    (tmp_path / "bare").mkdir()
    transformers.BertModel(BertConfig(**SMALL)).save_pretrained(tmp_path / "bare")
    with pytest.raises(ValueError, match=r"no vocabulary.*tokenizer\.json, vocab\.txt"):
        convert_bert_checkpoint(tmp_path / "bare", tmp_path / "out")
    assert (tmp_path / "out" / "tokenizer.json").read_bytes() == before
    # weights_only: the model is converted and the output's tokenizer left as it was.
    convert_bert_checkpoint(tmp_path / "bare", tmp_path / "out", weights_only=True)
    assert (tmp_path / "out" / "tokenizer.json").read_bytes() == before
    assert isinstance(AutoModel.from_pretrained(tmp_path / "out"), CtxBertModel)


@pytest.mark.parametrize("damage", ["missing", "mismatched"])
def test_convert_refuses_missing_or_mismatched_weights_naming_them(tmp_path, damage):
    from safetensors.torch import load_file, save_file

    _source_with_tokenizer(tmp_path / "src")
    weights = load_file(tmp_path / "src" / "model.safetensors")
    if damage == "missing":
        del weights["classifier.weight"]
    else:
        weights["bert.encoder.layer.1.output.dense.bias"] = torch.zeros(5)
    save_file(weights, tmp_path / "src" / "model.safetensors", metadata={"format": "pt"})
    expected = (
        "missing classifier.weight"
        if damage == "missing"
        else r"wrong shape bert.encoder.layer.1.output.dense.bias \(file \(5,\), model \(32,\)\)"
    )
    with pytest.raises(ValueError, match=expected):
        convert_bert_checkpoint(tmp_path / "src", tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.parametrize("damage", ["truncated weights", "vocab_size 0", "heads not dividing the width"])
def test_convert_refuses_a_damaged_source_in_one_line_naming_the_file(tmp_path, damage):
    """A truncated model.safetensors (before: safetensors' "incomplete metadata" traceback), a config.json with
    vocab_size 0 (before: an IndexError traceback) or heads that do not divide hidden_size (transformers' message,
    naming no file): one error naming the file, nothing written."""
    import json

    _source_with_tokenizer(tmp_path / "src")
    src = tmp_path / "src"
    if damage == "truncated weights":
        weights = src / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:5000])
        error, message = (
            OSError,
            rf"^cannot load {src}: model.safetensors \(its tensors need \d+ bytes, the file has 5000\)",
        )
    else:
        config = json.loads((src / "config.json").read_text())
        config.update({"vocab_size": 0} if damage == "vocab_size 0" else {"num_attention_heads": 3})
        (src / "config.json").write_text(json.dumps(config))
        field = "vocab_size must be a positive integer, got 0" if damage == "vocab_size 0" else "divisible by"
        error, message = ValueError, rf"^{src / 'config.json'}: .*{field}"
    with pytest.raises(error, match=message):
        convert_bert_checkpoint(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_convert_refuses_to_write_over_its_source_or_into_a_file(tmp_path):
    _source_with_tokenizer(tmp_path / "src")
    before = {p.name: p.read_bytes() for p in (tmp_path / "src").iterdir()}
    with pytest.raises(ValueError, match="is the source folder"):
        hf_ctx.tools.cli.main(["convert-bert", str(tmp_path / "src"), str(tmp_path / "src" / "."), "--debug"])
    assert {p.name: p.read_bytes() for p in (tmp_path / "src").iterdir()} == before
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        convert_bert_checkpoint(tmp_path / "src", tmp_path / "a_file")


def test_convert_refuses_nan_weights_and_a_folder_holding_a_checkpoint(tmp_path):
    _source_with_tokenizer(tmp_path / "src")
    convert_bert_checkpoint(tmp_path / "src", tmp_path / "out")
    with pytest.raises(ValueError, match=r"out already holds a checkpoint \(config.json, tokenizer_config.json"):
        convert_bert_checkpoint(tmp_path / "src", tmp_path / "out")
    model = transformers.BertForSequenceClassification.from_pretrained(tmp_path / "src")
    with torch.no_grad():
        model.bert.encoder.layer[0].output.dense.weight[0, 0] = float("nan")
    model.save_pretrained(tmp_path / "src")
    with pytest.raises(ValueError, match=r"src: the weights .*layers?\.0\..* hold 1 NaN or infinite value"):
        convert_bert_checkpoint(tmp_path / "src", tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_convert_writes_a_card_naming_the_source(tmp_path):
    """The converted folder's README.md names the source and the conversion; a Hub id becomes `base_model`."""
    cached = tmp_path / "hub" / "models--nreimers--MiniLM-L6-H384-uncased" / "snapshots" / "abc123"
    cached.parent.mkdir(parents=True)
    _source_with_tokenizer(cached, "BertModel")
    hf_ctx.tools.cli.main(["convert-bert", str(cached), str(tmp_path / "minilm")])
    card = ModelCard.load(tmp_path / "minilm" / "README.md")
    assert card.data.base_model == "nreimers/MiniLM-L6-H384-uncased"
    source = "the transformers `BertModel` checkpoint `nreimers/MiniLM-L6-H384-uncased`"
    assert card.data.hf_ctx_origin == f"converted by `hf-ctx convert-bert` from {source}"
    assert "`CtxBertModel` converted by `hf-ctx convert-bert` (hf_ctx" in card.text and source in card.text
    assert str(tmp_path) not in str(card)
    # --source_name names what the folder cannot tell; a plain folder is named by its name.
    _source_with_tokenizer(tmp_path / "downloaded")
    hf_ctx.tools.cli.main(
        ["convert-bert", str(tmp_path / "downloaded"), str(tmp_path / "out"), "--source_name", "me/bert-sst2"]
    )
    assert ModelCard.load(tmp_path / "out" / "README.md").data.base_model == "me/bert-sst2"
    assert checkpoint_name(tmp_path / "downloaded") == "downloaded"


def test_a_readme_hf_ctx_did_not_write_is_refused_not_replaced(tmp_path, capsys):
    """Before: the conversion's card replaced the user's README.md (or the downloaded model's card) in silence."""
    _source_with_tokenizer(tmp_path / "src", "BertModel")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "README.md").write_text("my own notes\n")
    capsys.readouterr()
    with pytest.raises(SystemExit):
        hf_ctx.tools.cli.main(["convert-bert", str(tmp_path / "src"), str(tmp_path / "out")])
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'out' / 'README.md'} is not a model card hf_ctx wrote, and the conversion writes its "
        "card there; move it, or give another output folder\n"
    )
    assert (tmp_path / "out" / "README.md").read_text() == "my own notes\n"
    assert not (tmp_path / "out" / "config.json").exists()


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"model_type": "bert", "hidden_size": "big"}, r"config.json: .*hidden_size.*expected int, got str"),
        ({"model_type": "bert", "vocab_size": None}, r"config.json: .*vocab_size"),
        ({}, r"c holds a config.json without a model_type, not a transformers BERT"),
        ({"model_type": "hf_ctx_elmo"}, r"c holds a 'hf_ctx_elmo' model, not a transformers BERT"),
    ],
)
def test_a_config_of_the_wrong_kinds_or_type_is_one_line_naming_it(tmp_path, capsys, fields, message):
    """Before: huggingface_hub's StrictDataclassFieldValidationError traceback, or (for `{}`) a sentencepiece
    message about the tokenizer."""
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "config.json").write_text(json.dumps(fields))
    with pytest.raises(SystemExit):
        hf_ctx.tools.cli.main(["convert-bert", str(tmp_path / "c"), str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and re.search(message, err), err
    assert not (tmp_path / "out").exists()
