"""hf_ctx/tools/families.py: the family records are what the Auto classes register and the one place the example
scripts learn a family's classes from; the per-family rules and the one tokenizer check."""

import ast
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, BertConfig, BertTokenizer
from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING

import hf_ctx
from hf_ctx import ElmoTokenizer
from hf_ctx.tools.families import AUTO_CLASSES, MODEL_FAMILIES, check_tokenizer_fits, families_with, find_family

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("name", MODEL_FAMILIES)
def test_the_auto_classes_load_exactly_what_the_record_declares(name):
    family = MODEL_FAMILIES[name]
    assert type(AutoConfig.for_model(family.config_class.model_type)) is family.config_class
    assert TOKENIZER_MAPPING[family.config_class] is family.tokenizer_class
    config = family.config_class(vocab_size=10)
    for task, auto_class in AUTO_CLASSES.items():
        with torch.device("meta"):  # no weights are allocated
            if task in family.models:
                assert type(auto_class.from_config(config)) is family.models[task], task
            else:  # a task the family has no model for is not registered either
                with pytest.raises(ValueError, match="Unrecognized configuration class"):
                    auto_class.from_config(config)
    # The registration tables (also what register_remote_code reads) are derived from the records.
    assert [(auto, cls) for auto, cls in hf_ctx._AUTO_MODELS if cls.config_class is family.config_class] == [
        (AUTO_CLASSES[task], cls) for task, cls in family.models.items()
    ]


def test_the_task_scripts_name_no_family_class():
    """run_ner, run_glue, run_qa and run_swag learn every family's classes from its record: none of them imports a
    family's config, model or tokenizer class, or names a family in a comparison."""
    family_classes = {
        cls.__name__
        for family in MODEL_FAMILIES.values()
        for cls in (family.config_class, family.tokenizer_class, *family.models.values())
    }
    for script in ("run_ner.py", "run_glue.py", "run_qa.py", "run_swag.py"):
        tree = ast.parse((EXAMPLES / script).read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
        assert not imported & family_classes, f"{script} imports {sorted(imported & family_classes)}"
        compared = [
            const.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Compare)
            for const in ast.walk(node)
            if isinstance(const, ast.Constant) and const.value in MODEL_FAMILIES
        ]
        assert not compared, f"{script} compares with the family names {compared}"


def test_one_registry_names_the_model_families():
    from hf_ctx import CtxBertConfig, ElmoConfig, TagLMConfig
    from hf_ctx.tools.families import model_family
    from hf_ctx.tools.model_card import RunFacts, build_model_card

    assert tuple(MODEL_FAMILIES) == ("bert", "elmo", "taglm")
    assert [model_family(c()) for c in (CtxBertConfig, ElmoConfig, TagLMConfig)] == ["bert", "elmo", "taglm"]
    with pytest.raises(ValueError, match="'bert' is not an hf_ctx model type .*convert-bert"):
        model_family(BertConfig())
    with pytest.raises(ValueError, match=r"unknown model_family 'gpt'; choose one of \('bert', 'elmo', 'taglm'\)"):
        build_model_card(None, RunFacts("gpt", dataset="d"), model_id="m")


def test_families_by_task_and_config():
    assert families_with("token_classification") == ["bert", "elmo", "taglm"]
    assert families_with("sequence_classification") == ["bert", "elmo"]
    assert families_with("question_answering") == families_with("multiple_choice") == ["bert"]
    assert find_family(hf_ctx.TagLMConfig()) is MODEL_FAMILIES["taglm"]
    assert find_family(BertConfig()) is None  # transformers' own BERT has no record


