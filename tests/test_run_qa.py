"""examples/run_qa.py, hf_ctx.data.squad and hf_ctx.tools.question_answering: windows and their answer positions,
post-processing by hand, SQuAD files and their errors, a tiny BERT that learns a generated task end to end,
the pipeline against the script, and parity with transformers' BertForQuestionAnswering."""

import json
import logging
import random
import re
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import ModelCard
from tiny_checkpoints import QUICK_RUN, new_bert_arguments

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
pytest.importorskip("evaluate")
import datasets
import run_qa
import torch
from transformers import AutoTokenizer, BertConfig, BertForQuestionAnswering

from hf_ctx import CtxBertConfig, QuestionAnsweringPipeline, train_wordpiece_tokenizer
from hf_ctx.data import squad
from hf_ctx.metrics import load_metric
from hf_ctx.tools.convert_bert import convert_bert_checkpoint
from hf_ctx.tools.question_answering import best_answers, encode_windows, postprocess_predictions

RUN_QA = Path(__file__).resolve().parents[1] / "examples" / "run_qa.py"
FILLER = "the a of river town hill road stone bridge field old new small large north south east west".split()
COLORS = "red blue green black white pink gray brown".split()
# The same tiny size for hf_ctx's BERT and transformers'.
TINY_BERT = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
}


def squad_json(paragraphs) -> dict:
    """The official layout from (context, [(id, question, [(answer, start), ...]), ...]) pairs."""
    return {
        "version": "1.1",
        "data": [
            {
                "title": "generated",
                "paragraphs": [
                    {
                        "context": context,
                        "qas": [
                            {
                                "id": qid,
                                "question": question,
                                "answers": [{"text": text, "answer_start": start} for text, start in answers],
                            }
                            for qid, question, answers in qas
                        ],
                    }
                    for context, qas in paragraphs
                ],
            }
        ],
    }


def write_json(path: Path, content) -> Path:
    path.write_text(json.dumps(content), encoding="utf-8")
    return path


def color_paragraphs(rng, n: int, prefix: str):
    """Contexts of 10-40 filler words with one colour word somewhere; "which colour?" is answered by it."""
    paragraphs = []
    for i in range(n):
        words = rng.choices(FILLER, k=rng.randint(10, 40))
        position, color = rng.randrange(len(words)), rng.choice(COLORS)
        words.insert(position, color)
        context = " ".join(words)
        start = len(" ".join(words[:position])) + (1 if position else 0)
        paragraphs.append((context, [(f"{prefix}{i}", "which colour is named ?", [(color, start)])]))
    return paragraphs


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("qa")
    rng = random.Random(0)
    write_json(root / "train.json", squad_json(color_paragraphs(rng, 160, "t")))
    write_json(root / "dev.json", squad_json(color_paragraphs(rng, 40, "d")))
    corpus = root / "corpus.txt"
    corpus.write_text(
        "\n".join(" ".join(rng.sample(FILLER + COLORS, 12)) + " which colour is named ?" for _ in range(50))
    )
    tokenizer = train_wordpiece_tokenizer([corpus], vocab_size=200, min_frequency=1, model_max_length=64)
    tokenizer.save_pretrained(root / "tokenizer")
    config = CtxBertConfig(vocab_size=len(tokenizer), **TINY_BERT)
    config.save_pretrained(root / "config")
    return root, run_qa


def run(setup, output_dir, *extra, model=None):
    root, run_qa = setup
    # dev.json where the run evaluates: a --validation_file no step reads is refused
    evaluates = "--do_eval" in extra or any(arg.startswith("--eval_strategy") for arg in extra)
    args = [
        *(["--validation_file", str(root / "dev.json")] if evaluates else []),
        "--output_dir",
        str(output_dir),
        "--max_seq_length",
        "24",
        "--doc_stride",
        "8",
        *QUICK_RUN,
        "--seed",
        "0",
        *extra,
    ]
    if model is None:
        args += new_bert_arguments(root)
    else:
        args += ["--model_name_or_path", str(model)]
    return run_qa.main(args)


