"""`training_curves.png`: a training run's loss and evaluation metrics against steps, for a person to look at
beside the checkpoint (and in its model card).

matplotlib is a dependency of hf_ctx (the pictures are part of every card); an environment without it still
saves the model and its card, and one logged line says the picture is skipped.
"""

import copy
import io
import logging
import os

from ..data.atomic_write import atomic_write

logger = logging.getLogger(__name__)

# Entries of the Trainer's evaluation logs that describe the run, not the model.
_BOOKKEEPING = ("runtime", "samples_per_second", "steps_per_second", "epoch", "step", "total_flos")
_PANEL_SIZE = (4.0, 3.0)  # inches, one metric each
_COLUMNS = 3
# inches around and between the panels
_MARGINS = {"left": 0.7, "right": 0.2, "top": 0.35, "bottom": 0.5, "between_columns": 0.75, "between_rows": 0.9}
# path -> (curves, the file's (mtime_ns, size) once written) of each picture this process drew: a script writes its
# card twice (after training, then with the test scores), and drawing the same curves again took 0.3-0.6 s a run.
_DRAWN: dict[str, tuple[dict, tuple[int, int]]] = {}


def training_curves(log_history: list[dict], final_metrics: dict[str, float] | None = None, final_step=None):
    """The curves of a run, from `Trainer.state.log_history`: {"training loss": (steps, values), "eval_f1":
    (steps, values), ...}: the training loss as logged every `--logging_steps`, and each evaluation metric
    (`eval_*`, the loss included; not the timings). `final_metrics` (`{"eval_f1": ...}`), measured at step
    `final_step` by a script that did not log them (evaluated while predicting), is added as the last point of
    its curves. Curves with no point are left out."""
    curves: dict[str, tuple[list, list]] = {}

    def add(name, step, value):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            steps, values = curves.setdefault(name, ([], []))
            if step not in steps:
                steps.append(step)
                values.append(float(value))

    for entry in log_history:
        step = entry.get("step")
        if "loss" in entry:
            add("training loss", step, entry["loss"])
        for key, value in entry.items():
            if key.startswith("eval_") and not key.endswith(_BOOKKEEPING):
                add(key, step, value)
    for key, value in (final_metrics or {}).items():
        if key.startswith("eval_") and not key.endswith(_BOOKKEEPING):
            add(key, final_step, value)
    return curves


def write_training_curves(path: str | os.PathLike, curves: dict[str, tuple[list, list]]) -> bool:
    """Draw `curves` (`training_curves`), one panel each, `_COLUMNS` to a row, into the PNG file `path`
    (written atomically). Returns whether it was written: not without curves, nor without matplotlib (each said
    in one line)."""
    if not curves:
        logger.info(f"not drawing {os.path.basename(path)}: the run logged no training loss and no evaluation")
        return False
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        logger.info(
            f"not drawing {os.path.basename(path)}: matplotlib, a dependency of hf_ctx, is not installed "
            "(pip install matplotlib)"
        )
        return False
    key = os.path.abspath(path)
    if key in _DRAWN and _DRAWN[key] == (curves, _stamp(path)):  # this picture, still as this process wrote it
        return True
    figure = curves_figure(curves, Figure)
    FigureCanvasAgg(figure)
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=100)
    with atomic_write(path, "wb") as f:
        f.write(image.getvalue())
    _DRAWN[key] = (copy.deepcopy(curves), _stamp(path))
    return True


def _stamp(path) -> tuple[int, int] | None:
    """(mtime_ns, size) of the file at `path`, None where there is none."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def curves_figure(curves: dict[str, tuple[list, list]], figure_class):
    """The figure `write_training_curves` draws: a panel per curve, `_COLUMNS` to a row. A curve of one point
    (a run evaluated once) would be a lone dot: its panel writes the value beside it and says "one evaluation"."""
    columns = min(len(curves), _COLUMNS)
    rows = -(-len(curves) // columns)
    width, height = _PANEL_SIZE[0] * columns, _PANEL_SIZE[1] * rows
    # A Figure of its own, not pyplot's: no display, and no state shared with the user's plots. Margins fixed in
    # inches (tick labels, a title above and a label below each panel) rather than matplotlib's constrained
    # layout, which measured every label again and doubled the time of each picture (0.27 s against 0.8 s).
    figure = figure_class(figsize=(width, height))
    axes_width = (width - _MARGINS["left"] - _MARGINS["right"] - _MARGINS["between_columns"] * (columns - 1)) / columns
    axes_height = (height - _MARGINS["top"] - _MARGINS["bottom"] - _MARGINS["between_rows"] * (rows - 1)) / rows
    figure.subplots_adjust(
        left=_MARGINS["left"] / width,
        right=1 - _MARGINS["right"] / width,
        top=1 - _MARGINS["top"] / height,
        bottom=_MARGINS["bottom"] / height,
        wspace=_MARGINS["between_columns"] / axes_width,
        hspace=_MARGINS["between_rows"] / axes_height,
    )
    for axes, (name, (steps, values)) in zip(figure.subplots(rows, columns, squeeze=False).flat, curves.items()):
        axes.plot(steps, values, marker="o" if len(steps) < 20 else None)
        if len(steps) == 1:
            axes.annotate(f"{values[0]:.4g}", (steps[0], values[0]), xytext=(8, 4), textcoords="offset points")
            name = f"{name} (one evaluation, at step {steps[0]})"
        axes.set_title(name)
        axes.set_xlabel("step")
        axes.grid(alpha=0.3)
    for axes in figure.axes[len(curves) :]:
        axes.set_visible(False)
    return figure
