"""TagLM (Peters et al., 2017, "Semi-supervised sequence tagging with bidirectional language models").

A biRNN-CRF tagger whose first layer's output is concatenated with the states of a pretrained, frozen
bidirectional language model (an hf_ctx ELMo biLM) before the second layer:

    word embedding ; character representation       (B, W, E + C)
    -> bidirectional RNN                            (B, W, 2R)
    -> concatenated with the biLM's chosen layers   (B, W, 2R + len(bilm_layers) * 2P)
    -> bidirectional RNN -> linear                  (B, W, num_labels)  "emissions"
    -> CRF

Shapes use B = batch, W = words, C = characters per word (50) unless stated, R = rnn_hidden_size,
P = the biLM's projection_dim.

The biLM is not trained with the tagger: its parameters have `requires_grad=False` (so `Trainer` gives them no
optimizer state), it runs under `torch.no_grad()` and stays in eval mode (no dropout) when the tagger trains.
Its weights are saved inside the TagLM checkpoint and its config inside TagLM's (`bilm_config`), so a saved
TagLM folder is complete on its own.

`logits` are the CRF's max-marginal scores (the best sequence score with tag j at word i), not the raw
emissions: their per-word argmax is the CRF's Viterbi decoding, so `Trainer`'s usual `compute_metrics`
(argmax over logits) and `pipeline("token-classification", pipeline_class=WordTokenClassificationPipeline)` report
what the CRF decodes. `TagLMModel` (what `AutoModel` loads from a tagger's folder) is the tagger without its
classifier and CRF: the second biRNN's states, from the same weights.
"""

import logging
from pathlib import Path

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutput, TokenClassifierOutput
from transformers.utils.generic import can_return_tuple

from .configuration_elmo import ElmoConfig
from .configuration_taglm import TagLMConfig
from .crf import ConditionalRandomField, crf_logits_and_loss, init_crf_weights, tagger_crf
from .input_checks import (
    check_bilm_hidden_states,
    check_character_ids,
    check_gold_tags,
    check_has_words,
    check_labels_shape,
    check_sentence_length,
    check_word_ids,
)
from .layers import checkpointed, run_packed_rnn
from .losses import AccumulatedBatchLossMixin, accumulated_mean
from .model_size import ParameterMemoryMixin
from .modeling_elmo import ElmoModel, FrozenBiLMMixin
from .remote_code import AutoMapMixin, shareable_name

logger = logging.getLogger(__name__)


class CharacterEncoder(nn.Module):
    """One vector per word from its character ids: CNN + max-pooling, or a bidirectional GRU.

    Input: (N, C) character ids of N words (ELMo's encoding: begin-of-word, bytes, end-of-word, padding).
    Output: (N, char_cnn_filters) for the CNN, (N, 2 * char_rnn_hidden_size) for the GRU.
    """

    def __init__(self, config: TagLMConfig):
        super().__init__()
        self.kind = config.char_representation
        self.padding_id = config.char_padding_id
        self.embeddings = nn.Embedding(config.n_characters, config.char_embedding_dim, padding_idx=0)
        if self.kind == "cnn":
            self.conv = nn.Conv1d(config.char_embedding_dim, config.char_cnn_filters, config.char_cnn_width)
            self.output_dim = config.char_cnn_filters
        else:
            self.rnn = nn.GRU(
                config.char_embedding_dim, config.char_rnn_hidden_size, batch_first=True, bidirectional=True
            )
            self.output_dim = 2 * config.char_rnn_hidden_size

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        embedded = self.embeddings(char_ids)  # (N, C, char_embedding_dim)
        if self.kind == "cnn":
            return self.conv(embedded.transpose(1, 2)).max(dim=2).values
        # The GRU reads the word's marks and bytes and stops before the padding characters.
        lengths = ((char_ids != 0) & (char_ids != self.padding_id)).sum(1).clamp(min=1)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, final = self.rnn(packed)  # (2, N, H): last forward state, last backward state
        return torch.cat([final[0], final[1]], dim=-1)


