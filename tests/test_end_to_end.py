"""examples/end_to_end.py with tiny sizes: data, biLM pretraining, TagLM on the frozen biLM, reload, pipeline."""

import json
import math
import warnings

import end_to_end
import pytest
import torch
from seqeval.metrics import f1_score
from transformers import AutoModel, AutoModelForTokenClassification

from hf_ctx.data.conll import read_conll

TINY_BILM = {
    "char_cnn": {"filters": [[1, 8], [2, 8]], "embedding": {"dim": 4}, "n_highway": 1},
    "lstm": {"dim": 16, "projection_dim": 8, "cell_clip": None, "proj_clip": None},
}


def test_end_to_end_example_runs_every_step_with_tiny_sizes(tmp_path, capfd):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=DeprecationWarning)  # hidden by Python's default filters too
        results = end_to_end.main(
            [
                "--output_dir",
                str(tmp_path),
                "--num_train_sentences",
                "64",
                "--num_eval_sentences",
                "24",
                "--num_raw_sentences",
                "64",
                "--bilm_config",
                json.dumps(TINY_BILM),
                "--bilm_epochs",
                "1",
                "--tagger_epochs",
                "1",
            ]
        )
    # The main job prints nothing a user could not act on: no warning, no load report; and each stage's expected time.
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == []
    output = capfd.readouterr()
    assert "LOAD REPORT" not in output.out + output.err and "Warning" not in output.err
    assert output.out.count("on 2 idle CPU cores with the default settings)") == 4
    # Output to a file (capfd is no terminal) reads well there: no bar redrawn with carriage returns, no terminal
    # codes, each block of metrics once (validation evaluated once, though also predicted), a short log.
    printed = output.out + output.err
    assert "\r" not in printed and "\x1b" not in printed
    assert printed.count("***** eval metrics *****") == 2  # the biLM's and the tagger's
    assert "predict_validation" not in printed and printed.count("***** predict metrics *****") == 1
    assert len([line for line in printed.splitlines() if line.strip()]) <= 150
    # The summary names validation and test F1, and says the corpus was generated.
    [summary] = [line for line in output.out.splitlines() if line.startswith("[3/4]")]
    assert summary.startswith("[3/4] TagLM entity F1 on the generated corpus: validation ")
    assert f", test {results['tagger']['predict_f1']:.4f};" in summary
    perplexity = results["bilm"]["eval_perplexity"]
    assert math.isfinite(perplexity) and perplexity > 1
    tagger = AutoModelForTokenClassification.from_pretrained(tmp_path / "tagger")
    bilm = AutoModel.from_pretrained(tmp_path / "bilm")
    assert tagger.config.bilm_config["lstm"]["dim"] == 16
    # The tagger carries the pretrained biLM, unchanged: it stayed frozen while the tagger trained.
    for key, tensor in bilm.state_dict().items():
        assert torch.equal(tagger.bilm.state_dict()[key], tensor), key
    # The reported test F1 is conlleval's on the written predictions (seqeval recounts it).
    predicted = read_conll(tmp_path / "tagger" / "predictions_test.txt", num_columns=5)
    assert (
        f1_score([s["column_3"] for s in predicted], [s["ner_tags"] for s in predicted])
        == results["tagger"]["predict_f1"]
    )
    # The reloaded pipeline's entities are spans of the demo sentence.
    for entity in results["entities"]:
        assert end_to_end.DEMO_SENTENCE[entity["start"] : entity["end"]] == entity["word"]
    # The cards and the summary say what happened: generated data, evaluated on validation.txt, tested on test.txt.
    tagger_card = (tmp_path / "tagger" / "README.md").read_text()
    assert "| Trained on | the local file train.txt in CoNLL-2003 format, generated data |" in tagger_card
    assert "Evaluated only on validation.txt in CoNLL-2003 format and test.txt in CoNLL-2003 format;" in tagger_card
    assert "English text like that of" not in tagger_card
    assert f"| test | F1 | {round(results['tagger']['predict_f1'], 4)} |" in tagger_card
    bilm_card = (tmp_path / "bilm" / "README.md").read_text()
    assert "| Trained on | the local files raw.txt, bilm_training_text.txt, generated data |" in bilm_card


def test_options_the_run_would_ignore_and_a_bad_bilm_config_are_refused_before_anything_runs(tmp_path):
    """Your files without --train_file, and the generated data's sizes with it, were silently unused (a binary
    --raw_text_file was never read, and the run reported F1 on generated data); --bilm_config's sections are
    checked as the biLM's config, named as --bilm_config (before: a traceback, or --config_overrides named)."""
    text = tmp_path / "train.txt"
    text.write_text("EU B-ORG\n")
    out = str(tmp_path / "run")
    cases = {
        r"^--validation_file would do nothing here: without --train_file the run generates its data; leave it out$": [
            "--validation_file", str(text)
        ],
        r"^--test_file and --raw_text_file would do nothing here: without --train_file": [
            "--test_file", str(text), "--raw_text_file", str(text)
        ],
        r"^--num_raw_sentences would do nothing here: they size the generated data, and --train_file brings yours": [
            "--train_file", str(text), "--validation_file", str(text), "--num_raw_sentences", "5"
        ],
        r"^--bilm_config is not valid JSON": ["--bilm_config", "{"],
        r"^--bilm_config: lstm must be a dict of options \(.*\), got 5$": ["--bilm_config", '{"lstm": 5}'],
    }  # fmt: skip
    for message, extra in cases.items():
        with pytest.raises(ValueError, match=message):
            end_to_end.main(["--output_dir", out, *extra])
    assert not (tmp_path / "run").exists()
