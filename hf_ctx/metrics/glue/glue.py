"""The GLUE benchmark's metrics, one configuration per task.

An `evaluate` metric module shipped inside hf_ctx, so it loads offline:

    >>> from hf_ctx.metrics import load_metric
    >>> glue = load_metric("glue", "mrpc")
    >>> glue.compute(predictions=[1, 0, 1, 1], references=[1, 0, 0, 1])
    {'accuracy': 0.75, 'f1': 0.8}

As GLUE scores them (Wang et al., 2019):
- CoLA: Matthews correlation coefficient;
- MRPC, QQP: accuracy and F1 of the positive class (1 = equivalent / duplicate);
- STS-B: Pearson and Spearman correlation between predicted and gold similarity scores;
- SST-2, MNLI (matched and mismatched dev sets alike), QNLI, RTE, WNLI, AX: accuracy.
"""

import datasets
import evaluate
import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import f1_score, matthews_corrcoef

_CITATION = """\
@inproceedings{wang2019glue,
    title = {{GLUE}: A Multi-Task Benchmark and Analysis Platform for Natural Language Understanding},
    author = {Wang, Alex and Singh, Amanpreet and Michael, Julian and Hill, Felix and Levy, Omer and Bowman, Samuel R.},
    booktitle = {International Conference on Learning Representations},
    year = {2019},
}
"""

_DESCRIPTION = """\
Metrics of the GLUE benchmark: the configuration name is the task ("cola", "sst2", "mrpc", "stsb", "qqp",
"mnli", "mnli_matched", "mnli_mismatched", "qnli", "rte", "wnli", "ax").
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: predicted class ids (ints), or for "stsb" predicted similarity scores (floats).
    references: gold class ids, or for "stsb" gold scores, one per prediction.
Returns:
    "cola": {"matthews_correlation"}, in [-1, 1];
    "mrpc", "qqp": {"accuracy", "f1"}, in [0, 1];
    "stsb": {"pearson", "spearmanr"}, in [-1, 1] (NaN, with a warning, when either side is constant);
    every other task: {"accuracy"}.
Example:
    >>> glue = load_metric("glue", "cola")
    >>> glue.compute(predictions=[1, 1, 0, 0], references=[1, 0, 0, 0])["matthews_correlation"]
    0.5773502691896258
"""

ACCURACY_TASKS = ("sst2", "mnli", "mnli_matched", "mnli_mismatched", "qnli", "rte", "wnli", "ax")
CONFIG_NAMES = ("cola", "mrpc", "qqp", "stsb", *ACCURACY_TASKS)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Glue(evaluate.Metric):
    def _info(self):
        if self.config_name not in CONFIG_NAMES:
            raise ValueError(
                f"unknown GLUE metric configuration {self.config_name!r}; choose one of {list(CONFIG_NAMES)}"
            )
        value = datasets.Value("float32" if self.config_name == "stsb" else "int64")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": value, "references": value}),
            format="numpy",
            reference_urls=["https://gluebenchmark.com/tasks"],
        )

    def _compute(self, predictions, references):
        predictions, references = np.asarray(predictions), np.asarray(references)
        if self.config_name == "cola":
            return {"matthews_correlation": float(matthews_corrcoef(references, predictions))}
        if self.config_name == "stsb":
            predictions, references = predictions.astype(np.float64), references.astype(np.float64)
            return {
                "pearson": float(pearsonr(predictions, references)[0]),
                "spearmanr": float(spearmanr(predictions, references)[0]),
            }
        accuracy = float((predictions == references).mean())
        if self.config_name in ("mrpc", "qqp"):
            for name, values in (("predictions", predictions), ("references", references)):
                if not np.isin(values, (0, 1)).all():
                    raise ValueError(f"{self.config_name} {name} must be 0 or 1, got {sorted(set(values.tolist()))}")
            return {"accuracy": accuracy, "f1": float(f1_score(references, predictions, zero_division=0.0))}
        return {"accuracy": accuracy}
