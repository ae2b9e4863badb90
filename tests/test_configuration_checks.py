"""Config checks run on every road a value takes into an hf_ctx config: `__init__`, `from_pretrained(path,
**overrides)` (also through `AutoConfig` and the model classes), `from_dict`, plain assignment, building a model,
saving; and an ELMo options.json with a NaN clip."""

import json
import math

import pytest
from transformers import AutoConfig, AutoModel

from hf_ctx import CtxBertConfig, CtxBertModel, ElmoConfig, ElmoModel, TagLMConfig, TagLMForTokenClassification
from hf_ctx.configuration_elmo import DEFAULT_LSTM
from hf_ctx.tools.convert_elmo import elmo_config_from_options

TINY_ELMO = {
    "char_cnn": {"filters": [[1, 4], [2, 6]], "embedding": {"dim": 4}, "n_highway": 1},
    "lstm": {"dim": 12, "projection_dim": 5, "n_layers": 1},
    "vocab_size": 20,
}
CONFIGS = {
    "bert": lambda: CtxBertConfig.from_preset("tiny", vocab_size=50),
    "elmo": lambda: ElmoConfig(**TINY_ELMO),
    "taglm": lambda: TagLMConfig(vocab_size=30, word_embedding_dim=8, rnn_hidden_size=9),
}
# (family, field, bad value, what the error says): one bad value per kind of check.
BAD_FIELDS = [
    ("bert", "hidden_dropout_prob", 1.5, r"hidden_dropout_prob must be in \[0, 1\), got 1.5"),
    ("bert", "attention_probs_dropout_prob", math.nan, r"attention_probs_dropout_prob must be in \[0, 1\), got nan"),
    ("bert", "num_hidden_layers", 0, "num_hidden_layers must be a positive integer, got 0"),
    ("bert", "hidden_act", "swishy", r"hidden_act must be one of \[.*'gelu'.*\], got 'swishy'"),
    ("bert", "layer_norm_eps", -1e-12, "layer_norm_eps must be a positive number"),
    ("elmo", "dropout", 1.0, r"dropout must be in \[0, 1\), got 1.0"),
    ("elmo", "num_sampled", -3, r"num_sampled must be 0 \(full softmax\) or a positive integer, got -3"),
    (
        "elmo",
        "lstm",
        {**DEFAULT_LSTM, "dim": 12, "projection_dim": 5, "cell_clip": math.nan},
        "lstm cell_clip must be a positive number, got nan",
    ),
    ("taglm", "rnn_type", "transformer", r"rnn_type must be one of \['gru', 'lstm'\], got 'transformer'"),
    ("taglm", "rnn_hidden_size", 0, "rnn_hidden_size must be a positive integer, got 0"),
    ("taglm", "tag_scheme", "BILOU2", "tag_scheme must be one of"),
]


@pytest.mark.parametrize("family,field,value,message", BAD_FIELDS)
def test_a_bad_field_is_refused_on_every_road_in(tmp_path, family, field, value, message):
    config = CONFIGS[family]()
    config.save_pretrained(tmp_path)
    saved = config.to_dict()
    config_class = type(config)
    roads = {
        "__init__": lambda: config_class(**{**config.to_dict(), field: value}),
        "from_pretrained(path, **overrides)": lambda: config_class.from_pretrained(tmp_path, **{field: value}),
        "AutoConfig.from_pretrained": lambda: AutoConfig.from_pretrained(tmp_path, **{field: value}),
        "from_dict(dict, **overrides)": lambda: config_class.from_dict(config.to_dict(), **{field: value}),
        "assignment": lambda: setattr(config, field, value),
    }
    for road, call in roads.items():
        with pytest.raises(ValueError, match=message):
            call()
            pytest.fail(f"accepted on the road {road}")
    assert config.to_dict() == saved  # the refused assignment changed nothing


def test_rules_between_fields_are_checked_when_the_config_is_complete(tmp_path):
    """hidden_size % num_attention_heads: checked after from_pretrained's overrides, when a model is built, and
    when the config is saved; not on each assignment (a change of both passes through a state that breaks it)."""
    config = CtxBertConfig.from_preset("tiny", vocab_size=50)  # hidden 128, 2 heads
    config.save_pretrained(tmp_path)
    message = r"hidden_size \(128\) must be divisible by num_attention_heads \(3\)"
    with pytest.raises(ValueError, match=message):
        AutoConfig.from_pretrained(tmp_path, num_attention_heads=3)
    with pytest.raises(ValueError, match=message):
        AutoModel.from_pretrained(tmp_path, num_attention_heads=3)
    with pytest.raises(ValueError, match=r"pad_token_id \(50\) must be in \[0, vocab_size=50\)"):
        CtxBertConfig.from_pretrained(tmp_path, pad_token_id=50)

    config.num_attention_heads = 3
    with pytest.raises(ValueError, match=message):
        CtxBertModel(config)
    with pytest.raises(ValueError, match=message):
        config.save_pretrained(tmp_path / "bad")
    config.hidden_size = 96  # now consistent again
    assert CtxBertModel(config).config.hidden_size == 96

    elmo = ElmoConfig(**TINY_ELMO)
    elmo.lstm["cell_clip"] = math.nan  # a section changed in place: seen when the model is built
    with pytest.raises(ValueError, match="lstm cell_clip must be a positive number, got nan"):
        ElmoModel(elmo)
    taglm = CONFIGS["taglm"]()
    taglm.char_padding_id = 262
    with pytest.raises(ValueError, match=r"char_padding_id must be in \[0, n_characters=262\), got 262"):
        TagLMForTokenClassification(taglm)


@pytest.mark.parametrize("clip", ["cell_clip", "proj_clip"])
def test_an_options_file_with_a_nan_clip_is_refused(clip):
    """A NaN clip makes every LSTM output NaN; `value <= 0` let it through."""
    options = json.loads(f"""{{"char_cnn": {{"activation": "relu", "embedding": {{"dim": 4}},
        "filters": [[1, 4]], "max_characters_per_token": 50, "n_characters": 261, "n_highway": 1}},
        "lstm": {{"dim": 12, "projection_dim": 5, "n_layers": 1, "cell_clip": 3, "proj_clip": 3,
        "use_skip_connections": true, "{clip}": NaN}}}}""")
    assert math.isnan(options["lstm"][clip])
    with pytest.raises(ValueError, match=f"lstm {clip} must be a positive number, got nan"):
        elmo_config_from_options(options)
