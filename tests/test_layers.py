"""The shared layers against plain references written out here: highway, character CNN, the LSTM with projection
and clipping (per-step numpy reference, cuDNN-path equivalence, gradients), the biLSTM stack's masking, the
scalar mix and the sampled softmax."""

import itertools
import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from hf_ctx.layers import (
    CharacterCNN,
    Highway,
    LstmCellWithProjection,
    ProjectedLstm,
    ScalarMix,
    WordSoftmax,
    lstm_with_projection_scan,
    reverse_padded_sequences,
    run_lstms_with_projection,
    run_packed_rnn,
)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference_lstm(x, weight_ih, weight_hh, bias, weight_hr, cell_clip, proj_clip):
    """A plain per-step LSTM with projection and clipping in float64 numpy: x (T, I) -> (T, P)."""
    cell_size = weight_hh.shape[0] // 4
    h = np.zeros(weight_hh.shape[1])
    c = np.zeros(cell_size)
    outputs = []
    for x_t in x:
        z = weight_ih @ x_t + weight_hh @ h + bias
        i, f, g, o = (z[k * cell_size : (k + 1) * cell_size] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        if cell_clip is not None:
            c = np.clip(c, -cell_clip, cell_clip)
        h = sigmoid(o) * np.tanh(c)
        if weight_hr is not None:
            h = weight_hr @ h
            if proj_clip is not None:
                h = np.clip(h, -proj_clip, proj_clip)
        outputs.append(h)
    return np.stack(outputs)


def cell_weights(cell):
    to_np = lambda t: None if t is None else t.detach().double().numpy()  # noqa: E731
    return to_np(cell.weight_ih), to_np(cell.weight_hh), to_np(cell.bias), to_np(cell.weight_hr)


def randomize(module, scale=0.5):
    with torch.no_grad():
        for p in module.parameters():
            p.uniform_(-scale, scale)
    return module


def test_highway_is_gated_mix_of_relu_transform_and_input():
    highway = randomize(Highway(5, num_layers=2))
    x = torch.randn(3, 5)
    expected = x
    for layer in highway.layers:
        w, b = layer.weight, layer.bias
        transform = torch.relu(expected @ w[:5].T + b[:5])
        gate = torch.sigmoid(expected @ w[5:].T + b[5:])
        expected = gate * transform + (1 - gate) * expected
    torch.testing.assert_close(highway(x), expected)
    assert torch.equal(Highway(5, num_layers=0)(x), x)


@pytest.mark.parametrize("output_dim", [6, 12])  # 12 = number of filters: no projection, as in bilm-tf
def test_character_cnn_matches_explicit_convolutions(output_dim):
    filters = [[1, 4], [3, 8]]
    cnn = randomize(CharacterCNN(262, 3, filters, n_highway=1, output_dim=output_dim, activation="tanh"))
    assert (cnn.projection is None) == (output_dim == 12)
    ids = torch.randint(1, 262, (2, 4, 7))
    out = cnn(ids)
    assert out.shape == (2, 4, output_dim)

    embedded = cnn.char_embeddings.weight[ids.view(-1, 7)]  # (N, 7, 3)
    pooled = []
    for (width, _), conv in zip(filters, cnn.convolutions):
        windows = torch.stack([embedded[:, s : s + width] for s in range(7 - width + 1)], dim=1)  # (N, S, w, 3)
        scores = torch.einsum("nswe,kew->nsk", windows, conv.weight) + conv.bias
        pooled.append(torch.tanh(scores.max(dim=1).values))
    expected = cnn.highway(torch.cat(pooled, dim=-1))
    if cnn.projection is not None:
        expected = cnn.projection(expected)
    torch.testing.assert_close(out, expected.view(2, 4, output_dim), atol=1e-5, rtol=1e-5)


def test_character_cnn_runs_each_distinct_word_once_with_outputs_and_gradients_of_every_occurrence():
    """Repeated words (and all-zero padding rows) are encoded once and copied: outputs and every parameter's
    gradient equal those of `encode_words` run on each occurrence."""
    torch.manual_seed(0)
    cnn = randomize(CharacterCNN(262, 3, [[1, 4], [3, 8]], n_highway=2, output_dim=6)).double()
    words = torch.randint(1, 262, (5, 7))
    ids = words[torch.randint(0, 5, (3, 9))]  # (3, 9, 7): 27 occurrences of at most 5 words
    ids[2, 6:] = 0  # padding rows
    upstream = torch.randn(3, 9, 6, dtype=torch.float64)

    def outputs_and_gradients(run):
        cnn.zero_grad(set_to_none=True)
        out = run(ids)
        (out * upstream).sum().backward()
        return out.detach(), [p.grad.clone() for p in cnn.parameters()]

    calls = []
    cnn.encode_words = lambda rows, encode=cnn.encode_words: calls.append(len(rows)) or encode(rows)
    got, got_grads = outputs_and_gradients(cnn)
    expected, expected_grads = outputs_and_gradients(lambda x: cnn.encode_words(x.view(-1, 7)).view(3, 9, 6))
    assert calls[0] == len(torch.unique(ids.view(-1, 7), dim=0)) <= 6  # once per distinct row
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
    for got_grad, expected_grad in zip(got_grads, expected_grads):
        torch.testing.assert_close(got_grad, expected_grad, atol=1e-6, rtol=0)
    # float32, the training dtype: the same outputs up to float rounding
    cnn.float()
    torch.testing.assert_close(cnn(ids), cnn.encode_words(ids.view(-1, 7)).view(3, 9, 6), atol=1e-6, rtol=0)


def test_character_cnn_gradients_equal_the_amax_pooling_reference_on_tied_windows():
    """Max-pooling over positions sends each gradient to one maximal window; `amax` splits it among tied windows.
    Ties come from identical windows (repeated letters, the padding characters after a word, padding words), which
    contribute identically to every parameter's gradient, so both give the same gradients, on the full rows and
    with the repeated tails dropped (the layer's forward)."""
    torch.manual_seed(0)
    cnn = randomize(CharacterCNN(262, 3, [[1, 4], [2, 5], [3, 8]], n_highway=1, output_dim=6)).double()
    ids = torch.full((4, 16), 261)  # padding characters after each word
    ids[0, :5] = torch.tensor([259, 5, 5, 5, 260])  # a repeated letter
    ids[1, :4] = torch.tensor([259, 7, 8, 260])
    ids[2] = 0  # a padding word
    ids[3, :6] = torch.tensor([259, 5, 9, 5, 9, 260])
    upstream = torch.randn(4, 6, dtype=torch.float64)
    embedded = cnn.char_embeddings(ids).transpose(1, 2)
    scores = [conv(embedded) for conv in cnn.convolutions]
    assert sum(((s == s.amax(-1, keepdim=True)).sum(-1) > 1).sum() for s in scores) > 0  # tied maxima exist

    def reference(ids):
        embedded = cnn.char_embeddings(ids).transpose(1, 2)
        pooled = [torch.relu(conv(embedded).amax(dim=-1)) for conv in cnn.convolutions]
        return cnn.projection(cnn.highway(torch.cat(pooled, dim=-1)))

    assert cnn.drop_repeated_tails(ids).shape == (4, 9)  # the longest word's 6 characters and one 3-wide window
    results = []
    for run in (cnn, cnn.encode_words, reference):
        cnn.zero_grad(set_to_none=True)
        out = run(ids)
        (out * upstream).sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in cnn.parameters()]))
    expected, expected_grads = results[-1]
    for got, got_grads in results[:-1]:
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
        for got_grad, expected_grad in zip(got_grads, expected_grads):
            torch.testing.assert_close(got_grad, expected_grad, atol=1e-6, rtol=0)


