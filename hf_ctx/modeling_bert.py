"""hf_ctx's from-scratch BERT (Devlin et al., 2019): a Transformer encoder with MLM/NSP pretraining heads and
the usual fine-tuning heads.

Shapes below use B = batch, T = tokens, H = hidden size, V = vocabulary size, C = choices.

What differs from transformers' `BertModel` (and why):
- one fused query/key/value projection per layer (one matmul instead of three);
- optional fixed sinusoidal positions and pre-LayerNorm layers;
- with `config.unpad_inputs` (the default), padding is dropped before the layers: linear layers see only real
  tokens and, on a GPU in half precision, attention runs as variable-length flash attention
  (`torch.nn.attention.varlen`); elsewhere the attention product alone runs padded, through the kernel asked for;
- optionally, the vocabulary rows padded to a multiple of `config.pad_vocab_size_to_multiple_of` (MosaicBERT's 64),
  the padding never an input nor a prediction (the MLM logits are cut back to `vocab_size`);
- inputs are validated before any kernel runs, so a bad id is a `ValueError`, not a device-side assert.
`hf_ctx.tools.convert_bert` maps transformers' BERT weights onto this model; the outputs match to 1e-5.
"""

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    NextSentencePredictorOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.processing_utils import Unpack
from transformers.utils import ModelOutput, TransformersKwargs
from transformers.utils.generic import can_return_tuple
from transformers.utils.output_capturing import OutputRecorder, capture_outputs, maybe_install_capturing_hooks

from .configuration_bert import CtxBertConfig
from .crf import ConditionalRandomField, crf_logits_and_loss, init_crf_weights, tagger_crf
from .input_checks import (
    IGNORE_INDEX,
    check_bert_inputs,
    check_choice_inputs,
    check_gold_tags,
    check_integer_labels,
    check_span_positions,
    check_word_mask,
    host_syncs_allowed,
    true_positions,
)
from .losses import (
    AccumulatedBatchLossMixin,
    accumulated_mean,
    check_class_labels,
    classification_loss,
    sequence_classification_loss,
)
from .model_size import ParameterMemoryMixin
from .remote_code import AutoMapMixin


