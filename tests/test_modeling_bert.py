"""hf_ctx BERT: parity with transformers' BERT, the Auto classes, bad input, save/load, training."""

import copy
import json
import math

import pytest
import torch
import transformers
from tiny_checkpoints import enable_activation_checkpointing
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForNextSentencePrediction,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    BertConfig,
)
from transformers.utils import output_capturing

import hf_ctx
from hf_ctx import (
    CtxBertConfig,
    CtxBertForMaskedLM,
    CtxBertForMultipleChoice,
    CtxBertForNextSentencePrediction,
    CtxBertForPreTraining,
    CtxBertForQuestionAnswering,
    CtxBertForSequenceClassification,
    CtxBertForTokenClassification,
    CtxBertModel,
)
from hf_ctx.modeling_bert import sinusoidal_position_table
from hf_ctx.tools.convert_bert import convert_bert_checkpoint, convert_bert_config, convert_bert_state_dict

TINY = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 37,
    "max_position_embeddings": 64,
}


def tiny_config(**overrides):
    return CtxBertConfig(**{**TINY, **overrides})


def padded_batch(vocab_size=99, batch=3, length=11, seed=0):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, vocab_size, (batch, length), generator=generator)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[1, 7:] = 0
    attention_mask[2, 3:] = 0
    input_ids[attention_mask == 0] = 0
    token_type_ids = torch.zeros(batch, length, dtype=torch.long)
    token_type_ids[:, 5:] = 1
    return input_ids, attention_mask, token_type_ids


# --- parity with transformers' BERT ------------------------------------------------------------------------

PARITY_CONFIGS = [
    {"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 37},
    {
        "vocab_size": 120,
        "hidden_size": 48,
        "num_hidden_layers": 3,
        "num_attention_heads": 6,
        "intermediate_size": 64,
        "hidden_act": "gelu_new",
        "layer_norm_eps": 1e-7,
        "type_vocab_size": 3,
    },
    {
        "vocab_size": 77,
        "hidden_size": 24,
        "num_hidden_layers": 1,
        "num_attention_heads": 1,
        "intermediate_size": 96,
        "hidden_act": "relu",
        "max_position_embeddings": 40,
    },
]
HEADS = [
    ("BertModel", ["last_hidden_state", "pooler_output"]),
    ("BertForPreTraining", ["prediction_logits", "seq_relationship_logits"]),
    ("BertForMaskedLM", ["logits"]),
    ("BertForNextSentencePrediction", ["logits"]),
    ("BertForSequenceClassification", ["logits"]),
    ("BertForTokenClassification", ["logits"]),
    ("BertForQuestionAnswering", ["start_logits", "end_logits"]),
    ("BertForMultipleChoice", ["logits"]),
]


@pytest.mark.parametrize("unpad_inputs", [None, False])
@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("config_index", range(len(PARITY_CONFIGS)))
@pytest.mark.parametrize("architecture,keys", HEADS)
def test_converted_model_matches_transformers(
    tmp_path, architecture, keys, config_index, attn_implementation, unpad_inputs
):
    """Every head, every output, on a padded batch: as converted (`unpad_inputs` on by default) and with
    `unpad_inputs=False`. Unpadded, only the real tokens are compared: padded positions are zeros there, and
    transformers computes meaningless values for them."""
    kwargs = PARITY_CONFIGS[config_index]
    torch.manual_seed(config_index)
    source = getattr(transformers, architecture)(
        BertConfig(**kwargs, num_labels=3 if "Question" not in architecture else 2)
    ).eval()
    source.save_pretrained(tmp_path / "src")
    convert_bert_checkpoint(tmp_path / "src", tmp_path / "out", weights_only=True)

    auto_class = {
        "BertModel": AutoModel,
        "BertForPreTraining": AutoModelForPreTraining,
        "BertForMaskedLM": AutoModelForMaskedLM,
        "BertForNextSentencePrediction": AutoModelForNextSentencePrediction,
        "BertForSequenceClassification": AutoModelForSequenceClassification,
        "BertForTokenClassification": AutoModelForTokenClassification,
        "BertForQuestionAnswering": AutoModelForQuestionAnswering,
        "BertForMultipleChoice": AutoModelForMultipleChoice,
    }[architecture]
    overrides = {} if unpad_inputs is None else {"unpad_inputs": unpad_inputs}
    ours = auto_class.from_pretrained(tmp_path / "out", attn_implementation=attn_implementation, **overrides).eval()
    assert type(ours).__name__ == "Ctx" + architecture
    assert ours.config.unpad_inputs is (unpad_inputs is None)
    source.set_attn_implementation(attn_implementation)

    input_ids, attention_mask, token_type_ids = padded_batch(kwargs["vocab_size"])
    if architecture == "BertForMultipleChoice":
        input_ids, attention_mask, token_type_ids = (
            t[:, None].expand(-1, 2, -1).contiguous() for t in (input_ids, attention_mask, token_type_ids)
        )
    inputs = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
        "output_hidden_states": True,
    }
    with torch.no_grad():
        expected, actual = source(**inputs), ours(**inputs)
    real = attention_mask.bool().reshape(-1, attention_mask.shape[-1])  # (sequences, T), also for multiple choice
    if not ours.config.unpad_inputs:
        real = torch.ones_like(real)

    def compared(tensor):  # token-level outputs at the compared positions; sentence-level ones whole
        return tensor[real] if tensor.shape[:2] == real.shape else tensor

    for key in keys:
        torch.testing.assert_close(compared(actual[key]), compared(expected[key]), atol=1e-5, rtol=1e-5, msg=key)
    assert len(actual.hidden_states) == kwargs["num_hidden_layers"] + 1
    for mine, theirs in zip(actual.hidden_states, expected.hidden_states):
        torch.testing.assert_close(compared(mine), compared(theirs), atol=1e-5, rtol=1e-5)


def test_attentions_match_transformers_eager():
    torch.manual_seed(0)
    source = transformers.BertModel(BertConfig(**PARITY_CONFIGS[0], attn_implementation="eager")).eval()
    ours = CtxBertModel(convert_bert_config(source.config)).eval()
    ours.load_state_dict(convert_bert_state_dict(source.state_dict()))
    input_ids, attention_mask, _ = padded_batch()
    with torch.no_grad():
        expected = source(input_ids, attention_mask=attention_mask, output_attentions=True).attentions
        actual = ours(input_ids, attention_mask=attention_mask, output_attentions=True).attentions
    assert len(actual) == 2 and actual[0].shape == (3, 4, 11, 11)
    for mine, theirs in zip(actual, expected):
        # Padded keys get zero probability in both; compare everywhere.
        torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=1e-5)


# transformers 5.23 numbers selected hidden states from the embeddings (0) and resolves negative indices; 5.17 to 5.22
# number them from the first layer.
SELECTS_FROM_EMBEDDINGS = hasattr(output_capturing, "resolve_hidden_states_indices")