class TagLMPreTrainedModel(
    FrozenBiLMMixin, AutoMapMixin, ParameterMemoryMixin, AccumulatedBatchLossMixin, PreTrainedModel
):
    """Weight initialisation and loading for TagLM models, and the layers both share up to the second biRNN (the
    biLM frozen in both)."""

    config_class = TagLMConfig
    base_model_prefix = "taglm"
    main_input_name = "input_ids"
    # Gradient checkpointing recomputes the two biRNNs in the backward pass (the frozen biLM keeps nothing).
    supports_gradient_checkpointing = True
    # FSDP / `device_map` units; the biLM's own (`ElmoModel._no_split_modules`) are added by transformers. The CRF
    # stays with the model, which calls its unchecked methods (`log_likelihood`, `max_marginal_scores`), not its
    # forward.
    _no_split_modules = ["CharacterEncoder"]

    @torch.no_grad()
    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, (nn.Linear, nn.Conv1d)):
            init.xavier_uniform_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, (nn.GRU, nn.LSTM)):
            # Orthogonal recurrent weights keep gradients steady over long sentences.
            for name, param in module.named_parameters():
                if name.startswith("weight_ih"):
                    init.xavier_uniform_(param)
                elif name.startswith("weight_hh"):
                    init.orthogonal_(param)
                else:
                    init.zeros_(param)
        elif isinstance(module, ConditionalRandomField):
            init_crf_weights(module)

    def _build_encoder(self, config: TagLMConfig) -> None:
        """The layers up to the second biRNN, as attributes of the model itself (not a submodule), so that a
        tagger's checkpoint and a TagLMModel's have the same weight names."""
        self.word_embeddings = nn.Embedding(config.vocab_size, config.word_embedding_dim)
        self.char_encoder = CharacterEncoder(config)
        rnn_class = nn.GRU if config.rnn_type == "gru" else nn.LSTM
        token_dim = config.word_embedding_dim + self.char_encoder.output_dim
        self.first_rnn = rnn_class(token_dim, config.rnn_hidden_size, batch_first=True, bidirectional=True)

        self.bilm = None
        bilm_dim = 0
        if config.bilm_config is not None:
            bilm_config = ElmoConfig.from_dict(config.bilm_config)
            self.bilm = ElmoModel(bilm_config)
            if bilm_config.max_characters_per_token != config.max_characters_per_token:
                raise ValueError(
                    f"the biLM reads {bilm_config.max_characters_per_token} characters per word but "
                    f"max_characters_per_token={config.max_characters_per_token}"
                )
            # config.bilm_layers were checked against its layers (`TagLMConfig.check_fields_together`).
            bilm_dim = len(config.bilm_layers) * bilm_config.hidden_size
        self.second_rnn = rnn_class(
            2 * config.rnn_hidden_size + bilm_dim, config.rnn_hidden_size, batch_first=True, bidirectional=True
        )
        self.dropout = nn.Dropout(config.dropout)

    def frozen_bilm(self) -> nn.Module | None:
        return self.bilm

    def _encode(self, input_ids, mask, input_word_ids, bilm_hidden_states):
        """The token representation (B, W, E + C), the first biRNN's output concatenated with the biLM states,
        and the second biRNN's output (B, W, 2R), for inputs checked by `_validate`."""
        lengths = mask.sum(1)
        # Characters are encoded for real words only: padding words can be most of a batch.
        chars = torch.zeros(*mask.shape, self.char_encoder.output_dim, device=input_ids.device)
        chars = chars.to(self.word_embeddings.weight.dtype)
        if mask.any():
            chars[mask] = self.char_encoder(input_ids[mask]).to(chars.dtype)
        # Padding words may hold any id: only the words' ids were checked.
        tokens = torch.cat([self.word_embeddings(input_word_ids.masked_fill(~mask, 0)), chars], dim=-1)
        first = checkpointed(self, run_packed_rnn, self.first_rnn, self.dropout(tokens), lengths)
        if self.bilm is not None:
            if bilm_hidden_states is not None:
                states = bilm_hidden_states.unbind(dim=2)
            else:
                with torch.no_grad():
                    states = self.bilm.word_hidden_states(input_ids, mask)  # the inputs were checked above
            first = torch.cat([first, *(states[i].to(first.dtype) for i in self.config.bilm_layers)], dim=-1)
        second = checkpointed(self, run_packed_rnn, self.second_rnn, self.dropout(first), lengths)
        return tokens, first, second

    def _validate(self, input_ids, attention_mask, input_word_ids, labels, bilm_hidden_states=None) -> torch.Tensor:
        """`forward`'s inputs checked where they enter (`input_checks`): ELMo's checks of the character ids (TagLM
        reads the same encoding), then the word ids, labels and cached biLM states; the word mask (B, W)."""
        config = self.config
        n_characters = config.n_characters
        if self.bilm is not None:
            # The biLM reads the same ids and runs without checks of its own (`word_hidden_states`): its limits
            # are checked here. Its width equals the tagger's (see `__init__`).
            check_sentence_length(self.bilm.config, input_ids)
            n_characters = min(n_characters, self.bilm.config.char_cnn["n_characters"])
        mask = check_character_ids(input_ids, attention_mask, config.max_characters_per_token, n_characters)
        check_has_words(input_ids, "TagLM")
        if input_word_ids is None:
            raise ValueError("TagLM needs input_word_ids (batch, words): use an ElmoTokenizer with a word vocabulary")
        check_word_ids(config, input_word_ids, mask)
        if labels is not None:
            check_labels_shape(labels, mask)
            check_gold_tags(self.crf, labels, mask, config)
        if bilm_hidden_states is not None:
            if self.bilm is None:
                raise ValueError("bilm_hidden_states given, but this TagLM has no biLM (bilm_config is None)")
            check_bilm_hidden_states(self.bilm.config, bilm_hidden_states, mask)
        return mask