def test_character_padding_id_embeds_to_zero():
    cnn = CharacterCNN(262, 3, [[1, 2]], n_highway=0, output_dim=2)
    assert torch.equal(cnn.char_embeddings.weight[0], torch.zeros(3))


@pytest.mark.parametrize("projection_size", [3, 6])  # 6 = cell size: no projection
def test_clipped_lstm_matches_per_step_reference(projection_size):
    torch.manual_seed(0)
    cell = randomize(LstmCellWithProjection(4, 6, projection_size, cell_clip=0.5, proj_clip=0.3), scale=1.5)
    x = torch.randn(2, 7, 4) * 2
    out = cell(x)
    reference = [reference_lstm(x[b].double().numpy(), *cell_weights(cell), 0.5, 0.3) for b in range(2)]
    np.testing.assert_allclose(out.detach().double().numpy(), np.stack(reference), atol=1e-5)
    # The test means something only if clipping happened: without it the outputs differ.
    unclipped = np.stack([reference_lstm(x[b].double().numpy(), *cell_weights(cell), None, None) for b in range(2)])
    assert np.abs(unclipped - np.stack(reference)).max() > 1e-2


def test_unclipped_lstm_uses_nn_lstm_and_equals_the_step_path():
    cell = randomize(LstmCellWithProjection(4, 6, 3))
    assert not cell.clipped
    x = torch.randn(2, 5, 4, requires_grad=True)
    fast = cell(x)
    gates_x = (F.linear(x, cell.weight_ih, cell.bias)).transpose(0, 1).unsqueeze(1)  # (T, 1, B, 4H)
    stepped = lstm_with_projection_scan(gates_x, cell.weight_hh[None], cell.weight_hr[None])[:, 0].transpose(0, 1)
    torch.testing.assert_close(fast, stepped, atol=1e-6, rtol=1e-5)
    # Same as nn.LSTM itself with these weights.
    reference = torch.nn.LSTM(4, 6, batch_first=True, proj_size=3)
    with torch.no_grad():
        for name, value in [
            ("weight_ih_l0", cell.weight_ih),
            ("weight_hh_l0", cell.weight_hh),
            ("bias_ih_l0", cell.bias),
            ("bias_hh_l0", torch.zeros(24)),
            ("weight_hr_l0", cell.weight_hr),
        ]:
            getattr(reference, name).copy_(value)
    torch.testing.assert_close(fast, reference(x)[0])
    grads_fast = torch.autograd.grad(fast.square().sum(), [x, *cell.parameters()])
    grads_step = torch.autograd.grad(stepped.square().sum(), [x, *cell.parameters()])
    for a, b in zip(grads_fast, grads_step):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_directions_run_together_equal_each_alone_with_gradients():
    cells = [randomize(LstmCellWithProjection(4, 6, 3, cell_clip=0.5, proj_clip=0.5), 1.0) for _ in range(2)]
    inputs = [torch.randn(2, 5, 4, requires_grad=True) for _ in range(2)]
    together = run_lstms_with_projection(cells, inputs)
    alone = [cell(x) for cell, x in zip(cells, inputs)]
    params = [p for cell in cells for p in cell.parameters()]
    for a, b in zip(together, alone):
        torch.testing.assert_close(a, b)
    grads_together = torch.autograd.grad(sum(t.sum() for t in together), inputs + params)
    grads_alone = torch.autograd.grad(sum(t.sum() for t in alone), inputs + params)
    for a, b in zip(grads_together, grads_alone):
        torch.testing.assert_close(a, b)


