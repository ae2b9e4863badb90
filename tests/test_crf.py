"""The CRF against brute-force enumeration of every tag sequence on tiny inputs, and its tag-scheme constraints."""

import itertools

import pytest
import torch

from hf_ctx.crf import FORBIDDEN_SCORE, ConditionalRandomField
from hf_ctx.input_checks import IGNORE_INDEX
from hf_ctx.tag_schemes import allowed_transitions

BIO_LABELS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}


def sequence_score(crf, emissions, tags):
    """Score of one tag sequence (list of ids) for one sentence's emissions (n, T), written out term by term."""
    allowed = crf.allowed
    t = crf.num_tags

    def trans(i, j):
        return FORBIDDEN_SCORE if not allowed[i, j] else crf.transitions[i, j].item()

    start = crf.start_transitions[tags[0]].item() if crf.include_start_end_transitions else 0.0
    end = crf.end_transitions[tags[-1]].item() if crf.include_start_end_transitions else 0.0
    score = (start if allowed[t, tags[0]] else FORBIDDEN_SCORE) + (
        end if allowed[tags[-1], t + 1] else FORBIDDEN_SCORE
    )
    score += sum(emissions[i, tag].item() for i, tag in enumerate(tags))
    score += sum(trans(a, b) for a, b in zip(tags, tags[1:]))
    return score


def brute_force(crf, emissions, length):
    """(log Z, best sequence, best score) of one sentence by enumerating all T**length sequences."""
    sequences = list(itertools.product(range(crf.num_tags), repeat=length))
    scores = torch.tensor([sequence_score(crf, emissions[:length], seq) for seq in sequences], dtype=torch.float64)
    best = int(scores.argmax())
    return torch.logsumexp(scores, 0).item(), list(sequences[best]), scores[best].item()


def random_crf(num_tags, constraints=None, include_start_end=True):
    crf = ConditionalRandomField(num_tags, constraints, include_start_end_transitions=include_start_end)
    with torch.no_grad():
        crf.transitions.normal_()
        if include_start_end:
            crf.start_transitions.normal_()
            crf.end_transitions.normal_()
    return crf


def prefix_mask(lengths, max_len):
    return torch.arange(max_len)[None, :] < torch.tensor(lengths)[:, None]


@pytest.mark.parametrize("include_start_end", [True, False])
@pytest.mark.parametrize("constrained", [False, True])
def test_log_likelihood_and_viterbi_match_brute_force(include_start_end, constrained):
    constraints = allowed_transitions("BIO", BIO_LABELS) if constrained else None
    crf = random_crf(5, constraints, include_start_end)
    lengths = [4, 1, 3, 2]
    emissions = torch.randn(len(lengths), 4, 5) * 2
    mask = prefix_mask(lengths, 4)
    tags = torch.randint(0, 5, (len(lengths), 4))
    tags[~mask] = IGNORE_INDEX

    log_likelihood = crf(emissions, tags, mask)
    best_tags, best_scores = crf.viterbi_decode(emissions, mask)
    max_marginals = crf.max_marginals(emissions, mask)
    for b, n in enumerate(lengths):
        log_z, best, best_score = brute_force(crf, emissions[b], n)
        gold = sequence_score(crf, emissions[b], tags[b, :n].tolist())
        assert log_likelihood[b].item() == pytest.approx(gold - log_z, rel=1e-6, abs=1e-3)
        assert best_tags[b, :n].tolist() == best
        assert (best_tags[b, n:] == IGNORE_INDEX).all()
        assert best_scores[b].item() == pytest.approx(best_score, abs=1e-3)
        # Max-marginals: argmax is the Viterbi path; each word's maximum is the Viterbi score; entry (i, j)
        # is the best score among the sequences with tag j at word i.
        assert max_marginals[b, :n].argmax(-1).tolist() == best
        torch.testing.assert_close(
            max_marginals[b, :n].max(-1).values, torch.full((n,), best_score), atol=1e-3, rtol=0
        )
        i, j = n - 1, (best[-1] + 1) % 5
        constrained_best = max(
            sequence_score(crf, emissions[b], seq) for seq in itertools.product(range(5), repeat=n) if seq[i] == j
        )
        assert max_marginals[b, i, j].item() == pytest.approx(constrained_best, abs=1e-3)
        assert (max_marginals[b, n:] == 0).all()


def test_probabilities_of_all_sequences_sum_to_one():
    crf = random_crf(3)
    emissions = torch.randn(1, 3, 3)
    total = sum(crf(emissions, torch.tensor([seq])).exp().item() for seq in itertools.product(range(3), repeat=3))
    assert total == pytest.approx(1.0, abs=1e-5)


def test_gradient_of_log_partition_is_the_tag_marginals():
    # d logZ / d emissions[i, j] = P(y_i = j): checks the forward algorithm beyond its value.
    crf = random_crf(3)
    emissions = torch.randn(1, 3, 3, requires_grad=True)
    log_z = -crf(emissions, torch.zeros(1, 3, dtype=torch.long))  # gold score of all-zeros is linear in e
    (grad,) = torch.autograd.grad(log_z.sum(), emissions)
    marginals = torch.zeros(3, 3)
    for seq in itertools.product(range(3), repeat=3):
        p = crf(emissions.detach(), torch.tensor([seq])).exp().item()
        for i, tag in enumerate(seq):
            marginals[i, tag] += p
    gold_indicator = torch.zeros(3, 3)
    gold_indicator[:, 0] = 1
    torch.testing.assert_close(grad[0] + gold_indicator, marginals, atol=1e-5, rtol=0)