@pytest.mark.skipif(not SELECTS_FROM_EMBEDDINGS, reason="needs transformers >= 5.23's numbering of hidden states")
@pytest.mark.parametrize("unpad_inputs", [True, False])
@pytest.mark.parametrize("selected", [[0, -1], [1], 2])
def test_selected_hidden_states_match_transformers(unpad_inputs, selected):
    """`output_hidden_states` as indices, recorded by transformers' `capture_outputs` from `_can_record_outputs`:
    the selected states are transformers' BERT's on the same weights (at the real tokens when unpadded, zeros at
    its padding), the others None."""
    torch.manual_seed(0)
    source = transformers.BertModel(BertConfig(**PARITY_CONFIGS[0])).eval()
    config = convert_bert_config(source.config)
    config.unpad_inputs = unpad_inputs
    ours = CtxBertModel(config).eval()
    ours.load_state_dict(convert_bert_state_dict(source.state_dict()))
    input_ids, attention_mask, token_type_ids = padded_batch()
    with torch.no_grad():
        expected = source(input_ids, attention_mask, token_type_ids, output_hidden_states=selected).hidden_states
        actual = ours(input_ids, attention_mask, token_type_ids, output_hidden_states=selected).hidden_states
    real = attention_mask.bool() if unpad_inputs else torch.ones_like(attention_mask, dtype=torch.bool)
    assert len(actual) == len(expected) == PARITY_CONFIGS[0]["num_hidden_layers"] + 1
    assert [state is None for state in actual] == [state is None for state in expected]
    assert sum(state is not None for state in actual) == (len(selected) if isinstance(selected, list) else 1)
    for index, (mine, theirs) in enumerate(zip(actual, expected)):
        if mine is not None:
            torch.testing.assert_close(mine[real], theirs[real], atol=1e-5, rtol=1e-5)
            assert index == 0 or not mine[~real].any()


@pytest.mark.parametrize(
    "model_class", [CtxBertForPreTraining, CtxBertForTokenClassification, CtxBertForMultipleChoice]
)
def test_every_head_records_through_the_base_models_capture_outputs_once(model_class, monkeypatch):
    """As transformers' `test_capture_outputs_decorator`: the base model's forward alone records (no head chains a
    second `capture_outputs` around it), and a head returns every layer's hidden states and attentions."""
    assert set(CtxBertModel._can_record_outputs) == {"hidden_states", "attentions"}
    active, collectors = [0], []
    context = output_capturing.CompileableContextVar
    set_value, reset = context.set, context.reset

    def counted_set(self, value):
        if value:
            collectors.append(sorted(value))
            active[0] += 1
            assert active[0] == 1, "capture_outputs chained"
        return set_value(self, value)

    def counted_reset(self, token):
        if self.get():
            active[0] -= 1
        return reset(self, token)

    monkeypatch.setattr(context, "set", counted_set)
    monkeypatch.setattr(context, "reset", counted_reset)
    model = model_class(tiny_config(num_labels=3)).eval()
    input_ids, attention_mask, _ = padded_batch()
    if model_class is CtxBertForMultipleChoice:
        input_ids, attention_mask = (t[:, None].expand(-1, 2, -1) for t in (input_ids, attention_mask))
    with torch.no_grad():
        output = model(input_ids, attention_mask, output_hidden_states=True, output_attentions=True)
    assert collectors == [["attentions", "hidden_states"]]
    assert (
        len(output.hidden_states) == TINY["num_hidden_layers"] + 1
        and len(output.attentions) == TINY["num_hidden_layers"]
    )
    assert output.attentions[0].shape[-3:] == (TINY["num_attention_heads"], 11, 11)


# --- the model's own behaviour ----------------------------------------------------------------------------


@pytest.mark.parametrize("overrides", [{}, {"pre_layer_norm": True}, {"position_embedding_type": "sinusoidal"}])
def test_eager_and_sdpa_agree(overrides):
    model = CtxBertModel(tiny_config(**overrides)).eval()
    input_ids, attention_mask, token_type_ids = padded_batch()
    outputs = {}
    for implementation in ("eager", "sdpa"):
        model.set_attn_implementation(implementation)
        with torch.no_grad():
            outputs[implementation] = model(input_ids, attention_mask, token_type_ids).last_hidden_state
    torch.testing.assert_close(outputs["eager"], outputs["sdpa"], atol=1e-5, rtol=1e-5)
    # Padding must not change the real tokens' outputs: row 2 alone, unpadded, gives the same vectors.
    with torch.no_grad():
        alone = model(input_ids[2:, :3], attention_mask[2:, :3], token_type_ids[2:, :3]).last_hidden_state
    torch.testing.assert_close(alone[0], outputs["sdpa"][2, :3], atol=1e-5, rtol=1e-5)


def test_pre_layer_norm_layer_computes_x_plus_f_of_ln_x():
    config = tiny_config(num_hidden_layers=1, pre_layer_norm=True, hidden_dropout_prob=0.0)
    model = CtxBertModel(config, add_pooling_layer=False).eval()
    model.set_attn_implementation("eager")
    layer = model.encoder.layer[0]
    x = torch.randn(2, 5, 32)
    # Independent reference: attention written out with plain tensor ops.
    ln1 = torch.nn.functional.layer_norm(x, (32,), layer.attention_norm.weight, layer.attention_norm.bias, 1e-12)
    q, k, v = (ln1 @ layer.attention.qkv.weight.T + layer.attention.qkv.bias).split(32, dim=-1)
    heads = lambda t: t.view(2, 5, 4, 8).transpose(1, 2)  # noqa: E731
    probs = torch.softmax(heads(q) @ heads(k).transpose(-1, -2) / math.sqrt(8), dim=-1)
    attended = (probs @ heads(v)).transpose(1, 2).reshape(2, 5, 32)
    h = x + layer.attention.out_proj(attended)
    ln2 = torch.nn.functional.layer_norm(h, (32,), layer.feed_forward_norm.weight, layer.feed_forward_norm.bias, 1e-12)
    expected = h + layer.feed_forward(ln2)
    with torch.no_grad():
        actual, _ = layer(x)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    assert model.encoder.final_norm is not None


def test_sinusoidal_positions_are_fixed_unsaved_and_restored(tmp_path):
    model = CtxBertModel(tiny_config(position_embedding_type="sinusoidal")).eval()
    table = model.embeddings.sinusoidal_positions
    pos, i = 5, 3  # feature 2i is sin(pos / 10000^(2i/d)), feature 2i+1 the cos
    assert table[pos, 2 * i].item() == pytest.approx(math.sin(pos / 10000 ** (2 * i / 32)), abs=1e-6)
    assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(pos / 10000 ** (2 * i / 32)), abs=1e-6)
    assert not any("position" in name for name, _ in model.named_parameters())
    model.save_pretrained(tmp_path)
    reloaded = CtxBertModel.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(reloaded.embeddings.sinusoidal_positions, sinusoidal_position_table(64, 32))
    input_ids, attention_mask, _ = padded_batch()
    with torch.no_grad():
        torch.testing.assert_close(
            reloaded(input_ids, attention_mask).last_hidden_state, model(input_ids, attention_mask).last_hidden_state
        )


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"hidden_size": 30, "num_attention_heads": 4}, "divisible"),
        ({"num_hidden_layers": 0}, "num_hidden_layers"),
        ({"vocab_size": -1}, "vocab_size"),
        ({"hidden_act": "swishy"}, "swishy"),
        ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
        ({"position_embedding_type": "rotary"}, "rotary"),
        ({"pad_token_id": 500}, "pad_token_id"),
        ({"pad_vocab_size_to_multiple_of": 0}, "pad_vocab_size_to_multiple_of"),
    ],
)
def test_config_rejects_bad_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**overrides)


def test_presets():
    config = CtxBertConfig.from_preset("base")
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (12, 768, 12)
    assert CtxBertConfig.from_preset("mini", vocab_size=500).vocab_size == 500
    with pytest.raises(ValueError, match="huge"):
        CtxBertConfig.from_preset("huge")


