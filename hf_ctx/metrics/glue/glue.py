"""The GLUE benchmark's metrics, one configuration per task.

An `evaluate` metric module shipped inside hf_ctx, so it loads offline:

    >>> from hf_ctx.metrics import load_metric
    >>> glue = load_metric("glue", "mrpc")
    >>> glue.compute(predictions=[1, 0, 1, 1], references=[1, 0, 0, 1])
    {'accuracy': 0.75, 'f1': 0.8}

Which metrics each task reports comes from its record, `hf_ctx.data.glue.GLUE_TASKS` (`GlueTask.metrics`), which
`examples/run_glue.py` reads too. As GLUE scores them (Wang et al., 2019):
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

from hf_ctx.data.glue_tasks import GLUE_TASKS

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

# Configuration name -> the task's record ("mnli_matched" and "mnli_mismatched" are MNLI's).
CONFIGURATIONS = {name: task for task in GLUE_TASKS.values() for name in task.metric_configurations}
# Metric name -> f(predictions, references), for every name a task's record may list.
METRICS = {
    "accuracy": lambda p, r: (p == r).mean(),
    "f1": lambda p, r: f1_score(r, p, zero_division=0.0),
    "matthews_correlation": lambda p, r: matthews_corrcoef(r, p),
    "pearson": lambda p, r: pearsonr(p, r)[0],
    "spearmanr": lambda p, r: spearmanr(p, r)[0],
}


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Glue(evaluate.Metric):
    def _info(self):
        if self.config_name not in CONFIGURATIONS:
            raise ValueError(
                f"unknown GLUE metric configuration {self.config_name!r}; choose one of {list(CONFIGURATIONS)}"
            )
        value = datasets.Value("float32" if CONFIGURATIONS[self.config_name].is_regression else "int64")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": value, "references": value}),
            format="numpy",
            reference_urls=["https://gluebenchmark.com/tasks"],
        )

    def _compute(self, predictions, references):
        task = CONFIGURATIONS[self.config_name]
        predictions, references = np.asarray(predictions), np.asarray(references)
        if task.is_regression:
            predictions, references = predictions.astype(np.float64), references.astype(np.float64)
        if "f1" in task.metrics:  # of class 1: the labels must be binary
            for name, values in (("predictions", predictions), ("references", references)):
                if not np.isin(values, (0, 1)).all():
                    raise ValueError(f"{self.config_name} {name} must be 0 or 1, got {sorted(set(values.tolist()))}")
        return {name: float(METRICS[name](predictions, references)) for name in task.metrics}
