"""Held-out cases, data at scale and full disks: an empty file, a file of blank lines, one line, one huge line,
latin-1 bytes, CRLF line endings, a gzip file whole and truncated, a full disk while embedding, a read-only output
folder. Each must give a correct result or one line naming the file (and line) and exit 1, with nothing half
written. Each case is a function named after what it tries."""

import gzip
import os
import subprocess

import h5py
import pytest
from filesystems import tmpfs
from script_errors import one_error_line
from tiny_checkpoints import elmo_bilm

from hf_ctx import train_wordpiece_tokenizer
from hf_ctx.tools.cli import main as cli_main
from hf_ctx.tools.errors import run_script

LINES = "".join(f"red cat {i} runs fast\n" for i in range(40))


@pytest.fixture(scope="module")
def elmo_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("elmo")
    model, tokenizer = elmo_bilm(root)
    model.save_pretrained(root / "elmo")
    tokenizer.save_pretrained(root / "elmo")
    return root / "elmo"


def train_tokenizer(*files, output_dir):
    return cli_main(["train-tokenizer", *map(str, files), "--output_dir", str(output_dir), "--vocab_size", "60"])


@pytest.mark.parametrize("content", ["", "\n\n   \n\t\n"], ids=["empty", "blank lines"])
def test_train_tokenizer_on_a_file_without_text_is_one_line_and_writes_nothing(tmp_path, capsys, content):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(content)
    line = one_error_line(capsys, lambda: train_tokenizer(corpus, output_dir=tmp_path / "tok"))
    assert line == f"error: {corpus} holds no text (empty or only blank lines)"
    assert not (tmp_path / "tok").exists()


def test_a_tokenizer_trained_on_one_line_encodes_that_line_without_unknowns(tmp_path):
    corpus = tmp_path / "one.txt"
    corpus.write_text("the red cat runs\n")
    tokenizer = train_wordpiece_tokenizer([corpus], vocab_size=60, min_frequency=1)
    ids = tokenizer("the red cat runs")["input_ids"]
    assert tokenizer.unk_token_id not in ids and tokenizer.decode(ids, skip_special_tokens=True) == "the red cat runs"


def test_train_tokenizer_reads_a_gzip_file_as_its_text(tmp_path):
    """Before: a .gz corpus was read as its compressed bytes: "not valid UTF-8 ... save the file as UTF-8"."""
    plain, packed = tmp_path / "corpus.txt", tmp_path / "corpus.txt.gz"
    plain.write_text(LINES)
    packed.write_bytes(gzip.compress(LINES.encode()))
    from_plain = train_wordpiece_tokenizer([plain], vocab_size=60, min_frequency=1)
    from_gzip = train_wordpiece_tokenizer([packed], vocab_size=60, min_frequency=1)
    assert from_gzip.get_vocab() == from_plain.get_vocab()