def test_reverse_padded_sequences():
    x = torch.arange(8).view(2, 4, 1)
    reversed_ = reverse_padded_sequences(x, torch.tensor([3, 0]))
    assert reversed_[..., 0].tolist() == [[2, 1, 0, 3], [4, 5, 6, 7]]
    assert torch.equal(reverse_padded_sequences(reversed_, torch.tensor([3, 0])), x)


@pytest.mark.parametrize("clip", [None, 0.4])  # cuDNN path and clipped path
def test_bilstm_stack_padding_never_leaks_and_backward_reads_right_to_left(clip):
    torch.manual_seed(0)
    stack = randomize(ProjectedLstm(3, 5, 3, num_layers=2, cell_clip=clip, proj_clip=clip), 1.0).eval()
    lengths = [4, 2, 1]
    x = torch.randn(3, 4, 3)
    mask = torch.arange(4)[None] < torch.tensor(lengths)[:, None]
    x = x * mask[..., None]
    batched = stack(x, mask)
    for b, n in enumerate(lengths):
        alone = stack(x[b : b + 1, :n], mask[b : b + 1, :n])
        for layer_batched, layer_alone in zip(batched, alone):
            torch.testing.assert_close(layer_batched[b, :n], layer_alone[0], atol=1e-6, rtol=1e-5)
            assert (layer_batched[b, n:] == 0).all()
    # Layer 1 by hand: the forward stack reads x left to right, the backward stack reads it right to left.
    n = lengths[0]
    sequence = x[0, :n].double().numpy()
    forward = reference_lstm(sequence, *cell_weights(stack.forward_layers[0]), clip, clip)
    backward = reference_lstm(sequence[::-1], *cell_weights(stack.backward_layers[0]), clip, clip)[::-1]
    np.testing.assert_allclose(batched[0][0, :n].detach().numpy(), np.concatenate([forward, backward], -1), atol=1e-5)
    # Layer 2 adds its input (skip connection).
    second_forward = reference_lstm(forward, *cell_weights(stack.forward_layers[1]), clip, clip) + forward
    np.testing.assert_allclose(batched[1][0, :n, :3].detach().numpy(), second_forward, atol=1e-5)


