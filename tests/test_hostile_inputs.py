"""Damaged, hostile or self-contradicting files a user points hf_ctx at: each is one named error (the file, and
what is wrong with it), never a traceback of another library, a prompt, or an error that names no file."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from tiny_checkpoints import bert_sequence_classifier, elmo_bilm

from hf_ctx import CtxBertForSequenceClassification
from hf_ctx.tools.loading import load_tokenizer


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("bert")
    model, tokenizer = bert_sequence_classifier(root)
    model.save_pretrained(root / "checkpoint")
    tokenizer.save_pretrained(root / "checkpoint")
    return root / "checkpoint"


def copy_with(folder, tmp_path, name, change):
    """A copy of `folder` whose file `name` is `change(bytes)`."""
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    (copy / name).write_bytes(change((copy / name).read_bytes()))
    return copy


def with_config(**fields):
    def change(content: bytes) -> bytes:
        return json.dumps({**json.loads(content), **fields}).encode()

    return change


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"hidden_size": "big"}, "hidden_size must be a positive integer, got 'big'"),
        ({"layer_norm_eps": "1e-5"}, "layer_norm_eps must be a positive number, got '1e-5'"),
        ({"id2label": [1, 2]}, r"id2label must map label ids to label names, e\.g\. .*, got \[1, 2\]"),
        ({"id2label": {"0": 5}}, r"id2label must map label ids to label names, e\.g\. .*, got \{'0': 5\}"),
        ({"label2id": ["NEG"]}, r"label2id must map label names to label ids, e\.g\. .*, got \['NEG'\]"),
    ],
)
def test_a_config_value_of_the_wrong_kind_names_the_file(bert_folder, tmp_path, fields, message):
    copy = copy_with(bert_folder, tmp_path, "config.json", with_config(**fields))
    with pytest.raises(ValueError, match=rf"^{copy / 'config.json'}: .*{message}$"):
        CtxBertForSequenceClassification.from_pretrained(copy)


def test_a_field_transformers_refuses_is_one_line_naming_the_file(bert_folder, monkeypatch):
    """transformers before 5.18 checks PreTrainedConfig's own fields with huggingface_hub's strict dataclasses,
    whose error subclasses only Exception and spans two lines: it comes as the same one-line ValueError."""
    from huggingface_hub.errors import StrictDataclassFieldValidationError
    from transformers import PreTrainedConfig

    def refuse(cls, *args, **kwargs):
        raise StrictDataclassFieldValidationError("output_hidden_states", TypeError("expected a bool, got 'yes'"))

    monkeypatch.setattr(PreTrainedConfig, "from_pretrained", classmethod(refuse))
    with pytest.raises(ValueError) as caught:
        CtxBertForSequenceClassification.config_class.from_pretrained(bert_folder)
    assert str(caught.value) == (
        f"{bert_folder / 'config.json'}: a value of the wrong kind (Validation error for field "
        "'output_hidden_states': TypeError: expected a bool, got 'yes')"
    )


def test_weights_whose_shapes_disagree_with_the_config_name_the_tensor(bert_folder, tmp_path):
    intermediate = json.loads((bert_folder / "config.json").read_text())["intermediate_size"]
    # Smaller than the weights: a larger size is refused before the model is built, by the weights' header
    # (tests/hostile/test_checkpoint_folders.py).
    copy = copy_with(bert_folder, tmp_path, "config.json", with_config(intermediate_size=intermediate // 2))
    with pytest.raises(
        ValueError,
        match=rf"^cannot load {copy}: its weights do not fit the model its config\.json describes: bert\.\S+ is "
        rf"\[{intermediate}(, \d+)?\] in the weights, \[{intermediate // 2}(, \d+)?\] in the model \(and \d+ more",
    ):
        CtxBertForSequenceClassification.from_pretrained(copy)


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda b: b[:8] + b"{garbage" + b[16:], "its header is not valid JSON"),
        (lambda b: (10**15).to_bytes(8, "little") + b[8:], "its header says 1000000000000000 bytes"),
        (lambda b: b[: len(b) // 2], ""),
    ],
    ids=["garbage-header", "huge-header-length", "truncated"],
)
def test_damaged_weights_name_the_file(bert_folder, tmp_path, change, reason):
    copy = copy_with(bert_folder, tmp_path, "model.safetensors", change)
    with pytest.raises(OSError, match=rf"cannot load {copy}: model\.safetensors \({reason}.*incomplete or corrupt"):
        CtxBertForSequenceClassification.from_pretrained(copy)


def test_a_truncated_tokenizer_file_is_named(bert_folder, tmp_path):
    copy = copy_with(bert_folder, tmp_path, "tokenizer.json", lambda b: b[:200])
    with pytest.raises(ValueError, match=rf"tokenizer: in {copy}, tokenizer\.json \(not valid JSON .*incomplete"):
        load_tokenizer(copy)


def test_a_tokenizer_asking_for_its_own_code_is_refused_without_a_prompt(bert_folder, tmp_path):
    """transformers would ask "Do you wish to run the custom code? [y/N]"; here stdin is closed, as in a job."""
    copy = copy_with(
        bert_folder,
        tmp_path,
        "tokenizer_config.json",
        with_config(tokenizer_class="MyTok", auto_map={"AutoTokenizer": ["tok.MyTok", None]}),
    )
    (copy / "tok.py").write_text("raise SystemExit('the folder code ran')\n")
    script = f"from hf_ctx.tools.loading import load_tokenizer\nload_tokenizer({str(copy)!r})"
    done = subprocess.run(
        [sys.executable, "-c", script], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    assert "[y/N]" not in done.stdout + done.stderr and "folder code ran" not in done.stdout + done.stderr
    assert f"ValueError: tokenizer: {copy / 'tokenizer_config.json'} asks for code of its own" in done.stderr
    assert load_tokenizer(bert_folder).__class__.__name__ == "BertTokenizer"  # a known class loads as before


def test_hf_ctx_own_tokenizer_with_auto_map_still_loads(tmp_path):
    _, tokenizer = elmo_bilm(tmp_path)
    tokenizer.save_pretrained(tmp_path / "elmo")
    assert "auto_map" in json.loads((tmp_path / "elmo" / "tokenizer_config.json").read_text())
    assert type(load_tokenizer(tmp_path / "elmo")) is type(tokenizer)


def test_a_truncated_hdf5_weights_file_is_named(tmp_path):
    from test_convert_elmo import options_for, write_weights

    from hf_ctx.tools.convert_elmo import convert_elmo_checkpoint

    options = options_for(True)
    (tmp_path / "options.json").write_text(json.dumps(options))
    write_weights(tmp_path / "weights.hdf5", options, np.random.default_rng(0))
    (tmp_path / "cut.hdf5").write_bytes((tmp_path / "weights.hdf5").read_bytes()[:3000])
    with pytest.raises(ValueError, match=rf"^{tmp_path / 'cut.hdf5'}: not a complete HDF5 weights file \(.*truncated"):
        convert_elmo_checkpoint(tmp_path / "options.json", tmp_path / "cut.hdf5", tmp_path / "out")
    (tmp_path / "latin1.json").write_bytes(json.dumps(options).replace("relu", "r\u00e9lu").encode("latin-1"))
    with pytest.raises(ValueError, match=rf"^{tmp_path / 'latin1.json'}: not valid UTF-8"):
        convert_elmo_checkpoint(tmp_path / "latin1.json", tmp_path / "weights.hdf5", tmp_path / "out")


def test_a_squad_file_that_is_not_utf8_is_named(tmp_path):
    from hf_ctx.data.squad import read_squad_file

    path = tmp_path / "train.json"
    path.write_bytes('{"data": [{"title": "caf\u00e9", "paragraphs": []}]}'.encode("latin-1"))
    with pytest.raises(ValueError, match=rf"^{path}: not valid UTF-8 .*a SQuAD file"):
        read_squad_file(path)


def test_an_elmo_vocabulary_that_is_not_utf8_names_the_line(tmp_path):
    from hf_ctx.tokenization_elmo import read_vocabulary_file

    path = tmp_path / "vocab.txt"
    path.write_bytes("\ufeff<S>\n</S>\ncaf\u00e9\n".encode("utf-8")[:-3] + "caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=rf"{path}:3: not valid UTF-8"):
        read_vocabulary_file(path)
    path.write_bytes("\ufeff<S>\n</S>\n<UNK>\n".encode("utf-8"))
    assert read_vocabulary_file(path) == ["<S>", "</S>", "<UNK>"]  # the byte-order mark is no part of a word


def test_a_squad_file_with_half_a_surrogate_pair_is_named_before_any_tokenizer_sees_it(tmp_path):
    """JSON can write "\\udce9" alone; a tokenizer then fails with "TextEncodeInput must be Union[...]"."""
    from hf_ctx.data.squad import read_squad_file

    path = tmp_path / "train.json"
    context = "the caf\udce9 sat"
    qa = {"id": "q1", "question": "what?", "answers": [{"text": "sat", "answer_start": 9}]}
    path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": [qa]}]}]}))
    with pytest.raises(ValueError, match=rf"^{path}: the text 'the caf\\udce9 sat' holds half of a UTF-16 surrogate"):
        read_squad_file(path)
    paragraphs = [{"context": "the cat sat", "qas": [{**qa, "answers": [{"text": "sat", "answer_start": 8}]}]}]
    path.write_text(
        json.dumps({"data": [{"title": "TITLE", "paragraphs": paragraphs}]}).replace("TITLE", "\\ud83d\\ude00")
    )
    assert read_squad_file(path)["title"] == ["\U0001f600"]  # a whole pair (an emoji) is a character


def edit_vocab(change):
    def edit(content: bytes) -> bytes:
        tokenizer = json.loads(content)
        change(tokenizer["model"]["vocab"])
        return json.dumps(tokenizer).encode()

    return edit


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda vocab: vocab.pop("[UNK]"), r"gives id \d+ to 2 tokens \(.*'\[UNK\]'"),  # [UNK] re-added over a word
        (lambda vocab: vocab.update(red=vocab["blue"]), r"gives id \d+ to 2 tokens \('(red|blue)', '(red|blue)'\)"),
    ],
    ids=["special-token-missing", "two-tokens-one-id"],
)
def test_a_tokenizer_whose_files_disagree_is_refused_naming_the_folder(bert_folder, tmp_path, change, message):
    copy = copy_with(bert_folder, tmp_path, "tokenizer.json", edit_vocab(change))
    with pytest.raises(ValueError, match=rf"^the tokenizer loaded from {copy} {message}"):
        load_tokenizer(copy)


def test_a_squad_answer_start_of_true_is_not_read_as_1(tmp_path):
    from hf_ctx.data.squad import read_squad_file

    path = tmp_path / "train.json"
    qa = {"id": "q1", "question": "what?", "answers": [{"text": "he", "answer_start": True}]}
    path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "the cat", "qas": [qa]}]}]}))
    with pytest.raises(ValueError, match=rf"^{path}: question 'q1' .*answer_start is a bool, not a int"):
        read_squad_file(path)


@pytest.mark.parametrize(
    "change, message",
    [
        # Before: "false" is truthy, so the question's answers were dropped (with --version_2_with_negative, in
        # silence; without, refused as "has no answer").
        ({"is_impossible": "false"}, r"question 'q1' .*\.is_impossible is \"false\", not true or false"),
        # Before: the answers were dropped in silence; the official scripts score the answers, not the flag.
        ({"is_impossible": True}, r"question 'q1' .* has is_impossible true but 1 answer\(s\)"),
        # Before: json kept the last "answers", in silence.
        ({"answers": []}, r"an object names the key 'answers' twice \(\[\], then \[\{.*\}\]\)"),
    ],
    ids=["is-impossible-a-string", "impossible-with-answers", "answers-twice"],
)
def test_a_squad_question_that_contradicts_itself_is_named(tmp_path, change, message):
    from hf_ctx.data.squad import read_squad_file

    path = tmp_path / "train.json"
    qa = {"id": "q1", "question": "what?", "answers": [{"text": "cat", "answer_start": 4}]}
    text = json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "the cat", "qas": [qa]}]}]})
    key, value = next(iter(change.items()))
    if key in qa:  # the key a second time, as a hand-edited file holds it
        text = text.replace('"answers": [', f'"{key}": {json.dumps(value)}, "answers": [', 1)
    else:
        text = text.replace('"id": "q1"', f'"id": "q1", "{key}": {json.dumps(value)}')
    path.write_text(text)
    with pytest.raises(ValueError, match=rf"^{path}: .*{message}"):
        read_squad_file(path)


def test_a_squad_title_that_is_not_text_is_named(tmp_path):
    """Before: pyarrow's "ArrowTypeError: Expected bytes, got a 'int' object" traceback from run_qa.py."""
    from hf_ctx.data.squad import read_squad_file

    path = tmp_path / "train.json"
    qa = {"id": "q1", "question": "what?", "answers": [{"text": "cat", "answer_start": 4}]}
    articles = [
        {"title": title, "paragraphs": [{"context": "the cat", "qas": [{**qa, "id": f"q{i}"}]}]}
        for i, title in enumerate(["t", 5, None])
    ]
    path.write_text(json.dumps({"data": articles}))
    with pytest.raises(ValueError, match=rf"^{path}: data\[1\]\.title is a int, not a str"):
        read_squad_file(path)
    del articles[1]
    path.write_text(json.dumps({"data": articles}))
    assert read_squad_file(path)["title"] == ["t", None]  # no title is no error


def test_a_swag_label_of_true_is_not_read_as_1(tmp_path):
    from hf_ctx.data.multiple_choice import MultipleChoiceColumns, read_multiple_choice_file

    row = {"sent1": "A man", "sent2": "He", "ending0": "runs.", "ending1": "sits.", "ending2": "a", "ending3": "b"}
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({**row, "label": True}) + "\n" for _ in range(2)))
    with pytest.raises(ValueError, match=rf"^{path}:1, column 'label': label True is not the index of one of the 4"):
        read_multiple_choice_file(path, MultipleChoiceColumns())
