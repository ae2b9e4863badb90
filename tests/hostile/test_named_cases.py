"""Cases of issues #50 and #51 tried again from a fresh clone, through the entry point the issue named, that did not
hold there: each function is named after what it tries."""

import pytest
from tiny_checkpoints import taglm

import hf_ctx


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    folder = tmp_path_factory.mktemp("taglm")
    model, tokenizer = taglm(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_word_pipeline_on_a_tagger_whose_vocab_txt_was_cut_is_refused_naming_both_sizes(tagger, tmp_path):
    """`pipeline("token-classification", ...)` on a TagLM folder whose vocab.txt was cut loaded and tagged other
    words than it was given (the scripts refused it; the pipeline did not)."""
    import shutil

    from transformers import pipeline

    folder = tmp_path / "cut"
    shutil.copytree(tagger, folder)
    words = (folder / "vocab.txt").read_text().splitlines()
    (folder / "vocab.txt").write_text("\n".join(words[:5]) + "\n")
    with pytest.raises(ValueError) as raised:
        pipeline("token-classification", model=str(folder), pipeline_class=hf_ctx.WordTokenClassificationPipeline)
    # Refused by the model's from_pretrained, inside pipeline(): transformers' model loading puts its own
    # "Could not load model ..." (with the traceback) before a loading error, so the line is in the message
    assert (
        f"the tokenizer of {folder} has 5 words (vocab.txt) but the model's word vocabulary has {len(words)}"
        in str(raised.value)
    )
    whole = pipeline("token-classification", model=str(tagger), pipeline_class=hf_ctx.WordTokenClassificationPipeline)
    assert len(whole("red cat runs", ignore_labels=[])) == 3