def test_bilstm_stack_zero_length_rows_are_zero_not_nan():
    stack = ProjectedLstm(3, 5, 3, num_layers=2, cell_clip=3.0, proj_clip=3.0)
    mask = torch.tensor([[True, True], [False, False]])
    outputs = stack(torch.randn(2, 2, 3) * mask[..., None], mask)
    for layer in outputs:
        assert torch.isfinite(layer).all()
        assert (layer[1] == 0).all()


def test_scalar_mix_is_gamma_times_softmax_weighted_sum():
    mix = ScalarMix(3)
    with torch.no_grad():
        mix.scalar_parameters.copy_(torch.tensor([0.1, -0.5, 2.0]))
        mix.gamma.fill_(1.7)
    tensors = [torch.randn(2, 4, 5) for _ in range(3)]
    weights = np.exp([0.1, -0.5, 2.0]) / np.exp([0.1, -0.5, 2.0]).sum()
    expected = 1.7 * sum(float(w) * t for w, t in zip(weights, tensors))
    torch.testing.assert_close(mix(tensors), expected)


@pytest.mark.parametrize(
    "initial",
    [
        [float("nan")] * 3,
        [float("inf"), 0.0, 0.0],
        [0.0, float("-inf"), 1.0],
        "abc",
        5,
        [0.0, True, 1.0],
        [0.0, "1", 2.0],
    ],
)
def test_scalar_mix_refuses_initial_weights_that_are_not_finite_numbers_in_one_line(initial):
    """NaN or infinity made every output NaN, in silence; a string ended in torch's "too many dimensions 'str'"."""
    with pytest.raises(ValueError) as error:
        ScalarMix(3, initial_scalar_parameters=initial)
    assert str(error.value) == (
        f"initial_scalar_parameters must be a list of finite numbers, one per layer, got {initial!r}"
    )


def test_scalar_mix_starts_from_finite_initial_weights_of_the_layer_count():
    mix = ScalarMix(3, initial_scalar_parameters=(1, 0.5, -2.0))
    assert mix.scalar_parameters.tolist() == [1.0, 0.5, -2.0]
    tensors = [torch.full((1, 2, 3), float(k)) for k in range(3)]
    weights = np.exp([1, 0.5, -2.0]) / np.exp([1, 0.5, -2.0]).sum()
    torch.testing.assert_close(mix(tensors), torch.full((1, 2, 3), float(weights @ [0, 1, 2])))
    with pytest.raises(ValueError, match=r"^initial_scalar_parameters has 2 values for 3 layers$"):
        ScalarMix(3, initial_scalar_parameters=[0.0, 1.0])


def test_scalar_mix_layer_norm_uses_only_unmasked_positions():
    mix = ScalarMix(2, do_layer_norm=True)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]]).bool()
    tensors = [torch.randn(2, 3, 4) for _ in range(2)]
    out = mix(tensors, mask)
    expected = 0
    for t in tensors:
        values = t[mask]  # (3, 4): the unmasked positions
        normalised = (t - values.mean()) / torch.sqrt(values.var(unbiased=False) + 1e-12)
        expected = expected + 0.5 * normalised
    torch.testing.assert_close(out[mask], expected[mask], atol=1e-5, rtol=1e-5)
    assert (out[~mask] == 0).all()
    all_masked = mix(tensors, torch.zeros(2, 3, dtype=torch.bool))
    assert torch.isfinite(all_masked).all() and (all_masked == 0).all()


def test_full_softmax_loss_is_cross_entropy_and_skips_ignored():
    softmax = randomize(WordSoftmax(4, 10))
    hidden, targets = torch.randn(6, 4), torch.tensor([1, 2, -100, 9, 0, -100])
    keep = targets != -100
    expected = F.cross_entropy(hidden[keep] @ softmax.weight.T + softmax.bias, targets[keep])
    torch.testing.assert_close(softmax.loss(hidden, targets), expected)
    assert softmax.loss(hidden, torch.full((6,), -100)).item() == 0.0


