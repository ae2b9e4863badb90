"""Data preparation: pretraining pairs, masking collator, biLM batches, CoNLL and GLUE readers.

Used from the installed package; none of this travels with checkpoints.
"""
