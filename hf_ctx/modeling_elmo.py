"""ELMo (Peters et al., 2018): a character-based bidirectional language model whose layers give contextual word
vectors, as transformers models.

Shapes use B = batch, W = words, C = characters per word (50), P = `lstm["projection_dim"]`, L = LSTM layers,
V = word vocabulary size.

    character ids (B, W, C)
    -> <S> and </S> added around each sentence               (B, W + 2, C)
    -> character CNN + highway + projection: token layer     (B, W + 2, P)
    -> L-layer forward LSTM and L-layer backward LSTM        L x (B, W + 2, 2P)
    -> boundaries removed: L + 1 layers of word vectors      (L + 1) x (B, W, 2P)

`ElmoForBiLM` predicts each next word from the forward states and each previous word from the backward states
with a softmax shared by the two directions. `hf_ctx.tools.convert_elmo` loads the published bilm-tf weights.
"""

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutput, SequenceClassifierOutput, TokenClassifierOutput
from transformers.utils import ModelOutput
from transformers.utils.generic import can_return_tuple

from .configuration_elmo import ElmoConfig
from .crf import ConditionalRandomField, crf_logits_and_loss, init_crf_weights, tagger_crf
from .elmo_characters import BOS_TOKEN, EOS_TOKEN, sentence_boundary_char_ids, word_to_char_ids
from .input_checks import (
    IGNORE_INDEX,
    check_bilm_hidden_states,
    check_gold_tags,
    check_has_words,
    check_labels_shape,
    check_word_ids,
    elmo_input_mask,
)
from .layers import (
    CharacterCNN,
    Highway,
    LstmCellWithProjection,
    MaskedBatchNorm,
    ProjectedLstm,
    ScalarMix,
    WordSoftmax,
    run_packed_rnn,
)
from .losses import AccumulatedBatchLossMixin, accumulated_mean, classification_loss, sequence_classification_loss
from .model_size import ParameterMemoryMixin
from .remote_code import AutoMapMixin

# Two polynomial hashes of a word's character ids, modulo primes below 2**31, make one 62-bit key per word for the
# token-embedding cache. Every product and sum stays below 2**47, so int64 never overflows. A key only proposes a
# cache row: the row's character ids are compared in full before it is used, so a collision costs a CNN run,
# never a wrong vector.
_KEY_PRIMES = (2_147_483_647, 2_147_483_629)
_KEY_BASES = (263, 269)


def char_ids_key(char_ids: torch.Tensor) -> torch.Tensor:
    """A 62-bit int64 key of each word's character ids: (..., C) -> (...)."""
    width = char_ids.shape[-1]
    ids = char_ids.long()
    key = torch.zeros(ids.shape[:-1], dtype=torch.long, device=ids.device)
    for prime, base in zip(_KEY_PRIMES, _KEY_BASES):
        powers = torch.tensor([pow(base, width - 1 - j, prime) for j in range(width)], device=ids.device)
        key = key * (2**31) + (ids * powers).sum(dim=-1) % prime
    return key


