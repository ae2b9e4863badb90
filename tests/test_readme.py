"""The code of the README's Usage section and of docs/migrating.md runs as written (each document's Python blocks in
order, its `hf-ctx` commands) and prints no warning and no transformers LOAD REPORT: nothing a user could not act
on. A document may print the report of a new task head, whose weights are all MISSING (newly initialised), as
every transformers user who adds a head sees. It runs in a fresh Python process, because PyTorch shows some
warnings only once per process (an earlier test would hide them), on tiny stand-ins for the files the documents
name (the published ELMo files, a corpus, a trained tagger). Blocks marked ```` ```python allennlp ```` or
```` ```python flair ```` (the code a document migrates from) are shown, not run."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
USAGE = README[README.index("## Usage") : README.index("## Example commands")]
MIGRATING = (ROOT / "docs" / "migrating.md").read_text(encoding="utf-8")
# Each document whose code runs: its code, the `hf-ctx` commands it runs, and whether it may print a new task
# head's LOAD REPORT.
DOCUMENTS = {
    "README.md": (USAGE, ["convert-elmo", "embed", "embed"], False),
    "docs/migrating.md": (MIGRATING, ["convert-elmo", "embed", "embed"], True),
}

# Python's default filters show every warning but the deprecation ones outside __main__; an error here is a
# warning a user of the README would see.
DRIVER = """
import json, sys, warnings
from pathlib import Path
warnings.simplefilter("error")
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
import numpy as np
from test_convert_elmo import options_for, write_weights
from tiny_checkpoints import WORDS, elmo_tokenizer
import hf_ctx, hf_ctx_cli

# What the README's commands and snippets read.
rng = np.random.default_rng(0)
Path("corpus.txt").write_text("\\n".join(" ".join(rng.choice(WORDS, 6)) for _ in range(200)) + "\\n")
Path("runs/end_to_end/data").mkdir(parents=True)
Path("runs/end_to_end/data/raw.txt").write_text(Path("corpus.txt").read_text())
Path("sentences.txt").write_text("The cat sat on the mat .\\nIt slept .\\n")
Path("vocab.txt").write_text("</S>\\n<S>\\n<UNK>\\nThe\\ncat\\n")
options = options_for(True)
Path("elmo_2x4096_512_2048cnn_2xhighway_options.json").write_text(json.dumps(options))
write_weights("elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5", options, rng)
# A tagger as end_to_end.py trains it: its biLM has no clipping, so PyTorch's fused LSTM runs it.
tokenizer = elmo_tokenizer()
bilm = hf_ctx.ElmoModel(hf_ctx.ElmoConfig(
    char_cnn={{"filters": [[1, 4], [2, 8]], "embedding": {{"dim": 4}}, "n_highway": 1}},
    lstm={{"dim": 16, "projection_dim": 8, "cell_clip": None, "proj_clip": None}},
    vocab_size=len(tokenizer.get_vocab()),
))
labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
config = hf_ctx.TagLMConfig(vocab_size=len(tokenizer.get_vocab()), word_embedding_dim=8, char_cnn_filters=6,
    rnn_hidden_size=6, id2label=dict(enumerate(labels)), tag_scheme="BIO")
hf_ctx.TagLMForTokenClassification.from_bilm(bilm, config).save_pretrained("runs/end_to_end/tagger")
tokenizer.save_pretrained("runs/end_to_end/tagger")
# A reader as run_qa.py trains it.
bert_tokenizer = hf_ctx.train_wordpiece_tokenizer(["corpus.txt"], vocab_size=200)
hf_ctx.CtxBertForQuestionAnswering(hf_ctx.CtxBertConfig(vocab_size=len(bert_tokenizer), hidden_size=16,
    num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)).save_pretrained("runs/squad-mini")
bert_tokenizer.save_pretrained("runs/squad-mini")

for command in {commands!r}:
    print("$", " ".join(command), flush=True)
    hf_ctx_cli.main(command)
namespace = {{}}
for block in {blocks!r}:
    exec(compile(block, {document!r}, "exec"), namespace)
print("DOCUMENT OK")
"""


def python_blocks(text: str) -> list[str]:
    """The code of the ```` ```python ```` blocks of `text`."""
    return re.findall(r"```python\n(.*?)```", text, re.S)


def hf_ctx_commands(text: str) -> list[list[str]]:
    """The `hf-ctx` commands of the ```` ```bash ```` blocks of `text`, as argument lists (comments dropped)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "hf-ctx":
                commands.append(words[1:])
    return commands