@pytest.mark.parametrize(
    "inputs,message",
    [
        ({"input_ids": torch.tensor([[1, 2, 99]])}, "input_ids contains 99"),
        ({"input_ids": torch.tensor([[1, -2, 3]])}, "input_ids contains -2"),
        ({"input_ids": torch.ones(1, 65, dtype=torch.long)}, "longer than the model allows"),
        (
            {"input_ids": torch.ones(2, 4, dtype=torch.long), "token_type_ids": torch.full((2, 4), 2)},
            "token_type_ids contains 2",
        ),
        (
            {"input_ids": torch.ones(2, 4, dtype=torch.long), "attention_mask": torch.ones(2, 5)},
            "attention_mask has shape",
        ),
        ({"input_ids": torch.ones(4, dtype=torch.long)}, r"\(batch, tokens\)"),
        ({"input_ids": torch.ones(2, 4)}, "integer"),
        (
            {"input_ids": torch.ones(2, 4, dtype=torch.long), "position_ids": torch.arange(4.0)[None]},
            r"^position_ids must be integer positions \(int64 or int32\), got dtype torch.float32$",
        ),
        (
            {"input_ids": torch.ones(2, 4, dtype=torch.long), "token_type_ids": torch.zeros(2, 4)},
            r"^token_type_ids must be integer segment ids \(int64 or int32\), got dtype torch.float32$",
        ),
        (
            {"input_ids": torch.ones(2, 4, dtype=torch.long), "position_ids": torch.arange(4).repeat(3, 1)},
            r"^position_ids has shape \(3, 4\); expected \(batch, tokens\) = \(2, 4\), \(1, 4\) or \(4,\)$",
        ),
        (
            {"inputs_embeds": torch.ones(2, 4, 32, dtype=torch.float64)},
            r"^inputs_embeds has dtype torch.float64, but the model computes in torch.float32",
        ),
        ({}, "exactly one"),
    ],
)
def test_bad_input_is_a_clear_value_error(inputs, message):
    model = CtxBertModel(tiny_config()).eval()
    with pytest.raises(ValueError, match=message):
        model(**inputs)


def test_position_ids_of_one_row_and_narrower_inputs_embeds_are_taken():
    """Position ids (T,) or (1, T) are every sequence's; bfloat16 `inputs_embeds` into a float32 model are promoted
    (what transformers' BERT does), and give what the float32 vectors of the same values give."""
    model = CtxBertModel(tiny_config()).eval()
    input_ids = torch.ones(2, 4, dtype=torch.long)
    expected = model(input_ids).last_hidden_state
    for positions in (torch.arange(4), torch.arange(4)[None], torch.arange(4, dtype=torch.int32).repeat(2, 1)):
        torch.testing.assert_close(model(input_ids, position_ids=positions).last_hidden_state, expected)
    embeds = torch.randn(2, 4, 32).bfloat16()
    torch.testing.assert_close(
        model(inputs_embeds=embeds).last_hidden_state, model(inputs_embeds=embeds.float()).last_hidden_state
    )


def test_every_auto_class_loads_the_right_class(tmp_path):
    pairs = [
        (AutoModel, CtxBertModel),
        (AutoModelForPreTraining, CtxBertForPreTraining),
        (AutoModelForMaskedLM, CtxBertForMaskedLM),
        (AutoModelForNextSentencePrediction, CtxBertForNextSentencePrediction),
        (AutoModelForSequenceClassification, CtxBertForSequenceClassification),
        (AutoModelForTokenClassification, CtxBertForTokenClassification),
        (AutoModelForQuestionAnswering, CtxBertForQuestionAnswering),
        (AutoModelForMultipleChoice, CtxBertForMultipleChoice),
    ]
    CtxBertForPreTraining(tiny_config()).save_pretrained(tmp_path)
    assert isinstance(AutoConfig.from_pretrained(tmp_path), CtxBertConfig)
    for auto_class, expected in pairs:
        assert type(auto_class.from_pretrained(tmp_path)) is expected
        assert type(auto_class.from_config(tiny_config())) is expected


def test_import_twice_is_harmless():
    import importlib

    importlib.reload(hf_ctx)
    assert AutoConfig.for_model("hf_ctx_bert").__class__.__name__ == "CtxBertConfig"


def test_save_load_round_trip_is_exact_and_safetensors(tmp_path):
    model = CtxBertForPreTraining(tiny_config(num_labels=2)).eval()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    assert not list(tmp_path.glob("*.bin"))
    reloaded = AutoModelForPreTraining.from_pretrained(tmp_path).eval()
    for (name, a), (_, b) in zip(model.state_dict().items(), reloaded.state_dict().items()):
        assert torch.equal(a, b), name
    assert reloaded.cls.predictions.decoder.weight is reloaded.bert.embeddings.word_embeddings.weight


def test_resize_token_embeddings_keeps_the_decoder_tied():
    model = CtxBertForMaskedLM(tiny_config())
    model.resize_token_embeddings(120)
    assert model.config.vocab_size == 120
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.bias.shape == (120,)
    logits = model(torch.tensor([[119, 3]])).logits
    assert logits.shape == (1, 2, 120)


@pytest.mark.parametrize("unpad_inputs", [False, True])
def test_gradient_checkpointing_gives_the_same_gradients(unpad_inputs):
    torch.manual_seed(0)
    model = CtxBertForMaskedLM(
        tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, unpad_inputs=unpad_inputs)
    )
    input_ids, attention_mask, _ = padded_batch()
    grads = []
    for checkpointing in (False, True):
        model.zero_grad()
        if checkpointing:
            enable_activation_checkpointing(model)
        model.train()
        model(input_ids, attention_mask, labels=input_ids).loss.backward()
        grads.append(model.bert.encoder.layer[0].attention.qkv.weight.grad.clone())
    assert model.bert.encoder.layer[0].gradient_checkpointing
    torch.testing.assert_close(grads[0], grads[1])


def test_pretraining_loss_is_mlm_plus_nsp():
    model = CtxBertForPreTraining(tiny_config()).eval()
    input_ids, attention_mask, _ = padded_batch()
    labels = torch.full_like(input_ids, -100)
    labels[:, 1] = input_ids[:, 1]
    nsp = torch.tensor([0, 1, 0])
    out = model(input_ids, attention_mask, labels=labels, next_sentence_label=nsp)
    mlm = torch.nn.functional.cross_entropy(out.prediction_logits[:, 1], input_ids[:, 1])
    nsp_loss = torch.nn.functional.cross_entropy(out.seq_relationship_logits, nsp)
    torch.testing.assert_close(out.loss, mlm + nsp_loss)
    torch.testing.assert_close(model(input_ids, attention_mask, labels=labels).loss, mlm)


@pytest.mark.parametrize(
    "nsp, message",
    [
        (
            [0, 1, 0],
            r"^next_sentence_label must be a tensor of integer class ids \(int64\), or -100 for none; got list$",
        ),
        (
            torch.tensor([0.0, 1.0, 0.0]),
            r"^next_sentence_label must be a tensor of integer class ids .* torch.float32$",
        ),
        (torch.tensor([0, 1]), r"^next_sentence_label has shape \(2,\), expected \(3,\): one class id per example"),
    ],
)
def test_bad_next_sentence_labels_are_named_as_such(nsp, message):
    """Before: named `labels`, the masked-LM argument, which was right."""
    model = CtxBertForPreTraining(tiny_config()).eval()
    input_ids, attention_mask, _ = padded_batch()
    with pytest.raises(ValueError, match=message):
        model(input_ids, attention_mask, labels=torch.full_like(input_ids, -100), next_sentence_label=nsp)


