"""Training beyond one process with `CtxTrainer` (tests/distributed_worker.py, a tiny BERT classifier):

- two `torchrun --nnodes 2` nodes on this machine train like one process with twice the batch;
- FSDP asked for on CPU processes is refused (accelerate would silently run plain DDP), while torch's FSDP2 itself
  shards every family at its `_no_split_modules` there (tests/fsdp2_worker.py);
- a streamed training set is split between the processes, each reading its own share;
- on GPUs (`gpu`): FSDP2 and DeepSpeed ZeRO-2/3 shard the model and match the DDP losses;
- a forward pass reads nothing back to the host where that would sync an XLA device.
"""

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
import torch
from accelerate.utils.deepspeed import HfDeepSpeedConfig
from datasets import Dataset
from distributed_worker import parse, run
from tiny_checkpoints import bert_pretraining, elmo_bilm
from transformers import TrainingArguments

from hf_ctx import CtxBertConfig, CtxBertForSequenceClassification
from hf_ctx.input_checks import host_syncs_allowed
from hf_ctx.tools.trainer import CtxTrainer

WORKER = Path(__file__).resolve().parent / "distributed_worker.py"
ACCELERATE_CONFIGS = WORKER.parents[1] / "examples" / "accelerate"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago; skips the test when none can be bound."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    except OSError as error:
        pytest.skip(f"cannot bind a port on 127.0.0.1 for the process group: {error}")


def results(output_dir, world_size):
    return [json.loads((Path(output_dir) / f"rank{rank}.json").read_text()) for rank in range(world_size)]


def environment():
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}


def check(process: subprocess.CompletedProcess):
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]


@pytest.fixture(scope="module")
def one_process_batch_8(tmp_path_factory):
    """The reference: one process, batch 8."""
    output_dir = tmp_path_factory.mktemp("one")
    return run(*parse(["--output_dir", str(output_dir), "--per_device_train_batch_size", "8", "--use_cpu"]))


