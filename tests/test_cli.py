"""The `hf-ctx` command and the example scripts, as a person at a terminal meets them: help and version without
importing torch, options with help text, and user errors as one line (`error: ...`, exit status 1) with
`--debug` / `HF_CTX_DEBUG=1` for the traceback."""

import ast
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import hf_ctx
from hf_ctx.tools import cli
from hf_ctx.tools.errors import run_script

ROOT = Path(__file__).resolve().parents[1]
# The example scripts (script_help.py beside them is their helper, not an example).
EXAMPLES = sorted(path for path in (ROOT / "examples").glob("*.py") if path.name != "script_help.py")


def run_python(args: list[str]) -> subprocess.CompletedProcess:
    """`python ARGS` in the repository root with this checkout's hf_ctx, without HF_CTX_DEBUG."""
    environment = {key: value for key, value in os.environ.items() if key != "HF_CTX_DEBUG"}
    environment["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300
    )


def test_help_version_and_argument_errors_answer_without_importing_torch():
    """What makes `hf-ctx --help` instant: the entry point never imports torch, transformers or hf_ctx's __init__."""
    code = """
import sys, hf_ctx_cli
for argv in (["--help"], ["--version"], ["train-tokenizer", "--help"], ["convert-elmo"]):
    try:
        hf_ctx_cli.main(argv)
    except SystemExit as exit:
        print("EXIT", exit.code)
print("IMPORTED", sorted(m for m in ("torch", "transformers", "hf_ctx") if m in sys.modules))
"""
    result = run_python(["-c", code])
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "IMPORTED []" in out
    assert out.count("EXIT 0") == 3 and "EXIT 1" in out  # help, version, help; the missing arguments: one line
    assert f"hf_ctx {hf_ctx.__version__}\n" in out
    assert "usage: hf-ctx" in out and "``" not in out
    assert "embed a text file with ELMo" in " ".join(out.split())  # the description names every command
    assert "the following arguments are required: options_json, weights_hdf5, output_dir" in result.stderr


