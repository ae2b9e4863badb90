"""GLUE metric module: hand-computed cases, and random cases against formulas computed independently with numpy
(the module itself calls scikit-learn and scipy)."""

import math

import numpy as np
import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
pytest.importorskip("evaluate")
from scipy.stats import rankdata

from hf_ctx.metrics import load_metric


def compute(task, predictions, references):
    return load_metric("glue", task).compute(predictions=predictions, references=references)


# --- independent references -----------------------------------------------------------------------------


def confusion(predictions, references):
    p, r = np.asarray(predictions), np.asarray(references)
    return [int(((p == a) & (r == b)).sum()) for a, b in ((1, 1), (0, 0), (1, 0), (0, 1))]  # tp, tn, fp, fn


def matthews(predictions, references):
    tp, tn, fp, fn = confusion(predictions, references)
    denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return 0.0 if denominator == 0 else (tp * tn - fp * fn) / denominator


def f1(predictions, references):
    tp, _, fp, fn = confusion(predictions, references)
    return 2 * tp / (2 * tp + fp + fn)


def pearson(x, y):
    return float(np.corrcoef(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))[0, 1])


def spearman(x, y):
    return pearson(rankdata(x), rankdata(y))  # Pearson of the ranks, ties sharing their mean rank


# --- hand-computed ----------------------------------------------------------------------------------------


def test_cola_matthews_by_hand():
    # tp=2 tn=1 fp=1 fn=0: (2*1 - 1*0) / sqrt(3*2*2*1) = 2 / sqrt(12)
    assert compute("cola", [1, 1, 1, 0], [1, 1, 0, 0]) == {"matthews_correlation": pytest.approx(2 / math.sqrt(12))}
    assert compute("cola", [0, 1, 0, 1], [1, 0, 1, 0])["matthews_correlation"] == pytest.approx(-1.0)
    # A model that always says "acceptable" scores 0, however often it is right.
    assert compute("cola", [1, 1, 1, 1], [1, 1, 1, 0])["matthews_correlation"] == 0.0


def test_mrpc_and_qqp_accuracy_and_f1_by_hand():
    # tp=2 fp=1 fn=1 tn=1: accuracy 3/5, precision 2/3, recall 2/3, F1 2/3
    for task in ("mrpc", "qqp"):
        result = compute(task, [1, 1, 1, 0, 0], [1, 1, 0, 1, 0])
        assert result == {"accuracy": pytest.approx(0.6), "f1": pytest.approx(2 / 3)}
    # No positive predicted and none in the references: F1 is 0, not a division error.
    assert compute("mrpc", [0, 0], [0, 0]) == {"accuracy": 1.0, "f1": 0.0}
    with pytest.raises(ValueError, match=r"mrpc predictions must be 0 or 1, got \[0, 2\]"):
        compute("mrpc", [0, 2], [0, 1])


def test_stsb_correlations_by_hand():
    # x deviations (-1, 0, 1), y = (1, 2, 4) deviations (-4/3, -1/3, 5/3): r = 3 / (sqrt(2) * sqrt(42) / 3)
    result = compute("stsb", [1.0, 2.0, 3.0], [1.0, 2.0, 4.0])
    assert result == {"pearson": pytest.approx(9 / math.sqrt(84)), "spearmanr": pytest.approx(1.0)}
    # Ties share their mean rank: ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4).
    result = compute("stsb", [0.5, 2.0, 2.0, 4.5], [0.0, 1.0, 2.0, 3.0])
    assert result["spearmanr"] == pytest.approx(pearson([1, 2.5, 2.5, 4], [1, 2, 3, 4]))
    assert pearson([1, 2.5, 2.5, 4], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert compute("stsb", [3.0, 2.0, 1.0], [1.0, 2.0, 3.0])["pearson"] == pytest.approx(-1.0)


@pytest.mark.parametrize("task", ["sst2", "mnli", "mnli_matched", "mnli_mismatched", "qnli", "rte", "wnli", "ax"])
def test_accuracy_tasks_by_hand(task):
    assert compute(task, [0, 2, 1, 1], [0, 2, 2, 1]) == {"accuracy": 0.75}


def test_unknown_configuration():
    with pytest.raises(ValueError, match="unknown GLUE metric configuration 'squad'"):
        load_metric("glue", "squad")


# --- random cases against the numpy formulas ------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_random_cases_match_independent_formulas(seed):
    rng = np.random.default_rng(seed)
    references = rng.integers(0, 2, size=200)
    predictions = np.where(rng.random(200) < 0.7, references, 1 - references)  # right 70% of the time
    assert compute("cola", predictions, references)["matthews_correlation"] == pytest.approx(
        matthews(predictions, references), abs=1e-12
    )
    result = compute("qqp", predictions, references)
    assert result["accuracy"] == pytest.approx(float((predictions == references).mean()))
    assert result["f1"] == pytest.approx(f1(predictions, references), abs=1e-12)

    gold = np.round(rng.uniform(0, 5, size=300), 1)  # STS-B-like scores, with ties
    predicted = gold + rng.normal(0, 1.5, size=300)
    result = compute("stsb", predicted, gold)
    # The module receives float32 values; the references use the same values.
    gold32, predicted32 = gold.astype(np.float32), predicted.astype(np.float32)
    assert result["pearson"] == pytest.approx(pearson(predicted32, gold32), abs=1e-9)
    assert result["spearmanr"] == pytest.approx(spearman(predicted32, gold32), abs=1e-9)
    assert 0.5 < result["pearson"] < 0.95  # the noise leaves a clear but imperfect correlation


def test_stsb_against_scipy_and_qqp_mnli_qnli_by_hand():
    from scipy.stats import pearsonr, spearmanr

    predicted, gold = [4.5, 1.0, 3.2, 3.2, 0.4, 2.8], [5.0, 0.8, 2.5, 4.0, 0.0, 3.0]
    result = compute("stsb", predicted, gold)
    # float32 inputs (the module's feature type), as the reference sees them too
    p32, g32 = np.float32(predicted).astype(np.float64), np.float32(gold).astype(np.float64)
    assert result == {
        "pearson": pytest.approx(pearsonr(p32, g32)[0], abs=1e-12),
        "spearmanr": pytest.approx(spearmanr(p32, g32)[0], abs=1e-12),
    }
    # Ranks (6, 2, 4.5, 4.5, 1, 3) against (6, 2, 3, 5, 1, 4): Pearson of the ranks.
    assert result["spearmanr"] == pytest.approx(pearson([6, 2, 4.5, 4.5, 1, 3], [6, 2, 3, 5, 1, 4]))
    # QQP: tp=1 fp=1 fn=1 tn=2 -> accuracy 3/5, F1 2/(2+1+1)
    assert compute("qqp", [1, 1, 0, 0, 0], [1, 0, 1, 0, 0]) == {"accuracy": 0.6, "f1": pytest.approx(0.5)}
    # MNLI's two dev sets and QNLI: accuracy over three and two classes.
    for task in ("mnli_matched", "mnli_mismatched"):
        assert compute(task, [0, 1, 2, 2, 1], [0, 1, 2, 0, 0]) == {"accuracy": pytest.approx(0.6)}
    assert compute("qnli", [0, 1, 1, 0], [0, 1, 0, 0]) == {"accuracy": 0.75}