@pytest.mark.parametrize(
    "num_labels,labels,problem_type",
    [
        (1, torch.tensor([0.5, -1.0, 2.0]), "regression"),
        (3, torch.tensor([0, 2, 1]), "single_label_classification"),
        (3, torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), "multi_label_classification"),
    ],
)
def test_sequence_classification_problem_types(num_labels, labels, problem_type):
    model = CtxBertForSequenceClassification(tiny_config(num_labels=num_labels)).eval()
    input_ids, attention_mask, _ = padded_batch()
    out = model(input_ids, attention_mask, labels=labels)
    assert model.config.problem_type == problem_type
    logits = out.logits
    expected = {
        "regression": lambda: torch.nn.functional.mse_loss(logits.squeeze(-1), labels),
        "single_label_classification": lambda: torch.nn.functional.cross_entropy(logits, labels),
        "multi_label_classification": lambda: torch.nn.functional.binary_cross_entropy_with_logits(logits, labels),
    }[problem_type]()
    torch.testing.assert_close(out.loss, expected)


@pytest.mark.parametrize(
    "name, shape, message",
    [
        ("attention_mask", (3, 2, 5), r"^attention_mask has shape \(3, 2, 5\) but input_ids has \(batch, choices, "),
        ("attention_mask", (6, 5), r"^attention_mask has shape \(6, 5\) but input_ids has .* = \(2, 3, 5\)$"),
        ("token_type_ids", (2, 15), r"^token_type_ids has shape \(2, 15\) but input_ids has"),
        ("position_ids", (2, 3, 4), r"^position_ids has shape \(2, 3, 4\) but input_ids has"),
    ],
)
def test_multiple_choice_inputs_are_checked_before_the_choices_are_flattened(name, shape, message):
    """A mask of the choices' transpose (3, 2, 5) has the flattened (6, 5) shape and, before, masked the wrong
    sequences in silence; a (6, 5) or (2, 15) one was checked after flattening, named by shapes nobody passed."""
    model = CtxBertForMultipleChoice(tiny_config()).eval()
    with pytest.raises(ValueError, match=message):
        model(torch.ones(2, 3, 5, dtype=torch.long), **{name: torch.ones(shape, dtype=torch.long)})
    with pytest.raises(ValueError, match=r"^multiple-choice input_ids must have shape \(batch, choices, tokens\)"):
        model(torch.ones(6, 5, dtype=torch.long))


def test_label_out_of_range_is_a_clear_error():
    model = CtxBertForSequenceClassification(tiny_config(num_labels=2)).eval()
    with pytest.raises(ValueError, match="label 5"):
        model(torch.tensor([[1, 2]]), labels=torch.tensor([5]))


def test_question_answering_ignores_spans_past_the_input():
    model = CtxBertForQuestionAnswering(tiny_config()).eval()
    input_ids, attention_mask, _ = padded_batch()
    out = model(
        input_ids, attention_mask, start_positions=torch.tensor([1, 50, 2]), end_positions=torch.tensor([3, 60, 2])
    )
    keep = torch.tensor([0, 2])
    expected = (
        torch.nn.functional.cross_entropy(out.start_logits[keep], torch.tensor([1, 2]))
        + torch.nn.functional.cross_entropy(out.end_logits[keep], torch.tensor([3, 2]))
    ) / 2
    torch.testing.assert_close(out.loss, expected)


def test_question_answering_ignores_spans_of_minus_100_and_refuses_other_negative_positions():
    """-100 is no loss, as for every hf_ctx head (transformers clamps it to 0 and trains the [CLS] token as the
    answer; so did hf_ctx, in silence); -3 is no token."""
    model = CtxBertForQuestionAnswering(tiny_config()).eval()
    input_ids, attention_mask, _ = padded_batch()
    out = model(
        input_ids, attention_mask, start_positions=torch.tensor([1, -100, 2]), end_positions=torch.tensor([3, 4, 2])
    )
    expected = (
        torch.nn.functional.cross_entropy(out.start_logits[[0, 2]], torch.tensor([1, 2]))
        + torch.nn.functional.cross_entropy(out.end_logits, torch.tensor([3, 4, 2]))
    ) / 2
    torch.testing.assert_close(out.loss, expected)
    with pytest.raises(ValueError, match=r"^end_positions contains -3: a span position is a token index"):
        model(input_ids, start_positions=torch.tensor([1, 2, 2]), end_positions=torch.tensor([3, -3, 2]))
    with pytest.raises(ValueError, match=r"^start_positions must be a tensor of integer class ids"):
        model(input_ids, start_positions=torch.tensor([1.0, 2, 2]), end_positions=torch.tensor([3, 3, 2]))


def test_return_dict_false_gives_a_tuple():
    model = CtxBertForTokenClassification(tiny_config(num_labels=4)).eval()
    out = model(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[0, 1, -100]]), return_dict=False)
    assert isinstance(out, tuple) and out[0].dim() == 0 and out[1].shape == (1, 3, 4)