class ElmoPreTrainedModel(AutoMapMixin, ParameterMemoryMixin, AccumulatedBatchLossMixin, PreTrainedModel):
    """Weight initialisation (bilm-tf's) and loading for ELMo models."""

    config_class = ElmoConfig
    base_model_prefix = "elmo"
    main_input_name = "input_ids"
    # Gradient checkpointing recomputes each biLSTM layer (`ProjectedLstm`) in the backward pass.
    supports_gradient_checkpointing = True
    # Units that FSDP shards whole and `device_map` keeps on one device: a biLSTM layer runs both directions'
    # weights in one batched matmul, so the stack stays together; the softmax stays with the model, which calls
    # its `loss` method rather than its forward.
    _no_split_modules = ["CharacterCNN", "ProjectedLstm"]
    # A biLM checkpoint (`ElmoForBiLM`) loaded as the encoder of a model without the language-model softmax: its
    # softmax weights are expected to be left out, not worth a load report.
    _keys_to_ignore_on_load_unexpected = [r"^(backward_)?softmax\."]

    @torch.no_grad()
    def _init_weights(self, module):
        # Modules are visited children first, so the ELMo layers below override the generic cases.
        if isinstance(module, nn.Linear):
            init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, TaskWordEmbedding):
            # Task word vectors start at about the scale of the ELMo vectors they sit beside (unit per feature).
            init.normal_(module.weight, std=1.0)
        elif isinstance(module, nn.LSTM):
            for name, param in module.named_parameters():
                if name.startswith("bias"):
                    init.zeros_(param)
                elif name.startswith("weight_hh"):
                    init.orthogonal_(param)
                else:
                    init.xavier_uniform_(param)
        elif isinstance(module, CharacterCNN):
            init.uniform_(module.char_embeddings.weight, -1.0, 1.0)
            if not getattr(module.char_embeddings.weight, "_is_hf_initialized", False):
                init.zeros_(module.char_embeddings.weight[0])
            for conv in module.convolutions:
                # Kim et al. (2016) for ReLU; Glorot's std for tanh, as bilm-tf.
                if module.activation is torch.tanh:
                    width, embedding_dim = conv.kernel_size[0], conv.in_channels
                    init.normal_(conv.weight, std=(1.0 / (width * embedding_dim)) ** 0.5)
                else:
                    init.uniform_(conv.weight, -0.05, 0.05)
                init.zeros_(conv.bias)
            if module.projection is not None:
                init.normal_(module.projection.weight, std=(1.0 / module.projection.in_features) ** 0.5)
                init.zeros_(module.projection.bias)
        elif isinstance(module, Highway):
            for layer in module.layers:
                dim = layer.in_features
                init.normal_(layer.weight, std=(1.0 / dim) ** 0.5)
                # A gate bias of -2 starts every highway layer close to the identity.
                if not getattr(layer.bias, "_is_hf_initialized", False):
                    init.zeros_(layer.bias)
                    layer.bias[dim:] = -2.0
        elif isinstance(module, LstmCellWithProjection):
            for param in (module.weight_ih, module.weight_hh, module.weight_hr):
                if param is not None:
                    init.xavier_uniform_(param)  # TensorFlow's default for LSTMCell kernels
            # TensorFlow adds 1 to the forget gate's bias when it runs; here the 1 is part of the bias.
            if not getattr(module.bias, "_is_hf_initialized", False):
                init.zeros_(module.bias)
                module.bias[module.cell_size : 2 * module.cell_size] = 1.0
        elif isinstance(module, MaskedBatchNorm):
            init.zeros_(module.running_mean)
            init.ones_(module.running_var)
        elif isinstance(module, ScalarMix):
            # Equal weights, or the fixed ones of `config.scalar_mix_parameters`.
            init.copy_(module.scalar_parameters, torch.tensor(module.initial_scalar_parameters))
            init.ones_(module.gamma)
        elif isinstance(module, WordSoftmax):
            init.normal_(module.weight, std=(1.0 / module.weight.shape[1]) ** 0.5)
            init.zeros_(module.bias)
        elif isinstance(module, ConditionalRandomField):
            init_crf_weights(module)
        elif isinstance(module, ElmoModel):
            # Fixed, not saved: a model loaded with `from_pretrained` gets it here.
            init.copy_(module.boundary_char_ids, module.boundary_char_ids_table())