def sinusoidal_position_table(num_positions: int, dim: int) -> torch.Tensor:
    """The fixed (num_positions, dim) table of Vaswani et al.: sin on even features, cos on odd ones."""
    position = torch.arange(num_positions, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(num_positions, dim)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table


class CtxBertEmbeddings(nn.Module):
    """Token + position + segment embeddings, then LayerNorm and dropout. Output: (B, T, H)."""

    def __init__(self, config: CtxBertConfig):
        super().__init__()
        self.position_embedding_type = config.position_embedding_type
        self.word_embeddings = nn.Embedding(
            config.padded_vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        if config.position_embedding_type == "absolute":
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        else:
            # Fixed, so not a parameter and not saved; `_init_weights` fills it.
            table = sinusoidal_position_table(config.max_position_embeddings, config.hidden_size)
            self.register_buffer("sinusoidal_positions", table, persistent=False)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        seq_length = inputs_embeds.shape[1]
        if position_ids is None:
            position_ids = torch.arange(seq_length, device=inputs_embeds.device)[None, :]
        if self.position_embedding_type == "absolute":
            positions = self.position_embeddings(position_ids)
        else:
            positions = self.sinusoidal_positions[position_ids].to(inputs_embeds.dtype)
        if token_type_ids is None:
            segments = self.token_type_embeddings.weight[0]
        else:
            segments = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + positions + segments
        return self.dropout(self.LayerNorm(embeddings))


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Plain softmax(QK^T * scaling + mask) V; also returns the attention probabilities.

    query/key/value: (B, heads, T, head_dim); attention_mask: None, boolean (True = attend) or additive float,
    broadcastable to (B, heads, T, T). Returns ((B, T, heads, head_dim), (B, heads, T, T)).
    """
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    probs = F.dropout(probs, p=dropout, training=module.training)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs


try:  # torch >= 2.10: flash attention over variable-length sequences, without padding
    from torch.nn.attention.varlen import varlen_attn
except ImportError:
    varlen_attn = None


@dataclass
class UnpaddedLayout:
    """Where the real tokens of a padded (B, T) batch are, so the encoder can run on them alone (N of them).

    `indices` (N,): flat positions b * T + t of the real tokens, row by row; `cu_seqlens` (B + 1,) int32: where
    each sequence starts in that order; `max_seqlen`: the longest sequence; `padded_mask`: the attention mask
    the padded kernels take (what `create_bidirectional_mask` made), for when attention cannot run unpadded.
    """

    indices: torch.Tensor
    cu_seqlens: torch.Tensor
    max_seqlen: int
    batch: int
    seq_length: int
    padded_mask: torch.Tensor | None

    @classmethod
    def from_attention_mask(cls, attention_mask: torch.Tensor, padded_mask) -> "UnpaddedLayout":
        """The layout of `attention_mask` (B, T), 1 on real tokens; `padded_mask` is kept for the padded kernels."""
        keep = attention_mask.bool()  # (B, T)
        lengths = keep.sum(dim=1, dtype=torch.int32)  # (B,) real tokens per sequence
        # (B + 1,): 0, then running totals, so sequence b is tokens cu_seqlens[b] .. cu_seqlens[b + 1] - 1.
        cu_seqlens = F.pad(torch.cumsum(lengths, dim=0, dtype=torch.int32), (1, 0))
        indices = true_positions(keep)  # (N,) positions in the flat (B * T); traced by torch.compile
        # Under torch.compile the longest length is not read back (a host read): only the varlen kernel, which does
        # not run there, needs it, and T bounds it.
        max_seqlen = keep.shape[1] if torch.compiler.is_compiling() else int(lengths.max())
        return cls(indices, cu_seqlens, max_seqlen, keep.shape[0], keep.shape[1], padded_mask)

    def unpad(self, padded: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) -> (N, ...)"""
        return padded.flatten(0, 1)[self.indices]  # (B * T, ...) -> the N real rows

    def pad(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (B, T, ...), zeros at the padding."""
        padded = tokens.new_zeros(self.batch * self.seq_length, *tokens.shape[1:])  # (B * T, ...)
        padded = padded.index_copy(0, self.indices, tokens)  # the N real rows back in place
        return padded.view(self.batch, self.seq_length, *tokens.shape[1:])


def can_use_varlen_attention(query: torch.Tensor, dropout: float) -> bool:
    """Flash attention's variable-length kernel needs CUDA, half precision and no attention dropout."""
    return (
        varlen_attn is not None
        and query.is_cuda
        and query.dtype in (torch.float16, torch.bfloat16)
        and dropout == 0.0
        and not torch.compiler.is_compiling()
    )


class CtxBertSelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention with one fused QKV projection. (B, T, H) -> (B, T, H).

    The attention kernel comes from `config._attn_implementation` (eager, sdpa, flex_attention, flash_attention_2,
    ...) through transformers' attention-function registry, with the mask in the form transformers' mask registry
    makes for it (a `BlockMask` for flex_attention); asking for the attention probabilities uses the eager kernel,
    the only one that computes them. On the unpadded path the variable-length flash kernel, where it can run,
    replaces whichever kernel was asked for (see [`CtxBertConfig`]'s `unpad_inputs`).
    """

    is_causal = False  # read by transformers' sdpa/flash kernels

    def __init__(self, config: CtxBertConfig):
        super().__init__()
        self.config = config
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_dim**-0.5
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_prob = config.attention_probs_dropout_prob

    def attention_function(self, output_attentions: bool):
        implementation = self.config._attn_implementation
        if output_attentions or implementation in (None, "eager"):
            return eager_attention_forward
        # `get_interface` (not indexing) also tells transformers that `set_attn_implementation` works here.
        return ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, layout=None, shape=None):
        """`hidden_states` (B, T, H) with `attention_mask` in the form the kernel wants, the same flattened to
        (B * T, H) with `shape` = (B, T), or the (N, H) real tokens of an [`UnpaddedLayout`] `layout`. Returns
        the same shape, and the attention probabilities (eager only)."""
        if layout is not None:
            return self.out_proj(self.unpadded_attention(hidden_states, layout)), None
        batch, seq_length = hidden_states.shape[:2] if shape is None else shape
        hidden = hidden_states.shape[-1]
        qkv = self.qkv(hidden_states).view(batch, seq_length, 3, self.num_heads, self.head_dim)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, T, head_dim)
        output, probs = self.attention_function(output_attentions)(
            self,
            query,
            key,
            value,
            attention_mask,
            scaling=self.scaling,
            dropout=self.dropout_prob if self.training else 0.0,
        )
        return self.out_proj(output.reshape(hidden_states.shape[:-1] + (hidden,))), probs

    def unpadded_attention(self, tokens: torch.Tensor, layout: UnpaddedLayout) -> torch.Tensor:
        """Attention within each sequence of the (N, H) real tokens -> (N, H), before the output projection."""
        qkv = self.qkv(tokens).view(-1, 3, self.num_heads, self.head_dim)
        dropout = self.dropout_prob if self.training else 0.0
        if can_use_varlen_attention(qkv, dropout):
            query, key, value = qkv.unbind(1)  # each (N, heads, head_dim)
            output = varlen_attn(
                query,
                key,
                value,
                layout.cu_seqlens,
                layout.cu_seqlens,
                layout.max_seqlen,
                layout.max_seqlen,
                scale=self.scaling,
            )
            return output.reshape(tokens.shape)
        # No variable-length kernel here (CPU, fp32, attention dropout): pad for the attention product only; the
        # projections around it still skip the padding.
        query, key, value = layout.pad(qkv).permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, T, head_dim)
        output, _ = self.attention_function(False)(
            self, query, key, value, layout.padded_mask, scaling=self.scaling, dropout=dropout
        )
        return layout.unpad(output).reshape(tokens.shape)


class CtxBertFeedForward(nn.Module):
    """Position-wise feed-forward network: Linear(H, I), activation, Linear(I, H)."""

    def __init__(self, config: CtxBertConfig):
        super().__init__()
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.activation = ACT2FN[config.hidden_act]
        self.output = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, hidden_states):
        return self.output(self.activation(self.intermediate(hidden_states)))


class CtxBertLayer(GradientCheckpointingLayer):
    """One Transformer layer: self-attention and feed-forward, each with a residual connection and LayerNorm.

    Post-LN (BERT): x = LN(x + f(x)). Pre-LN: x = x + f(LN(x)). (B, T, H) -> (B, T, H), or (N, H) -> (N, H) for
    the real tokens of an [`UnpaddedLayout`].
    """

    def __init__(self, config: CtxBertConfig):
        super().__init__()
        self.pre_layer_norm = config.pre_layer_norm
        self.attention = CtxBertSelfAttention(config)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.feed_forward = CtxBertFeedForward(config)
        self.feed_forward_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, layout=None, shape=None):
        if self.pre_layer_norm:
            attended, probs = self.attention(
                self.attention_norm(hidden_states), attention_mask, output_attentions, layout, shape
            )
            hidden_states = hidden_states + self.dropout(attended)
            hidden_states = hidden_states + self.dropout(self.feed_forward(self.feed_forward_norm(hidden_states)))
        else:
            attended, probs = self.attention(hidden_states, attention_mask, output_attentions, layout, shape)
            hidden_states = self.attention_norm(hidden_states + self.dropout(attended))
            hidden_states = self.feed_forward_norm(hidden_states + self.dropout(self.feed_forward(hidden_states)))
        return hidden_states, probs


def batch_shaped(tokens: torch.Tensor, layout: UnpaddedLayout | None, shape: tuple[int, int]) -> torch.Tensor:
    """The encoder's tokens in the batch's shape: the (N, H) real tokens of an [`UnpaddedLayout`] `layout`, zeros
    at the padding, or the (B * T, H) flattened tokens of `shape` (B, T) -> (B, T, H)."""
    return layout.pad(tokens) if layout is not None else tokens.view(*shape, tokens.shape[-1])


class CtxBertPaddedStates(nn.Module):
    """`batch_shaped` as a module: the encoder calls it on each layer's output when hidden states are asked for,
    and transformers records its output (`_can_record_outputs`), as it records each layer's output in its own
    models."""

    def forward(self, tokens: torch.Tensor, layout: UnpaddedLayout | None, shape: tuple[int, int]) -> torch.Tensor:
        return batch_shaped(tokens, layout, shape)


class CtxBertEncoder(nn.Module):
    """A stack of `CtxBertLayer`s (plus a final LayerNorm for pre-LN). (B, T, H) -> (B, T, H).

    Given an [`UnpaddedLayout`], the layers run on the (N, H) real tokens and the output is padded back (zeros at
    the padding). Otherwise they run on the (B * T, H) tokens of the flattened batch: linear layers then take 2-D
    inputs as they are, instead of flattening and unflattening (B, T, H) around every matmul, forward and backward
    (a dozen ATen ops a layer fewer, each host time on a GPU).
    """

    def __init__(self, config: CtxBertConfig):
        super().__init__()
        self.layer = nn.ModuleList([CtxBertLayer(config) for _ in range(config.num_hidden_layers)])
        self.final_norm = (
            nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.pre_layer_norm else None
        )
        self.padded_states = CtxBertPaddedStates()

    def forward(
        self, hidden_states, attention_mask=None, output_attentions=False, output_hidden_states=False, layout=None
    ) -> torch.Tensor:
        shape = tuple(hidden_states.shape[:2])
        if layout is not None:
            hidden_states = layout.unpad(hidden_states)
        else:
            hidden_states = hidden_states.reshape(-1, hidden_states.shape[-1])
        for layer in self.layer:
            hidden_states, _ = layer(
                hidden_states, attention_mask, output_attentions=output_attentions, layout=layout, shape=shape
            )
            if output_hidden_states:
                self.padded_states(hidden_states, layout, shape)  # recorded by `capture_outputs`
        if self.final_norm is not None:
            hidden_states = self.final_norm(hidden_states)
        return batch_shaped(hidden_states, layout, shape)


class CtxBertPooler(nn.Module):
    """tanh(Linear(h_[CLS])): the sentence vector used by NSP and sequence classification. (B, T, H) -> (B, H).

    [CLS] is each sequence's first real token: with left padding (`attention_mask` starting with 0) that is not
    position 0, where the padded path has a meaningless state and the unpadded path zeros. (transformers' BERT
    reads position 0 even there.)
    """

    def __init__(self, config: CtxBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states, attention_mask=None):
        if attention_mask is None:
            first = hidden_states[:, 0]
        else:
            first_real = attention_mask.int().argmax(dim=1)  # (B,): the first 1 (0 for a row without one)
            first = hidden_states[torch.arange(hidden_states.shape[0], device=hidden_states.device), first_real]
        return torch.tanh(self.dense(first))


class CtxBertLMHead(nn.Module):
    """Masked-LM head: Linear, activation, LayerNorm, then a decoder tied to the input embeddings. (..., H) -> (..., V).

    With `config.pad_vocab_size_to_multiple_of`, the decoder computes its padded number of rows and the logits are
    cut back to the V real tokens (a view: the padding is in no softmax, loss or pipeline's top-k).
    """

    def __init__(self, config: CtxBertConfig):
        super().__init__()
        self.config = config
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.padded_vocab_size)

    def forward(self, hidden_states):
        logits = self.decoder(self.LayerNorm(self.activation(self.dense(hidden_states))))
        vocab_size = self.config.vocab_size
        return logits[..., :vocab_size] if logits.shape[-1] != vocab_size else logits


class CtxBertPreTrainedModel(AutoMapMixin, ParameterMemoryMixin, AccumulatedBatchLossMixin, PreTrainedModel):
    """Weight initialisation, attention-implementation support and loading for all CtxBert models."""

    config_class = CtxBertConfig
    base_model_prefix = "bert"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    # What `output_hidden_states` and `output_attentions` return, recorded by transformers' `capture_outputs` (on
    # `CtxBertModel.forward`) with hooks on these modules, as for transformers' own models: the embeddings' output,
    # then each layer's output in the batch's shape (`CtxBertPaddedStates`: the layers themselves run on flattened
    # or unpadded tokens, so their inputs and outputs are not (B, T, H)), and each layer's attention probabilities.
    # `capture_initial_hidden_state` needs transformers >= 5.9; `output_hidden_states` as indices, >= 5.17, numbered
    # as from 5.23 on (0 = the embeddings; transformers' own models count from the first layer in 5.17 to 5.22).
    _can_record_outputs = {
        "hidden_states": [
            OutputRecorder(CtxBertEmbeddings, capture_initial_hidden_state=False),
            OutputRecorder(CtxBertPaddedStates, capture_initial_hidden_state=False),
        ],
        "attentions": OutputRecorder(CtxBertSelfAttention, index=1),
    }
    # FSDP's shard units and what `device_map` keeps on one device. Not `CtxBertEmbeddings` (transformers' BERT
    # lists its embeddings): the MLM decoder shares the word embeddings' weight, so FSDP2 must hold the two in one
    # group (accelerate forms it), which fails once the embeddings module is a unit of its own.
    _no_split_modules = ["CtxBertLayer"]
    # A pretraining checkpoint (`CtxBertForPreTraining`) loaded into a model with fewer heads: the pretraining heads
    # it leaves out (the next-sentence head and its pooler for masked LM; both heads for the base model and the task
    # models) are expected to be dropped, not worth a load report.
    _keys_to_ignore_on_load_unexpected = [r"^cls\.(predictions|seq_relationship)\.", r"^bert\.pooler\."]

    def resize_token_embeddings(self, new_num_tokens=None, pad_to_multiple_of=None, mean_resizing=True):
        """transformers' `resize_token_embeddings`, with `config.vocab_size` kept the number of real tokens
        (`new_num_tokens`): the word embeddings and the MLM decoder get `config.padded_vocab_size` rows.
        `pad_to_multiple_of` becomes `config.pad_vocab_size_to_multiple_of`, so its padding, too, is never predicted
        (transformers' own models count it in `vocab_size`)."""
        if new_num_tokens is None and pad_to_multiple_of is None:
            return self.get_input_embeddings()
        vocab_size = self.config.vocab_size if new_num_tokens is None else new_num_tokens
        if pad_to_multiple_of is not None:
            self.config.pad_vocab_size_to_multiple_of = pad_to_multiple_of
        self.config.vocab_size = vocab_size
        embeddings = super().resize_token_embeddings(self.config.padded_vocab_size, None, mean_resizing)
        self.config.vocab_size = self.vocab_size = vocab_size  # transformers set them to the rows
        return embeddings

    @torch.no_grad()
    def _init_weights(self, module):
        # Normal(0, initializer_range) for Linear/Embedding weights, zero biases, unit LayerNorms, as in BERT.
        super()._init_weights(module)
        if isinstance(module, CtxBertEmbeddings) and module.position_embedding_type == "sinusoidal":
            init.copy_(module.sinusoidal_positions, sinusoidal_position_table(*module.sinusoidal_positions.shape))
        elif isinstance(module, ConditionalRandomField):
            init_crf_weights(module)


@dataclass
class CtxBertForPreTrainingOutput(ModelOutput):
    """
    Output of [`CtxBertForPreTraining`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*): sum of the masked-LM and next-sentence losses that
            were asked for (labels given).
        prediction_logits (`torch.FloatTensor` of shape `(B, T, V)`): masked-LM scores before softmax; `(N, V)` for
            the N labelled tokens with `config.sparse_prediction` and labels.
        seq_relationship_logits (`torch.FloatTensor` of shape `(B, 2)`): next-sentence scores (0 = IsNext).
        hidden_states (`tuple(torch.FloatTensor)`, *optional*): embeddings and every layer's output, each (B, T, H).
        attentions (`tuple(torch.FloatTensor)`, *optional*): every layer's attention probabilities, (B, heads, T, T).
    """

    loss: torch.FloatTensor | None = None
    prediction_logits: torch.FloatTensor | None = None
    seq_relationship_logits: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None


class CtxBertModel(CtxBertPreTrainedModel):
    """The bare encoder: embeddings, Transformer layers and (optionally) the pooler.

    Args:
        config ([`CtxBertConfig`]): model configuration.
        add_pooling_layer (`bool`, defaults to `True`): build the [CLS] pooler (needed for NSP and classification).
    """

    def __init__(self, config: CtxBertConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = CtxBertEmbeddings(config)
        self.encoder = CtxBertEncoder(config)
        self.pooler = CtxBertPooler(config) if add_pooling_layer else None
        self.post_init()
        # transformers installs the recording hooks (`_can_record_outputs`) when hidden states or attentions are
        # first asked for; installed here instead, a first request inside `torch.compile(fullgraph=True)` does not
        # install them while tracing (dynamo refuses the lock around that). Idle, a hook returns at once.
        maybe_install_capturing_hooks(self)

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> BaseModelOutputWithPooling | tuple:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(B, T)`): token ids in `[0, vocab_size)`.
            attention_mask (`torch.Tensor` of shape `(B, T)`, *optional*): 1 for real tokens, 0 for padding.
            token_type_ids (`torch.LongTensor` of shape `(B, T)`, *optional*): segment ids (0 for sentence A, 1 for B).
            position_ids (`torch.LongTensor` of shape `(B, T)`, *optional*): defaults to 0..T-1.
            inputs_embeds (`torch.FloatTensor` of shape `(B, T, H)`, *optional*): instead of `input_ids`.
            output_attentions (`bool`, *optional*): also return every layer's attention probabilities.
            output_hidden_states (`bool`, `int` or `list[int]`, *optional*): also return the embeddings and every
                layer's output; an index or a list of indices (0: the embeddings, -1: the last layer) returns those
                alone, None in the other places.
            return_dict (`bool`, *optional*): return a `ModelOutput` (default) or a tuple.

        `capture_outputs` records the hidden states and attentions (see `_can_record_outputs`).

        Returns:
            `BaseModelOutputWithPooling` with `last_hidden_state` (B, T, H) and `pooler_output` (B, H).
        """
        output_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        output_hidden_states = (
            self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        )
        check_bert_inputs(
            self.config,
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            model_dtype=self.embeddings.word_embeddings.weight.dtype,
        )

        embeddings = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        if output_attentions:
            # The eager kernel (the only one that returns probabilities) takes a boolean mask.
            mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        else:
            # The mask form each kernel wants (None when nothing is padded, so sdpa may pick its fastest path;
            # finding that out reads the mask back, so where host syncs are not allowed the mask is always made).
            mask = create_bidirectional_mask(
                config=self.config,
                inputs_embeds=embeddings,
                attention_mask=attention_mask,
                allow_is_bidirectional_skip=host_syncs_allowed(embeddings),
            )
        layout = None
        if self.config.unpad_inputs and attention_mask is not None and not output_attentions:
            if host_syncs_allowed(attention_mask):
                if not attention_mask.bool().all():
                    layout = UnpaddedLayout.from_attention_mask(attention_mask, mask)
            elif torch.compiler.is_compiling():
                # Traced with a symbolic number of real tokens (`true_positions`); every batch unpads, as testing
                # for padding would branch on values.
                layout = UnpaddedLayout.from_attention_mask(attention_mask, mask)
        sequence_output = self.encoder(
            embeddings,
            mask,
            output_attentions=output_attentions,
            output_hidden_states=bool(output_hidden_states),
            layout=layout,
        )
        return BaseModelOutputWithPooling(
            last_hidden_state=sequence_output,
            pooler_output=self.pooler(sequence_output, attention_mask) if self.pooler is not None else None,
        )


def masked_lm_logits_and_loss(lm_head, sequence_output, labels, config, num_items_in_batch=None):
    """MLM logits and, when `labels` (B, T) are given, the cross-entropy over the positions whose label is not
    `IGNORE_INDEX` (-100).

    With `config.sparse_prediction` and labels, only the labelled positions go through the head (see
    `CtxBertConfig`): logits (N, V) for the N labelled tokens; otherwise logits (B, T, V).
    """
    if labels is None:
        return lm_head(sequence_output), None
    if config.sparse_prediction:
        check_class_labels(sequence_output, labels)  # before the flat positions index the states with them
        labelled = true_positions(labels != IGNORE_INDEX)  # (N,) flat positions; traced by torch.compile
        logits = lm_head(sequence_output.reshape(-1, sequence_output.shape[-1]).index_select(0, labelled))
        labels = labels.reshape(-1).index_select(0, labelled)
    else:
        logits = lm_head(sequence_output)
    # 0, not NaN, for a batch without a masked token (as every hf_ctx head: see `classification_loss`).
    return logits, classification_loss(logits, labels, config.vocab_size, num_items_in_batch)


def _classifier_dropout(config):
    return nn.Dropout(config.hidden_dropout_prob if config.classifier_dropout is None else config.classifier_dropout)


# The heads below take the inputs of `CtxBertModel.forward` by keyword and pass `output_attentions`,
# `output_hidden_states` on through `**kwargs`, annotated as transformers' models annotate theirs, so that code
# reading the signature finds those two options (`CtxBertModel.forward` refuses the other keys of
# `TransformersKwargs`, which it has no use for); `can_return_tuple` turns their output into a tuple when
# `return_dict=False` (or `config.return_dict` is False).


class CtxBertForPreTraining(CtxBertPreTrainedModel):
    """BERT with its two pretraining heads: masked LM (tied to the input embeddings) and next-sentence prediction.

    The loss is the sum of the losses whose labels are given, so MLM-only pretraining passes just `labels`.
    """

    _tied_weights_keys = {"cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight"}

    def __init__(self, config: CtxBertConfig):
        super().__init__(config)
        self.bert = CtxBertModel(config)
        self.cls = nn.Module()
        self.cls.predictions = CtxBertLMHead(config)
        self.cls.seq_relationship = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings

    def loss_items(self, inputs: dict) -> dict[str, torch.Tensor]:
        """The masked tokens (`labels`) and the sentence pairs (`next_sentence_label`): the masked-LM and the
        next-sentence losses are means over them."""
        items = super().loss_items(inputs)
        if torch.is_tensor(inputs.get("next_sentence_label")):
            items["next_sentence_label"] = inputs["next_sentence_label"].ne(IGNORE_INDEX).sum()
        return items

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels: torch.LongTensor | None = None,
        next_sentence_label: torch.LongTensor | None = None,
        num_items_in_batch=None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> CtxBertForPreTrainingOutput | tuple:
        r"""
        Args:
            labels (`torch.LongTensor` of shape `(B, T)`, *optional*): original ids at masked positions, -100 elsewhere.
            next_sentence_label (`torch.LongTensor` of shape `(B,)`, *optional*): 0 if B follows A, 1 if B is random.
            Other arguments: see [`CtxBertModel.forward`].
        """
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        prediction_logits, loss = masked_lm_logits_and_loss(
            self.cls.predictions, outputs.last_hidden_state, labels, self.config, num_items_in_batch
        )
        seq_relationship_logits = self.cls.seq_relationship(outputs.pooler_output)
        if next_sentence_label is not None:
            nsp_loss = classification_loss(seq_relationship_logits, next_sentence_label, 2, name="next_sentence_label")
            pairs = next_sentence_label.ne(IGNORE_INDEX).sum()
            nsp_loss = accumulated_mean(nsp_loss, pairs, "next_sentence_label", num_items_in_batch, labels)
            loss = nsp_loss if loss is None else loss + nsp_loss
        return CtxBertForPreTrainingOutput(
            loss=loss,
            prediction_logits=prediction_logits,
            seq_relationship_logits=seq_relationship_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


class CtxBertForMaskedLM(CtxBertPreTrainedModel):
    """BERT with the masked-LM head only (used by `pipeline("fill-mask")`)."""

    _tied_weights_keys = {"cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight"}

    def __init__(self, config: CtxBertConfig):
        super().__init__(config)
        self.bert = CtxBertModel(config, add_pooling_layer=False)
        self.cls = nn.Module()
        self.cls.predictions = CtxBertLMHead(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        num_items_in_batch=None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MaskedLMOutput | tuple:
        r"""`labels` (B, T): original ids at masked positions, -100 elsewhere. Returns `logits` (B, T, V), or (N, V)
        for the N labelled tokens with `config.sparse_prediction`."""
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits, loss = masked_lm_logits_and_loss(
            self.cls.predictions, outputs.last_hidden_state, labels, self.config, num_items_in_batch
        )
        return MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class CtxBertForNextSentencePrediction(CtxBertPreTrainedModel):
    """BERT with the next-sentence head only. `labels` (B,): 0 if B follows A, 1 if B is random."""

    def __init__(self, config: CtxBertConfig):
        super().__init__(config)
        self.bert = CtxBertModel(config)
        self.cls = nn.Module()
        self.cls.seq_relationship = nn.Linear(config.hidden_size, 2)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        num_items_in_batch=None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> NextSentencePredictorOutput | tuple:
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.cls.seq_relationship(outputs.pooler_output)
        loss = classification_loss(logits, labels, 2, num_items_in_batch) if labels is not None else None
        return NextSentencePredictorOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class CtxBertForSequenceClassification(CtxBertPreTrainedModel):
    """BERT with a linear classifier (or regressor) on the pooled [CLS] vector, e.g. for GLUE."""

    def __init__(self, config: CtxBertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = CtxBertModel(config)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        num_items_in_batch=None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> SequenceClassifierOutput | tuple:
        r"""`labels`: (B,) class ids (-100: no loss), (B,) floats for regression or (B, num_labels) floats for
        multi-output regression, (B, num_labels) multi-hot for multi-label; see `sequence_classification_loss`."""
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.pooler_output))
        loss = (
            sequence_classification_loss(self.config, logits, labels, num_items_in_batch)
            if labels is not None
            else None
        )
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class CtxBertForTokenClassification(CtxBertPreTrainedModel):
    """BERT with a linear classifier on every token, e.g. for NER. `labels` (B, T) with -100 where ignored.

    With `config.use_crf`, a linear-chain CRF (`crf.ConditionalRandomField`, under the transitions
    `config.tag_scheme` allows) decodes the words, as TagLM does: it runs over the first sub-token of each word,
    which the model finds in `word_mask` (B, T), 1 at each word's first sub-token, or else in `labels`: the
    positions whose label is not -100, as `data.conll.align_labels` labels a sentence (its first sub-token per
    word; the other sub-tokens and the special tokens -100). Without either (plain inference) it cannot know the
    words and says so; `SubwordTokenClassificationPipeline` passes `word_mask`. Then
        loss: mean over sentences of the CRF negative log-likelihood of the words' labels;
        logits: (B, T, num_labels) the CRF max-marginal scores at each word's first sub-token, so that
            `logits.argmax(-1)` there is the Viterbi tag sequence; each later sub-token (and a special token after
            the last word) repeats its word's scores, so that the pipelines' "first", "average" and "max"
            aggregations agree; positions before the first word and padding are 0.
    """

    def __init__(self, config: CtxBertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = CtxBertModel(config, add_pooling_layer=False)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.crf = tagger_crf(config) if config.use_crf else None
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        word_mask=None,
        num_items_in_batch=None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> TokenClassifierOutput | tuple:
        r"""`word_mask` (`torch.Tensor` of shape `(B, T)`, *optional*): with `config.use_crf`, 1 (or True) at the
        first sub-token of each word, the positions the CRF decodes; defaults to `labels != -100`."""
        inputs = input_ids if input_ids is not None else inputs_embeds
        word_mask = self._word_mask(word_mask, labels, attention_mask, inputs)
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        if self.crf is not None:
            logits, loss = self._crf_logits_and_loss(logits, word_mask, attention_mask, labels)
            if loss is not None:  # a mean over sentences: this batch's share of the accumulated batch's
                loss = accumulated_mean(loss, labels.shape[0], "sentences", num_items_in_batch, labels)
        else:
            loss = (
                classification_loss(logits, labels, self.num_labels, num_items_in_batch)
                if labels is not None
                else None
            )
        return TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )

    def _word_mask(self, word_mask, labels, attention_mask, inputs) -> torch.Tensor | None:
        """The CRF's word positions (B, T) as booleans, checked (`check_word_mask`): `word_mask`, else where
        `labels` are not -100; None without a CRF."""
        if self.crf is None:
            if word_mask is not None:
                raise ValueError("word_mask is read by the CRF only; this model has none (use_crf=False)")
            return None
        if labels is not None:  # a list would be read as word_mask `True`, or fail on .shape
            check_integer_labels(labels)
        if word_mask is None:
            if labels is None:
                raise ValueError(
                    "this tagger decodes words with a CRF (use_crf=True): pass word_mask (batch, tokens), 1 at the "
                    "first sub-token of each word, or labels (-100 on the other tokens); for a pipeline use "
                    "pipeline(..., pipeline_class=hf_ctx.SubwordTokenClassificationPipeline)"
                )
            source, word_mask = "labels", labels != IGNORE_INDEX
        else:
            source = "word_mask"
        check_word_mask(word_mask, attention_mask, word_mask.shape if inputs is None else inputs.shape[:2], source)
        if labels is not None and tuple(labels.shape) != tuple(word_mask.shape):
            raise ValueError(
                f"labels has shape {tuple(labels.shape)}, expected (batch, tokens) = {tuple(word_mask.shape)}"
            )
        return word_mask.bool()

    def _crf_logits_and_loss(self, emissions, word_mask, attention_mask, labels):
        """The CRF over each row's words, packed to the front: (logits (B, T, num_labels), loss or None)."""
        order, words = words_first(word_mask)
        packed = emissions.gather(1, order.unsqueeze(2).expand(-1, -1, emissions.shape[2]))
        packed_labels = None
        if labels is not None:
            packed_labels = labels.gather(1, order)
            check_gold_tags(self.crf, packed_labels, words, self.config)
        scores, loss = crf_logits_and_loss(self.crf, packed, words, packed_labels)
        # Each token takes the scores of the word it is in or follows (-1: before the first word).
        word_index = word_mask.long().cumsum(1) - 1
        logits = scores.gather(1, word_index.clamp(min=0).unsqueeze(2).expand(-1, -1, scores.shape[2]))
        outside = word_index < 0
        if attention_mask is not None:
            outside = outside | ~attention_mask.bool()
        # float32, as the CRF computes them: in half precision near-equal scores could swap the Viterbi tag.
        return logits.masked_fill(outside.unsqueeze(2), 0.0), loss


def words_first(word_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's word positions first, in order: `order` (B, S) token positions and the prefix mask (B, S) of
    the words among them, S = the most words of a row (at least 1; T where host syncs are not allowed)."""
    counts = word_mask.sum(1)
    width = int(counts.max()) if host_syncs_allowed(word_mask) else word_mask.shape[1]
    width = min(max(width, 1), word_mask.shape[1])
    order = torch.sort((~word_mask).int(), dim=1, stable=True).indices[:, :width]
    return order, torch.arange(width, device=word_mask.device) < counts.unsqueeze(1)


def span_labels(positions: torch.Tensor, length: int) -> torch.Tensor:
    """Span positions (B,) (or (B, 1)) as class labels over an input of `length` tokens. Spans past the (possibly
    truncated) input point at an ignored index, as in transformers; here they become IGNORE_INDEX, so that a batch
    of such spans has loss 0, not NaN. IGNORE_INDEX itself stays ignored (transformers clamps it to 0, the [CLS]
    token); other negative positions are refused where they enter (`check_span_positions`)."""
    positions = positions.reshape(-1)
    return positions.masked_fill((positions >= length) | (positions < 0), IGNORE_INDEX)


class CtxBertForQuestionAnswering(CtxBertPreTrainedModel):
    """BERT with span-start and span-end scores on every token (extractive QA, e.g. SQuAD)."""

    def __init__(self, config: CtxBertConfig):
        super().__init__(config)
        self.bert = CtxBertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def loss_items(self, inputs: dict) -> dict[str, torch.Tensor]:
        """The spans inside the input, of starts and of ends: the start and end losses are means over them."""
        tokens = inputs["input_ids"] if inputs.get("input_ids") is not None else inputs["inputs_embeds"]
        return {
            key: span_labels(inputs[key], tokens.shape[1]).ne(IGNORE_INDEX).sum()
            for key in ("start_positions", "end_positions")
            if torch.is_tensor(inputs.get(key))
        }

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        start_positions=None,
        end_positions=None,
        num_items_in_batch=None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> QuestionAnsweringModelOutput | tuple:
        r"""`start_positions`/`end_positions` (B,): answer span token indices; positions past the end and -100 are
        ignored (no loss), other negative positions refused.
        Returns `start_logits` and `end_logits`, each (B, T)."""
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).float().unbind(-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            check_span_positions(start_positions, "start_positions")
            check_span_positions(end_positions, "end_positions")
            length = start_logits.shape[1]
            # Each a mean over its spans inside the input: this batch's share of the accumulated batch's
            starts, ends = span_labels(start_positions, length), span_labels(end_positions, length)
            loss = (
                accumulated_mean(
                    classification_loss(start_logits, starts, length, name="start_positions"),
                    starts.ne(IGNORE_INDEX).sum(),
                    "start_positions",
                    num_items_in_batch,
                )
                + accumulated_mean(
                    classification_loss(end_logits, ends, length, name="end_positions"),
                    ends.ne(IGNORE_INDEX).sum(),
                    "end_positions",
                    num_items_in_batch,
                )
            ) / 2
        return QuestionAnsweringModelOutput(
            loss=loss,
            start_logits=start_logits,
            end_logits=end_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


class CtxBertForMultipleChoice(CtxBertPreTrainedModel):
    """BERT scoring C candidate continuations: inputs (B, C, T), `labels` (B,) the right choice, logits (B, C)."""

    def __init__(self, config: CtxBertConfig):
        super().__init__(config)
        self.bert = CtxBertModel(config)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        num_items_in_batch=None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MultipleChoiceModelOutput | tuple:
        num_choices = check_choice_inputs(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)

        def flat(t):  # (B, C, T, ...) -> (B * C, T, ...): every choice is one sequence for the encoder
            return None if t is None else t.reshape(-1, *t.shape[2:])

        outputs = self.bert(
            flat(input_ids),
            attention_mask=flat(attention_mask),
            token_type_ids=flat(token_type_ids),
            position_ids=flat(position_ids),
            inputs_embeds=flat(inputs_embeds),
            return_dict=True,
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.pooler_output)).view(-1, num_choices)
        loss = classification_loss(logits, labels, num_choices, num_items_in_batch) if labels is not None else None
        return MultipleChoiceModelOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


__all__ = [
    "CtxBertForMaskedLM",
    "CtxBertForMultipleChoice",
    "CtxBertForNextSentencePrediction",
    "CtxBertForPreTraining",
    "CtxBertForPreTrainingOutput",
    "CtxBertForQuestionAnswering",
    "CtxBertForSequenceClassification",
    "CtxBertForTokenClassification",
    "CtxBertModel",
    "CtxBertPreTrainedModel",
]