# --- windows and answers ----------------------------------------------------------------------------------


def test_training_windows_point_at_the_answer_and_cut_answers_are_counted(setup, caplog):
    tokenizer = AutoTokenizer.from_pretrained(setup[0] / "tokenizer")
    context = "north south east west river town hill road stone bridge field old new small large"
    batch = {
        "id": ["q0", "q1", "q2"],
        "question": ["which colour ?", "which colour ?", "which colour ?"],
        "context": [context] * 3,
        # "stone bridge" sits in two windows; "river ... large" fits in none of 24 tokens less the question's.
        "answers": [
            {"text": ["stone bridge"], "answer_start": [context.index("stone")]},
            {"text": ["north"], "answer_start": [0]},
            {"text": [context[12:]], "answer_start": [12]},
        ],
    }
    encoded = squad.encode_for_training(batch, tokenizer, max_seq_length=12, doc_stride=4, source="f.json")
    for ids, start, end, qid, inside in zip(
        encoded["input_ids"],
        encoded["start_positions"],
        encoded["end_positions"],
        encoded["example_id"],
        encoded["answer_in_window"],
    ):
        answer = batch["answers"][int(qid[1])]["text"][0]
        assert inside == (start > 0)
        if inside:
            assert tokenizer.decode(ids[start : end + 1]) == answer
        else:
            assert start == end == 0
    assert encoded["example_id"].count("q0") > 1  # the context needs several windows
    assert not any(inside for qid, inside in zip(encoded["example_id"], encoded["answer_in_window"]) if qid == "q2")
    with caplog.at_level(logging.INFO, logger="hf_ctx"):
        kept = squad.drop_unanswerable_windows(datasets.Dataset.from_dict(dict(encoded)), 3, "f.json")
    assert "f.json: 1 of 3 questions dropped from training" in caplog.text
    assert len(kept) == len(encoded["input_ids"]) - encoded["example_id"].count("q2")
    assert set(kept.column_names) == {
        "input_ids",
        "token_type_ids",
        "attention_mask",
        "start_positions",
        "end_positions",
    }


def test_evaluation_windows_overlap_by_the_stride_and_keep_context_offsets_only(setup):
    tokenizer = AutoTokenizer.from_pretrained(setup[0] / "tokenizer")
    context = " ".join(FILLER)
    encoded = encode_windows(tokenizer, ["  which colour ?"], [context], max_seq_length=16, doc_stride=4)
    assert len(encoded["input_ids"]) > 2 and set(encoded["example_index"]) == {0}
    spans = [[o for o in offsets if o is not None] for offsets in encoded["offset_mapping"]]
    assert spans[0][0] == (0, 3) and spans[-1][-1][1] == len(context)  # the whole context is covered
    for before, after in zip(spans, spans[1:]):
        assert before[-4:] == after[:4]  # doc_stride tokens shared
    assert all(len(ids) <= 16 for ids in encoded["input_ids"])


