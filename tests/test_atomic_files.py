"""Every write is atomic: a full disk (OSError ENOSPC, injected at several points of each writer) leaves the previous
artifact loadable and no temporary file behind."""

import errno
import json
import os

import pytest
import torch
import transformers
from tiny_checkpoints import elmo_bilm, elmo_tokenizer

from hf_ctx import ElmoForBiLM, ElmoTokenizer
from hf_ctx.atomic_files import write_into_folder
from hf_ctx.data.atomic_write import atomic_write, write_text


def disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _leftovers(folder):
    """Temporary files or folders that a write left in `folder` or beside it."""
    names = (os.listdir(folder) if os.path.isdir(folder) else []) + os.listdir(os.path.dirname(folder))
    return [name for name in names if name.endswith(".tmp")]


def test_atomic_write_keeps_the_previous_file(tmp_path):
    path = tmp_path / "results.json"
    write_text(path, '{"f1": 0.5}')
    with pytest.raises(OSError, match="No space"), atomic_write(path) as f:
        f.write('{"f1": ')
        disk_full()
    assert json.loads(path.read_text()) == {"f1": 0.5}
    assert _leftovers(str(tmp_path / "x")) == []
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize(
    "where",
    [
        "transformers.modeling_utils.safe_save_file",  # the weights
        "transformers.configuration_utils.PreTrainedConfig.to_json_file",  # config.json
        "transformers.dynamic_module_utils.shutil.copyfile",  # the remote-code source files
    ],
)
def test_save_pretrained_over_a_checkpoint_survives_a_full_disk(tmp_path, monkeypatch, where):
    old, _ = elmo_bilm(tmp_path)
    folder = tmp_path / "checkpoint"
    old.save_pretrained(folder)
    before = sorted(os.listdir(folder))
    new, _ = elmo_bilm(tmp_path)
    with torch.no_grad():
        for parameter in new.parameters():
            parameter.add_(1.0)
    new.config.dropout = 0.25
    monkeypatch.setattr(where, disk_full)
    with pytest.raises(OSError, match="No space"):
        new.save_pretrained(folder)
    monkeypatch.undo()
    assert sorted(os.listdir(folder)) == before
    assert _leftovers(str(folder)) == []
    loaded = ElmoForBiLM.from_pretrained(folder)
    assert loaded.config.dropout == old.config.dropout
    for (name, saved), (_, reloaded) in zip(old.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(saved, reloaded), name
    new.save_pretrained(folder)  # with space again, the new checkpoint replaces the old one whole
    assert ElmoForBiLM.from_pretrained(folder).config.dropout == 0.25


def test_tokenizer_save_survives_a_full_disk(tmp_path, monkeypatch):
    tokenizer = elmo_tokenizer()
    tokenizer.save_pretrained(tmp_path / "tok")
    monkeypatch.setattr(ElmoTokenizer, "save_vocabulary", disk_full)
    with pytest.raises(OSError, match="No space"):
        ElmoTokenizer(vocab=["<S>", "</S>", "<UNK>", "other"]).save_pretrained(tmp_path / "tok")
    monkeypatch.undo()
    assert ElmoTokenizer.from_pretrained(tmp_path / "tok").get_vocab() == tokenizer.get_vocab()
    assert _leftovers(str(tmp_path / "tok")) == []


def test_write_into_folder_returns_the_final_paths_and_replaces_old_weight_shards(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "model-00001-of-00002.safetensors").write_text("old shard")
    (folder / "notes.txt").write_text("kept")

    def write(staging):
        with open(os.path.join(staging, "model.safetensors"), "w") as f:
            f.write("new")
        return (os.path.join(staging, "model.safetensors"),)

    assert write_into_folder(folder, write) == (str(folder / "model.safetensors"),)
    assert sorted(os.listdir(folder)) == ["model.safetensors", "notes.txt"]


def test_trainer_metrics_survive_a_full_disk(tmp_path, monkeypatch):
    from hf_ctx.tools.trainer import CtxTrainer

    model, tokenizer = elmo_bilm(tmp_path)
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "run"), report_to=[])
    trainer = CtxTrainer(model=model, args=args, processing_class=tokenizer)
    trainer.save_metrics("eval", {"eval_loss": 1.0})
    monkeypatch.setattr(json, "dumps", disk_full)
    with pytest.raises(OSError, match="No space"):
        trainer.save_metrics("eval", {"eval_loss": 2.0})
    monkeypatch.undo()
    assert json.loads((tmp_path / "run" / "all_results.json").read_text()) == {"eval_loss": 1.0}
    assert json.loads((tmp_path / "run" / "eval_results.json").read_text()) == {"eval_loss": 1.0}


def test_loading_a_truncated_checkpoint_names_the_file(tmp_path):
    model, _ = elmo_bilm(tmp_path)
    model.save_pretrained(tmp_path / "ckpt")
    weights = tmp_path / "ckpt" / "model.safetensors"
    os.truncate(weights, weights.stat().st_size - 100)
    with pytest.raises(
        OSError, match=r"model.safetensors \(its tensors need \d+ bytes, the file has \d+\) is incomplete"
    ):
        ElmoForBiLM.from_pretrained(tmp_path / "ckpt")
    with pytest.raises(OSError, match="model.safetensors .* is incomplete or corrupt"):
        transformers.AutoModel.from_pretrained(tmp_path / "ckpt")