def test_train_tokenizer_options_have_help_and_defaults(capsys, tmp_path):
    with pytest.raises(SystemExit):
        cli.main(["train-tokenizer", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for option, default in [
        ("--vocab_size", "default 8000"),
        ("--min_frequency", "default 2"),
        ("--model_max_length", "default 512"),
        ("--lowercase", "the default"),
    ]:
        assert option in help_text and default in help_text
    assert "--no_lowercase keep case" in help_text
    text = tmp_path / "a.txt"
    text.write_text("a line\n")
    args = cli.build_parser().parse_args(["train-tokenizer", str(text), "--output_dir", "out"])
    assert (args.vocab_size, args.min_frequency, args.lowercase, args.model_max_length) == (8000, 2, True, 512)
    assert (
        cli.build_parser().parse_args(["train-tokenizer", str(text), "--output_dir", "o", "--no_lowercase"]).lowercase
        is False
    )


def test_lowercase_and_no_lowercase_together_are_refused(tmp_path, capsys):
    """One line; before, the last of the two won in silence."""
    text = tmp_path / "a.txt"
    text.write_text("a line\n")
    with pytest.raises(SystemExit):
        cli.main(["train-tokenizer", str(text), "--output_dir", str(tmp_path / "o"), "--lowercase", "--no_lowercase"])
    assert capsys.readouterr().err == (
        "error: hf-ctx train-tokenizer: argument --no_lowercase: not allowed with argument --lowercase\n"
    )
    assert not (tmp_path / "o").exists()


def test_cased_is_a_deprecated_alias_of_no_lowercase(tmp_path):
    text = tmp_path / "a.txt"
    text.write_text("a line\n")
    with pytest.warns(FutureWarning, match="--cased is deprecated; use --no_lowercase"):
        args = cli.build_parser().parse_args(["train-tokenizer", str(text), "--output_dir", "o", "--cased"])
    assert args.lowercase is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cli.build_parser().parse_args(["train-tokenizer", str(text), "--output_dir", "o"]).lowercase is True


def test_user_error_is_one_line_and_exit_status_1(tmp_path):
    """Through the installed entry point's module, in a fresh process, as a person runs it."""
    missing = tmp_path / "missing.txt"
    result = run_python(["hf_ctx_cli.py", "train-tokenizer", str(missing), "--output_dir", str(tmp_path / "tok")])
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"error: files {missing}: no such file"]
    assert not (tmp_path / "tok").exists()


def test_train_tokenizer_says_why_the_vocabulary_is_smaller_than_asked(tmp_path, capsys):
    """A text with few distinct pieces gives fewer tokens than --vocab_size: the one line says so, and why."""
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat\n" * 20)
    cli.main(["train-tokenizer", str(text), "--output_dir", str(tmp_path / "tok"), "--vocab_size", "8000"])
    from transformers import AutoTokenizer

    size = len(AutoTokenizer.from_pretrained(tmp_path / "tok"))
    assert size < 100 and capsys.readouterr().out == (
        f"wrote a {size}-token WordPiece tokenizer to {tmp_path / 'tok'}, fewer than the 8,000 asked: the text has "
        "no more distinct pieces seen at least 2 times (--vocab_size, --min_frequency)\n"
    )
    cli.main(["train-tokenizer", str(text), "--output_dir", str(tmp_path / "small"), "--vocab_size", "20"])
    assert capsys.readouterr().out == f"wrote a 20-token WordPiece tokenizer to {tmp_path / 'small'}\n"


def test_train_tokenizer_never_writes_over_a_models_folder(tmp_path, capsys):
    """A new vocabulary beside a trained model's weights would not fit them: refused by name, the folder unchanged;
    a folder holding only an earlier tokenizer gets the new one."""
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat\n" * 20)
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        (model / name).write_text("x")
    with pytest.raises(SystemExit):
        cli.main(["train-tokenizer", str(text), "--output_dir", str(model)])
    assert capsys.readouterr().err == (
        f"error: --output_dir {model} holds a model (config.json, model.safetensors); a new tokenizer written there "
        "would not fit its weights. Give another --output_dir\n"
    )
    assert {p.name: p.read_text() for p in model.iterdir()} == dict.fromkeys(
        ["config.json", "model.safetensors", "vocab.txt"], "x"
    )
    for _ in range(2):
        cli.main(["train-tokenizer", str(text), "--output_dir", str(tmp_path / "tok"), "--vocab_size", "20"])
    assert capsys.readouterr().out.count("wrote a 20-token WordPiece tokenizer") == 2


def test_debug_flag_or_environment_shows_the_traceback(tmp_path, monkeypatch, capsys):
    missing = str(tmp_path / "missing.txt")
    monkeypatch.delenv("HF_CTX_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exit:
        cli.main(["train-tokenizer", missing, "--output_dir", str(tmp_path / "tok")])
    assert exit.value.code == 1 and capsys.readouterr().err == f"error: files {missing}: no such file\n"
    for argv in (["--debug", "train-tokenizer", missing], ["train-tokenizer", missing, "--debug"]):
        with pytest.raises(FileNotFoundError, match="no such file"):
            cli.main([*argv, "--output_dir", str(tmp_path / "tok")])
    monkeypatch.setenv("HF_CTX_DEBUG", "1")
    with pytest.raises(FileNotFoundError):
        cli.main(["train-tokenizer", missing, "--output_dir", str(tmp_path / "tok")])


def test_bugs_keep_their_traceback(monkeypatch):
    """Only expected user errors become one line; anything else (a bug) is raised as it is."""

    def broken(argv):
        raise KeyError("a bug")

    monkeypatch.delenv("HF_CTX_DEBUG", raising=False)
    with pytest.raises(KeyError):
        run_script(broken, [])


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_every_example_runs_its_main_through_run_script(script):
    tree = ast.parse(script.read_text())
    guard = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
    assert len(guard) == 1 and ast.unparse(guard[0].body[0]) == "run_script(main)"


def test_example_user_error_is_one_line(tmp_path):
    """A script run from the shell: one line on stderr and status 1."""
    (tmp_path / "train.txt").write_text("EU B-ORG\n")
    argv = ["examples/end_to_end.py", "--train_file", str(tmp_path / "train.txt"), "--output_dir", str(tmp_path)]
    result = run_python(argv)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: --train_file needs --validation_file (the tagger's F1 is measured on it)"
    ]


def test_run_script_strips_debug_and_then_shows_the_traceback(monkeypatch, capsys):
    seen = []

    def main(argv):
        seen.append(argv)
        raise ValueError("--train_file needs --validation_file")

    monkeypatch.delenv("HF_CTX_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exit:
        run_script(main, ["--output_dir", "x"])
    assert exit.value.code == 1 and capsys.readouterr().err == "error: --train_file needs --validation_file\n"
    with pytest.raises(ValueError, match="needs --validation_file"):
        run_script(main, ["--output_dir", "x", "--debug"])
    assert seen == [["--output_dir", "x"], ["--output_dir", "x"]]  # the script's parser never sees --debug


def test_a_refusal_of_the_launch_is_printed_by_rank_0_alone(monkeypatch, capsys):
    """A launch refusal (`SameOnEveryRank`) that every process raises alike is printed once, by rank 0; the
    other ranks exit 1 silently. Any other user error is printed by the rank that raised it."""
    from hf_ctx.tools.errors import SameOnEveryRank, user_errors_as_messages

    monkeypatch.delenv("HF_CTX_DEBUG", raising=False)
    for rank, error, printed in (
        ("1", SameOnEveryRank("no GPU"), ""),
        ("0", SameOnEveryRank("no GPU"), "error: no GPU\n"),
        ("1", ValueError("bad file"), "error: bad file\n"),
    ):
        monkeypatch.setenv("RANK", rank)
        with pytest.raises(SystemExit) as exit_info, user_errors_as_messages():
            raise error
        assert exit_info.value.code == 1 and capsys.readouterr().err == printed


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("kind", ["fifo", "devnull"])
def test_train_tokenizer_names_a_text_input_that_is_not_a_regular_file(tmp_path, capsys, kind):
    if kind == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)
    else:
        path = Path(os.devnull)
    with pytest.raises(SystemExit) as raised:
        cli.main(["train-tokenizer", str(path), "--output_dir", str(tmp_path / "tok")])
    assert raised.value.code == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a regular file" in err and "not found" not in err
    assert not (tmp_path / "tok").exists()


def test_train_tokenizer_refuses_a_file_given_twice(tmp_path, capsys):
    text = tmp_path / "a.txt"
    text.write_text("the cat sat on the mat\n", encoding="utf-8")
    os.symlink(text, tmp_path / "b.txt")
    for second in (text, tmp_path / "b.txt"):
        with pytest.raises(SystemExit):
            cli.main(["train-tokenizer", str(text), str(second), "--output_dir", str(tmp_path / "tok")])
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "given twice" in err
    assert not (tmp_path / "tok").exists()


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt, as at a terminal: a shell starts a background job (`pytest ... &`) with
    SIGINT ignored, and Python then leaves it ignored."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_interrupted_tokenizer_training_stops_reading_the_text(ctrl_c_raises):
    """From Python (no process exit to end it), the training thread of an interrupted
    `train_wordpiece_tokenizer` is stopped by the next line it reads, rather than reading the whole corpus."""
    import _thread
    import threading
    import time

    from hf_ctx.data import wordpiece

    read, ended = [], []

    class SlowReader:
        def train_from_iterator(self, lines, trainer):
            try:
                for line in lines:
                    read.append(line)
                    time.sleep(0.01)
                ended.append("read every line")
            except RuntimeError as error:
                ended.append(str(error))

    def interrupt():
        while len(read) < 5:
            time.sleep(0.01)
        _thread.interrupt_main()

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        wordpiece._train_interruptibly(SlowReader(), iter([f"line {i}" for i in range(10_000)]), trainer=None)
    deadline = time.monotonic() + 5
    while not ended and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ended == ["tokenizer training was interrupted"] and len(read) < 100


def test_train_tokenizer_stops_at_once_on_a_signal_while_learning_merges(tmp_path, monkeypatch, ctrl_c_raises):
    """The merges are learnt in Rust after the text is read, where a signal is not seen until the training returns:
    a SIGINT then stops training at once (before: only when the merges were all learnt, the work thrown away).
    The stand-in for tokenizers' training blocks SIGINT in its thread for 3 s, as the Rust loop ignores it."""
    import signal
    import threading
    import time

    from hf_ctx.data import wordpiece

    learning = threading.Event()

    class RustLikeTraining:
        def __init__(self, model):
            self.pre_tokenizer = None

        def train_from_iterator(self, lines, trainer):
            list(lines)
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                learning.set()
                time.sleep(3)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    text = tmp_path / "corpus.txt"
    text.write_text("a few words of text\n", encoding="utf-8")
    monkeypatch.setattr(wordpiece, "Tokenizer", RustLikeTraining)
    sent = []

    def interrupt():
        learning.wait(30)
        time.sleep(0.2)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        wordpiece.train_wordpiece_tokenizer([text], vocab_size=100)
    stopped = time.monotonic()
    assert sent and stopped - sent[0] < 1.5  # at once, not when the 3 s of training are over