def load_report_statuses(output: str) -> set[str]:
    """The statuses (MISSING, UNEXPECTED, MISMATCH, ...) of the rows of the LOAD REPORTs in `output`."""
    rows = re.findall(r"^\S+\s+\|\s+([A-Z]+)\s+\|", output, re.M)
    return set(rows) | ({"unreadable"} if "LOAD REPORT" in output and not rows else set())


@pytest.mark.slow  # a fresh Python process that builds BERT mini: 8 s on a quiet 2-core machine, a minute on a busy one
@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_documents_code_runs_without_warnings_or_load_reports(tmp_path, document):
    text, expected_commands, new_head_reported = DOCUMENTS[document]
    blocks, commands = python_blocks(text), hf_ctx_commands(text)
    assert len(blocks) >= 4 and [c[0] for c in commands] == expected_commands
    driver = DRIVER.format(commands=commands, blocks=blocks, document=document)
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),  # the driver imports test helpers
        "OMP_NUM_THREADS": "1",
    }
    environment.pop("PYTHONWARNINGS", None)
    result = subprocess.run(
        [sys.executable, "-c", driver], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "DOCUMENT OK" in result.stdout, output[-3000:]
    assert "Warning" not in output, output[-3000:]
    if new_head_reported:
        assert load_report_statuses(output) <= {"MISSING"}, output[-3000:]
    else:
        assert "LOAD REPORT" not in output, output[-3000:]


def test_a_new_heads_load_report_is_told_from_one_of_missing_or_unexpected_weights():
    report = "ElmoForTokenClassification LOAD REPORT from: elmo\nKey | Status | \n---+---+-\n{rows}\nNotes:\n"
    assert load_report_statuses(report.format(rows="classifier.bias   | MISSING | ")) == {"MISSING"}
    rows = "classifier.bias   | MISSING | \nsoftmax.weight    | UNEXPECTED | "
    assert load_report_statuses(report.format(rows=rows)) == {"MISSING", "UNEXPECTED"}
    assert load_report_statuses("nothing to report") == set()


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_documents_snippets_import_only_what_they_use(document):
    """Every name a document's code block imports, it uses."""
    for block in python_blocks(DOCUMENTS[document][0]):
        for names in re.findall(r"^from \S+ import (.+)$", block, re.M):
            for name in (n.strip() for n in names.split("#")[0].split(",")):
                assert re.search(rf"\b{name}\b", block.split(names, 1)[1]), f"unused import {name} in:\n{block}"


def test_the_flair_users_file_reads_back_as_elmo_embedders_vectors(tmp_path, monkeypatch):
    """docs/migrating.md part 3: what its `hf-ctx embed` command writes, read back by its h5py block (flair's side),
    is per word the 3 layers that hf_ctx's ElmoEmbedder gives for the same words, concatenated in layer order as
    flair's embedding_mode="all" concatenates them."""
    import numpy as np
    from test_convert_elmo import options_for, write_weights

    import hf_ctx_cli
    from hf_ctx.allennlp import ElmoEmbedder

    part_3 = MIGRATING[MIGRATING.index("## 3. flair") :]
    (command,) = hf_ctx_commands(part_3)
    (read_back,) = [block for block in python_blocks(part_3) if "h5py.File" in block]
    monkeypatch.chdir(tmp_path)
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    options.write_text(json.dumps(options_for(True)))
    write_weights(weights, options_for(True), np.random.default_rng(0))
    hf_ctx_cli.main(["convert-elmo", str(options), str(weights), "elmo-original"])
    sentences = ["The grass is green .", "It is", "Zürich 's ( grass ) , green and long is what it is ."]
    (tmp_path / "sentences.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    hf_ctx_cli.main(command)
    namespace = {}
    exec(compile(read_back, "docs/migrating.md", "exec"), namespace)

    embedder = ElmoEmbedder(str(options), str(weights))
    assert [len(v) for v in namespace["vectors"]] == [len(s.split()) for s in sentences]
    for sentence, vectors in zip(sentences, namespace["vectors"]):
        layers = embedder.embed_sentence(sentence.split())  # (3, words, 2P)
        expected = np.concatenate(list(layers), axis=-1)  # word j: layer 0, layer 1, layer 2
        assert vectors.shape == (len(sentence.split()), 3 * layers.shape[-1])
        np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-5)