@pytest.mark.gpu
def test_flash_attention_matches_sdpa_on_gpu():
    pytest.importorskip("flash_attn", reason="flash-attn is not installed")
    model = CtxBertModel(tiny_config()).to("cuda", torch.bfloat16).eval()
    input_ids, attention_mask, _ = (t.cuda() for t in padded_batch())
    with torch.no_grad():
        reference = model(input_ids, attention_mask).last_hidden_state
        model.set_attn_implementation("flash_attention_2")
        flash = model(input_ids, attention_mask).last_hidden_state
    mask = attention_mask.bool()
    torch.testing.assert_close(flash[mask], reference[mask], atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("model_class", [CtxBertForPreTraining, CtxBertForMaskedLM])
def test_sparse_prediction_gives_the_same_loss_and_the_labelled_logits(model_class):
    input_ids, attention_mask, _ = padded_batch()
    labels = torch.full_like(input_ids, -100)
    labels[0, [1, 4]] = input_ids[0, [1, 4]]
    labels[2, 2] = input_ids[2, 2]
    dense = model_class(tiny_config()).eval()
    sparse = model_class(tiny_config(sparse_prediction=True)).eval()
    sparse.load_state_dict(dense.state_dict())
    with torch.no_grad():
        full, fast = dense(input_ids, attention_mask, labels=labels), sparse(input_ids, attention_mask, labels=labels)
        unlabelled = sparse(input_ids, attention_mask)
    full_logits, fast_logits = full[1], fast[1]
    assert fast_logits.shape == (3, 99) and full_logits.shape == (3, 11, 99)
    torch.testing.assert_close(fast_logits, full_logits[labels != -100], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(fast.loss, full.loss, atol=1e-6, rtol=1e-6)
    assert unlabelled[0].shape == (3, 11, 99)  # no labels: full logits, as pipelines expect


def with_padded_vocabulary(state_dict: dict, rows: int, bias: float = 1e4) -> dict:
    """`state_dict` with its word-embedding / MLM-decoder rows padded to `rows`: random vectors, and decoder biases
    of `bias`, which would win every softmax and top-k if the padding were ever predicted."""
    padded = dict(state_dict)
    generator = torch.Generator().manual_seed(1)
    for key, tensor in state_dict.items():
        if key.endswith(("word_embeddings.weight", "predictions.decoder.weight")):
            extra = torch.randn(rows - tensor.shape[0], tensor.shape[1], generator=generator)
        elif key.endswith("predictions.decoder.bias"):
            extra = torch.full((rows - tensor.shape[0],), bias)
        else:
            continue
        padded[key] = torch.cat([tensor, extra.to(tensor.dtype)])
    return padded


@pytest.mark.parametrize("sparse_prediction", [False, True])
@pytest.mark.parametrize("architecture", ["BertForPreTraining", "BertForMaskedLM"])
def test_padded_vocabulary_gives_transformers_loss_and_logits_and_no_padding_gradient(architecture, sparse_prediction):
    """`pad_vocab_size_to_multiple_of=64` on transformers' BERT weights (vocabulary 99 -> 128 rows, the padding
    rows' decoder biases 1e4): logits of the 99 real tokens, loss and gradients equal transformers' and the
    unpadded model's; the padding rows get no gradient, so they never move."""
    kwargs, key = PARITY_CONFIGS[0], "prediction_logits" if architecture == "BertForPreTraining" else "logits"
    torch.manual_seed(0)
    source = getattr(transformers, architecture)(
        BertConfig(**kwargs, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    )
    config = convert_bert_config(source.config)
    config.sparse_prediction = sparse_prediction
    state = convert_bert_state_dict(source.state_dict())
    unpadded = getattr(hf_ctx, "Ctx" + architecture)(config)
    config = copy.deepcopy(config)
    config.pad_vocab_size_to_multiple_of = 64
    assert config.padded_vocab_size == 128 and config.vocab_size == 99
    padded = getattr(hf_ctx, "Ctx" + architecture)(config)
    for model, weights in ((unpadded, state), (padded, with_padded_vocabulary(state, 128))):
        missing, unexpected = model.load_state_dict(weights, strict=False)
        assert not unexpected and set(missing) <= {"cls.predictions.decoder.weight"}, (missing, unexpected)
        model.tie_weights()
    assert padded.bert.embeddings.word_embeddings.weight.shape == (128, kwargs["hidden_size"])
    assert padded.cls.predictions.decoder.weight is padded.bert.embeddings.word_embeddings.weight

    input_ids, attention_mask, token_type_ids = padded_batch(kwargs["vocab_size"])
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, ::2] = -100
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    if architecture == "BertForPreTraining":  # transformers' pretraining loss needs both labels
        batch["next_sentence_label"] = torch.tensor([0, 1, 1])
    expected, mine, theirs = (
        source(**batch, labels=labels),
        unpadded(**batch, labels=labels),
        padded(**batch, labels=labels),
    )
    for outputs in (expected, mine, theirs):
        outputs.loss.backward()
    assert theirs[key].shape == mine[key].shape and theirs[key].shape[-1] == 99
    real = labels != -100 if sparse_prediction else attention_mask.bool()  # unpadded: zeros at the padding
    torch.testing.assert_close(
        theirs[key] if sparse_prediction else theirs[key][real], expected[key][real], atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(theirs[key], mine[key], atol=0, rtol=0)
    torch.testing.assert_close(theirs.loss, expected.loss, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(theirs.loss, mine.loss, atol=0, rtol=0)
    for (name, reference), (_, parameter) in zip(unpadded.named_parameters(), padded.named_parameters()):
        real = parameter.grad[: reference.grad.shape[0]]
        torch.testing.assert_close(real, reference.grad, atol=1e-7, rtol=1e-6, msg=name)
        assert not parameter.grad[reference.grad.shape[0] :].any(), name  # the padding rows: no gradient
    with torch.no_grad():
        without_labels = padded(**batch)[key]
    assert without_labels.shape == (3, 11, 99)  # no labels: every position, the real tokens only


def test_padded_vocabulary_round_trips_and_a_checkpoint_saved_before_the_option_loads_as_before(tmp_path):
    """A padded model saves its padded rows and `pad_vocab_size_to_multiple_of`, and reloads exactly; a config.json
    without the field (a checkpoint saved before it existed) builds the unpadded model it was saved from."""
    padded = CtxBertForPreTraining(tiny_config(pad_vocab_size_to_multiple_of=64)).eval()
    padded.save_pretrained(tmp_path / "padded")
    reloaded = AutoModelForPreTraining.from_pretrained(tmp_path / "padded").eval()
    assert reloaded.config.pad_vocab_size_to_multiple_of == 64 and reloaded.config.vocab_size == 99
    assert reloaded.bert.embeddings.word_embeddings.weight.shape[0] == 128
    for (name, a), (_, b) in zip(padded.state_dict().items(), reloaded.state_dict().items()):
        assert torch.equal(a, b), name
    assert reloaded.cls.predictions.decoder.weight is reloaded.bert.embeddings.word_embeddings.weight

    older = CtxBertForMaskedLM(tiny_config()).eval()
    older.save_pretrained(tmp_path / "older")
    config_file = tmp_path / "older" / "config.json"
    fields = json.loads(config_file.read_text())
    del fields["pad_vocab_size_to_multiple_of"]
    config_file.write_text(json.dumps(fields))
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path / "older").eval()
    assert loaded.config.pad_vocab_size_to_multiple_of == 1
    assert loaded.bert.embeddings.word_embeddings.weight.shape[0] == 99
    input_ids, attention_mask, _ = padded_batch()
    with torch.no_grad():
        assert torch.equal(loaded(input_ids, attention_mask).logits, older(input_ids, attention_mask).logits)


def test_resize_token_embeddings_keeps_the_padding_out_of_the_vocabulary(tmp_path):
    """Resizing a padded model keeps `vocab_size` the real tokens and pads the rows again; transformers'
    `pad_to_multiple_of` becomes the option (its padding is not predicted either); the result saves and reloads."""
    model = CtxBertForMaskedLM(tiny_config(pad_vocab_size_to_multiple_of=64))
    model.resize_token_embeddings(130)
    assert model.config.vocab_size == 130 and model.config.padded_vocab_size == 192
    assert model.bert.embeddings.word_embeddings.weight.shape[0] == 192
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.bias.shape == (192,)
    assert model(torch.tensor([[129, 3]])).logits.shape == (1, 2, 130)
    unpadded = CtxBertForMaskedLM(tiny_config())
    unpadded.resize_token_embeddings(100, pad_to_multiple_of=8)
    assert (unpadded.config.vocab_size, unpadded.config.pad_vocab_size_to_multiple_of) == (100, 8)
    assert unpadded.bert.embeddings.word_embeddings.weight.shape[0] == 104
    model.eval().save_pretrained(tmp_path)
    reloaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(reloaded(torch.tensor([[129, 3]])).logits, model(torch.tensor([[129, 3]])).logits)


@pytest.mark.parametrize(
    "model_class,extra",
    [
        (CtxBertModel, {}),
        (CtxBertForPreTraining, {"labels": True, "next_sentence_label": torch.tensor([0, 1, 1])}),
        (CtxBertForPreTraining, {"labels": True, "sparse_prediction": True}),
        (CtxBertForPreTraining, {"labels": True, "sparse_prediction": True, "pad_vocab_size_to_multiple_of": 64}),
        (CtxBertForSequenceClassification, {"labels": torch.tensor([0, 1, 1])}),
        (CtxBertForTokenClassification, {"labels": True}),
    ],
)
@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=False)
def test_no_graph_breaks_under_torch_compile(model_class, extra):
    """One graph under a plain `torch.compile` (torch's `capture_dynamic_output_shape_ops` off), unpadding and the
    sparse MLM head included: `torch.nonzero` in their place breaks the graph (test_input_checks.py)."""
    import torch._dynamo as dynamo

    input_ids, attention_mask, token_type_ids = padded_batch()
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    overrides = {
        key: value for key, value in extra.items() if key in ("sparse_prediction", "pad_vocab_size_to_multiple_of")
    }
    for key, value in extra.items() - overrides.items():
        inputs[key] = torch.zeros_like(input_ids) if value is True else value
    if "labels" in inputs and model_class is CtxBertForPreTraining:
        inputs["labels"] = input_ids.masked_fill(attention_mask == 0, -100)
    dynamo.reset()
    explanation = dynamo.explain(model_class(tiny_config(num_labels=2, **overrides)).train())(**inputs)
    dynamo.reset()
    assert explanation.graph_break_count == 0, explanation.break_reasons


def cuda_graph_blockers(model, inputs) -> list[str]:
    """The ops of `model`'s compiled training step (forward and backward graphs, as AOTAutograd hands them to
    inductor) that keep CUDA graphs (`torch.compile(mode="reduce-overhead")`) from holding it: a size that depends
    on the values (an unbacked symbol) or a read back to the host (`.item()`), which inductor runs outside them,
    and "graph break" for a step traced as more than one forward graph (the break runs eagerly between them)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    blockers = []

    def collect(graph, example_inputs):
        for node in graph.graph.nodes:
            value = node.meta.get("val")
            if (value is not None and free_unbacked_symbols(value)) or (
                node.target is torch.ops.aten._local_scalar_dense.default
            ):
                blockers.append(str(node.target))
        return make_boxed_func(graph.forward)

    forward_graphs = []

    def collect_forward(graph, example_inputs):
        forward_graphs.append(graph)
        return collect(graph, example_inputs)

    torch._dynamo.reset()
    output = torch.compile(model, backend=aot_autograd(fw_compiler=collect_forward, bw_compiler=collect))(**inputs)
    output.loss.backward()
    torch._dynamo.reset()
    return blockers + ["graph break"] * (len(forward_graphs) - 1)


@pytest.mark.parametrize("model_class", [CtxBertForSequenceClassification, CtxBertForTokenClassification])
def test_the_padded_fine_tuning_step_fits_in_cuda_graphs_and_the_unpadded_one_does_not(model_class):
    """Launch-bound fine-tuning steps gain from CUDA graphs (benchmarks/bert_speed.py --compile_mode
    reduce-overhead --plain): with `unpad_inputs=False` the compiled step holds no data-dependent size or host read;
    with unpadding it holds the real-token count (`hf_ctx::true_positions`), which keeps the graphs from it."""
    input_ids, attention_mask, token_type_ids = padded_batch()
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    inputs["labels"] = torch.tensor([0, 1, 1]) if model_class is CtxBertForSequenceClassification else input_ids % 2
    padded = cuda_graph_blockers(model_class(tiny_config(num_labels=2, unpad_inputs=False)).train(), inputs)
    assert padded == []
    unpadded = cuda_graph_blockers(model_class(tiny_config(num_labels=2)).train(), inputs)
    assert "hf_ctx.true_positions.default" in unpadded


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=False)
def test_unpadding_is_the_default_and_a_plain_torch_compile_keeps_it():
    """New configs, presets and converted configs unpad, and so does the same model under a plain `torch.compile`
    (torch's `capture_dynamic_output_shape_ops` off, as by default): zeros at the padding, the eager model's states
    at the real tokens."""
    assert CtxBertConfig().unpad_inputs and CtxBertConfig.from_preset("tiny").unpad_inputs
    assert convert_bert_config(BertConfig(**TINY)).unpad_inputs
    model = CtxBertModel(tiny_config()).eval()
    input_ids, attention_mask, token_type_ids = padded_batch()
    torch._dynamo.reset()
    with torch.no_grad():
        eager = model(input_ids, attention_mask, token_type_ids).last_hidden_state
        compiled = torch.compile(model, backend="eager")(input_ids, attention_mask, token_type_ids)
    torch._dynamo.reset()
    real = attention_mask.bool()
    torch.testing.assert_close(compiled.last_hidden_state[real], eager[real], atol=1e-6, rtol=1e-6)
    assert not eager[~real].any() and not compiled.last_hidden_state[~real].any()  # zeros: unpadded both times


@pytest.mark.parametrize("pad_vocab_size_to_multiple_of", [1, 64])
@pytest.mark.parametrize("backend", ["eager", pytest.param("aot_eager", marks=pytest.mark.slow)])
def test_plain_torch_compile_unpads_and_trains_as_the_eager_model(backend, pad_vocab_size_to_multiple_of):
    """A plain `torch.compile` (no flag) of the pretraining model with unpadding and the MLM head on the masked
    positions only (`sparse_prediction`): zeros at the padding, and the eager model's loss, real-token outputs,
    logits and gradients (autograd through the traced graph with aot_eager); also with the vocabulary padded."""
    check_plain_compile_trains_as_eager(backend, "cpu", 1e-6, pad_vocab_size_to_multiple_of)


@pytest.mark.gpu
def test_plain_torch_compile_unpads_and_trains_as_the_eager_model_on_gpu():
    """The same with inductor's CUDA kernels (fp32), the real-token count a symbolic size in generated code."""
    check_plain_compile_trains_as_eager("inductor", "cuda", tolerance=1e-4)


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=False)
def check_plain_compile_trains_as_eager(backend, device, tolerance, pad_vocab_size_to_multiple_of=1):
    torch.manual_seed(0)
    config = tiny_config(
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        sparse_prediction=True,
        pad_vocab_size_to_multiple_of=pad_vocab_size_to_multiple_of,
    )
    eager = CtxBertForPreTraining(config).to(device).train()
    traced = copy.deepcopy(eager)
    input_ids, attention_mask, token_type_ids = (t.to(device) for t in padded_batch())
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, ::2] = -100
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    batch["next_sentence_label"] = torch.tensor([0, 1, 1], device=device)
    expected = eager(**batch, labels=labels, output_hidden_states=True)
    expected.loss.backward()
    torch._dynamo.reset()
    actual = torch.compile(traced, backend=backend)(**batch, labels=labels, output_hidden_states=True)
    actual.loss.backward()
    torch._dynamo.reset()
    real, close = attention_mask.bool(), {"atol": tolerance, "rtol": max(tolerance, 1e-5)}
    torch.testing.assert_close(actual.loss, expected.loss, **close)
    assert actual.prediction_logits.shape == (int((labels != -100).sum()), 99)  # the masked positions only
    torch.testing.assert_close(actual.prediction_logits, expected.prediction_logits, **close)
    torch.testing.assert_close(actual.hidden_states[-1][real], expected.hidden_states[-1][real], **close)
    assert not actual.hidden_states[-1][~real].any()  # unpadded, not the padded path
    for (name, mine), (_, reference) in zip(traced.named_parameters(), eager.named_parameters()):
        torch.testing.assert_close(mine.grad, reference.grad, **close, msg=name)


# --- unpadded (variable-length) path ---------------------------------------------------------------------------


def _same_weights(model_class, **overrides):
    torch.manual_seed(0)
    padded = model_class(tiny_config(num_labels=3, unpad_inputs=False, **overrides))
    unpadded = model_class(tiny_config(num_labels=3, **overrides))  # unpadded by default
    assert unpadded.config.unpad_inputs
    unpadded.load_state_dict(padded.state_dict())
    return padded, unpadded


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("pre_layer_norm", [False, True])
def test_unpadded_path_gives_the_same_loss_and_gradients(attn_implementation, pre_layer_norm):
    """Pretraining (MLM + NSP) in training mode without dropout: same loss, same gradients, same hidden states at
    the real tokens, and layer outputs of zeros at the padding (the embeddings are computed for every position)."""
    padded, unpadded = _same_weights(
        CtxBertForPreTraining, pre_layer_norm=pre_layer_norm, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    input_ids, attention_mask, token_type_ids = padded_batch()
    labels = torch.where(
        torch.rand(input_ids.shape, generator=torch.Generator().manual_seed(1)) < 0.3, input_ids, -100
    )
    labels[attention_mask == 0] = -100
    outputs = []
    for model in (padded, unpadded):
        model.set_attn_implementation(attn_implementation)
        model.train()
        out = model(
            input_ids,
            attention_mask,
            token_type_ids,
            labels=labels,
            next_sentence_label=torch.tensor([0, 1, 1]),
            output_hidden_states=True,
        )
        out.loss.backward()
        outputs.append(out)
    real = attention_mask.bool()
    torch.testing.assert_close(outputs[1].loss, outputs[0].loss, atol=1e-6, rtol=1e-6)
    for layer, (mine, reference) in enumerate(zip(outputs[1].hidden_states, outputs[0].hidden_states)):
        torch.testing.assert_close(mine[real], reference[real], atol=1e-6, rtol=1e-6)
        assert layer == 0 or not mine[~real].any()
    for (name, mine), (_, reference) in zip(unpadded.named_parameters(), padded.named_parameters()):
        torch.testing.assert_close(mine.grad, reference.grad, atol=1e-6, rtol=1e-5, msg=name)


def test_unpadded_gradients_equal_the_padded_ones_and_split_batches_in_float64():
    """In float64 the unpadded path's gradients are the padded path's, and the mean of two half batches' gradients
    is the whole batch's, to 1e-12: no padded position reaches a real one, and the float32 differences (1e-4 on
    the MLM head's largest gradients when padding is labelled, as tests/fsdp2_worker.py does) are rounding."""
    padded, unpadded = (m.double().eval() for m in _same_weights(CtxBertForPreTraining))
    input_ids, attention_mask, token_type_ids = padded_batch(batch=4)
    attention_mask[3, 5:] = 0
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}

    def gradients(model, labels, rows=slice(None)):
        model.zero_grad()
        model(**{k: v[rows] for k, v in batch.items()}, labels=labels[rows]).loss.backward()
        return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    real_only = input_ids.masked_fill(attention_mask == 0, -100)
    expected, actual = gradients(padded, real_only), gradients(unpadded, real_only)
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], atol=1e-12, rtol=1e-12, msg=name)
    # Every position labelled, padding too (as many in each half): the halves average to the whole batch.
    whole = gradients(unpadded, input_ids)
    halves = [gradients(unpadded, input_ids, slice(start, start + 2)) for start in (0, 2)]
    for name in whole:
        torch.testing.assert_close((halves[0][name] + halves[1][name]) / 2, whole[name], atol=1e-12, rtol=1e-12)


