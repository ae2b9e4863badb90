"""hf_ctx.tools.plots: the curves read from a Trainer's log history, and a picture not drawn said in one line."""

import logging
import sys

import pytest

from hf_ctx.tools.plots import training_curves, write_training_curves

LOG_HISTORY = [
    {"loss": 2.0, "grad_norm": 1.0, "learning_rate": 1e-3, "epoch": 0.5, "step": 5},
    {"loss": 1.0, "grad_norm": 1.0, "learning_rate": 5e-4, "epoch": 1.0, "step": 10},
    {"eval_loss": 1.5, "eval_f1": 0.25, "eval_runtime": 0.1, "eval_samples_per_second": 9.0, "epoch": 1.0, "step": 10},
    {"loss": 0.5, "epoch": 1.5, "step": 15},
    {"train_runtime": 3.0, "train_loss": 1.2, "total_flos": 1.0, "epoch": 2.0, "step": 20},
]


def test_curves_are_the_training_loss_and_each_evaluation_metric_against_steps():
    assert training_curves(LOG_HISTORY) == {
        "training loss": ([5, 10, 15], [2.0, 1.0, 0.5]),
        "eval_loss": ([10], [1.5]),
        "eval_f1": ([10], [0.25]),
    }
    # An evaluation the script did not log ends its curves; one logged at that step already is not repeated.
    final = {"eval_loss": 1.25, "eval_f1": 0.5, "eval_runtime": 0.2}
    curves = training_curves(LOG_HISTORY, final, 20)
    assert curves["eval_f1"] == ([10, 20], [0.25, 0.5]) and "eval_runtime" not in curves
    assert training_curves(LOG_HISTORY, {"eval_f1": 0.9}, 10)["eval_f1"] == ([10], [0.25])
    assert training_curves([{"train_runtime": 1.0, "train_loss": 1.0, "step": 2}]) == {}


def test_the_picture_has_a_panel_per_curve_and_is_skipped_without_matplotlib(tmp_path, monkeypatch, caplog):
    image = pytest.importorskip("matplotlib.image")
    path = tmp_path / "training_curves.png"
    curves = training_curves(LOG_HISTORY, {"eval_accuracy": 0.5}, 20)  # 4 curves: 3 to a row, 2 rows
    assert write_training_curves(path, curves)
    assert image.imread(path).shape[:2] == (600, 1200)
    with caplog.at_level(logging.INFO, logger="hf_ctx.tools.plots"):
        assert not write_training_curves(tmp_path / "none.png", {}) and not (tmp_path / "none.png").exists()
        monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails as if not installed
        assert not write_training_curves(tmp_path / "skipped.png", curves)
    assert not (tmp_path / "skipped.png").exists()
    # Each picture not drawn says why, in one line.
    assert [r.getMessage() for r in caplog.records] == [
        "not drawing none.png: the run logged no training loss and no evaluation",
        "not drawing skipped.png: matplotlib, a dependency of hf_ctx, is not installed (pip install matplotlib)",
    ]


def test_a_curve_of_one_evaluation_writes_its_value_and_says_so():
    """A run evaluated once drew its metric panels as a lone dot, no value to read."""
    figure_module = pytest.importorskip("matplotlib.figure")
    from hf_ctx.tools.plots import curves_figure

    figure = curves_figure(training_curves(LOG_HISTORY), figure_module.Figure)
    panels = {axes.get_title(): [text.get_text() for text in axes.texts] for axes in figure.axes if axes.get_visible()}
    assert panels == {
        "training loss": [],  # three points: a line, no values written
        "eval_loss (one evaluation, at step 10)": ["1.5"],
        "eval_f1 (one evaluation, at step 10)": ["0.25"],
    }


def test_the_same_curves_are_drawn_once_unless_the_file_changed(tmp_path, monkeypatch):
    """A script writes its card twice (after training, then with the test scores): the second call with the same
    curves keeps the picture it drew; new curves, or a file removed or replaced since, are drawn again."""
    pytest.importorskip("matplotlib.figure")
    from hf_ctx.tools import plots

    drawn = []
    monkeypatch.setattr(plots, "curves_figure", lambda curves, cls, draw=plots.curves_figure: (
        drawn.append(list(curves)), draw(curves, cls))[1])  # fmt: skip
    path = tmp_path / "training_curves.png"
    curves = training_curves(LOG_HISTORY)
    assert write_training_curves(path, curves) and write_training_curves(path, training_curves(LOG_HISTORY))
    assert len(drawn) == 1
    curves["eval_f1"][1][0] = 0.5  # the caller's dict changed in place: other curves
    assert write_training_curves(path, curves) and len(drawn) == 2
    path.unlink()
    assert write_training_curves(path, curves) and path.is_file() and len(drawn) == 3
    path.write_bytes(b"not a picture")
    assert write_training_curves(path, curves) and path.read_bytes()[:4] == b"\x89PNG" and len(drawn) == 4
    assert write_training_curves(tmp_path / "other.png", curves) and len(drawn) == 5
