"""hf_ctx.plot_attention and hf_ctx.plot_scalar_mix: the panels drawn, and the values they show against the model's
own attention probabilities and softmax of its scalar-mix parameters."""

import sys

import pytest
import torch
from tiny_checkpoints import bert_tokenizer, elmo_tokenizer, taglm

import hf_ctx
from hf_ctx import CtxBertConfig, CtxBertForTokenClassification, ElmoConfig, ElmoForTokenClassification

pytest.importorskip("matplotlib")

TEXT = "red cat runs fast"


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """A tiny random BERT tagger with 3 heads per layer (a 2 x 2 grid with one panel left out) and its tokenizer."""
    tokenizer = bert_tokenizer(tmp_path_factory.mktemp("bert"))
    config = CtxBertConfig(
        vocab_size=len(tokenizer),
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=32,
        max_position_embeddings=32,
        use_crf=True,  # the plot reads the encoder, which needs no word_mask
    )
    torch.manual_seed(0)
    return CtxBertForTokenClassification(config), tokenizer


def elmo_tagger(**overrides):
    config = ElmoConfig(
        char_cnn={"filters": [[1, 4], [2, 8]], "embedding": {"dim": 4}, "n_highway": 1},
        lstm={"dim": 16, "projection_dim": 8, "n_layers": 2},
        task_hidden_size=4,
        num_labels=3,
        **overrides,
    )
    return ElmoForTokenClassification(config)


def test_attention_grid_has_a_panel_per_head_showing_its_probabilities(bert):
    model, tokenizer = bert
    model.train()
    encoding = tokenizer(TEXT, return_tensors="pt")
    tokens = tokenizer.convert_ids_to_tokens(encoding["input_ids"][0])
    with torch.no_grad():
        expected = model.eval().bert(**encoding, output_attentions=True).attentions
    model.train()
    figure = hf_ctx.plot_attention(model, tokenizer, TEXT, layer=1)
    assert len(figure.axes) == 3  # num_attention_heads panels; the grid's fourth cell is removed
    for head, axis in enumerate(figure.axes):
        torch.testing.assert_close(torch.as_tensor(axis.images[0].get_array()), expected[1][0, head])
        assert [label.get_text() for label in axis.get_xticklabels()] == tokens
        assert axis.get_title() == f"layer 1, head {head}"
    assert model.training  # the plot ran in eval mode and left the model as it was
    (axis,) = hf_ctx.plot_attention(model, tokenizer, TEXT, layer=-2, head=2).axes
    torch.testing.assert_close(torch.as_tensor(axis.images[0].get_array()), expected[0][0, 2])
    assert axis.get_title() == "layer 0, head 2"


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"layer": 2}, r"layer must be an integer in \[-2, 2\)"),
        ({"layer": 0, "head": 3}, r"head must be an integer in \[0, 3\) or None"),
    ],
)
def test_attention_outside_the_model_is_refused(bert, arguments, message):
    model, tokenizer = bert
    with pytest.raises(ValueError, match=message):
        hf_ctx.plot_attention(model, tokenizer, TEXT, **arguments)
    with pytest.raises(ValueError, match=r"ElmoForTokenClassification has no attention to plot"):
        hf_ctx.plot_attention(elmo_tagger(), elmo_tokenizer(), TEXT)


@pytest.mark.parametrize("representations", [1, 2])
def test_scalar_mix_plot_shows_softmax_of_each_mix(representations):
    model = elmo_tagger(num_output_representations=representations)
    with torch.no_grad():
        for offset, mix in enumerate(model.scalar_mixes()):
            mix.scalar_parameters.copy_(torch.tensor([0.5, -1.0, 2.0]) * (offset + 1))
    figure = hf_ctx.plot_scalar_mix(model)
    assert len(figure.axes) == representations
    for axis, mix in zip(figure.axes, model.scalar_mixes()):
        heights = torch.tensor([bar.get_height() for bar in axis.patches], dtype=torch.float32)
        torch.testing.assert_close(heights, torch.softmax(mix.scalar_parameters.detach(), 0))
        assert [label.get_text() for label in axis.get_xticklabels()] == ["characters (0)", "LSTM 1", "LSTM 2"]
    if representations == 2:
        first, second = (
            torch.tensor([bar.get_height() for bar in axis.patches], dtype=torch.float32) for axis in figure.axes
        )
        assert not torch.allclose(first, second)


def test_scalar_mix_plot_refuses_models_without_one(bert, tmp_path):
    with pytest.raises(ValueError, match=r"TagLM has no scalar mix: it concatenates the biLM layers"):
        hf_ctx.plot_scalar_mix(taglm(tmp_path)[0])
    with pytest.raises(ValueError, match=r"got CtxBertForTokenClassification"):
        hf_ctx.plot_scalar_mix(bert[0])


def test_without_matplotlib_the_error_is_one_line(bert, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"^plotting needs matplotlib: pip install matplotlib$"):
        hf_ctx.plot_scalar_mix(elmo_tagger())