def test_unpadded_path_handles_full_and_empty_rows():
    """No padding at all (the padded path runs); a row of padding only gives zeros, not NaN."""
    padded, unpadded = (m.eval() for m in _same_weights(CtxBertForSequenceClassification))
    input_ids, attention_mask, token_type_ids = padded_batch()
    full = torch.ones_like(attention_mask)
    with torch.no_grad():
        torch.testing.assert_close(unpadded(input_ids, full).logits, padded(input_ids, full).logits)
        attention_mask[1] = 0
        out = unpadded.bert(input_ids, attention_mask, token_type_ids)
        expected = padded.bert(input_ids[[0, 2]], attention_mask[[0, 2]], token_type_ids[[0, 2]])
    assert not out.last_hidden_state[1].any() and torch.isfinite(out.pooler_output).all()
    real = attention_mask[[0, 2]].bool()
    torch.testing.assert_close(out.last_hidden_state[[0, 2]][real], expected.last_hidden_state[real])


def test_set_attn_implementation_switches_the_kernel(monkeypatch):
    """The kernel that runs is the one asked for: spies stand in for the eager function and for the sdpa entry of
    transformers' attention-function registry, and count the calls per layer."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    import hf_ctx.modeling_bert as modeling_bert

    calls = []

    def spy(name, kernel):
        def counted(*args, **kwargs):
            calls.append(name)
            return kernel(*args, **kwargs)

        return counted

    monkeypatch.setattr(modeling_bert, "eager_attention_forward", spy("eager", modeling_bert.eager_attention_forward))
    sdpa = ALL_ATTENTION_FUNCTIONS["sdpa"]
    ALL_ATTENTION_FUNCTIONS["sdpa"] = spy("sdpa", sdpa)  # the registry instance's own entry, removed below
    try:
        config = tiny_config()
        model = CtxBertModel(config).eval()
        input_ids, attention_mask, _ = padded_batch()
        outputs = {}
        for implementation in ("eager", "sdpa", "eager"):
            calls.clear()
            model.set_attn_implementation(implementation)
            with torch.no_grad():
                outputs[implementation] = model(input_ids, attention_mask).last_hidden_state
            assert calls == [implementation] * config.num_hidden_layers
        torch.testing.assert_close(outputs["sdpa"], outputs["eager"], atol=1e-5, rtol=1e-5)
        # Asking for the attention probabilities runs the eager kernel, the only one that computes them.
        model.set_attn_implementation("sdpa")
        calls.clear()
        with torch.no_grad():
            model(input_ids, attention_mask, output_attentions=True)
        assert calls == ["eager"] * config.num_hidden_layers
    finally:
        del ALL_ATTENTION_FUNCTIONS["sdpa"]
    assert ALL_ATTENTION_FUNCTIONS["sdpa"] is sdpa


def _spy_on_flex_attention(monkeypatch):
    """A list that counts the calls of transformers' registered flex_attention kernel, and the masks it gets."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    kernel, calls = ALL_ATTENTION_FUNCTIONS["flex_attention"], []

    def counted(module, query, key, value, attention_mask, **kwargs):
        calls.append(type(attention_mask).__name__)
        return kernel(module, query, key, value, attention_mask, **kwargs)

    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS, "flex_attention", counted)
    return calls


