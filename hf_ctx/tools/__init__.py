"""What works with an installed hf_ctx and never travels with a checkpoint: the family registry, checks of what a
user points hf_ctx at, pipelines, training and the example scripts' helpers, model cards and the Hub, the converters,
`hf-ctx embed` and the command line.

The modules one folder up (`hf_ctx/*.py`) are a checkpoint's remote code and never import from here; see
docs/design.md for the layers and what each may import.
"""
