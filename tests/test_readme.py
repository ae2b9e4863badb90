"""The README's Usage section runs as written (its Python blocks in order, its `hf-ctx` commands) and prints no
warning and no transformers LOAD REPORT: nothing a user could not act on. It runs in a fresh Python process,
because PyTorch shows some warnings only once per process (an earlier test would hide them), on tiny stand-ins
for the files the README names (the published ELMo files, a corpus, a trained tagger)."""

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
    exec(compile(block, "README.md", "exec"), namespace)
print("README OK")
"""


def readme_commands() -> list[list[str]]:
    """The `hf-ctx` commands of the Usage section's bash blocks, as argument lists (comments dropped)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", USAGE, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "hf-ctx":
                commands.append(words[1:])
    return commands


@pytest.mark.slow  # a fresh Python process that builds BERT mini: 8 s on a quiet 2-core machine, a minute on a busy one
def test_readme_usage_runs_without_warnings_or_load_reports(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", USAGE, re.S)
    commands = readme_commands()
    assert len(blocks) >= 4 and [c[0] for c in commands] == ["convert-elmo", "embed", "embed"]
    driver = DRIVER.format(commands=commands, blocks=blocks)
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
    assert result.returncode == 0 and "README OK" in result.stdout, output[-3000:]
    assert "LOAD REPORT" not in output and "Warning" not in output, output[-3000:]


def test_the_readme_snippets_import_only_what_they_use():
    """Every name a README code block imports, it uses."""
    for block in re.findall(r"```python\n(.*?)```", USAGE, re.S):
        for names in re.findall(r"^from \S+ import (.+)$", block, re.M):
            for name in (n.strip() for n in names.split("#")[0].split(",")):
                assert re.search(rf"\b{name}\b", block.split(names, 1)[1]), f"unused import {name} in:\n{block}"