def test_best_answers_by_hand(caplog):
    context = "aa bb cc dd"
    offsets = [None, (0, 2), (3, 5), (6, 8), (9, 11), None]
    start = np.array([5.0, 1.0, 0.0, 3.0, 0.0, 9.0])  # the first and last positions are outside the context
    end = np.array([5.0, 0.0, 2.5, 0.0, 1.0, 9.0])
    n_best = best_answers(context, [(start, end, offsets)], n_best_size=10, max_answer_length=30)
    # cc..dd scores 3 + 1, aa..bb 1 + 2.5, cc alone 3 + 0; dd..bb ends before it starts and is no candidate.
    assert [(c["text"], c["score"]) for c in n_best[:3]] == [("cc dd", 4.0), ("aa bb", 3.5), ("cc", 3.0)]
    assert [c["start"] for c in n_best[:3]] == [6, 0, 6] and len(n_best) == 10  # every span of the 4 tokens
    assert sum(c["probability"] for c in n_best) == pytest.approx(1.0)
    assert n_best[0]["probability"] / n_best[1]["probability"] == pytest.approx(np.exp(0.5))
    assert best_answers(context, [(start, end, offsets)], max_answer_length=1)[0]["text"] == "cc"
    # Only the n best starts and ends are paired: the 2 best starts ([CLS] and the last) are outside the context.
    assert best_answers(context, [(start, end, offsets)], n_best_size=2)[0]["text"] == ""
    with caplog.at_level(logging.WARNING, logger="hf_ctx"):
        assert postprocess_predictions([("q", context)], [(0, offsets)], [start], [end], n_best_size=2)[0] == {"q": ""}
    assert "1 of 1 questions got no valid span" in caplog.text
    # SQuAD 2.0: the null answer scores [CLS]'s 5 + 5 and beats the best span by 6.
    predictions, n_best, null = postprocess_predictions(
        [("q", context)], [(0, offsets)], [start], [end], version_2_with_negative=True
    )
    assert predictions == {"q": ""} and null == {"q": pytest.approx(6.0)} and n_best["q"][0]["text"] == ""
    predictions, _, _ = postprocess_predictions(
        [("q", context)], [(0, offsets)], [start], [end], version_2_with_negative=True, null_score_diff_threshold=7
    )
    assert predictions == {"q": "cc dd"}
    # Over two windows the best span wins wherever it is; the null score is the lowest [CLS] score, and the
    # null answer is listed even when it is not among the n best.
    second = (np.array([0.0, 0, 0, 0, 8, 0]), np.array([1.0, 0, 0, 0, 8, 0]), offsets)
    n_best = best_answers(context, [(start, end, offsets), second], n_best_size=1, with_null=True)
    assert n_best[0]["text"] == "dd" and n_best[0]["score"] == 16.0
    assert len(n_best) == 2 and n_best[-1]["text"] == "" and n_best[-1]["score"] == 1.0


# --- files and bad input ---------------------------------------------------------------------------------


def test_squad_files_are_read_and_bad_ones_refused_naming_file_and_question(setup, tmp_path):
    root, _ = setup
    rows = squad.read_squad_file(root / "dev.json")
    assert len(rows["id"]) == 40 and rows["id"][0] == "d0"
    context, qas = "the red road", [("x1", "which colour ?", [("red", 4)])]
    good = squad_json([(context, qas)])
    with pytest.raises(ValueError, match=r"bad.json: the top level has no 'data'; not in the SQuAD layout"):
        squad.read_squad_file(write_json(tmp_path / "bad.json", {"articles": good["data"]}))
    del good["data"][0]["paragraphs"][0]["qas"][0]["question"]
    with pytest.raises(
        ValueError, match=r"bad.json: question 'x1' \(data\[0\].paragraphs\[0\].qas\[0\]\) has no 'question'"
    ):
        squad.read_squad_file(write_json(tmp_path / "bad.json", good))
    (tmp_path / "bad.json").write_text("id,question\n")
    with pytest.raises(ValueError, match=r"bad.json: not JSON"):
        squad.read_squad_file(tmp_path / "bad.json")
    shifted = squad_json([(context, [("x1", "which colour ?", [("red", 5)])])])
    with pytest.raises(
        ValueError, match=r"bad.json: question 'x1': answer_start 5 points at 'ed ', not at the answer 'red'"
    ):
        squad.read_squad_file(write_json(tmp_path / "bad.json", shifted))
    twice = squad_json([(context, qas), (context, qas)])
    with pytest.raises(ValueError, match=r"bad.json: question id 'x1' appears twice"):
        squad.read_squad_file(write_json(tmp_path / "bad.json", twice))
    # An empty question or context: before, a model trained and answered on windows of [CLS] [SEP] and a context.
    for blank, name in (((context, [("x1", " ", [])]), "question"), (("", [("x1", "which colour ?", [])]), "context")):
        with pytest.raises(ValueError, match=rf"bad.json: question 'x1': the {name} is '\s*'; give it a text"):
            squad.read_squad_file(write_json(tmp_path / "bad.json", squad_json([blank])), answers_required=False)
    # No questions: before, "Column 'example_id' doesn't exist" (training) or a failure after training (evaluation).
    for empty in ({"data": []}, {"data": [{"title": "t", "paragraphs": [{"context": "c", "qas": []}]}]}):
        with pytest.raises(ValueError, match=r"bad.json holds no questions \(a SQuAD file is one JSON object"):
            squad.read_squad_file(write_json(tmp_path / "bad.json", empty))