@pytest.mark.slow  # torch compiles flex_attention and its block mask on first use: about 50 s on 2 CPU cores
def test_flex_attention_matches_sdpa_padded_and_unpadded(monkeypatch):
    """`attn_implementation="flex_attention"` runs transformers' flex kernel with a `BlockMask` of the padding:
    padded, every position equals sdpa's; unpadded (the default), the real tokens do and the padding is zeros.
    Training with attention dropout is refused (the kernel has none)."""
    calls = _spy_on_flex_attention(monkeypatch)
    input_ids, attention_mask, token_type_ids = padded_batch()
    real = attention_mask.bool()
    for unpad_inputs in (False, True):
        model = CtxBertModel(tiny_config(unpad_inputs=unpad_inputs)).eval()
        outputs = {}
        for implementation in ("sdpa", "flex_attention"):
            model.set_attn_implementation(implementation)
            calls.clear()
            with torch.no_grad():
                outputs[implementation] = model(input_ids, attention_mask, token_type_ids).last_hidden_state
        assert calls == ["BlockMask"] * model.config.num_hidden_layers
        compared = slice(None) if not unpad_inputs else real
        torch.testing.assert_close(
            outputs["flex_attention"][compared], outputs["sdpa"][compared], atol=1e-5, rtol=1e-5
        )
        assert not unpad_inputs or not outputs["flex_attention"][~real].any()
    # transformers' flex kernel has no dropout: training with attention dropout is refused in one line.
    with pytest.raises(ValueError, match="`flex_attention` does not support `dropout`"):
        model.train()(input_ids, attention_mask, token_type_ids)


def test_flex_attention_is_accepted_at_load_time(tmp_path):
    """transformers refuses flex_attention for a model without `_supports_flex_attn`; CtxBert models have it."""
    CtxBertModel(tiny_config()).save_pretrained(tmp_path)
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path, attn_implementation="flex_attention")
    assert model.config._attn_implementation == "flex_attention"