def test_empty_rows_and_float32_under_autocast():
    crf = random_crf(3)
    emissions = torch.randn(2, 3, 3)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    ll = crf(emissions, torch.zeros(2, 3, dtype=torch.long), mask)
    assert ll[1].item() == 0.0 and torch.isfinite(ll).all()
    tags, scores = crf.viterbi_decode(emissions, mask)
    assert (tags[1] == IGNORE_INDEX).all() and scores[1].item() == 0.0
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ll_autocast = crf(emissions.bfloat16(), torch.zeros(2, 3, dtype=torch.long), mask)
    assert ll_autocast.dtype == torch.float32
    torch.testing.assert_close(
        ll_autocast, crf(emissions.bfloat16().float(), torch.zeros(2, 3, dtype=torch.long), mask)
    )


def test_bad_inputs_raise_clear_errors():
    crf = random_crf(3)
    with pytest.raises(ValueError, match="emissions must have shape"):
        crf(torch.randn(2, 3, 4), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="prefix"):
        crf(torch.randn(1, 3, 3), torch.zeros(1, 3, dtype=torch.long), torch.tensor([[True, False, True]]))
    with pytest.raises(ValueError, match=r"tags inside the mask must be in \[0, 3\)"):
        crf(torch.randn(1, 2, 3), torch.tensor([[0, 3]]))
    with pytest.raises(ValueError, match="tags have shape"):
        crf(torch.randn(1, 2, 3), torch.tensor([[0, 1, 2]]))


# --- constraints ------------------------------------------------------------------------------------------


def test_bio_transitions_by_hand():
    labels = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}
    start, end = 5, 6
    expected = {
        (start, 0),
        (start, 1),
        (start, 3),
        (0, end),
        (1, end),
        (2, end),
        (3, end),
        (4, end),
    }
    for i in range(5):
        expected |= {(i, 0), (i, 1), (i, 3)}  # O and B-x may follow anything
    expected |= {(1, 2), (2, 2), (3, 4), (4, 4)}  # I-x only continues x
    assert set(allowed_transitions("BIO", labels)) == expected
    assert set(allowed_transitions("IOB2", labels)) == expected


def test_iob1_transitions_by_hand():
    labels = {0: "O", 1: "I-PER", 2: "B-PER", 3: "I-LOC"}
    start, end = 4, 5
    expected = {(start, 0), (start, 1), (start, 3), (0, end), (1, end), (2, end), (3, end)}
    for i in range(4):
        expected |= {(i, 0), (i, 1), (i, 3)}  # O and I-x may follow anything
    expected |= {(1, 2), (2, 2)}  # B-PER only right after a PER entity
    assert set(allowed_transitions("IOB1", labels)) == expected


def test_bioes_transitions_by_hand():
    labels = {0: "O", 1: "B-PER", 2: "I-PER", 3: "E-PER", 4: "S-PER"}
    start, end = 5, 6
    expected = {(start, 0), (start, 1), (start, 4), (0, end), (3, end), (4, end)}
    for closed in (0, 3, 4):  # after O, E-x, S-x: a new chunk or O
        expected |= {(closed, 0), (closed, 1), (closed, 4)}
    expected |= {(1, 2), (1, 3), (2, 2), (2, 3)}  # inside an open PER chunk
    assert set(allowed_transitions("BIOES", labels)) == expected


def is_valid(scheme, labels, sequence):
    pairs = set(allowed_transitions(scheme, labels))
    n = len(labels)
    path = [n, *sequence, n + 1]
    return all((a, b) in pairs for a, b in zip(path, path[1:]))


@pytest.mark.parametrize(
    "scheme,labels",
    [
        ("BIO", BIO_LABELS),
        ("IOB1", {0: "O", 1: "I-PER", 2: "B-PER", 3: "I-LOC", 4: "B-LOC"}),
        ("BIOES", {0: "O", 1: "B-PER", 2: "I-PER", 3: "E-PER", 4: "S-PER"}),
        ("BIOUL", {0: "O", 1: "B-PER", 2: "I-PER", 3: "L-PER", 4: "U-PER"}),
    ],
)
def test_decoding_never_breaks_the_scheme(scheme, labels):
    crf = random_crf(len(labels), allowed_transitions(scheme, labels))
    with torch.no_grad():  # make forbidden transitions the most attractive ones
        crf.transitions.copy_(torch.where(crf.allowed[:5, :5], -1.0, 5.0))
    emissions = torch.randn(64, 5, len(labels)) * 3
    tags, _ = crf.viterbi_decode(emissions)
    assert all(is_valid(scheme, labels, row) for row in tags.tolist())
    # Unconstrained, the same scores do produce invalid sequences: the constraint is what prevents them.
    free = random_crf(len(labels))
    with torch.no_grad():
        free.transitions.copy_(crf.transitions)
    free_tags, _ = free.viterbi_decode(emissions)
    assert not all(is_valid(scheme, labels, row) for row in free_tags.tolist())


def test_labels_outside_the_scheme_are_rejected():
    with pytest.raises(ValueError, match="prefix 'E'"):
        allowed_transitions("BIO", {0: "O", 1: "E-PER"})
    with pytest.raises(ValueError, match="unknown tag scheme"):
        allowed_transitions("BILOU2", {0: "O"})
    with pytest.raises(ValueError, match="neither 'O'"):
        allowed_transitions("BIO", {0: "O", 1: "PER"})
