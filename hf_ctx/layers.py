"""Reusable layers for contextual word representations: ELMo's character CNN and highway layers, LSTMs with
projected and clipped states, the scalar mix of layers, and a word softmax with a sampled option.

Shapes use B = batch, T = time steps (words), C = characters per word, H = LSTM cell size, P = projected state
size. Sequences are left-aligned: the first `lengths[b]` steps of row b are real, the rest padding.
"""

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .configuration_checks import finite_numbers
from .input_checks import IGNORE_INDEX, host_syncs_allowed

ACTIVATIONS = {"relu": F.relu, "tanh": torch.tanh}


class Highway(nn.Module):
    """Highway layers (Srivastava et al., 2015): `y = g * relu(A x) + (1 - g) * x` with the gate
    `g = sigmoid(B x)`. One `nn.Linear` per layer computes `[A x ; B x]` in a single matmul.

    Input and output: (..., dim). With `num_layers=0` it is the identity.
    """

    def __init__(self, dim: int, num_layers: int = 1, activation: str = "relu"):
        super().__init__()
        self.activation = ACTIVATIONS[activation]
        self.layers = nn.ModuleList(nn.Linear(dim, 2 * dim) for _ in range(num_layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            transformed, gate = layer(x).chunk(2, dim=-1)
            gate = torch.sigmoid(gate)
            x = gate * self.activation(transformed) + (1 - gate) * x
        return x


class CharacterCNN(nn.Module):
    """ELMo's context-independent token representation from a word's character ids (Kim et al., 2016).

    Character embeddings -> one convolution per filter width, max-pooled over positions, then the activation ->
    concatenated -> highway layers -> a linear projection to `output_dim` (none when the filters already give
    `output_dim` features, as in bilm-tf). Character id 0 means "no word": its embedding is fixed at zero.

    A word's vector depends on its characters alone, so the layer runs once per distinct word of the input and
    copies the result to each occurrence (text repeats its frequent words, and padding rows are one word); the
    gradients sum over the occurrences, as they would through one run per occurrence. It convolves only as many
    characters as the batch's longest word needs (`drop_repeated_tails`). Where tensor values may not be read
    during the pass (under `torch.compile`, on XLA) every occurrence runs over all C characters.

    Input: (..., C) character ids. Output: (..., output_dim).
    """

    def __init__(
        self,
        n_characters: int,
        embedding_dim: int,
        filters: Sequence[Sequence[int]],
        n_highway: int,
        output_dim: int,
        activation: str = "relu",
    ):
        super().__init__()
        self.char_embeddings = nn.Embedding(n_characters, embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(nn.Conv1d(embedding_dim, count, width) for width, count in filters)
        self.activation = ACTIVATIONS[activation]
        n_filters = sum(count for _, count in filters)
        self.highway = Highway(n_filters, n_highway)
        self.projection = nn.Linear(n_filters, output_dim) if n_filters != output_dim else None
        self.output_dim = output_dim

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        leading = char_ids.shape[:-1]
        flat = char_ids.reshape(-1, char_ids.shape[-1])
        if flat.shape[0] > 0 and host_syncs_allowed(flat):
            distinct, occurrences = torch.unique(flat, dim=0, return_inverse=True)
            features = self.encode_words(self.drop_repeated_tails(distinct))[occurrences]
        else:
            features = self.encode_words(flat)
        return features.view(*leading, self.output_dim)

    def drop_repeated_tails(self, char_ids: torch.Tensor) -> torch.Tensor:
        """The leading columns of (N, C) character ids that every max-pooled score needs: (N, C) -> (N, C').

        The windows lying wholly in a row's trailing run of one character (ELMo's padding characters after the
        word, a padding word's zeros) all score alike, so one such window per filter width keeps every maximum;
        the columns after it are dropped. Its gradients equal those of the full row: a tied maximum's gradient
        goes to one window, and tied windows are identical."""
        width = char_ids.shape[-1]
        differs = char_ids != char_ids[:, -1:]
        run_starts = (differs * torch.arange(1, width + 1, device=char_ids.device)).amax(dim=-1)
        longest_filter = max(conv.kernel_size[0] for conv in self.convolutions)
        return char_ids[:, : min(width, int(run_starts.max()) + longest_filter)]

    def encode_words(self, char_ids: torch.Tensor) -> torch.Tensor:
        """The layer on each row: (N, C) character ids -> (N, output_dim)."""
        embedded = self.char_embeddings(char_ids).transpose(1, 2)  # (N, E, C)
        features = torch.cat(
            [self.activation(conv(embedded).max(dim=-1).values) for conv in self.convolutions], dim=-1
        )
        features = self.highway(features)
        if self.projection is not None:
            features = self.projection(features)
        return features


def sigmoid_gates_first(weight: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Reorder LSTM gate blocks along `dim` from PyTorch's (input, forget, cell, output) to (input, forget,
    output, cell): the three sigmoid gates side by side, so that one `sigmoid` covers them in each step."""
    input_gate, forget_gate, cell_input, output_gate = weight.chunk(4, dim=dim)
    return torch.cat([input_gate, forget_gate, output_gate, cell_input], dim=dim)


def lstm_projection_step(gates_x, h, c, weight_hh_t, weight_hr_t, cell_clip, proj_clip):
    """One time step of D independent LSTMs with clipped cells and clipped projected states.

    gates_x: (D, B, 4H) input contributions and biases for this step, gate order (input, forget, output, cell)
    (see `sigmoid_gates_first`); h: (D, B, P); c: (D, B, H); weight_hh_t: (D, P, 4H) in the same gate order;
    weight_hr_t: (D, H, P) or None (no projection, P = H). Returns the new (h, c).

    Small on purpose, because it runs once per word and each op is a kernel launch on a GPU: one batched matmul
    for the recurrence, one sigmoid for the three gates, eight elementwise ops in all (a compiler fuses them
    into one kernel), one batched matmul for the projection; and about half the plain cell's backward ops.
    """
    gates = torch.baddbmm(gates_x, h, weight_hh_t)
    cell_size = c.shape[-1]
    # One split, not two slices: its backward is one concatenation instead of two zero-filled copies.
    sigmoid_gates, cell_input = gates.split([3 * cell_size, cell_size], dim=-1)
    input_gate, forget_gate, output_gate = torch.sigmoid(sigmoid_gates).chunk(3, dim=-1)
    c = torch.addcmul(forget_gate * c, input_gate, torch.tanh(cell_input))
    # hardtanh is clamp with a one-kernel backward (clamp's takes five ops); they differ only in the gradient
    # at exactly +-clip, a point of measure zero.
    if cell_clip is not None:
        c = F.hardtanh(c, -cell_clip, cell_clip)
    h = output_gate * torch.tanh(c)
    if weight_hr_t is not None:
        h = torch.bmm(h, weight_hr_t)
        if proj_clip is not None:
            h = F.hardtanh(h, -proj_clip, proj_clip)
    return h, c


def lstm_with_projection_scan(gates_x, weight_hh, weight_hr, cell_clip=None, proj_clip=None):
    """Run D independent LSTMs with projection and clipping over T steps from zero states.

    gates_x: (T, D, B, 4H) input contributions and biases of every step, computed beforehand in one matmul, gate
    order PyTorch's; weight_hh: (D, 4H, P); weight_hr: (D, P, H) or None. Returns the states h: (T, D, B, P).
    """
    return _scan_sigmoid_gates_first(
        sigmoid_gates_first(gates_x, dim=-1), sigmoid_gates_first(weight_hh, dim=1), weight_hr, cell_clip, proj_clip
    )


def _scan_sigmoid_gates_first(gates_x, weight_hh, weight_hr, cell_clip, proj_clip):
    """`lstm_with_projection_scan` with the gates of `gates_x` and `weight_hh` in `sigmoid_gates_first` order."""
    directions, batch = gates_x.shape[1:3]
    cell_size, state_size = weight_hh.shape[1] // 4, weight_hh.shape[2]
    h = gates_x.new_zeros(directions, batch, state_size)
    c = gates_x.new_zeros(directions, batch, cell_size)
    # Contiguous operands: batched matmuls on transposed views take a much slower path on CPU.
    weight_hh_t = weight_hh.transpose(1, 2).contiguous()
    weight_hr_t = weight_hr.transpose(1, 2).contiguous() if weight_hr is not None else None
    outputs = []
    # unbind, not indexing: its backward writes each step's gradient once instead of a zero tensor per step.
    for gates_t in gates_x.unbind(0):
        h, c = lstm_projection_step(gates_t, h, c, weight_hh_t, weight_hr_t, cell_clip, proj_clip)
        outputs.append(h)
    return torch.stack(outputs) if outputs else gates_x.new_zeros(0, directions, batch, state_size)


class LstmCellWithProjection(nn.Module):
    """One LSTM layer, one direction, with a linear projection of the hidden state (Sak et al., 2014) and
    optional clipping of the memory cell and of the projected state (TensorFlow's `LSTMCell(num_proj, cell_clip,
    proj_clip)`, which ELMo uses). Runs left to right from zero states.

    Parameters are `nn.LSTM(input_size, cell_size, proj_size=projection_size)`'s with one bias: `weight_ih`
    (4H, input_size), `weight_hh` (4H, P), `bias` (4H), `weight_hr` (P, H; absent when P == H), gates in
    PyTorch's order (input, forget, cell, output). Without clipping the layer calls PyTorch's fused LSTM
    (`torch.lstm`, what `nn.LSTM` runs: cuDNN on GPU). With clipping it computes the input contributions of all
    steps in one matmul and runs `lstm_projection_step` per step.

    Input: (B, T, input_size) left-aligned sequences; output: (B, T, projection_size). Outputs at padding steps
    are not zeroed (the caller masks them); they never reach the real steps, which all come first.
    """

    def __init__(
        self,
        input_size: int,
        cell_size: int,
        projection_size: int,
        cell_clip: float | None = None,
        proj_clip: float | None = None,
    ):
        super().__init__()
        if projection_size > cell_size:
            raise ValueError(f"projection_size ({projection_size}) must not exceed cell_size ({cell_size})")
        self.input_size, self.cell_size, self.projection_size = input_size, cell_size, projection_size
        self.cell_clip, self.proj_clip = cell_clip, proj_clip
        self.weight_ih = nn.Parameter(torch.empty(4 * cell_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * cell_size, projection_size))
        self.bias = nn.Parameter(torch.empty(4 * cell_size))
        # A TensorFlow LSTMCell projecting to its own size has no projection.
        if projection_size < cell_size:
            self.weight_hr = nn.Parameter(torch.empty(projection_size, cell_size))
        else:
            self.register_parameter("weight_hr", None)
        self.reset_parameters()

    def reset_parameters(self):
        """`nn.LSTM`'s initialisation: uniform in +-1/sqrt(cell_size)."""
        bound = self.cell_size**-0.5
        for param in self.parameters():
            nn.init.uniform_(param, -bound, bound)

    @property
    def clipped(self) -> bool:
        return self.cell_clip is not None or (self.proj_clip is not None and self.weight_hr is not None)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if self.clipped:
            return run_lstms_with_projection([self], [inputs])[0]
        batch = inputs.shape[0]
        initial = (inputs.new_zeros(1, batch, self.projection_size), inputs.new_zeros(1, batch, self.cell_size))
        # On CPU, PyTorch offers an LSTM to oneDNN first; oneDNN has none with projections, so PyTorch warns
        # ("LSTM with projections is not supported with oneDNN") and runs its own kernel. Asking for that kernel
        # directly runs the same computation without a warning no user could act on.
        # Only the "enabled" flag changes, and only around this call: `torch.backends.mkldnn.flags()` would also
        # set oneDNN's TF32 flag, which warns on CPU builds.
        skip_onednn = self.weight_hr is not None and inputs.device.type == "cpu" and not torch.compiler.is_compiling()
        if skip_onednn:
            onednn_enabled = torch._C._get_mkldnn_enabled()
            torch._C._set_mkldnn_enabled(False)
        try:
            # (input, (h0, c0), weights, has_biases, num_layers, dropout, train, bidirectional, batch_first)
            return torch.lstm(inputs, initial, self.lstm_weights(), True, 1, 0.0, self.training, False, True)[0]
        finally:
            if skip_onednn:
                torch._C._set_mkldnn_enabled(onednn_enabled)

    def lstm_weights(self) -> list[torch.Tensor]:
        """The weight list `torch.lstm` takes: [weight_ih, weight_hh, bias_ih, bias_hh(, weight_hr)].

        The layer has one bias; the second is a zero tensor kept between calls (not a parameter, not saved).
        On a GPU the list is flattened into one cuDNN weight buffer the first time (and again whenever the
        parameters were replaced, e.g. by `.to()`), as `nn.LSTM.flatten_parameters` does: the parameters become
        views into it, so that cuDNN uses them in place instead of copying all weights into a new buffer at every
        call. State-dict keys and values are unchanged.
        """
        zero_bias = getattr(self, "_zero_bias", None)
        if zero_bias is None or zero_bias.device != self.bias.device or zero_bias.dtype != self.bias.dtype:
            # Made outside inference mode: an inference tensor could not be saved for a later training step.
            with torch.inference_mode(False):
                zero_bias = self._zero_bias = torch.zeros_like(self.bias, requires_grad=False)
        weights = [self.weight_ih, self.weight_hh, self.bias, zero_bias]
        if self.weight_hr is not None:
            weights.append(self.weight_hr)
        if weights[0].is_cuda and not torch.compiler.is_compiling():
            pointers = tuple(w.data_ptr() for w in weights)
            if pointers != getattr(self, "_flattened_pointers", None):
                with torch.inference_mode(False):
                    self._flatten_for_cudnn(weights)
                self._flattened_pointers = tuple(w.data_ptr() for w in weights)
        return weights

    def _flatten_for_cudnn(self, weights: list[torch.Tensor]):
        """`nn.LSTM.flatten_parameters` for this layer's weight list (a no-op where cuDNN would not run)."""
        if not (
            torch._use_cudnn_rnn_flatten_weight()
            and all(torch.backends.cudnn.is_acceptable(w) for w in weights)
            and len({w.dtype for w in weights}) == 1
            and len({w.data_ptr() for w in weights}) == len(weights)
        ):
            return
        from torch.backends.cudnn.rnn import get_cudnn_mode

        with torch.cuda.device_of(weights[0]), torch.no_grad():
            projection_size = self.projection_size if self.weight_hr is not None else 0
            torch._cudnn_rnn_flatten_weight(
                weights,
                len(weights),
                self.input_size,
                get_cudnn_mode("LSTM"),
                self.cell_size,
                projection_size,
                1,
                True,
                False,
            )


def run_lstms_with_projection(cells: Sequence[LstmCellWithProjection], inputs: Sequence[torch.Tensor]):
    """Run several equally-sized `LstmCellWithProjection` layers (e.g. the two directions of a biLSTM layer) on
    their own inputs together: every step is one batched matmul for all of them. Clipping is the first cell's.

    inputs: one (B, T, input_size) tensor per cell. Returns one (B, T, projection_size) tensor per cell.
    """
    first = cells[0]
    x = torch.stack(list(inputs))  # (D, B, T, I)
    directions, batch, steps, input_size = x.shape
    # Gates in `sigmoid_gates_first` order from here on (reordering the weights is cheaper than the inputs).
    weight_ih = sigmoid_gates_first(torch.stack([cell.weight_ih for cell in cells]), dim=1)  # (D, 4H, I)
    bias = sigmoid_gates_first(torch.stack([cell.bias for cell in cells]), dim=1)  # (D, 4H)
    # The input contributions of all steps in one matmul, laid out time-major so that each step reads one block.
    time_major = x.transpose(1, 2).reshape(directions, steps * batch, input_size)  # (D, T * B, I), step by step
    gates_x = torch.baddbmm(bias.unsqueeze(1), time_major, weight_ih.transpose(1, 2))  # (D, T * B, 4H)
    gates_x = gates_x.view(directions, steps, batch, -1).transpose(0, 1).contiguous()  # (T, D, B, 4H)
    weight_hh = sigmoid_gates_first(torch.stack([cell.weight_hh for cell in cells]), dim=1)  # (D, 4H, P)
    weight_hr = torch.stack([cell.weight_hr for cell in cells]) if first.weight_hr is not None else None  # (D, P, H)
    states = _scan_sigmoid_gates_first(gates_x, weight_hh, weight_hr, first.cell_clip, first.proj_clip)  # (T, D, B, P)
    return states.permute(1, 2, 0, 3).unbind(0)  # D x (B, T, P)


def reverse_padded_sequences(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse the first `lengths[b]` steps of each row b, leaving the padding after them in place
    (TensorFlow's `reverse_sequence`). Applying it twice gives `x` back.

    x: (B, T, ...); lengths: (B,). Returns (B, T, ...).
    """
    steps = torch.arange(x.shape[1], device=x.device)
    index = lengths.to(steps.device)[:, None] - 1 - steps[None, :]
    index = torch.where(index >= 0, index, steps[None, :])  # padding steps stay where they are
    index = index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


class ProjectedLstm(nn.Module):
    """ELMo's bidirectional LSTM stack: a forward and a backward stack of `num_layers` `LstmCellWithProjection`
    layers that never see each other's states. The backward stack reads every sequence from its last real step
    back to its first, so padding never reaches it. From the second layer on, each layer's input is added to its
    output (`use_skip_connections`). Dropout is applied to every layer's input (bilm-tf's `input_keep_prob`).

    Input: (B, T, input_size) and mask (B, T) (True on real steps, which come first).
    Output: a list of `num_layers` tensors (B, T, 2 * projection_size): [forward ; backward] states of each
    layer, zero at padding steps.

    With gradient checkpointing on (`gradient_checkpointing_enable()` on the model), each layer's activations are
    recomputed in the backward pass instead of kept (see `checkpointed`).
    """

    gradient_checkpointing = False  # set by transformers' `gradient_checkpointing_enable`

    def __init__(
        self,
        input_size: int,
        cell_size: int,
        projection_size: int,
        num_layers: int,
        cell_clip: float | None = None,
        proj_clip: float | None = None,
        use_skip_connections: bool = True,
        dropout: float = 0.0,
    ):
        super().__init__()
        sizes = [input_size] + [projection_size] * (num_layers - 1)
        self.forward_layers = nn.ModuleList(
            LstmCellWithProjection(size, cell_size, projection_size, cell_clip, proj_clip) for size in sizes
        )
        self.backward_layers = nn.ModuleList(
            LstmCellWithProjection(size, cell_size, projection_size, cell_clip, proj_clip) for size in sizes
        )
        self.use_skip_connections = use_skip_connections
        self.dropout = nn.Dropout(dropout)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        lengths = mask.sum(dim=1)
        forward_input, backward_input = inputs, reverse_padded_sequences(inputs, lengths)
        outputs = []
        for index in range(len(self.forward_layers)):
            forward_input, backward_input, both = checkpointed(
                self, self._layer, index, forward_input, backward_input, lengths, mask
            )
            outputs.append(both)
        return outputs

    def _layer(self, index: int, forward_input, backward_input, lengths, mask):
        """BiLSTM layer `index`: (forward output, backward output (reversed), both (B, T, 2P) zero at padding)."""
        forward_layer, backward_layer = self.forward_layers[index], self.backward_layers[index]
        forward_input, backward_input = self.dropout(forward_input), self.dropout(backward_input)
        if forward_layer.clipped:
            forward_output, backward_output = run_lstms_with_projection(
                [forward_layer, backward_layer], [forward_input, backward_input]
            )
        else:
            forward_output, backward_output = forward_layer(forward_input), backward_layer(backward_input)
        if self.use_skip_connections and index > 0:
            forward_output = forward_output + forward_input
            backward_output = backward_output + backward_input
        both = torch.cat([forward_output, reverse_padded_sequences(backward_output, lengths)], dim=-1)
        return forward_output, backward_output, both * mask.unsqueeze(-1).to(both.dtype)


class ScalarMix(nn.Module):
    """A task-specific weighting of a model's layers (Peters et al., 2018, eq. 1):
    `gamma * sum_k softmax(s)_k * h_k`, optionally after normalising each layer `h_k` to zero mean and unit
    variance over the positions the mask keeps.

    `initial_scalar_parameters`: the pre-softmax weights s to start from (a list of `num_layers` finite numbers;
    None: equal weights).

    Input: `num_layers` tensors (B, T, D), mask (B, T) (needed for `do_layer_norm`). Output: (B, T, D), zero
    where the mask is 0 when a mask is given.
    """

    def __init__(
        self,
        num_layers: int,
        do_layer_norm: bool = False,
        initial_scalar_parameters: Sequence[float] | None = None,
        trainable: bool = True,
    ):
        super().__init__()
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"ScalarMix needs num_layers of at least 1 (the layers it mixes), got {num_layers!r}")
        if initial_scalar_parameters is not None:  # NaN or infinity would make every output NaN
            finite_numbers("one per layer")("initial_scalar_parameters", initial_scalar_parameters)
        initial = [0.0] * num_layers if initial_scalar_parameters is None else list(initial_scalar_parameters)
        if len(initial) != num_layers:
            raise ValueError(f"initial_scalar_parameters has {len(initial)} values for {num_layers} layers")
        self.num_layers = num_layers
        self.do_layer_norm = do_layer_norm
        self.initial_scalar_parameters = initial  # what weight initialisation gives them
        self.trainable = trainable
        self.scalar_parameters = nn.Parameter(torch.tensor(initial, dtype=torch.float32), requires_grad=trainable)
        self.gamma = nn.Parameter(torch.ones(1), requires_grad=trainable)

    def forward(self, tensors: Sequence[torch.Tensor], mask: torch.Tensor | None = None) -> torch.Tensor:
        if len(tensors) != self.num_layers:
            raise ValueError(f"ScalarMix mixes {self.num_layers} layers, got {len(tensors)}")
        shapes = {tuple(tensor.shape) for tensor in tensors}
        if len(shapes) > 1:
            raise ValueError(f"ScalarMix mixes layers of one shape, got {sorted(shapes)}")
        if mask is not None and tuple(mask.shape) != tuple(tensors[0].shape[:-1]):
            raise ValueError(
                f"mask has shape {tuple(mask.shape)}, expected {tuple(tensors[0].shape[:-1])} (the layers' but the last)"
            )
        weights = torch.softmax(self.scalar_parameters, dim=0)
        keep = None if mask is None else mask.unsqueeze(-1).to(tensors[0].dtype)
        if self.do_layer_norm:
            if keep is None:
                raise ValueError("ScalarMix with do_layer_norm needs the mask")
            count = (keep.sum() * tensors[0].shape[-1]).clamp(min=1)  # no NaN for a batch without words
            normalised = []
            for tensor in tensors:
                mean = (tensor * keep).sum() / count
                variance = (((tensor - mean) * keep) ** 2).sum() / count
                normalised.append((tensor - mean) / torch.sqrt(variance + 1e-12))
            tensors = normalised
        mixed = self.gamma * sum(weight * tensor for weight, tensor in zip(weights, tensors))
        return mixed if keep is None else mixed * keep


class MaskedBatchNorm(nn.Module):
    """Per-feature batch normalisation of several layers of word vectors, without the affine part: each layer's
    features minus their mean over the words the mask keeps (and, with `scale`, divided by their standard
    deviation), from the batch while training and from running averages (`momentum`) in evaluation.

    It removes what every word shares: a frozen biLM's layers carry a large component common to all words (a ReLU
    character CNN's outputs are all positive), which leaves a task layer's inputs badly conditioned, so that a
    task model on them hardly learns. The running statistics start at mean 0 and variance 1, the identity.

    Input: `num_layers` tensors (B, T, D), mask (B, T) booleans. Output: the same, zero where the mask is 0.
    """

    def __init__(self, num_layers: int, dim: int, scale: bool = True, momentum: float = 0.1, eps: float = 1e-5):
        super().__init__()
        self.scale, self.momentum, self.eps = scale, momentum, eps
        self.register_buffer("running_mean", torch.zeros(num_layers, dim))
        self.register_buffer("running_var", torch.ones(num_layers, dim))

    def forward(self, tensors: Sequence[torch.Tensor], mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        keep = mask.unsqueeze(-1).to(tensors[0].dtype)
        if self.training and mask.sum() > 1:
            words = [tensor[mask] for tensor in tensors]  # (N, D) each
            mean = torch.stack([w.mean(0) for w in words])
            var = torch.stack([w.var(0, unbiased=False) for w in words])
            with torch.no_grad():
                self.running_mean.lerp_(mean.detach(), self.momentum)
                self.running_var.lerp_(var.detach(), self.momentum)
        else:
            mean, var = self.running_mean, self.running_var
        out = []
        for k, tensor in enumerate(tensors):
            normalised = tensor - mean[k]
            if self.scale:
                normalised = normalised / torch.sqrt(var[k] + self.eps)
            out.append(normalised * keep)
        return tuple(out)


class WordSoftmax(nn.Module):
    """A softmax over a word vocabulary: `logits = h W^T + b`, with a sampled softmax for training on large
    vocabularies (Jean et al., 2015), as bilm-tf trains ELMo.

    The sampled loss scores each target against `num_sampled` words drawn (with replacement, shared by the batch)
    from the log-uniform distribution P(k) = log((k + 2) / (k + 1)) / log(V + 1), which fits word ids sorted by
    decreasing frequency; every logit is corrected by log(expected count) and sampled words that equal the target
    are removed. It is used in training mode when 0 < `num_sampled` < V; evaluation uses the full softmax. Both
    score only the rows that have a target, and the sampled loss each distinct drawn word once (`losses`).

    weight: (V, D); bias: (V,).
    """

    def __init__(self, input_dim: int, vocab_size: int, num_sampled: int = 0):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, input_dim))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.num_sampled = num_sampled

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., D) -> (..., V) logits."""
        return F.linear(hidden, self.weight, self.bias)

    def loss(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean negative log-likelihood of `targets` (N,) given `hidden` (N, D); targets of -100 are skipped
        (0 when all are)."""
        return self.losses([(hidden, targets)])[0]

    def losses(self, pairs: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
        """`loss` of each (hidden, targets) pair, e.g. the forward and the backward LM that share this softmax.

        Skipped rows (padding) are dropped before any scoring where tensor values may be read (elsewhere, under
        `torch.compile` or on XLA, they are scored and multiplied by 0). With the sampled softmax each pair draws
        its own `num_sampled` words, in order, and the weight rows all pairs need are gathered in one indexing, so
        that the backward pass builds one dense (V, D) gradient instead of one per gather.
        """
        pairs = [_rows_with_targets(hidden, targets) for hidden, targets in pairs]
        vocab_size = self.weight.shape[0]
        if not (self.training and 0 < self.num_sampled < vocab_size):
            return [
                F.cross_entropy(self(hidden).float(), targets, ignore_index=IGNORE_INDEX, reduction="sum")
                / _target_count(targets)
                for hidden, targets in pairs
            ]
        samples = [self.sample_distinct(vocab_size, hidden.device) for hidden, _ in pairs]
        # One gather for the target and sampled words of every pair (skipped rows that are kept score word 0 and
        # are multiplied by 0). The log(expected count) subtracted from each of a word's logits joins its bias.
        words = [ids for (_, targets), (sampled, _) in zip(pairs, samples) for ids in (targets.clamp(min=0), sampled)]
        ids, sizes = torch.cat(words), [len(word_ids) for word_ids in words]
        biases = self.bias[ids] - self.log_expected_count(ids, vocab_size)
        rows = zip(self.weight[ids].split(sizes), biases.split(sizes))
        losses = []
        for (hidden, targets), (sampled, log_times_drawn) in zip(pairs, samples):
            (target_weight, target_bias), (sampled_weight, sampled_bias) = next(rows), next(rows)
            true_logits = ((hidden * target_weight).sum(-1) + target_bias).float()
            sampled_bias = sampled_bias + log_times_drawn.to(sampled_bias.dtype)
            sampled_logits = torch.addmm(sampled_bias, hidden, sampled_weight.t()).float()
            accidental_hits = sampled.unsqueeze(0) == targets.unsqueeze(1)
            sampled_logits = sampled_logits.masked_fill(accidental_hits, torch.finfo(sampled_logits.dtype).min)
            nll = torch.logaddexp(true_logits, torch.logsumexp(sampled_logits, dim=1)) - true_logits
            losses.append((nll * (targets != IGNORE_INDEX)).sum() / _target_count(targets))
        return losses

    def sample_distinct(self, vocab_size: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        """`num_sampled` log-uniform draws (`sample_log_uniform`) as (the distinct word ids, log of how often each
        was drawn). A word drawn m times adds m equal terms to the sampled softmax's sum: one term with log(m)
        added to its logit is the same sum over fewer columns. Where tensor values may not be read
        (`host_syncs_allowed`), every draw, with log(1) = 0."""
        draws = self.sample_log_uniform(self.num_sampled, vocab_size, device)
        if not host_syncs_allowed(draws):
            return draws, torch.zeros(draws.shape, device=device)
        distinct, times_drawn = torch.unique(draws, return_counts=True)
        return distinct, times_drawn.float().log()

    @staticmethod
    def sample_log_uniform(num_sampled: int, vocab_size: int, device) -> torch.Tensor:
        """`num_sampled` word ids from the log-uniform distribution over [0, vocab_size), by inverse CDF."""
        uniform = torch.rand(num_sampled, device=device, dtype=torch.float64)
        ids = torch.floor(torch.exp(uniform * math.log(vocab_size + 1))).long() - 1
        return ids.clamp(0, vocab_size - 1)

    def log_expected_count(self, ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """log(num_sampled * P(id)) under the log-uniform distribution."""
        ids = ids.double()
        probability = (torch.log(ids + 2) - torch.log(ids + 1)) / math.log(vocab_size + 1)
        return torch.log(self.num_sampled * probability).to(self.weight.dtype)


def _rows_with_targets(hidden: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of `hidden` (N, D) and `targets` (N,) whose target is not -100: (N', D), (N',). All rows where
    tensor values may not be read (`host_syncs_allowed`)."""
    if not host_syncs_allowed(targets):
        return hidden, targets
    scored = targets != IGNORE_INDEX
    return hidden[scored], targets[scored]


def _target_count(targets: torch.Tensor) -> torch.Tensor:
    """How many targets are not -100, at least 1: the denominator of a mean loss that is 0 without targets."""
    return (targets != IGNORE_INDEX).sum().clamp(min=1)


def checkpointed(module: nn.Module, function, *args):
    """`function(*args)`, its activations recomputed in the backward pass instead of kept, when `module` has
    gradient checkpointing on and trains with gradients. transformers' `gradient_checkpointing_enable()` sets
    `module.gradient_checkpointing` and `module._gradient_checkpointing_func` (`torch.utils.checkpoint`, which
    replays dropout with the same random numbers) on every module with a `gradient_checkpointing` attribute."""
    if module.gradient_checkpointing and module.training and torch.is_grad_enabled():
        return module._gradient_checkpointing_func(function, *args)
    return function(*args)


def run_packed_rnn(rnn: nn.RNNBase, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Run a `batch_first` RNN (e.g. bidirectional) over left-aligned sequences of different lengths, so that the
    backward direction starts at each sequence's real end.

    inputs: (B, T, D); lengths: (B,), zero allowed. Returns (B, T, output size), zero after each sequence's end.
    """
    packed = pack_padded_sequence(inputs, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
    outputs, _ = rnn(packed)
    outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=inputs.shape[1])
    return outputs * (lengths > 0).to(outputs.dtype).view(-1, 1, 1)


__all__ = [
    "CharacterCNN",
    "Highway",
    "LstmCellWithProjection",
    "MaskedBatchNorm",
    "ProjectedLstm",
    "ScalarMix",
    "WordSoftmax",
    "checkpointed",
    "lstm_projection_step",
    "lstm_with_projection_scan",
    "reverse_padded_sequences",
    "run_lstms_with_projection",
    "run_packed_rnn",
]