def test_new_configs_take_their_sizes_from_the_tokenizer(tmp_path):
    words = ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "the", "cat"])
    taglm = MODEL_FAMILIES["taglm"].new_config("mini", words, tag_scheme="BIOES")  # TagLM has no size presets
    assert (taglm.vocab_size, taglm.tag_scheme) == (5, "BIOES")
    bert_tokenizer = MODEL_FAMILIES["bert"].make_tokenizer([["the", "cat", "sat"]] * 5, vocab_size=40)
    bert = MODEL_FAMILIES["bert"].new_config("mini", bert_tokenizer, num_labels=3)
    assert (bert.vocab_size, bert.pad_token_id, bert.num_labels) == (len(bert_tokenizer), 0, 3)
    assert bert.hidden_size == hf_ctx.BERT_PRESETS["mini"]["hidden_size"]
    assert MODEL_FAMILIES["bert"].make_tokenizer(None) is None  # no training text: a script must be given one
    assert isinstance(MODEL_FAMILIES["elmo"].make_tokenizer(None), ElmoTokenizer)  # characters need no vocabulary
    # Each family's tokenizer takes the options it uses: TagLM's word vocabulary keeps words seen min_count times.
    taglm_tokenizer = MODEL_FAMILIES["taglm"].make_tokenizer([["a", "a", "b"]], vocab_size=2, min_count=2)
    assert (
        taglm_tokenizer.vocab_size == 4 and taglm_tokenizer.convert_tokens_to_ids("b") == taglm_tokenizer.unk_token_id
    )
    with pytest.raises(ValueError, match=r"--config_name .* is a 'hf_ctx_bert' config, not 'hf_ctx_elmo'"):
        bert.save_pretrained(tmp_path)
        MODEL_FAMILIES["elmo"].load_config(str(tmp_path), words)


def test_one_check_of_a_tokenizer_against_a_model():
    characters, words = ElmoTokenizer(), ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "the"])
    bert = hf_ctx.CtxBertConfig(vocab_size=3, max_position_embeddings=16)
    check_tokenizer_fits(hf_ctx.ElmoConfig(), characters, 1000, "runs/elmo")  # ELMo has no position limit
    check_tokenizer_fits(hf_ctx.TagLMConfig(vocab_size=4), words, None, "runs/taglm")
    check_tokenizer_fits(BertConfig(vocab_size=3, max_position_embeddings=16), characters, 16, "x")  # by its config
    with pytest.raises(ValueError, match="an ELMo model reads ElmoTokenizer's character ids; runs/bert holds a"):
        check_tokenizer_fits(hf_ctx.ElmoConfig(), object(), None, "runs/bert")
    with pytest.raises(ValueError, match="TagLM needs an ElmoTokenizer with a word vocabulary"):
        check_tokenizer_fits(hf_ctx.TagLMConfig(vocab_size=3), characters, None, "runs/elmo")
    with pytest.raises(ValueError, match=r"--max_seq_length 17 exceeds the model's max_position_embeddings \(16\)"):
        check_tokenizer_fits(bert, characters, 17, "x")
    with pytest.raises(ValueError, match=r"the tokenizer of x has 4 words \(vocab.txt\) but the model's word voc"):
        check_tokenizer_fits(bert, words, 16, "x")
    sub_words = BertTokenizer(vocab={token: i for i, token in enumerate("[PAD] [UNK] [CLS] [SEP] [MASK]".split())})
    with pytest.raises(ValueError, match=r"the tokenizer of x has 5 tokens \(tokenizer.json, vocab.txt\) but the "):
        check_tokenizer_fits(bert, sub_words, 16, "x")


def test_max_seq_length_must_leave_room_beside_the_special_tokens(tmp_path):
    from tiny_checkpoints import bert_tokenizer

    tokenizer = bert_tokenizer(tmp_path)  # [CLS] a [SEP]; [CLS] a [SEP] b [SEP]
    config = BertConfig(vocab_size=len(tokenizer), max_position_embeddings=16)
    check_tokenizer_fits(config, tokenizer, 3, "x")
    check_tokenizer_fits(config, tokenizer, 5, "x", pair=True)
    with pytest.raises(
        ValueError, match=r"--max_seq_length 2 leaves no room for the text: the tokenizer adds 2 special"
    ):
        check_tokenizer_fits(config, tokenizer, 2, "x")
    with pytest.raises(ValueError, match=r"adds 3 special tokens to a pair of texts, so give more than 4"):
        check_tokenizer_fits(config, tokenizer, 4, "x", pair=True)