class TagLMModel(TagLMPreTrainedModel):
    """A TagLM tagger without its classifier and CRF: `AutoModel` on a tagger's folder loads this, with the
    tagger's weights (the same names), to give its second biRNN's states as word features.

    Inputs as `TagLMForTokenClassification`'s, without `labels`.

    Outputs (`BaseModelOutput`):
        last_hidden_state: (B, W, 2R) the second biRNN's output, 0 at padding words.
        hidden_states: with `output_hidden_states`, the token representation (B, W, E + C), the first RNN's
            output concatenated with the biLM states, and the second RNN's output (B, W, 2R).
    """

    gradient_checkpointing = False  # set by transformers' `gradient_checkpointing_enable`
    # A tagger's folder holds the head too; its weights are left out here by design.
    _keys_to_ignore_on_load_unexpected = [r"^classifier\.", r"^crf\."]

    def __init__(self, config: TagLMConfig):
        super().__init__(config)
        self._build_encoder(config)
        self.post_init()
        self._freeze_bilm()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        input_word_ids: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        bilm_hidden_states: torch.Tensor | None = None,
        **kwargs,
    ) -> BaseModelOutput | tuple:
        output_hidden_states = (
            self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        )
        mask = self._validate(input_ids, attention_mask, input_word_ids, None, bilm_hidden_states)
        tokens, first, second = self._encode(input_ids, mask, input_word_ids, bilm_hidden_states)
        return BaseModelOutput(
            last_hidden_state=second, hidden_states=(tokens, first, second) if output_hidden_states else None
        )


class TagLMForTokenClassification(TagLMPreTrainedModel):
    """TagLM: word + character representation, biRNN, frozen biLM states, biRNN, linear, CRF.

    Inputs come from an `ElmoTokenizer` with a word vocabulary (the biLM's, when there is a biLM):
        input_ids: (B, W, C) character ids of each word.
        attention_mask: (B, W) 1 on words, 0 on padding (words first); derived from `input_ids` when omitted.
        input_word_ids: (B, W) word ids in [0, vocab_size).
        labels: (B, W) gold tag ids; every word needs one (-100 only on padding).
        bilm_hidden_states: (B, W, L + 1, 2P), optional: the frozen biLM's layers for these words, computed
            beforehand (e.g. by `hf_ctx.data.bilm_cache`); the biLM does not run then.

    Outputs (`TokenClassifierOutput`):
        loss: mean over sentences of the CRF negative log-likelihood (when `labels` are given).
        logits: (B, W, num_labels) CRF max-marginal scores; `logits.argmax(-1)` is the Viterbi tag sequence.
        hidden_states: with `output_hidden_states`, the token representation (B, W, E + C), the first RNN's
            output concatenated with the biLM states, and the second RNN's output (B, W, 2R).
    """

    gradient_checkpointing = False  # set by transformers' `gradient_checkpointing_enable`

    def __init__(self, config: TagLMConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self._build_encoder(config)
        self.classifier = nn.Linear(2 * config.rnn_hidden_size, config.num_labels)
        self.crf = tagger_crf(config)
        self.post_init()
        self._freeze_bilm()

    @classmethod
    def from_bilm(cls, bilm: "str | Path | ElmoModel", config: TagLMConfig) -> "TagLMForTokenClassification":
        """A new tagger on top of a pretrained biLM.

        Args:
            bilm: an hf_ctx ELMo checkpoint folder (an `ElmoModel` or `ElmoForBiLM` checkpoint) or a loaded
                `ElmoModel`.
            config: the tagger's config; its `bilm_config` and `bilm_name_or_path` (the biLM's Hub id, or the
                name of its folder) are filled in here.
        """
        name = str(bilm) if isinstance(bilm, (str, Path)) else getattr(bilm, "name_or_path", None)
        if isinstance(bilm, (str, Path)):
            bilm = ElmoModel.from_pretrained(bilm)
        if not isinstance(bilm, ElmoModel):
            raise ValueError(f"bilm must be an ElmoModel or a path to an ELMo checkpoint, got {type(bilm).__name__}")
        # The tagger's config.json may be published: it names the biLM by its Hub id or folder name, never by a
        # local path.
        config.bilm_config = {**bilm.config.to_dict(), "_name_or_path": shareable_name(name) or ""}
        config.bilm_name_or_path = shareable_name(name)
        model = cls(config)
        model.bilm.load_state_dict(bilm.state_dict())
        return model

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        input_word_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        bilm_hidden_states: torch.Tensor | None = None,
        num_items_in_batch=None,
        **kwargs,
    ) -> TokenClassifierOutput | tuple:
        output_hidden_states = (
            self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        )
        mask = self._validate(input_ids, attention_mask, input_word_ids, labels, bilm_hidden_states)
        tokens, first, second = self._encode(input_ids, mask, input_word_ids, bilm_hidden_states)
        emissions = self.classifier(self.dropout(second))

        logits, loss = crf_logits_and_loss(self.crf, emissions, mask, labels)
        if loss is not None:  # a mean over sentences: this batch's share of the accumulated batch's
            loss = accumulated_mean(loss, labels.shape[0], "sentences", num_items_in_batch, labels)
        return TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=(tokens, first, second) if output_hidden_states else None
        )


__all__ = ["TagLMForTokenClassification", "TagLMPreTrainedModel"]