def test_sampled_softmax_loss_matches_its_definition(monkeypatch):
    softmax = randomize(WordSoftmax(4, 50, num_sampled=5)).train()
    sampled = torch.tensor([0, 3, 3, 7, 40])
    monkeypatch.setattr(WordSoftmax, "sample_log_uniform", staticmethod(lambda n, v, device: sampled))
    hidden, targets = torch.randn(3, 4), torch.tensor([3, 12, -100])

    def log_q(k):  # log of the expected count of word k among 5 log-uniform draws
        return math.log(5 * math.log((k + 2) / (k + 1)) / math.log(51))

    losses = []
    for h, t in zip(hidden[:2], targets[:2].tolist()):
        true = float(h @ softmax.weight[t] + softmax.bias[t]) - log_q(t)
        others = [float(h @ softmax.weight[s] + softmax.bias[s]) - log_q(s) for s in sampled.tolist() if s != t]
        losses.append(math.log(sum(math.exp(v) for v in [true, *others])) - true)  # accidental hits removed
    assert softmax.loss(hidden, targets).item() == pytest.approx(sum(losses) / 2, rel=1e-5)
    softmax.eval()  # evaluation: the full softmax
    torch.testing.assert_close(softmax.loss(hidden, targets), F.cross_entropy(softmax(hidden[:2]), targets[:2]))


def sampled_softmax_reference(softmax, hidden, targets, draws):
    """The sampled softmax's mean loss written out row by row and draw by draw (duplicates scored as often as
    drawn, draws equal to the target left out), skipping targets of -100; in float64."""
    vocab_size, num_sampled = softmax.weight.shape[0], softmax.num_sampled
    weight, bias, hidden = softmax.weight.double(), softmax.bias.double(), hidden.double()

    def logit(h, word):  # corrected by log(expected count)
        probability = math.log((word + 2) / (word + 1)) / math.log(vocab_size + 1)
        return h @ weight[word] + bias[word] - math.log(num_sampled * probability)

    losses = []
    for h, target in zip(hidden, targets.tolist()):
        if target == -100:
            continue
        true = logit(h, target)
        others = [logit(h, word) for word in draws.tolist() if word != target]
        losses.append(torch.logsumexp(torch.stack([true, *others]), dim=0) - true)
    return torch.stack(losses).mean().float()


@pytest.mark.parametrize("host_syncs", [True, False])
def test_sampled_softmax_losses_equal_a_loss_over_every_row_and_every_draw(monkeypatch, host_syncs):
    """Two pairs sharing one softmax (the biLM's two directions), each with its own draws, duplicates and draws
    equal to a target among them, and rows without a target: losses and gradients equal the written-out
    definition (in float64). With host syncs, skipped rows are dropped and each distinct draw is scored once with
    log(times drawn); without (`torch.compile`), every row and every draw is scored."""
    import hf_ctx.layers as layers

    monkeypatch.setattr(layers, "host_syncs_allowed", lambda tensor: host_syncs)
    torch.manual_seed(0)
    softmax = randomize(WordSoftmax(4, 30, num_sampled=8)).train()
    draws = [torch.tensor([0, 3, 3, 7, 0, 0, 12, 3]), torch.tensor([1, 1, 5, 29, 2, 5, 0, 9])]
    sample = itertools.cycle(draws)
    monkeypatch.setattr(WordSoftmax, "sample_log_uniform", staticmethod(lambda n, v, device: next(sample)))
    hidden = [torch.randn(5, 4, requires_grad=True) for _ in range(2)]
    targets = [torch.tensor([3, -100, 12, 0, 20]), torch.tensor([-100, 5, 1, -100, 29])]

    losses = softmax.losses(list(zip(hidden, targets)))
    gradients = torch.autograd.grad(sum(losses), [softmax.weight, softmax.bias, *hidden])
    expected = [sampled_softmax_reference(softmax, h, t, d) for h, t, d in zip(hidden, targets, draws)]
    expected_gradients = torch.autograd.grad(sum(expected), [softmax.weight, softmax.bias, *hidden])
    torch.testing.assert_close(torch.stack(losses), torch.stack(expected))
    for gradient, expected_gradient in zip(gradients, expected_gradients):
        torch.testing.assert_close(gradient, expected_gradient)
    assert (gradients[2][1] == 0).all() and (gradients[3][[0, 3]] == 0).all()  # rows without a target
    assert softmax.loss(hidden[0][:2], torch.tensor([-100, -100])).item() == 0.0  # no target at all