@pytest.mark.gpu
def test_flex_attention_trains_like_sdpa_on_gpu():
    """On CUDA flex_attention also has a backward pass (not on CPU): same loss and gradients as sdpa, unpadded.
    Heads of 16: torch's CUDA flex kernel needs a head size of at least 16."""
    config = tiny_config(num_labels=3, attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0)
    config.num_attention_heads = config.hidden_size // 16
    model = CtxBertForSequenceClassification(config).cuda()
    input_ids, attention_mask, token_type_ids = (t.cuda() for t in padded_batch())
    labels = torch.tensor([0, 1, 2], device="cuda")
    results = {}
    for implementation in ("sdpa", "flex_attention"):
        model.set_attn_implementation(implementation)
        model.zero_grad()
        loss = model(input_ids, attention_mask, token_type_ids, labels=labels).loss
        loss.backward()
        results[implementation] = loss, {n: p.grad.clone() for n, p in model.named_parameters()}
    torch.testing.assert_close(results["flex_attention"][0], results["sdpa"][0], atol=1e-5, rtol=1e-5)
    for name, gradient in results["sdpa"][1].items():
        torch.testing.assert_close(results["flex_attention"][1][name], gradient, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_varlen_flash_attention_matches_padded_sdpa_on_gpu(dtype):
    from hf_ctx.modeling_bert import can_use_varlen_attention

    padded, unpadded = (m.to("cuda", dtype).eval() for m in _same_weights(CtxBertModel))
    input_ids, attention_mask, token_type_ids = (t.cuda() for t in padded_batch())
    if not can_use_varlen_attention(torch.zeros(1, device="cuda", dtype=dtype), 0.0):
        pytest.skip("torch.nn.attention.varlen is not available in this torch build")
    with torch.no_grad():
        reference = padded(input_ids, attention_mask, token_type_ids).last_hidden_state
        varlen = unpadded(input_ids, attention_mask, token_type_ids).last_hidden_state
    real = attention_mask.bool()
    torch.testing.assert_close(varlen[real], reference[real], atol=2e-2, rtol=2e-2)


# --- bad or unusual input (reliability issue) ----------------------------------------------------------------


def test_an_empty_batch_and_a_mask_that_is_not_0_1_are_refused():
    model = CtxBertModel(tiny_config()).eval()
    with pytest.raises(ValueError, match=r"the batch is empty \(shape \(0, 5\)\)"):
        model(torch.zeros(0, 5, dtype=torch.long))
    input_ids, attention_mask, _ = padded_batch()
    additive = torch.zeros(attention_mask.shape).masked_fill(attention_mask == 0, float("-inf"))
    with pytest.raises(ValueError, match="attention_mask must hold 1 for real tokens and 0 for padding; it has 12 "):
        model(input_ids, attention_mask=additive)
    with torch.no_grad():  # 0/1 in any dtype reads as the integer mask
        expected = model(input_ids, attention_mask=attention_mask).last_hidden_state
        for mask in (attention_mask.float(), attention_mask.bool()):
            torch.testing.assert_close(model(input_ids, attention_mask=mask).last_hidden_state, expected)


def test_the_pooler_reads_the_first_real_token_on_both_paths_with_left_padding():
    """Left padding: position 0 is padding, where the padded path has a meaningless state and the unpadded
    path zeros; both pool the first real token ([CLS]) now, so they agree."""
    model = CtxBertModel(tiny_config()).eval()
    input_ids, attention_mask, _ = padded_batch()
    left_mask = attention_mask.flip(1)
    outputs = {}
    for unpad in (False, True):
        model.config.unpad_inputs = unpad
        with torch.no_grad():
            outputs[unpad] = model(input_ids, attention_mask=left_mask)
    torch.testing.assert_close(outputs[True].pooler_output, outputs[False].pooler_output, atol=1e-5, rtol=1e-5)
    first_real = torch.tensor([0, 4, 8])  # rows with 11, 7 and 3 real tokens, right-aligned
    hidden = outputs[False].last_hidden_state[torch.arange(3), first_real]
    torch.testing.assert_close(outputs[False].pooler_output, torch.tanh(model.pooler.dense(hidden)))


@pytest.mark.parametrize(
    "head",
    [
        CtxBertForPreTraining,
        CtxBertForMaskedLM,
        CtxBertForNextSentencePrediction,
        CtxBertForSequenceClassification,
        CtxBertForTokenClassification,
        CtxBertForQuestionAnswering,
        CtxBertForMultipleChoice,
    ],
)
def test_heads_annotate_their_kwargs_as_transformers_models_do(head):
    """`**kwargs: Unpack[TransformersKwargs]`, as in transformers' `BertFor*`: code reading the signature (type
    hints included) finds `output_attentions` and `output_hidden_states`, and both reach the encoder; a key the
    encoder has no use for is refused by name."""
    import inspect
    import typing

    from transformers.utils import TransformersKwargs

    kwargs = inspect.signature(head.forward).parameters["kwargs"]
    assert kwargs.kind is inspect.Parameter.VAR_KEYWORD
    hinted = typing.get_type_hints(head.forward)["kwargs"]
    assert typing.get_args(kwargs.annotation) == typing.get_args(hinted) == (TransformersKwargs,)
    assert {"output_attentions", "output_hidden_states"} <= TransformersKwargs.__optional_keys__
    signature = inspect.signature(transformers.BertForSequenceClassification.forward).parameters["kwargs"]
    assert str(kwargs.annotation) == str(signature.annotation)  # the annotation transformers' BERT heads carry

    model = head(tiny_config(num_labels=3)).eval()
    input_ids, attention_mask, _ = padded_batch()
    if head is CtxBertForMultipleChoice:
        input_ids, attention_mask = input_ids[:, None], attention_mask[:, None]
    with torch.no_grad():
        outputs = model(input_ids, attention_mask, output_attentions=True, output_hidden_states=True)
    assert len(outputs.attentions) == len(outputs.hidden_states) - 1 == 2
    with pytest.raises(TypeError, match="unexpected keyword argument 'cu_seq_lens_q'"):
        model(input_ids, attention_mask, cu_seq_lens_q=torch.tensor([0, 11]))


def test_a_pretraining_checkpoint_loads_into_smaller_heads_without_a_load_report(tmp_path):
    """As the README's snippet does (save CtxBertForPreTraining, load it for fill-mask): the pretraining heads a
    smaller model leaves out are expected, not reported; any other stray weight still is."""
    from transformers.testing_utils import CaptureLogger

    config = CtxBertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    CtxBertForPreTraining(config).save_pretrained(tmp_path / "pretrained")
    for auto_class in (transformers.AutoModelForMaskedLM, transformers.AutoModel):
        with CaptureLogger(transformers.utils.logging.get_logger("transformers")) as captured:
            auto_class.from_pretrained(tmp_path / "pretrained")
        assert "LOAD REPORT" not in captured.out, (auto_class, captured.out)
    with CaptureLogger(transformers.utils.logging.get_logger("transformers")) as captured:
        transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "pretrained")
    assert "UNEXPECTED" not in captured.out and "classifier.weight" in captured.out  # the new head: worth saying
    stray = CtxBertForPreTraining(config)
    stray.register_buffer("stray", torch.zeros(2))
    stray.save_pretrained(tmp_path / "stray")
    with CaptureLogger(transformers.utils.logging.get_logger("transformers")) as captured:
        transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "stray")
    assert "LOAD REPORT" in captured.out and "stray" in captured.out and "seq_relationship" not in captured.out