def test_train_tokenizer_on_a_truncated_gzip_names_it_and_writes_nothing(tmp_path, capsys):
    packed = tmp_path / "corpus.txt.gz"
    whole = gzip.compress((LINES * 50).encode())
    packed.write_bytes(whole[: len(whole) // 2])
    line = one_error_line(capsys, lambda: train_tokenizer(packed, output_dir=tmp_path / "tok"))
    assert line.startswith(f"error: {packed}: corrupt or truncated gzip file after line ")
    assert not (tmp_path / "tok").exists()


def test_latin1_bytes_are_named_by_file_and_line_in_every_reader(tmp_path, capsys, elmo_folder):
    text = tmp_path / "latin1.txt"
    text.write_bytes("red cat\ncaf\xe9 au lait\n".encode("latin-1"))
    expected = f"error: {text}:2: not valid UTF-8 (invalid continuation byte at byte 3 of the line); save the file"
    assert one_error_line(capsys, lambda: train_tokenizer(text, output_dir=tmp_path / "tok")).startswith(expected)
    embed = ["embed", str(elmo_folder), str(text), str(tmp_path / "v.hdf5"), "--no_progress"]
    assert one_error_line(capsys, lambda: cli_main(embed)).startswith(expected)
    import run_ner

    argv = ["--model_type", "bert", "--config_name", "tiny", "--vocab_size", "60", "--train_file", str(text)]
    argv += ["--do_train", "--output_dir", str(tmp_path / "ner"), "--use_cpu", "--report_to", "none"]
    assert one_error_line(capsys, lambda: run_script(run_ner.main, argv)).startswith(expected)


def test_crlf_line_endings_give_the_words_of_lf_ones(tmp_path, elmo_folder):
    from hf_ctx.tools.embed import ElmoEmbedder

    unix, windows = tmp_path / "unix.txt", tmp_path / "windows.txt"
    unix.write_text("red cat runs\nblue dog\n")
    windows.write_bytes(b"red cat runs\r\nblue dog\r\n")
    embedder = ElmoEmbedder(str(elmo_folder), device="cpu")
    for source in (unix, windows):
        embedder.embed_file(source, tmp_path / f"{source.stem}.hdf5", progress=False)
    with h5py.File(tmp_path / "unix.hdf5") as a, h5py.File(tmp_path / "windows.hdf5") as b:
        assert a["sentence_to_index"][()] == b["sentence_to_index"][()]
        assert (a["0"][()] == b["0"][()]).all() and (a["1"][()] == b["1"][()]).all()
    tokenizer = train_wordpiece_tokenizer([windows], vocab_size=60, min_frequency=1)
    assert not any("\r" in token for token in tokenizer.get_vocab())


def test_crlf_conll_files_give_tags_without_carriage_returns(tmp_path):
    from hf_ctx.data.conll import read_conll

    conll = tmp_path / "train.txt"
    conll.write_bytes(b"EU NNP B-NP B-ORG\r\nrejects VBZ B-VP O\r\n\r\nred JJ B-NP O\r\n")
    sentences = read_conll(conll)
    assert [s["ner_tags"] for s in sentences] == [["B-ORG", "O"], ["O"]]
    assert [s["tokens"] for s in sentences] == [["EU", "rejects"], ["red"]]


def test_embed_of_one_huge_line_is_refused_by_line_before_writing(tmp_path, capsys, elmo_folder):
    text = tmp_path / "huge.txt"
    text.write_text("red cat\n" + "cat " * 200_000 + "\n")
    output = tmp_path / "v.hdf5"
    line = one_error_line(capsys, lambda: cli_main(["embed", str(elmo_folder), str(text), str(output)]))
    assert line.startswith(f"error: {text}:2: 200000 words, more than this ELMo's max_sentence_words=")
    assert not output.exists()


def test_embed_on_a_full_disk_is_one_line_naming_the_file_and_keeps_what_was_committed(tmp_path, capsys, elmo_folder):
    text = tmp_path / "many.txt"
    text.write_text("".join(f"red cat {i} runs fast and the blue dog sleeps\n" for i in range(3000)))
    with tmpfs(tmp_path / "disk", size="256k") as disk:
        output = disk / "vectors.hdf5"
        line = one_error_line(
            capsys, lambda: cli_main(["embed", str(elmo_folder), str(text), str(output), "--no_progress"])
        )
        assert str(output) in line and "No space" in line
        leftovers = [name for name in os.listdir(disk) if name != "vectors.hdf5"]
        assert leftovers == []
        if output.exists():  # what was committed before the disk filled reads back whole
            with h5py.File(output) as f:
                assert all(f[key].shape[0] > 0 for key in f if key.isdigit())


def test_train_tokenizer_into_a_read_only_folder_is_one_line_naming_it(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(LINES)
    with tmpfs(tmp_path / "ro", size="1m") as disk:
        if subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount the tmpfs read-only")
        line = one_error_line(capsys, lambda: train_tokenizer(corpus, output_dir=disk / "tok"))
        assert str(disk / "tok") in line and "Read-only file system" in line