def test_run_qa_refuses_bad_input_naming_file_and_question(setup, tmp_path):
    root, _ = setup
    long_question = " ".join(["which colour is named"] * 6)
    paragraphs = color_paragraphs(random.Random(1), 3, "v")
    paragraphs[1] = (paragraphs[1][0], [("v1", long_question, paragraphs[1][1][0][2])])
    data = write_json(tmp_path / "long.json", squad_json(paragraphs))
    with pytest.raises(
        ValueError,
        match=r"long.json: question 'v1' is 24 tokens long \(3 special tokens beside it\), which leaves its context "
        r"windows no room, not more than --doc_stride 8; raise --max_seq_length \(now 24\)",
    ):
        run(setup, tmp_path / "out", "--do_eval", "--validation_file", str(data))
    # SQuAD 2.0 questions without an answer need --version_2_with_negative; with it they are read.
    v2 = squad_json(color_paragraphs(random.Random(2), 2, "w"))
    v2["data"][0]["paragraphs"][0]["qas"][0].update(answers=[], is_impossible=True)
    data = write_json(tmp_path / "v2.json", v2)
    with pytest.raises(ValueError, match=r"v2.json: question 'w0' has no answer; .* needs --version_2_with_negative"):
        run(setup, tmp_path / "out", "--do_eval", "--validation_file", str(data))
    metrics = run(setup, tmp_path / "out", "--do_eval", "--validation_file", str(data), "--version_2_with_negative")
    assert metrics["eval_total"] == 2 and metrics["eval_NoAns_total"] == 1
    assert set(json.loads((tmp_path / "out" / "null_odds.json").read_text())) == {"w0", "w1"}
    with pytest.raises(ValueError, match="--do_train needs train data"):
        run(setup, tmp_path / "new", "--do_train")


def test_a_bad_file_is_one_line_on_the_command_line(setup, tmp_path, capsys):
    from hf_ctx.tools.errors import run_script

    shifted = squad_json([("the red road", [("x1", "which colour ?", [("red", 5)])])])
    data = write_json(tmp_path / "shifted.json", shifted)
    args = ["--validation_file", str(data), "--do_eval", "--output_dir", str(tmp_path), "--model_type", "bert"]
    with pytest.raises(SystemExit) as exit_info:
        run_script(setup[1].main, args)
    assert exit_info.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("error: ") and "shifted.json: question 'x1': answer_start 5" in lines[-1]


# --- end to end --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_tiny_bert_learns_the_answers_and_the_pipeline_gives_the_scripts_answers(setup, tmp_path):
    root, _ = setup
    metrics = run(
        setup,
        tmp_path,
        "--train_file",
        str(root / "train.json"),
        "--do_train",
        "--do_eval",
        "--num_train_epochs",
        "6",
        "--learning_rate",
        "3e-3",
        "--warmup_steps",
        "5",
    )
    assert metrics["eval_exact_match"] > 80 and metrics["eval_f1"] >= metrics["eval_exact_match"]
    predictions = json.loads((tmp_path / "predictions.json").read_text())
    n_best = json.loads((tmp_path / "nbest_predictions.json").read_text())
    dev = squad.read_squad_file(root / "dev.json")
    assert list(predictions) == dev["id"] and all(n_best[qid][0]["text"] == predictions[qid] for qid in dev["id"])
    recomputed = load_metric("squad").compute(**squad.metric_inputs(predictions, dev, False))
    assert recomputed == {
        "exact_match": pytest.approx(metrics["eval_exact_match"]),
        "f1": pytest.approx(metrics["eval_f1"]),
    }
    assert json.loads((tmp_path / "eval_results.json").read_text())["eval_f1"] == pytest.approx(metrics["eval_f1"])
    card = (tmp_path / "README.md").read_text()
    assert re.search(r"Training examples: all 160; \d+ steps of \d+ examples", card)  # questions, not windows
    assert "Evaluation examples: all 40." in card
    assert "QuestionAnsweringPipeline.from_pretrained" in card and 'pipeline("question-answering"' not in card

    reader = QuestionAnsweringPipeline.from_pretrained(tmp_path, max_seq_length=24, doc_stride=8)
    answers = reader(question=dev["question"], context=dev["context"])
    assert [a["answer"] for a in answers] == [predictions[qid] for qid in dev["id"]]
    one = reader(question=dev["question"][0], context=dev["context"][0], top_k=3)
    assert len(one) == 3 and one[0]["answer"] == dev["context"][0][one[0]["start"] : one[0]["end"]]
    assert one[0]["score"] >= one[1]["score"] >= one[2]["score"]