def test_log_uniform_sampler_follows_zipf():
    torch.manual_seed(0)
    draws = WordSoftmax.sample_log_uniform(200_000, 100, "cpu")
    assert draws.min() >= 0 and draws.max() < 100
    observed = torch.bincount(draws, minlength=100).double() / draws.numel()
    expected = torch.tensor([math.log((k + 2) / (k + 1)) / math.log(101) for k in range(100)], dtype=torch.double)
    torch.testing.assert_close(observed, expected, atol=4e-3, rtol=0)


def test_run_packed_rnn_handles_empty_rows():
    rnn = torch.nn.GRU(3, 2, batch_first=True, bidirectional=True)
    x = torch.randn(2, 3, 3)
    out = run_packed_rnn(rnn, x, torch.tensor([2, 0]))
    alone, _ = rnn(x[:1, :2])
    torch.testing.assert_close(out[0, :2], alone[0])
    assert (out[0, 2:] == 0).all() and (out[1] == 0).all()


def test_unclipped_lstm_keeps_its_weight_list_between_calls_and_its_checkpoint_format():
    """No fresh zero bias per call (cuDNN needs the same tensors to keep them in one flat buffer),
    including when the first call runs in inference mode and a training step follows; keys unchanged."""
    cell = randomize(LstmCellWithProjection(4, 6, 3))
    assert list(cell.state_dict()) == ["weight_ih", "weight_hh", "bias", "weight_hr"]
    x = torch.randn(2, 5, 4)
    with torch.inference_mode():
        first = cell.lstm_weights()
        inferred = cell(x)
    second = cell.lstm_weights()
    assert all(a is b for a, b in zip(first, second))
    assert not second[3].is_inference() and not second[3].requires_grad and (second[3] == 0).all()
    trained = cell(x)
    trained.sum().backward()  # the zero bias is saved for backward: fails if it were an inference tensor
    torch.testing.assert_close(trained, inferred)
    assert cell.weight_ih.grad is not None and second[3].grad is None


@pytest.mark.gpu
def test_unclipped_lstm_weights_are_one_cudnn_buffer_on_gpu(tmp_path):
    """On a GPU the weights are flattened once into one cuDNN buffer (no per-call compaction warning), outputs
    and gradients equal the CPU's, and a checkpoint saved from there loads into a fresh layer."""
    import warnings

    cell = randomize(LstmCellWithProjection(4, 6, 3))
    x = torch.randn(2, 5, 4)
    expected = cell(x)
    expected_grads = torch.autograd.grad(expected.square().sum(), list(cell.parameters()))
    cell = cell.cuda()
    # cuDNN's RNNs use TF32 by default (about 1e-3 apart from fp32 on an H200); compared in full fp32 here
    with warnings.catch_warnings(), torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        warnings.filterwarnings("error", message=".*single contiguous chunk.*")
        for _ in range(2):
            got = cell(x.cuda())
        grads = torch.autograd.grad(got.square().sum(), list(cell.parameters()))
    storages = {w.untyped_storage().data_ptr() for w in cell.lstm_weights()}
    assert len(storages) == 1
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-4)
    for a, b in zip(grads, expected_grads):
        torch.testing.assert_close(a.cpu(), b, atol=1e-5, rtol=1e-4)
    torch.save(cell.state_dict(), tmp_path / "cell.pt")
    fresh = LstmCellWithProjection(4, 6, 3)
    fresh.load_state_dict(torch.load(tmp_path / "cell.pt"))
    torch.testing.assert_close(fresh(x), expected, atol=1e-5, rtol=1e-4)


def test_unclipped_projected_lstm_skips_onednn_only_around_its_call():
    """PyTorch's own CPU kernel is asked for directly (no oneDNN attempt, so no warning; tests/test_readme.py
    checks that in a fresh process), and oneDNN stays enabled for everything else."""
    cell = LstmCellWithProjection(4, 6, 3)
    assert torch._C._get_mkldnn_enabled()
    seen = []
    original = torch.lstm

    def spy(*args):
        seen.append(torch._C._get_mkldnn_enabled())
        return original(*args)

    torch.lstm = spy
    try:
        cell(torch.randn(2, 5, 4))
    finally:
        torch.lstm = original
    assert seen == [False] and torch._C._get_mkldnn_enabled()
