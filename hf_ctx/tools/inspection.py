"""A look inside the models: BERT's attention maps and the layer weights an ELMo task model learned.

    >>> import hf_ctx
    >>> figure = hf_ctx.plot_attention(model, tokenizer, "The cat sat on the mat", layer=0)  # every head
    >>> figure.savefig("attention.png")
    >>> hf_ctx.plot_scalar_mix(elmo_tagger).savefig("scalar_mix.png")

Both return a `matplotlib.figure.Figure` (drawn without pyplot, so nothing opens a window and no global figure is
left behind); matplotlib is imported only when a plot is drawn.
"""

import math

import torch

from ..modeling_elmo import ElmoTaskModel
from ..modeling_taglm import TagLMForTokenClassification

# Names of the scalar mixes of an ELMo task model, in `ElmoTaskModel.scalar_mixes` order.
SCALAR_MIX_NAMES = ("input of the task model", "beside the task LSTM's output")


def new_figure(width: float, height: float):
    """An empty `matplotlib.figure.Figure` of that size in inches; a one-line error without matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("plotting needs matplotlib: pip install matplotlib") from None
    return Figure(figsize=(width, height), layout="constrained")


def attention_maps(model, tokenizer, text: str, layer: int) -> tuple[list[str], torch.Tensor, int]:
    """The tokens of `text`, the attention probabilities (heads, T, T) of layer `layer` (negative counts from
    the top) of `model`'s encoder (row i: what token i attends to), and the layer's index from the bottom."""
    base = getattr(model, "base_model", model)
    if isinstance(model, (ElmoTaskModel, TagLMForTokenClassification)) or not hasattr(
        base.config, "num_attention_heads"
    ):
        raise ValueError(
            f"{type(model).__name__} has no attention to plot (ELMo and TagLM are LSTMs); plot_scalar_mix shows "
            "an ELMo task model's layer weights"
        )
    num_layers = base.config.num_hidden_layers
    if not (isinstance(layer, int) and -num_layers <= layer < num_layers):
        raise ValueError(
            f"layer must be an integer in [{-num_layers}, {num_layers}) (the model's layers), got {layer!r}"
        )
    encoding = tokenizer(text, return_tensors="pt", truncation=True).to(base.device)
    was_training = base.training
    base.eval()
    try:
        with torch.no_grad():
            attentions = base(**encoding, output_attentions=True, return_dict=True).attentions
    finally:
        base.train(was_training)
    tokens = tokenizer.convert_ids_to_tokens(encoding["input_ids"][0].tolist())
    return tokens, attentions[layer][0].float().cpu(), layer % num_layers


def plot_attention(model, tokenizer, text: str, layer: int = -1, head: int | None = None):
    """A figure of the attention of one head of `model` (a BERT model, any head) on `text`, or with `head=None` a
    grid of every head of the layer, one panel each: rows are the attending tokens, columns the attended ones.

    Args:
        model: an hf_ctx BERT model (or a transformers encoder that returns `attentions`).
        tokenizer: its tokenizer.
        text: one sentence (truncated to the tokenizer's maximum length).
        layer: the layer, 0 the lowest; negative counts from the top (-1, the default, is the top layer).
        head: the head in [0, num_attention_heads); None draws all of them.

    Returns:
        `matplotlib.figure.Figure`; each panel's image holds the (T, T) probabilities.
    """
    tokens, maps, layer = attention_maps(model, tokenizer, text, layer)
    num_heads = maps.shape[0]
    if head is not None and not (isinstance(head, int) and 0 <= head < num_heads):
        raise ValueError(f"head must be an integer in [0, {num_heads}) or None for every head, got {head!r}")
    heads = range(num_heads) if head is None else [head]
    columns = math.ceil(math.sqrt(len(heads)))
    rows = math.ceil(len(heads) / columns)
    side = max(3.0, 0.3 * len(tokens) + 1.0)
    figure = new_figure(side * columns, side * rows)
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for axis in axes[len(heads) :]:
        axis.remove()
    for axis, index in zip(axes, heads):
        axis.imshow(maps[index].numpy(), vmin=0.0, vmax=1.0, cmap="viridis")
        axis.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
        axis.set_yticks(range(len(tokens)), tokens, fontsize=8)
        axis.set_title(f"layer {layer}, head {index}", fontsize=9)
    return figure


def plot_scalar_mix(model):
    """A figure of the layer weights an ELMo task model learned: one panel per scalar mix
    (`config.num_output_representations`), a bar per biLM layer (the character-CNN token layer, then each LSTM layer) of height
    softmax(s_k), the mix's scale gamma in the title.

    Args:
        model: an `ElmoForTokenClassification` or `ElmoForSequenceClassification`.

    Returns:
        `matplotlib.figure.Figure`.
    """
    if isinstance(model, TagLMForTokenClassification):
        raise ValueError(
            f"TagLM has no scalar mix: it concatenates the biLM layers bilm_layers={model.config.bilm_layers} "
            "to its first RNN's output"
        )
    if not isinstance(model, ElmoTaskModel):
        raise ValueError(
            f"plot_scalar_mix draws an ELMo task model's scalar mixes (ElmoForTokenClassification, "
            f"ElmoForSequenceClassification); got {type(model).__name__}"
        )
    mixes = model.scalar_mixes()
    names = ["characters (0)", *(f"LSTM {i}" for i in range(1, model.config.num_output_layers))]
    figure = new_figure(3.0 * len(mixes) + 1.0, 3.0)
    for axis, mix, title in zip(figure.subplots(1, len(mixes), squeeze=False).ravel(), mixes, SCALAR_MIX_NAMES):
        weights = torch.softmax(mix.scalar_parameters.detach().float(), dim=0).cpu()
        axis.bar(names, weights.numpy())
        axis.set_ylim(0.0, 1.0)
        axis.set_ylabel("softmax weight")
        axis.set_title(f"{title}\n(gamma = {mix.gamma.item():.3g})", fontsize=9)
    return figure