def test_transformers_bert_and_its_conversion_give_the_same_answers(setup, tmp_path):
    root, _ = setup
    tokenizer = AutoTokenizer.from_pretrained(root / "tokenizer")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), **TINY_BERT)
    reference = BertForQuestionAnswering(config)
    with torch.no_grad():
        reference.qa_outputs.weight.normal_(0, 1.0)  # spread the scores so that the ranking is not a near tie
    reference.save_pretrained(tmp_path / "transformers")
    tokenizer.save_pretrained(tmp_path / "transformers")
    convert_bert_checkpoint(tmp_path / "transformers", tmp_path / "hf_ctx")

    results = {}
    for name in ("transformers", "hf_ctx"):
        metrics = run(setup, tmp_path / f"out-{name}", "--do_eval", model=tmp_path / name)
        n_best = json.loads((tmp_path / f"out-{name}" / "nbest_predictions.json").read_text())
        results[name] = metrics, json.loads((tmp_path / f"out-{name}" / "predictions.json").read_text()), n_best
    (metrics, predictions, n_best), (ctx_metrics, ctx_predictions, ctx_n_best) = (
        results["transformers"],
        results["hf_ctx"],
    )
    assert ctx_predictions == predictions
    assert (
        ctx_metrics["eval_exact_match"] == metrics["eval_exact_match"] and ctx_metrics["eval_f1"] == metrics["eval_f1"]
    )
    for qid in predictions:
        assert [c["score"] for c in ctx_n_best[qid]] == pytest.approx([c["score"] for c in n_best[qid]], abs=1e-4)
    assert len(set(predictions.values())) > 3  # the answers differ between questions: not a constant reader


def test_the_card_counts_questions_of_the_data_and_traces_a_converted_starting_point(setup, tmp_path):
    """Fine-tuned from a `hf-ctx convert-bert` folder on the first 8 of 160 questions, evaluated on the first 10
    of 40: the card says so, and names the folder's source."""
    root, _ = setup
    tokenizer = AutoTokenizer.from_pretrained(root / "tokenizer")
    torch.manual_seed(0)
    BertForQuestionAnswering(BertConfig(vocab_size=len(tokenizer), **TINY_BERT)).save_pretrained(tmp_path / "src")
    tokenizer.save_pretrained(tmp_path / "src")
    convert_bert_checkpoint(tmp_path / "src", tmp_path / "converted", source_name="me/tiny-squad")
    limits = ["--max_train_samples", "8", "--max_eval_samples", "10", "--max_steps", "1"]
    train = ["--train_file", str(root / "train.json"), "--do_train", "--do_eval", *limits]
    run(setup, tmp_path / "out", *train, model=tmp_path / "converted")
    card = ModelCard.load(tmp_path / "out" / "README.md")
    assert "Training examples: the first 8 of 160;" in card.text
    assert "Evaluation examples: the first 10 of 40." in card.text
    source = "the transformers `BertForQuestionAnswering` checkpoint `me/tiny-squad`"
    assert f"| Starting point | `converted`, converted by `hf-ctx convert-bert` from {source} |" in card.text
    assert card.data.base_model == "me/tiny-squad"


