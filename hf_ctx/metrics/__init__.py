"""`evaluate` metric modules shipped inside hf_ctx, so evaluation works offline.

Each metric lives in ``metrics/<name>/<name>.py``; ``load_metric(name)`` loads it by
local path, which ``evaluate`` does without reaching the Hub.
"""

from pathlib import Path

import evaluate

_HERE = Path(__file__).resolve().parent
# Metric names served by a configuration of another module: name -> (module, configuration).
_CONFIGURATIONS = {"squad_v2": ("squad", "squad_v2")}


def load_metric(name: str, config_name: str | None = None, **kwargs) -> evaluate.EvaluationModule:
    """Load the metric module ``name`` shipped in hf_ctx (e.g. ``"seqeval"``, ``"glue"``, ``"squad"``,
    ``"squad_v2"``)."""
    if name in _CONFIGURATIONS and config_name is None:
        name, config_name = _CONFIGURATIONS[name]
    script = _HERE / name / f"{name}.py"
    if not script.is_file():
        available = sorted([p.name for p in _HERE.iterdir() if (p / f"{p.name}.py").is_file()] + list(_CONFIGURATIONS))
        raise ValueError(f"unknown hf_ctx metric {name!r}; available: {available}")
    return evaluate.load(str(script), config_name, **kwargs)
