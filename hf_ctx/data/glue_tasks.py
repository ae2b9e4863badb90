"""The GLUE tasks as records: one `GlueTask` per task (files, columns, labels, metrics, how predictions are
decoded). `data/glue.py` (reading, encoding, submission files), `examples/run_glue.py` and the `glue` metric module
(`hf_ctx/metrics/glue`) all read them, so a task scored by metrics the module already computes is one entry here.
"""

from dataclasses import dataclass, field

from datasets import ClassLabel, Features, Value


@dataclass(frozen=True)
class GlueTask:
    """What reading, scoring and submitting one GLUE task needs.

    Args:
        name: the Hub configuration name ("mrpc", "sst2", ...), also the metric configuration name.
        folder: the task's folder in `glue_data` ("MRPC").
        text_columns: names of the one or two text columns in the datasets built here (the Hub's names).
        file_text_columns: header names of those columns in the TSV files.
        file_label_column: header name of the label column (absent from test files).
        label_values: the labels as the files write them, in class-id order; empty for regression (STS-B).
        label_names: class names in class-id order (the Hub's `ClassLabel` names).
        metrics: what GLUE reports for the task, by the names the metric module (`hf_ctx/metrics/glue`) computes
            them under: "accuracy", "f1" (of class 1), "matthews_correlation", "pearson", "spearmanr".
        split_files: split name -> file name inside `folder`.
        headerless_columns: for files without a header (CoLA train/dev), the names of their columns.
        headerless_splits: the splits whose files have no header.
        submission_files: test split -> file name in a GLUE submission.
    """

    name: str
    folder: str
    text_columns: tuple[str, ...]
    file_text_columns: tuple[str, ...]
    file_label_column: str
    label_values: tuple[str, ...]
    label_names: tuple[str, ...]
    metrics: tuple[str, ...] = ("accuracy",)
    split_files: dict[str, str] = field(
        default_factory=lambda: {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}
    )
    headerless_columns: tuple[str, ...] = ()
    headerless_splits: tuple[str, ...] = ()
    submission_files: dict[str, str] = field(default_factory=dict)

    @property
    def is_regression(self) -> bool:
        return not self.label_values

    @property
    def num_labels(self) -> int:
        return 1 if self.is_regression else len(self.label_values)

    @property
    def validation_splits(self) -> list[str]:
        return [split for split in self.split_files if split.startswith("validation")]

    @property
    def test_splits(self) -> list[str]:
        return [split for split in self.split_files if split.startswith("test")]

    @property
    def metric_configurations(self) -> list[str]:
        """The metric module's configuration names for this task: its name, and one per named dev set
        ("mnli_matched", "mnli_mismatched")."""
        named = [split.removeprefix("validation") for split in self.validation_splits if split != "validation"]
        return [self.name] + [self.name + suffix for suffix in named]

    def decode(self, logits):
        """Predictions from a model's output (what `Trainer.predict` returns; a tuple's first item): class ids
        (the argmax over the last axis) or, for regression, the scores (batch, 1) -> (batch,)."""
        logits = logits[0] if isinstance(logits, tuple) else logits
        return logits.squeeze(-1) if self.is_regression else logits.argmax(-1)

    def features(self) -> Features:
        """The Hub's features: the text columns, "label" (a `ClassLabel`, or float32 for STS-B) and "idx"."""
        label = Value("float32") if self.is_regression else ClassLabel(names=list(self.label_names))
        return Features({**{c: Value("string") for c in self.text_columns}, "label": label, "idx": Value("int32")})


_BINARY = ("0", "1")
_ENTAILMENT = ("entailment", "not_entailment")
_MNLI_LABELS = ("entailment", "neutral", "contradiction")
_MNLI_SPLITS = {
    "train": "train.tsv",
    "validation_matched": "dev_matched.tsv",
    "validation_mismatched": "dev_mismatched.tsv",
    "test_matched": "test_matched.tsv",
    "test_mismatched": "test_mismatched.tsv",
}

GLUE_TASKS: dict[str, GlueTask] = {
    task.name: task
    for task in [
        GlueTask(
            "cola",
            "CoLA",
            ("sentence",),
            ("sentence",),
            "label",
            _BINARY,
            ("unacceptable", "acceptable"),
            metrics=("matthews_correlation",),
            headerless_columns=("source", "label", "original_label", "sentence"),
            headerless_splits=("train", "validation"),
            submission_files={"test": "CoLA.tsv"},
        ),
        GlueTask(
            "sst2",
            "SST-2",
            ("sentence",),
            ("sentence",),
            "label",
            _BINARY,
            ("negative", "positive"),
            submission_files={"test": "SST-2.tsv"},
        ),
        GlueTask(
            "mrpc",
            "MRPC",
            ("sentence1", "sentence2"),
            ("#1 String", "#2 String"),
            "Quality",
            _BINARY,
            ("not_equivalent", "equivalent"),
            metrics=("accuracy", "f1"),
            submission_files={"test": "MRPC.tsv"},
        ),
        GlueTask(
            "stsb",
            "STS-B",
            ("sentence1", "sentence2"),
            ("sentence1", "sentence2"),
            "score",
            (),
            (),
            metrics=("pearson", "spearmanr"),
            submission_files={"test": "STS-B.tsv"},
        ),
        GlueTask(
            "qqp",
            "QQP",
            ("question1", "question2"),
            ("question1", "question2"),
            "is_duplicate",
            _BINARY,
            ("not_duplicate", "duplicate"),
            metrics=("accuracy", "f1"),
            submission_files={"test": "QQP.tsv"},
        ),
        GlueTask(
            "mnli",
            "MNLI",
            ("premise", "hypothesis"),
            ("sentence1", "sentence2"),
            "gold_label",
            _MNLI_LABELS,
            _MNLI_LABELS,
            split_files=_MNLI_SPLITS,
            submission_files={"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"},
        ),
        GlueTask(
            "qnli",
            "QNLI",
            ("question", "sentence"),
            ("question", "sentence"),
            "label",
            _ENTAILMENT,
            _ENTAILMENT,
            submission_files={"test": "QNLI.tsv"},
        ),
        GlueTask(
            "rte",
            "RTE",
            ("sentence1", "sentence2"),
            ("sentence1", "sentence2"),
            "label",
            _ENTAILMENT,
            _ENTAILMENT,
            submission_files={"test": "RTE.tsv"},
        ),
        GlueTask(
            "wnli",
            "WNLI",
            ("sentence1", "sentence2"),
            ("sentence1", "sentence2"),
            "label",
            _BINARY,
            ("not_entailment", "entailment"),
            submission_files={"test": "WNLI.tsv"},
        ),
        # The diagnostic set: test only, scored with an MNLI model.
        GlueTask(
            "ax",
            "diagnostic",
            ("premise", "hypothesis"),
            ("sentence1", "sentence2"),
            "label",
            _MNLI_LABELS,
            _MNLI_LABELS,
            split_files={"test": "diagnostic.tsv"},
            submission_files={"test": "AX.tsv"},
        ),
    ]
}


def glue_task(name: str) -> GlueTask:
    """The task called `name`, by Hub name or folder name, in any case: "sst2", "SST-2", "sts-b", "MNLI"."""
    key = name.lower().replace("-", "").replace("_", "")
    for task in GLUE_TASKS.values():
        if key in (task.name, task.folder.lower().replace("-", "")):
            return task
    raise ValueError(f"unknown GLUE task {name!r}; choose one of {list(GLUE_TASKS)}")