# --- real data ---------------------------------------------------------------------------------------------


@pytest.mark.data
def test_real_squad_samples_and_the_first_sentence_baseline(shared_data, tmp_path):
    train = squad.read_squad_file(shared_data / "squad" / "train-v1.1.sample.json")
    dev = squad.read_squad_file(shared_data / "squad" / "dev-v1.1.sample.json")
    assert len(train["id"]) == 269 and len(dev["id"]) == 810
    assert all(len(a["text"]) >= 2 for a in dev["answers"])  # 784 questions have 3 references, 17 have 4, 9 have 2
    # Every training answer is found whole in a window of 384 tokens (stride 128), at the right characters.
    contexts = tmp_path / "contexts.txt"
    contexts.write_text("\n".join(sorted(set(train["context"]))), encoding="utf-8")
    tokenizer = train_wordpiece_tokenizer([contexts], vocab_size=2000, min_frequency=1)
    encoded = squad.encode_for_training(train, tokenizer, 384, 128, "train-v1.1.sample.json")
    assert {qid for qid, inside in zip(encoded["example_id"], encoded["answer_in_window"]) if inside} == set(
        train["id"]
    )
    baseline = {qid: squad.first_sentence(context) for qid, context in zip(dev["id"], dev["context"])}
    scores = load_metric("squad").compute(**squad.metric_inputs(baseline, dev, False))
    assert scores["exact_match"] == 0.0 and 0 < scores["f1"] < 20


