"""finish_run saves model, tokenizer and card, and with --push_to_hub uploads exactly that, offline.

The Hub is replaced by mocks of `HfApi.create_repo` and `HfApi.upload_folder`; the upload mock records every
file of the folder it is handed (the folder is temporary), so the test sees what would have been sent.
"""

import numpy as np
import pytest

# Optional dependencies: where they are missing this module is skipped, not a collection error.
pytest.importorskip("datasets")
import torch
from datasets import Dataset
from fake_hub import FakeHub, folder_files
from huggingface_hub import ModelCard
from tiny_checkpoints import WORDS, bert_sequence_classifier
from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments

from hf_ctx.hub import finish_run, push_checkpoint
from hf_ctx.model_card import build_model_card


def test_push_checkpoint_uploads_what_save_pretrained_writes(tmp_path):
    model, tokenizer = bert_sequence_classifier(tmp_path)
    card = build_model_card("bert", model, model_id="me/tiny", dataset_name="a toy corpus")
    with FakeHub() as hub:
        push_checkpoint(model, tokenizer, card, "me/tiny", revision="main")
    saved = tmp_path / "saved"
    model.save_pretrained(saved)
    tokenizer.save_pretrained(saved)
    (saved / "README.md").write_text(str(card))

    assert hub.created == ["me/tiny"]
    [upload] = hub.uploads
    assert upload["repo_id"] == "me/tiny" and upload["revision"] == "main"
    assert upload["files"] == folder_files(saved)
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "README.md",
            "configuration_bert.py", "modeling_bert.py"} <= set(upload["files"])


@pytest.mark.parametrize("push_to_hub", [False, True])
def test_finish_run_saves_and_pushes_the_checkpoint_and_card(tmp_path, push_to_hub):
    model, tokenizer = bert_sequence_classifier(tmp_path)
    rng = np.random.default_rng(0)
    sentences = [" ".join(rng.choice(WORDS, 5)) for _ in range(16)]
    data = Dataset.from_dict({"text": sentences, "label": [int("cat" in s) for s in sentences]})
    data = data.map(lambda b: tokenizer(b["text"], padding="max_length", max_length=12), batched=True)
    data = data.remove_columns("text")
    output_dir = tmp_path / "run"
    args = TrainingArguments(
        output_dir=str(output_dir), max_steps=2, per_device_train_batch_size=8, learning_rate=1e-3,
        report_to=[], save_strategy="no", push_to_hub=push_to_hub, hub_model_id="me/tiny-sst", use_cpu=True,
    )
    def accuracy(prediction):
        return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}

    with FakeHub() as hub:
        trainer = Trainer(model=model, args=args, train_dataset=data, eval_dataset=data,
                          processing_class=tokenizer, compute_metrics=accuracy)
        trainer.train()
        metrics = trainer.evaluate()
        card = finish_run(trainer, "bert", dataset_name="Toy sentences", eval_metrics={"validation": metrics},
                          hyperparameters={"max_seq_length": 12})

    saved = folder_files(output_dir)
    # The output folder holds a checkpoint the Auto classes load, and the card.
    reloaded = AutoModelForSequenceClassification.from_pretrained(output_dir)
    for name, tensor in trainer.model.state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[name], tensor)
    assert saved["README.md"].decode() == str(card)
    loaded_card = ModelCard.load(output_dir / "README.md")
    [result] = loaded_card.data.eval_results
    assert (result.metric_type, result.dataset_split) == ("accuracy", "validation")
    assert result.metric_value == round(metrics["eval_accuracy"], 4)
    assert loaded_card.data.model_name == "me/tiny-sst"
    assert "| max_seq_length | 12 |" in loaded_card.text and "| learning_rate | 0.001 |" in loaded_card.text
    assert "Training examples: 16." in loaded_card.text

    if not push_to_hub:
        assert hub.created == [] and hub.uploads == []
        return
    # The Trainer created the repository when it started; the end of the run uploads once, exactly what
    # save_pretrained wrote plus the card: no training state, no pickled training arguments.
    assert set(hub.created) == {"me/tiny-sst"}
    [upload] = hub.uploads
    assert upload["repo_id"] == "me/tiny-sst"
    assert "training_args.bin" in saved
    assert upload["files"] == {name: content for name, content in saved.items() if name != "training_args.bin"}
