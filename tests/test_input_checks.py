"""hf_ctx.input_checks: `values_outside`, the one read of an input's values that every check shares, and
`true_positions`, eager and compiled, against brute-force references; the checks of each family are tested with their models (test_modeling_*.py,
test_hostile_inputs.py, test_losses.py)."""

import pytest
import torch

from hf_ctx.input_checks import IGNORE_INDEX, check_label_range, true_positions, values_outside


def first_outside(tensor: torch.Tensor, limit: int):
    """Brute force: the smallest value if it is negative, else the largest if it is limit or more, else None."""
    values = tensor.flatten().tolist()
    if not values:
        return None
    return min(values) if min(values) < 0 else max(values) if max(values) >= limit else None


def test_values_outside_reads_every_range_and_flag_in_one_host_sync(count_host_syncs):
    generator = torch.Generator().manual_seed(0)
    for _ in range(50):
        tensors = [torch.randint(-3, 12, (int(n),), generator=generator) for n in torch.randint(0, 6, (3,))]
        limits = torch.randint(1, 12, (3,), generator=generator).tolist()
        flags = [torch.tensor(tensors[0].numel() > 2), torch.tensor(True), torch.tensor(7)]
        with count_host_syncs() as counter:
            outside, read_flags = values_outside(list(zip(tensors, limits)), flags)
        assert counter.syncs == ["tolist"]
        assert outside == [first_outside(t, limit) for t, limit in zip(tensors, limits)]
        assert read_flags == [int(tensors[0].numel() > 2), 1, 7]


def test_values_outside_without_values_reads_nothing(count_host_syncs):
    with count_host_syncs() as counter:
        assert values_outside([(torch.zeros(0, dtype=torch.long), 5)]) == ([None], [])
        assert values_outside([]) == ([], [])
    assert counter.syncs == []


@pytest.mark.parametrize("labels, error", [([0, 4, IGNORE_INDEX], None), ([0, 5], 5), ([-2, 9], -2), ([], None)])
def test_check_label_range_names_the_first_label_outside(labels, error):
    if error is None:
        check_label_range(torch.tensor(labels, dtype=torch.long), 5)
    else:
        with pytest.raises(ValueError, match=rf"^label {error} is outside \[0, num_labels=5\)"):
            check_label_range(torch.tensor(labels), 5)


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=False)
def test_true_positions_are_the_true_values_eager_and_under_a_plain_torch_compile():
    """The flat positions of the true values, in order (brute force), for any count of them (none, some, all), and
    traced into one graph by a plain `torch.compile`, where `torch.nonzero` breaks the graph."""
    generator = torch.Generator().manual_seed(0)
    masks = [torch.rand(3, 5, generator=generator) < p for p in (0.0, 0.4, 1.0)]  # none, some, all true

    def gathered(positions, values):
        return values.flatten().index_select(0, positions) * 2

    def with_true_positions(mask, values):
        return gathered(true_positions(mask), values)

    def with_nonzero(mask, values):
        return gathered(torch.nonzero(mask.flatten()).flatten(), values)

    torch._dynamo.reset()
    compiled = torch.compile(with_true_positions, backend="eager")
    for mask in masks:
        expected = [i for i, value in enumerate(mask.flatten().tolist()) if value]
        assert true_positions(mask).tolist() == expected
        values = torch.arange(mask.numel()).view(mask.shape)
        assert compiled(mask, values).tolist() == [2 * i for i in expected]
    values = torch.arange(15).view(3, 5)
    assert torch._dynamo.explain(with_true_positions)(masks[1], values).graph_break_count == 0
    assert torch._dynamo.explain(with_nonzero)(masks[1], values).graph_break_count == 1
    torch._dynamo.reset()