def test_questions_without_answers_are_answered_into_predict_predictions(setup, tmp_path):
    root, _ = setup
    model = tmp_path / "model"
    run(setup, model, "--train_file", str(root / "train.json"), "--do_train", "--max_steps", "2")
    evaluated = run(setup, tmp_path / "eval", "--do_eval", model=model)
    scored = run(setup, tmp_path / "scored", "--test_file", str(root / "dev.json"), "--do_predict", model=model)
    assert scored["predict_f1"] == pytest.approx(evaluated["eval_f1"])  # a test file with answers is scored
    questions = json.loads((root / "dev.json").read_text())
    for article in questions["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                del qa["answers"]
    test = write_json(tmp_path / "questions.json", questions)
    metrics = run(setup, tmp_path / "predict", "--test_file", str(test), "--do_predict", model=model)
    answered = json.loads((tmp_path / "predict" / "predict_predictions.json").read_text())
    assert answered == json.loads((tmp_path / "eval" / "predictions.json").read_text())
    assert not any(key.startswith("predict_") for key in metrics)  # nothing to score
    assert not (tmp_path / "predict" / "predict_results.json").exists()
    # --max_predict_samples answers the first N questions of --test_file.
    run(
        setup,
        tmp_path / "first_3",
        "--test_file",
        str(test),
        "--do_predict",
        "--max_predict_samples",
        "3",
        model=model,
    )
    first = json.loads((tmp_path / "first_3" / "predict_predictions.json").read_text())
    assert first == dict(list(answered.items())[:3])
    with pytest.raises(ValueError, match="--do_predict needs --test_file"):
        run(setup, tmp_path / "x", "--do_predict", model=model)


def test_a_test_file_mixing_answered_and_unanswered_questions(setup, tmp_path):
    """SQuAD 1.1 scoring: refused before any training, naming the file and a question of each kind; with
    --version_2_with_negative the run trains, saves and scores both kinds."""
    root, _ = setup
    questions = json.loads((root / "dev.json").read_text())
    qas = [qa for article in questions["data"] for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
    for qa in qas[:5]:
        qa["answers"] = []
    test = write_json(tmp_path / "mixed.json", questions)
    train = ["--train_file", str(root / "train.json"), "--do_train", "--max_steps", "2", "--test_file", str(test)]
    with pytest.raises(
        ValueError, match=rf"{test}: question 'd0' has no answer, but 35 others \(e.g. 'd5'\) have one"
    ):
        run(setup, tmp_path / "v1", *train, "--do_predict")
    assert not (tmp_path / "v1" / "model.safetensors").exists()  # refused before training
    metrics = run(setup, tmp_path / "v2", *train, "--do_predict", "--version_2_with_negative")
    assert metrics["predict_HasAns_total"] == 35 and metrics["predict_NoAns_total"] == 5
    assert (tmp_path / "v2" / "model.safetensors").exists() and (tmp_path / "v2" / "README.md").exists()


@pytest.mark.parametrize("text", ["", "  "])
def test_an_empty_answer_text_is_named_not_a_stop_iteration(setup, tmp_path, text):
    root, _ = setup
    content = squad_json([("the red cat", [("q1", "which colour?", [(text, 11)])])])
    train = write_json(tmp_path / "train.json", content)
    with pytest.raises(ValueError, match=rf"{train}: question 'q1': the answer text is '{text}'.*\"answers\": \[\]"):
        run(setup, tmp_path / "out", "--train_file", str(train), "--do_train", "--max_steps", "1")


def test_a_failure_after_training_keeps_the_model_and_says_so(setup, tmp_path, monkeypatch):
    root, _ = setup
    write = squad.write_json

    def full_disk_at_the_answers(path, value):
        if path.name.startswith("predict_"):
            raise OSError(f"could not write {path}: No space left on device")
        return write(path, value)

    monkeypatch.setattr(squad, "write_json", full_disk_at_the_answers)
    out = tmp_path / "out"
    options = ["--train_file", str(root / "train.json"), "--do_train", "--max_steps", "2"]
    with pytest.raises(
        OSError, match=rf"predict_predictions.json: No space .*the trained model and its card are saved in {out}"
    ):
        run(setup, out, *options, "--test_file", str(root / "dev.json"), "--do_predict")
    assert AutoTokenizer.from_pretrained(out) is not None and (out / "README.md").exists()
    monkeypatch.setattr(squad, "write_json", write)
    run(setup, tmp_path / "again", "--test_file", str(root / "dev.json"), "--do_predict", model=out)
    answers = json.loads((tmp_path / "again" / "predict_predictions.json").read_text())
    assert sorted(answers) == sorted(f"d{i}" for i in range(40))  # the saved model answers every question


def test_evaluating_a_model_not_fine_tuned_for_the_task_is_refused(setup, tmp_path):
    """--do_eval without --do_train on a pretrained model (no answer head): before, the head got random weights and
    its exact match and F1 were reported as the model's, exit 0. Refused, naming the architecture; run_swag.py
    (multiple choice) the same way."""
    from types import SimpleNamespace

    from hf_ctx import CtxBertForMaskedLM
    from hf_ctx.tools import scripts

    root, _ = setup
    tokenizer = AutoTokenizer.from_pretrained(root / "tokenizer")
    CtxBertForMaskedLM(CtxBertConfig(vocab_size=len(tokenizer), **TINY_BERT)).save_pretrained(tmp_path / "mlm")
    tokenizer.save_pretrained(tmp_path / "mlm")
    named = r"is not fine-tuned for question answering \(its config.json names CtxBertForMaskedLM\)"
    with pytest.raises(ValueError, match=rf"^{tmp_path / 'mlm'} {named}: without --do_train"):
        run(setup, tmp_path / "out", "--do_eval", model=tmp_path / "mlm")
    model_args = SimpleNamespace(model_name_or_path=str(tmp_path / "mlm"), cache_dir=None)
    with pytest.raises(ValueError, match=r"is not fine-tuned for multiple choice \(its config.json names CtxBert"):
        scripts.check_trained_for_the_task(
            model_args, SimpleNamespace(do_train=False), "multiple choice", "ForMultipleChoice"
        )
    scripts.check_trained_for_the_task(model_args, SimpleNamespace(do_train=True), "multiple choice", "Choice")