class ElmoModel(ElmoPreTrainedModel):
    """The ELMo biLM: every layer's word vectors.

    Inputs (from `ElmoTokenizer`):
        input_ids: (B, W, C) character ids; all-zero rows are padding words.
        attention_mask: (B, W) 1 on words, 0 on padding, words first; derived from `input_ids` when omitted.

    Output (`BaseModelOutput`):
        last_hidden_state: (B, W, 2P) the top biLSTM layer, [forward ; backward], zero at padding.
        hidden_states (with `output_hidden_states`): L + 1 tensors (B, W, 2P): the token layer (its P features
            twice, to match the width of the others) and each biLSTM layer, one to one with the input words.

    An empty sentence (no words) gets no vectors; its neighbours in the batch are unaffected. The LSTMs start
    from zero states for every batch (the original TensorFlow model carries states over between batches).
    """

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        char_cnn, lstm = config.char_cnn, config.lstm
        self.char_cnn = CharacterCNN(
            n_characters=char_cnn["n_characters"],
            embedding_dim=char_cnn["embedding"]["dim"],
            filters=char_cnn["filters"],
            n_highway=char_cnn["n_highway"],
            output_dim=lstm["projection_dim"],
            activation=char_cnn["activation"],
        )
        self.encoder = ProjectedLstm(
            input_size=lstm["projection_dim"],
            cell_size=lstm["dim"],
            projection_size=lstm["projection_dim"],
            num_layers=lstm["n_layers"],
            cell_clip=lstm["cell_clip"],
            proj_clip=lstm["proj_clip"],
            use_skip_connections=lstm["use_skip_connections"],
            dropout=config.dropout,
        )
        self.register_buffer("boundary_char_ids", self.boundary_char_ids_table(), persistent=False)
        # The token-embedding cache (see `cache_token_embeddings`): derived from the weights, never saved.
        self.register_buffer("token_cache_keys", None, persistent=False)  # (V,) sorted `char_ids_key`s
        self.register_buffer("token_cache_char_ids", None, persistent=False)  # (V, C) int16, in key order
        self.register_buffer("token_cache_embeddings", None, persistent=False)  # (V, P)
        self._token_cache_weights = None  # `_char_cnn_state()` when the embeddings were computed
        self.post_init()

    def boundary_char_ids_table(self) -> torch.Tensor:
        """The character ids of <S> and </S>: (2, C)."""
        return torch.tensor(sentence_boundary_char_ids(self.config.max_characters_per_token))

    # --- token-embedding cache ------------------------------------------------------------------------------

    @torch.no_grad()
    def cache_token_embeddings(self, words, batch_size: int = 4096) -> int:
        """Compute the token layer (character CNN, highway, projection) of `words` once and look it up afterwards.

        bilm-tf does this for its test-time vocabulary: the token layer depends on the word alone, so for a fixed
        vocabulary it needs computing only once. Afterwards, words of the cache skip the character CNN and other
        words still go through it; outputs are those of the uncached model (same values up to float rounding,
        1e-6). `<S>` and `</S>` are always cached. Calling it again replaces the cache; `clear_token_cache` drops
        it. Memory: V x P floats (the original ELMo: 2 KB a word).

        The cache is not saved with the model (its buffers are not persistent). It is recomputed for the same
        words before its next use whenever the character CNN's weights change (an optimizer step, `load_state_dict`,
        in-place edits) or move to another device or dtype. While gradients are wanted for the CNN (training with
        `requires_grad` parameters), the CNN runs and the cache is not used.

        words: an iterable of words (strings). Returns the number of distinct words cached, boundaries included.
        """
        if isinstance(words, str):
            raise ValueError("cache_token_embeddings takes an iterable of words, not one string")
        width = self.config.max_characters_per_token
        distinct = {word_to_char_ids(BOS_TOKEN, width): None, word_to_char_ids(EOS_TOKEN, width): None}
        for index, word in enumerate(words):
            if not isinstance(word, str) or not word:
                raise ValueError(f"cache_token_embeddings: word {index} must be a non-empty string, got {word!r}")
            distinct[word_to_char_ids(word, width)] = None
        char_ids = torch.tensor(list(distinct), dtype=torch.long, device=self.boundary_char_ids.device)
        keys, order = torch.sort(char_ids_key(char_ids), stable=True)
        # Two different words with one key (unlikely): keep the first; the other one runs through the CNN.
        first = torch.ones_like(keys, dtype=torch.bool)
        first[1:] = keys[1:] != keys[:-1]
        self.token_cache_keys = keys[first]
        self.token_cache_char_ids = char_ids[order[first]].to(torch.int16)
        self._compute_token_cache(batch_size)
        return len(self.token_cache_keys)

    def clear_token_cache(self):
        """Drop the token-embedding cache: every word goes through the character CNN again."""
        self.token_cache_keys = self.token_cache_char_ids = self.token_cache_embeddings = None
        self._token_cache_weights = None

    def _char_cnn_state(self) -> tuple:
        """What identifies the character CNN's current weights: each parameter's storage, version counter (bumped
        by every in-place change), dtype and device."""
        return tuple((p.data_ptr(), p._version, p.dtype, p.device) for p in self.char_cnn.parameters())

    @torch.no_grad()
    def _compute_token_cache(self, batch_size: int = 4096):
        char_ids = self.token_cache_char_ids.long()
        self.token_cache_embeddings = torch.cat([self.char_cnn(chunk) for chunk in char_ids.split(batch_size)])
        self._token_cache_weights = self._char_cnn_state()

    def token_embeddings(self, char_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The token layer: (B, T, C) character ids and their mask (B, T) -> (B, T, P), zero where the mask is 0.

        With a token-embedding cache, cached words are looked up and only the others run through the CNN.
        """
        cnn_needs_grad = torch.is_grad_enabled() and any(p.requires_grad for p in self.char_cnn.parameters())
        if self.token_cache_keys is None or cnn_needs_grad:
            return self.char_cnn(char_ids) * mask.unsqueeze(-1)
        if self._token_cache_weights != self._char_cnn_state():
            self._compute_token_cache()  # the weights changed since the cache was computed
        batch, steps, width = char_ids.shape
        flat, real = char_ids.reshape(-1, width), mask.reshape(-1)
        keys, wanted = self.token_cache_keys, char_ids_key(flat)
        row = torch.searchsorted(keys, wanted).clamp(max=len(keys) - 1)
        hit = real & (keys[row] == wanted) & (self.token_cache_char_ids[row] == flat).all(dim=-1)
        cached = self.token_cache_embeddings
        tokens = cached.new_zeros(flat.shape[0], cached.shape[-1])
        tokens[hit] = cached[row[hit]]
        miss = real & ~hit
        if miss.any():
            tokens[miss] = self.char_cnn(flat[miss]).to(tokens.dtype)
        return tokens.view(batch, steps, -1)

    def bilm_layers(self, input_ids: torch.Tensor, mask: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Run the biLM on sentences with their boundaries added.

        input_ids: (B, W, C); mask: (B, W) booleans. Returns L + 1 layers (B, W + 2, 2P) for the positions
        [<S>, words, </S>, padding] and their mask (B, W + 2).
        """
        batch, words, _ = input_ids.shape
        lengths = mask.sum(dim=1)
        chars = input_ids.new_zeros(batch, words + 2, input_ids.shape[-1])
        chars[:, 1 : words + 1] = input_ids * mask.unsqueeze(-1)
        rows = torch.arange(batch, device=input_ids.device)
        chars[:, 0] = self.boundary_char_ids[0]
        chars[rows, lengths + 1] = self.boundary_char_ids[1]
        mask_with_boundaries = torch.arange(words + 2, device=mask.device)[None, :] < (lengths + 2)[:, None]

        tokens = self.token_embeddings(chars, mask_with_boundaries)
        layers = [torch.cat([tokens, tokens], dim=-1)] + self.encoder(tokens, mask_with_boundaries)
        return layers, mask_with_boundaries

    def word_layers(self, layers: list[torch.Tensor], mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """`bilm_layers`' L + 1 layers (B, W + 2, 2P) -> the words' vectors, (B, W, 2P) each, zero at padding."""
        keep = mask.unsqueeze(-1)
        # Drop <S> (position 0) and the tail; </S> sits inside the tail of shorter sentences, hence the mask.
        return tuple(layer[:, 1:-1] * keep.to(layer.dtype) for layer in layers)

    def word_hidden_states(self, input_ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The L + 1 layers' vectors of the words, (B, W, 2P) each, zero at padding, without the input checks of
        `forward`: for the models that hold this biLM, which check their inputs where they enter.

        input_ids: (B, W, C) character ids; mask: (B, W) booleans, as `elmo_input_mask` returns it.
        """
        return self.word_layers(self.bilm_layers(input_ids, mask)[0], mask)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput | tuple:
        output_hidden_states = (
            self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        )
        mask = elmo_input_mask(self.config, input_ids, attention_mask)
        hidden_states = self.word_hidden_states(input_ids, mask)
        return BaseModelOutput(
            last_hidden_state=hidden_states[-1], hidden_states=hidden_states if output_hidden_states else None
        )


@dataclass
class ElmoForBiLMOutput(ModelOutput):
    """
    Output of [`ElmoForBiLM`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*): mean of the forward and backward LM losses (with
            `input_word_ids`); `exp(loss)` is the average perplexity bilm-tf reports.
        forward_loss, backward_loss (`torch.FloatTensor` of shape `()`, *optional*): mean negative log-likelihood
            per predicted word of the forward LM (each next word, `</S>` included) and of the backward LM (each
            previous word, `<S>` included).
        forward_logits (`torch.FloatTensor` of shape `(B, W + 1, V)`, *optional*): row i scores the token after
            the first i words of the sentence (the words, then `</S>` at row = length); given without
            `input_word_ids` or with `return_logits=True`.
        backward_logits (`torch.FloatTensor` of shape `(B, W + 1, V)`, *optional*): row i scores the token before
            word i+1 (`<S>` at row 0, then the words).
        hidden_states (`tuple(torch.FloatTensor)`, *optional*): as [`ElmoModel`]'s.
    """

    loss: torch.FloatTensor | None = None
    forward_loss: torch.FloatTensor | None = None
    backward_loss: torch.FloatTensor | None = None
    forward_logits: torch.FloatTensor | None = None
    backward_logits: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


class ElmoForBiLM(ElmoPreTrainedModel):
    """The ELMo biLM with its language-model softmax, for pretraining.

    Inputs: `input_ids` and `attention_mask` as for [`ElmoModel`], and `input_word_ids` (B, W): the words' ids in
    the tokenizer's vocabulary, the LM targets. The forward LM predicts w_1 ... w_n, `</S>` from `<S>`, w_1 ...
    w_n; the backward LM predicts `<S>`, w_1 ... w_n from w_1 ... w_n, `</S>`. Both use the top biLSTM layer.

    Output: [`ElmoForBiLMOutput`]. With `config.num_sampled` > 0, training uses a sampled softmax.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        if config.vocab_size is None:
            raise ValueError("ElmoForBiLM needs config.vocab_size (the word vocabulary size of the tokenizer)")
        self.elmo = ElmoModel(config)
        self.dropout = nn.Dropout(config.dropout)
        self.softmax = WordSoftmax(config.projection_dim, config.vocab_size, config.num_sampled)
        self.backward_softmax = (
            None if config.share_softmax else WordSoftmax(config.projection_dim, config.vocab_size, config.num_sampled)
        )
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        input_word_ids: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_logits: bool | None = None,
        num_items_in_batch=None,
        **kwargs,
    ) -> ElmoForBiLMOutput | tuple:
        output_hidden_states = (
            self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        )
        return_logits = input_word_ids is None if return_logits is None else return_logits
        mask = elmo_input_mask(self.config, input_ids, attention_mask)
        layers, mask_with_boundaries = self.elmo.bilm_layers(input_ids, mask)
        size = self.config.projection_dim
        top = self.dropout(layers[-1])
        forward_states = top[:, :-1, :size]  # after <S>, w_1 ... w_W: predict the next token
        backward_states = top[:, 1:, size:]  # at w_1 ... w_W, </S>: predict the previous token
        predicted = mask_with_boundaries[:, 1:]  # (B, W + 1): the predictions each sentence has
        backward_softmax = self.backward_softmax if self.backward_softmax is not None else self.softmax

        loss = forward_loss = backward_loss = None
        if input_word_ids is not None:
            tokens = self._targets(input_word_ids, mask)
            forward_targets = tokens[:, 1:].masked_fill(~predicted, IGNORE_INDEX)
            backward_targets = tokens[:, :-1].masked_fill(~predicted, IGNORE_INDEX)
            forward_pair = (forward_states.reshape(-1, size), forward_targets.reshape(-1))
            backward_pair = (backward_states.reshape(-1, size), backward_targets.reshape(-1))
            if self.backward_softmax is None:  # one call: one gather of the softmax rows for both directions
                forward_loss, backward_loss = self.softmax.losses([forward_pair, backward_pair])
            else:
                forward_loss, backward_loss = self.softmax.loss(*forward_pair), backward_softmax.loss(*backward_pair)
            # Means over the predictions (words + 1 per sentence), as many in each direction (`loss_items`)
            predictions = predicted.sum()
            forward_loss = accumulated_mean(forward_loss, predictions, "predictions", num_items_in_batch)
            backward_loss = accumulated_mean(backward_loss, predictions, "predictions", num_items_in_batch)
            loss = (forward_loss + backward_loss) / 2
        forward_logits = backward_logits = None
        if return_logits:
            forward_logits = self.softmax(forward_states) * predicted.unsqueeze(-1)
            backward_logits = backward_softmax(backward_states) * predicted.unsqueeze(-1)

        return ElmoForBiLMOutput(
            loss=loss,
            forward_loss=forward_loss,
            backward_loss=backward_loss,
            forward_logits=forward_logits,
            backward_logits=backward_logits,
            hidden_states=self.elmo.word_layers(layers, mask) if output_hidden_states else None,
        )

    def loss_items(self, inputs: dict) -> dict[str, torch.Tensor]:
        """The predictions a batch's loss is a mean over, in each direction: its words and one sentence boundary per
        sentence (`CtxTrainer` counts them: the batches have no `labels` that `Trainer` could count)."""
        mask = elmo_input_mask(self.config, inputs["input_ids"], inputs.get("attention_mask"))
        return {"predictions": mask.sum() + mask.shape[0]}

    def _targets(self, input_word_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[<S>, w_1 ... w_n, </S>, padding] word ids: (B, W + 2)."""
        check_word_ids(self.config, input_word_ids, mask)
        batch, words = mask.shape
        tokens = input_word_ids.new_full((batch, words + 2), self.config.eos_token_id, dtype=torch.long)
        tokens[:, 0] = self.config.bos_token_id
        tokens[:, 1 : words + 1] = torch.where(mask, input_word_ids.long(), self.config.eos_token_id)
        return tokens


class FrozenBiLMMixin:
    """For models that hold a pretrained biLM they do not train (ELMo task models, TagLM): its parameters get no
    gradients, hence no optimizer state, and it stays in eval mode (no dropout) while the model trains.

    A model mixes this in before its `PreTrainedModel` base class, returns the frozen module from `frozen_bilm`
    (None when nothing is frozen) and calls `_freeze_bilm` at the end of `__init__`. `from_pretrained` freezes
    again, because loading makes every floating-point parameter trainable.
    """

    def frozen_bilm(self) -> nn.Module | None:
        raise NotImplementedError

    def _freeze_bilm(self):
        bilm = self.frozen_bilm()
        if bilm is not None:
            bilm.requires_grad_(False)

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        loaded = super().from_pretrained(*args, **kwargs)
        (loaded[0] if isinstance(loaded, tuple) else loaded)._freeze_bilm()  # a tuple with output_loading_info
        return loaded

    def train(self, mode: bool = True):
        super().train(mode)
        bilm = self.frozen_bilm()
        if bilm is not None:
            bilm.eval()
        return self


class TaskWordEmbedding(nn.Embedding):
    """The task models' trainable word vectors: a type of their own, so that `_init_weights` initialises them and
    leaves the character embeddings to the character CNN's own scheme."""


class ElmoTaskModel(FrozenBiLMMixin, ElmoPreTrainedModel):
    """What the ELMo task models share: the biLM (frozen unless `config.freeze_bilm` is False), a scalar mix of
    its layers, optionally trainable word vectors concatenated to it (`config.task_word_embedding_size`), dropout,
    and a bidirectional LSTM over the result (`config.task_hidden_size`; none when 0); with
    `config.num_output_representations=2` a second scalar mix (`output_scalar_mix`) concatenated to the LSTM's
    output; a linear classifier on top, and the forward pass.

    A task model calls `_add_classifier` at the end of its `__init__`, names its output class in `output_class`,
    and defines `_logits_and_loss`: what it makes of the word features.
    """

    output_class: type[ModelOutput]

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.elmo = ElmoModel(config)
        self.bilm_norm = None
        if config.bilm_state_norm != "none":
            self.bilm_norm = MaskedBatchNorm(
                config.num_output_layers, config.hidden_size, scale=config.bilm_state_norm == "standardize"
            )
        self.scalar_mix = self._scalar_mix(config)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.word_embeddings = None
        self.feature_size = config.hidden_size
        if config.task_word_embedding_size > 0:
            self.word_embeddings = TaskWordEmbedding(config.vocab_size, config.task_word_embedding_size)
            self.feature_size += config.task_word_embedding_size
        self.task_encoder = None
        if config.task_hidden_size > 0:
            self.task_encoder = nn.LSTM(
                self.feature_size, config.task_hidden_size, batch_first=True, bidirectional=True
            )
            self.feature_size = 2 * config.task_hidden_size
        self.output_scalar_mix = None
        if config.num_output_representations == 2:
            self.output_scalar_mix = self._scalar_mix(config)
            self.feature_size += config.hidden_size

    @staticmethod
    def _scalar_mix(config: ElmoConfig) -> ScalarMix:
        """A scalar mix of the biLM layers: learned, or fixed to `config.scalar_mix_parameters` (AllenNLP's
        semantics: neither the weights nor gamma train)."""
        return ScalarMix(
            config.num_output_layers,
            do_layer_norm=config.scalar_mix_layer_norm,
            initial_scalar_parameters=config.scalar_mix_parameters,
            trainable=config.scalar_mix_parameters is None,
        )

    def _freeze_bilm(self):
        """The biLM frozen (`FrozenBiLMMixin`), and fixed scalar mixes too: loading makes them trainable again."""
        super()._freeze_bilm()
        for mix in self.scalar_mixes():
            if not mix.trainable:
                mix.requires_grad_(False)

    def scalar_mixes(self) -> list[ScalarMix]:
        """The model's scalar mixes of the biLM layers, one per output representation: the one the task LSTM
        reads, then the one beside its output (with `config.num_output_representations=2`)."""
        return [self.scalar_mix] + ([self.output_scalar_mix] if self.output_scalar_mix is not None else [])

    def _add_classifier(self, input_size: int):
        """Add `classifier`, a linear layer from `input_size` features to `config.num_labels`, then initialise
        the weights and freeze the biLM: the end of a task model's `__init__`."""
        self.num_labels = self.config.num_labels
        self.classifier = nn.Linear(input_size, self.config.num_labels)
        self.post_init()
        self._freeze_bilm()

    def frozen_bilm(self) -> nn.Module | None:
        return self.elmo if self.config.freeze_bilm else None

    def word_features(
        self, input_ids, attention_mask, input_word_ids=None, bilm_hidden_states=None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, W, feature_size) task features of each word, and the word mask (B, W)."""
        mask = elmo_input_mask(self.config, input_ids, attention_mask)
        check_has_words(input_ids, type(self).__name__)
        if bilm_hidden_states is not None:
            if not self.config.freeze_bilm:
                raise ValueError("bilm_hidden_states replace a frozen biLM's output, but freeze_bilm=False")
            check_bilm_hidden_states(self.config, bilm_hidden_states, mask)
            layers = bilm_hidden_states.unbind(dim=2)
        else:
            with torch.set_grad_enabled(torch.is_grad_enabled() and not self.config.freeze_bilm):
                layers = self.elmo.word_hidden_states(input_ids, mask)  # the inputs were checked above
        if self.bilm_norm is not None:
            layers = self.bilm_norm(layers, mask)
        features = self.scalar_mix(layers, mask)
        if self.word_embeddings is not None:
            if input_word_ids is None:
                raise ValueError(
                    "this model embeds words (task_word_embedding_size > 0): pass input_word_ids, which "
                    "an ElmoTokenizer with a word vocabulary returns"
                )
            check_word_ids(self.config, input_word_ids, mask)
            # Padding words may hold any id: only the words' ids were checked.
            features = torch.cat([features, self.word_embeddings(input_word_ids.masked_fill(~mask, 0))], dim=-1)
        features = self.dropout(features)
        if self.task_encoder is not None:
            features = self.dropout(run_packed_rnn(self.task_encoder, features, mask.sum(dim=1)))
        if self.output_scalar_mix is not None:
            features = torch.cat([features, self.dropout(self.output_scalar_mix(layers, mask))], dim=-1)
        return features, mask

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
    ) -> ModelOutput | tuple:
        """The task's `output_class` with `logits`, `loss` when `labels` are given, and the word features as
        `hidden_states` with `output_hidden_states`; see the task model for the shapes. `input_word_ids` (B, W):
        word ids from the tokenizer, used with `config.task_word_embedding_size` only. `bilm_hidden_states`
        (B, W, L + 1, 2P): the frozen biLM's layers for these words, computed beforehand (e.g. by
        `hf_ctx.data.bilm_cache`); the biLM does not run then."""
        features, mask = self.word_features(input_ids, attention_mask, input_word_ids, bilm_hidden_states)
        logits, loss = self._logits_and_loss(features, mask, labels, num_items_in_batch)
        return self.output_class(loss=loss, logits=logits, hidden_states=(features,) if output_hidden_states else None)

    def _logits_and_loss(
        self, features: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor | None, num_items_in_batch=None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(logits, loss or None) from the word features (B, W, feature_size) and word mask (B, W); the loss is
        normalised over `num_items_in_batch` labels when given (see `losses.AccumulatedBatchLossMixin`)."""
        raise NotImplementedError


class ElmoForSequenceClassification(ElmoTaskModel):
    """ELMo for sentence classification or regression: the task features of the words, max- and mean-pooled over
    the sentence, then a linear classifier.

    Inputs: `input_ids`, `attention_mask` as for [`ElmoModel`]; `labels` as for BERT's sequence classification
    (see `losses.sequence_classification_loss`): (B,) class ids (-100: no loss), (B,) or (B, num_labels) floats
    for regression, or (B, num_labels) multi-hot floats for multi-label problems.
    Output: `SequenceClassifierOutput` with `logits` (B, num_labels).
    """

    output_class = SequenceClassifierOutput

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self._add_classifier(2 * self.feature_size)  # max- and mean-pooled features side by side

    def _logits_and_loss(self, features, mask, labels, num_items_in_batch=None):
        keep = mask.unsqueeze(-1)
        mean = (features * keep).sum(1) / keep.sum(1).clamp(min=1)
        largest = features.masked_fill(~keep, torch.finfo(features.dtype).min).amax(dim=1)
        largest = torch.where(keep.any(dim=1), largest, torch.zeros_like(largest))  # an empty sentence pools to 0
        logits = self.classifier(torch.cat([largest, mean], dim=-1))
        loss = None
        if labels is not None:
            loss = sequence_classification_loss(self.config, logits, labels, num_items_in_batch)
        return logits, loss


class ElmoForTokenClassification(ElmoTaskModel):
    """ELMo for word tagging (e.g. named entities): the task features of each word, then a linear classifier.

    Inputs: `input_ids`, `attention_mask` as for [`ElmoModel`]; `labels` (B, W): tag ids, -100 where no loss
    is wanted (padding). Output: `TokenClassifierOutput` with `logits` (B, W, num_labels).

    With `config.use_crf`, a linear-chain CRF (`crf.ConditionalRandomField`, under the transitions
    `config.tag_scheme` allows) decodes the words, as TagLM does: every word then needs a label (-100 only on
    padding), the loss is the mean over sentences of the CRF negative log-likelihood, and `logits` are the CRF
    max-marginal scores, whose argmax is the Viterbi tag sequence (0 on padding).
    """

    output_class = TokenClassifierOutput

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.crf = tagger_crf(config) if config.use_crf else None
        self._add_classifier(self.feature_size)

    def _logits_and_loss(self, features, mask, labels, num_items_in_batch=None):
        if labels is not None:
            check_labels_shape(labels, mask)
        logits = self.classifier(features)
        if self.crf is not None:
            if labels is not None:
                check_gold_tags(self.crf, labels, mask, self.config)
            logits, loss = crf_logits_and_loss(self.crf, logits, mask, labels)
            if loss is not None:  # a mean over sentences: this batch's share of the accumulated batch's
                loss = accumulated_mean(loss, labels.shape[0], "sentences", num_items_in_batch, labels)
            return logits, loss
        loss = None
        if labels is not None:
            labels = labels.masked_fill(~mask, IGNORE_INDEX)
            loss = classification_loss(logits, labels, self.num_labels, num_items_in_batch)
        return logits, loss


__all__ = [
    "FrozenBiLMMixin",
    "ElmoForBiLM",
    "ElmoForBiLMOutput",
    "ElmoForSequenceClassification",
    "ElmoForTokenClassification",
    "ElmoModel",
    "ElmoPreTrainedModel",
]