@pytest.mark.slow
def test_two_nodes_train_like_one_process_with_twice_the_batch(one_process_batch_8, tmp_path):
    """`torchrun --nnodes 2 --nproc_per_node 1` twice (ranks 0 and 1, rendezvous on 127.0.0.1), batch 4 each,
    against one process with batch 8: the same data in each step, the mean of two 4-example mean losses is the
    8-example mean, and DDP averages the gradients the same way, so the losses agree to float rounding."""
    port = free_port()
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1"]
    launcher += ["--master_addr", "127.0.0.1", "--master_port", str(port)]
    worker = [str(WORKER), "--output_dir", str(tmp_path), "--per_device_train_batch_size", "4", "--use_cpu"]
    # Each node writes to a file, not a pipe: a node blocked on a full pipe that nobody reads would stall the other
    # at torchrun's exit barrier. A node that fails stops the wait (the other would sit out that 300 s barrier), and
    # any node still running is killed, so none outlives the test.
    logs = [tmp_path / f"node{rank}.log" for rank in (0, 1)]
    with contextlib.ExitStack() as stack:
        nodes = []
        for rank, log in enumerate(logs):
            out = stack.enter_context(open(log, "w"))
            command = [*launcher, "--node_rank", str(rank), *worker]
            nodes.append(subprocess.Popen(command, env=environment(), stdout=out, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and any(node.poll() is None for node in nodes):
            if any(node.returncode not in (None, 0) for node in nodes):
                break
            time.sleep(0.2)
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.wait()
    for node, log in zip(nodes, logs):
        assert node.returncode == 0, f"{log.name} (exit {node.returncode}):\n" + log.read_text()[-3000:]
    first, second = results(tmp_path, 2)
    assert first["world_size"] == second["world_size"] == 2
    assert len(first["losses"]) == len(one_process_batch_8["losses"]) == 3
    assert first["losses"] == pytest.approx(one_process_batch_8["losses"], rel=1e-5)
    assert first["local_parameters"] == first["model_parameters"]  # DDP: a whole copy on each node


# One SGD step of learning rate 1 without clipping: the weights after it are the step's gradient
ONE_SGD_STEP = ["--max_steps", "1", "--learning_rate", "1", "--optim", "sgd", "--max_grad_norm", "0"]
ONE_SGD_STEP += ["--lr_scheduler_type", "constant", "--use_cpu", "--task", "pretraining"]


@pytest.mark.slow
def test_accumulation_over_two_processes_is_the_one_process_big_batch(tmp_path):
    """BERT's MLM + NSP on 8 sentences of unequal lengths: 2 gloo processes of batch 2 accumulating 2 steps
    against one process of batch 8. `CtxTrainer` sums each loss term's items (masked tokens, pairs) over the
    micro-batches and the processes, so the weights after the step are the big batch's to 1e-6 relative; counting
    only the labels, as `Trainer` does, the pair loss was weighted by each micro-batch's masked tokens."""
    from safetensors.torch import load_file

    one = run(*parse(["--output_dir", str(tmp_path / "one"), "--per_device_train_batch_size", "8", *ONE_SGD_STEP]))
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    launcher += ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    worker = [str(WORKER), "--output_dir", str(tmp_path / "two"), "--per_device_train_batch_size", "2"]
    worker += ["--gradient_accumulation_steps", "2", *ONE_SGD_STEP]
    check(subprocess.run([*launcher, *worker], env=environment(), capture_output=True, text=True, timeout=300))
    first, _ = results(tmp_path / "two", 2)
    assert first["world_size"] == 2
    assert first["losses"] == pytest.approx(one["losses"], rel=1e-6)  # the step's loss, logged as its mean
    whole, accumulated = (load_file(tmp_path / name / "weights.safetensors") for name in ("one", "two"))
    assert whole.keys() == accumulated.keys()
    after = torch.cat([whole[k].flatten() for k in whole])
    difference = torch.cat([(accumulated[k] - whole[k]).flatten() for k in whole])
    assert difference.norm() <= 1e-6 * after.norm()


@pytest.mark.slow
def test_fsdp_on_cpu_processes_is_refused(tmp_path):
    """One CPU process of a process group (what torchrun sets up) with --fsdp: accelerate does not shard on
    CPU, and the run would be plain DDP; CtxTrainer says so and stops."""
    rendezvous = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}
    rendezvous |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    command = [sys.executable, str(WORKER), "--output_dir", str(tmp_path), "--use_cpu", "--fsdp"]
    process = subprocess.run(command, env={**environment(), **rendezvous}, capture_output=True, text=True, timeout=300)
    assert process.returncode != 0
    assert "FSDP was asked for (--fsdp), but accelerate set up MULTI_CPU on cpu" in process.stderr, process.stderr[
        -3000:
    ]
    assert not (tmp_path / "rank0.json").exists()


def test_each_process_reads_its_own_share_of_a_stream(tmp_path):
    """A streamed training set (`--streaming`) on 2 processes: each process's batches come from its own share of
    the stream (`split_dataset_by_node`), the shares are disjoint and together hold every example once."""
    config = CtxBertConfig.from_preset("tiny", vocab_size=50, max_position_embeddings=16)
    model = CtxBertForSequenceClassification(config)
    examples = [[5 + i % 40, 6 + i // 40] for i in range(30)]
    for num_shards in (1, 2, 3):  # whole files per process when they divide evenly, else every other example
        stream = Dataset.from_dict({"input_ids": examples, "labels": [0] * 30}).to_iterable_dataset(num_shards)
        args = TrainingArguments(str(tmp_path), per_device_train_batch_size=4, max_steps=1, report_to=[], use_cpu=True)
        trainer = CtxTrainer(model=model, args=args, train_dataset=stream)
        seen = []
        for rank in (0, 1):
            with (
                mock.patch.object(TrainingArguments, "world_size", 2),
                mock.patch.object(TrainingArguments, "process_index", rank),
            ):
                batches = list(trainer.get_train_dataloader())
            seen.append([row for batch in batches for row in batch["input_ids"].tolist()])
            assert all(len(batch["input_ids"]) <= 4 for batch in batches)
        assert not set(map(tuple, seen[0])) & set(map(tuple, seen[1])), num_shards
        assert sorted(seen[0] + seen[1]) == sorted(examples), num_shards
        assert abs(len(seen[0]) - len(seen[1])) <= 10, num_shards  # shares, not all on one process


@pytest.mark.slow
def test_fsdp2_shards_every_family_at_its_no_split_modules(tmp_path):
    """torch's FSDP2 on 2 CPU processes (gloo), which accelerate does not offer (see above) but torch does: BERT
    pretraining (tied MLM decoder), the ELMo biLM and TagLM, wrapped as accelerate wraps them (one unit per class
    of `_no_split_modules`, tied embeddings in one group, the root), each process holding half of the parameter
    values; trained on half a batch each, the gathered gradients equal an unsharded model's on the whole batch. (ELMo's softmax and TagLM's CRF, used through methods other than `forward`, stay
    in the root unit.)"""
    free_port()  # torchrun --standalone picks its own port; skip where none can be bound
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    command += [str(WORKER.parent / "fsdp2_worker.py"), str(tmp_path)]
    check(subprocess.run(command, env=environment(), capture_output=True, text=True, timeout=300))
    ranks = [json.loads((tmp_path / f"fsdp2_rank{rank}.json").read_text()) for rank in (0, 1)]
    assert ranks[0]["bert_pretraining"]["units"] == ["CtxBertLayer"]  # tied MLM decoder: see modeling_bert.py
    assert ranks[0]["elmo_bilm"]["units"] == ["CharacterCNN", "ProjectedLstm"]
    assert ranks[0]["taglm"]["units"] == ["CharacterCNN", "CharacterEncoder", "ProjectedLstm"]
    for family in ("bert_pretraining", "elmo_bilm", "taglm"):
        first, second = ranks[0][family], ranks[1][family]
        assert first["local_parameters"] + second["local_parameters"] == first["model_parameters"], family
        assert max(first["local_parameters"], second["local_parameters"]) < 0.6 * first["model_parameters"]
        assert first["trained_parameters"] > 0 and first["max_gradient_difference"] < 1e-5, (family, first)


def _gpu_run(output_dir: Path, launch: list[str], *training_args: str) -> list[dict]:
    """The worker on 2 GPUs with `launch` (torchrun or accelerate launch options); every rank's result."""
    world_size = 2
    if torch.cuda.device_count() < world_size:
        pytest.skip(f"needs {world_size} CUDA devices to shard over; this machine has {torch.cuda.device_count()}")
    command = [*launch, str(WORKER), "--output_dir", str(output_dir), "--per_device_train_batch_size", "4"]
    process = subprocess.run(
        command + list(training_args), env=environment(), capture_output=True, text=True, timeout=600
    )
    check(process)
    return results(output_dir, world_size)


def _torchrun():
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


@pytest.mark.gpu
@pytest.mark.slow
def test_fsdp2_shards_on_gpus_and_matches_ddp(tmp_path):
    """Trainer --fsdp (FSDP2, one unit per class of `_no_split_modules`) on 2 GPUs: each rank holds part of the
    parameters, and the losses are DDP's."""
    ddp = _gpu_run(tmp_path / "ddp", _torchrun())
    fsdp = _gpu_run(tmp_path / "fsdp", _torchrun(), "--fsdp", "--fsdp_config", '{"version": 2}')
    for rank in fsdp:
        assert rank["local_parameters"] < rank["model_parameters"]
    assert fsdp[0]["losses"] == pytest.approx(ddp[0]["losses"], rel=1e-4)


@pytest.mark.gpu
@pytest.mark.slow
def test_accelerate_fsdp_config_shards_and_matches_ddp(tmp_path):
    """examples/accelerate/fsdp.yaml (FSDP2, one unit per CtxBertLayer) through `accelerate launch`, fp32."""
    ddp = _gpu_run(tmp_path / "ddp", _torchrun())
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file"]
    launch += [str(ACCELERATE_CONFIGS / "fsdp.yaml"), "--num_processes", "2", "--mixed_precision", "no"]
    fsdp = _gpu_run(tmp_path / "fsdp", launch)
    for rank in fsdp:
        assert rank["local_parameters"] < rank["model_parameters"]
    assert fsdp[0]["losses"] == pytest.approx(ddp[0]["losses"], rel=1e-4)


@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_configs_are_read_as_their_zero_stage(stage):
    """What the Trainer's DeepSpeed integration reads from examples/accelerate/ds_zero{2,3}.json (accelerate's
    reader, which needs no deepspeed); the "auto" values are the Trainer's to fill."""
    config = HfDeepSpeedConfig(str(ACCELERATE_CONFIGS / f"ds_zero{stage}.json"))
    assert config.get_value("zero_optimization.stage") == stage
    assert (config.is_zero2(), config.is_zero3()) == (stage == 2, stage == 3)
    assert config.get_value("train_micro_batch_size_per_gpu") == "auto"  # --per_device_train_batch_size


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_zero_matches_ddp(tmp_path, stage):
    """Trainer --deepspeed with examples/accelerate/ds_zero{2,3}.json on 2 GPUs: the losses are DDP's; ZeRO-3
    leaves each rank part of the parameters (ZeRO-2 shards gradients and optimizer state only)."""
    pytest.importorskip("deepspeed")
    ddp = _gpu_run(tmp_path / "ddp", _torchrun())
    config = str(ACCELERATE_CONFIGS / f"ds_zero{stage}.json")
    zero = _gpu_run(tmp_path / "zero", _torchrun(), "--deepspeed", config)
    if stage == 3:
        for rank in zero:
            assert rank["local_parameters"] < rank["model_parameters"]
    assert zero[0]["losses"] == pytest.approx(ddp[0]["losses"], rel=1e-3)


# What reads a tensor's values back to the host: each is a sync on an XLA device.
HOST_READS = ["item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero", "cpu", "numpy"]


def test_host_syncs_are_not_allowed_on_xla_devices():
    assert not host_syncs_allowed(SimpleNamespace(device=torch.device("xla")))
    assert host_syncs_allowed(torch.zeros(1))


@pytest.mark.parametrize("build", [bert_pretraining, elmo_bilm])
def test_a_forward_pass_on_xla_reads_nothing_back(tmp_path, build):
    """BERT pretraining (dense MLM head, as examples/accelerate/tpu.yaml runs it) and the ELMo biLM compute their
    loss without reading a value back to the host when `host_syncs_allowed` says no, as it does for XLA
    tensors: every host read of a tensor raises here."""
    model, tokenizer = build(tmp_path)
    if build is bert_pretraining:
        model.config.sparse_prediction = False
        batch = tokenizer(["red cat runs fast", "dog"], padding="max_length", max_length=8, return_tensors="pt")
        batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        batch["next_sentence_label"] = torch.tensor([0, 1])
    else:
        batch = tokenizer(
            [["red", "cat", "runs"], ["dog"]], is_split_into_words=True, padding=True, return_tensors="pt"
        )
    modules = [module for name, module in sys.modules.items() if name.startswith("hf_ctx.")]
    with contextlib.ExitStack() as stack:
        for module in modules:
            if hasattr(module, "host_syncs_allowed"):
                stack.enter_context(mock.patch.object(module, "host_syncs_allowed", lambda tensor: False))
        for name in HOST_READS:
            stack.enter_context(mock.patch.object(torch.Tensor, name, side_effect=RuntimeError(f"host read: {name}")))
        loss = model(**batch).loss
    assert torch.isfinite(loss)
