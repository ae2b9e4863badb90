"""The benchmark scripts' own correctness: what they compare must be what they claim to compare."""

import importlib
import re

import pytest
import torch

from hf_ctx.layers import ProjectedLstm


@pytest.mark.gpu
def test_elmo_benchmark_compiled_cuda_graph_results_outlive_later_replays():
    """With mode="reduce-overhead" the first pass's outputs and gradients live in the CUDA graph's
    memory, and reading them after later replays would crash. The benchmark keeps copies; they must still equal the
    eager pass after the replays."""
    bench = importlib.import_module("elmo_lstm_speed")
    torch.manual_seed(0)
    device = torch.device("cuda")
    stack = ProjectedLstm(16, 32, 16, num_layers=2, cell_clip=3.0, proj_clip=3.0).to(device).eval()
    x = torch.randn(4, 6, 16, device=device)
    mask = torch.ones(4, 6, dtype=torch.bool, device=device)
    grad = torch.randn(4, 6, 32, device=device)
    eager = bench.forward_backward(lambda s, i, m: s(i, m), stack, x, mask, grad, keep=True)
    run = bench.compiled_runner(stack, "reduce-overhead")
    kept = bench.forward_backward(run, stack, x, mask, grad, keep=True)
    for _ in range(3):  # replays that reuse the graph's memory
        bench.forward_backward(run, stack, x, mask, grad)
    assert bench.largest_difference(kept[0], eager[0]) < 1e-4
    assert bench.largest_difference([kept[1], *kept[2]], [eager[1], *eager[2]]) < 1e-3


def test_elmo_benchmark_runs_on_cpu_and_gpu_table_reads_the_outputs(capsys, monkeypatch, tmp_path):
    """The benchmark's CPU fallback runs end to end at a tiny size and its paths agree with the reference; the
    table of gpu_window.py's checks reads its output and bert_speed's."""
    bench = importlib.import_module("elmo_lstm_speed")
    monkeypatch.setattr(
        "sys.argv",
        [
            "elmo_lstm_speed.py",
            "--device",
            "cpu",
            "--batch_size",
            "2",
            "--steps",
            "3",
            "--cell_size",
            "8",
            "--projection_size",
            "4",
            "--repeats",
            "1",
            "--no_compile",
        ],
    )
    bench.main()
    printed = capsys.readouterr().out
    rows = [line.split() for line in printed.splitlines() if line.startswith("hf_ctx")]
    assert len(rows) == 2  # clipped and unclipped
    for row in rows:
        assert float(row[-2]) < 1e-5 and float(row[-1]) < 1e-4  # output and gradient differences

    (tmp_path / "elmo_fp32.txt").write_text(printed)
    (tmp_path / "bert_pretrain_b32_s512.txt").write_text(  # bert_speed.py's lines
        "  eager    transformers       269,459 tokens/s   peak 12.70 GiB\n"
        "  eager    hf_ctx             351,752 tokens/s   peak 8.22 GiB\n"
        "  eager    hf_ctx+vocab64     369,340 tokens/s   peak 8.23 GiB\n"
    )
    (tmp_path / "bert_finetune_b32.txt").write_text("Traceback ...\n")
    table = importlib.import_module("gpu_table")
    monkeypatch.setattr("sys.argv", ["gpu_table.py", str(tmp_path)])
    table.main()
    lines = capsys.readouterr().out.splitlines()
    assert "| BERT pretrain_b32_s512, eager | 269,459 | 351,752 | **1.31x** | 12.70 -> 8.22 GiB | >= 1.5x |" in lines
    padded = (
        "| BERT pretrain_b32_s512, eager, vocabulary padded to 64 | 269,459 | 369,340 | **1.37x** (1.050x unpadded) |"
    )
    assert f"{padded} 12.70 -> 8.23 GiB | >= 1.5x |" in lines
    assert any(line.startswith("| BERT finetune_b32 |") and "not measured" in line for line in lines)
    elmo = [line for line in lines if line.startswith("| ELMo LSTM: hf_ctx")]
    assert len(elmo) == 2 and all("AllenNLP layout" in line for line in elmo)


def test_inductor_fusion_reads_the_fusions_from_the_kernel_names():
    fusion = importlib.import_module("inductor_fusion")
    cpu_default = ["cpp_fused_add_native_layer_norm_0", "cpp_fused_gelu_1", "cpp_fused_add_native_layer_norm_2"]
    assert fusion.fusions(cpu_default) == {"bias + GELU": False, "residual + LayerNorm": True}
    frozen = ["cpp_fused_add_addmm_native_layer_norm_transpose_view_1", "cpp_fused_addmm_gelu_2"]
    assert fusion.fusions(frozen) == {"bias + GELU": True, "residual + LayerNorm": True}
    assert fusion.fusions(["triton_poi_fused_gelu_3", "triton_per_fused_native_layer_norm_4"]) == dict.fromkeys(
        ("bias + GELU", "residual + LayerNorm"), False
    )


@pytest.mark.slow  # inductor compiles one layer: about 30 s on 2 busy cores
def test_inductor_fusion_finds_residual_and_layer_norm_fused_on_cpu_and_gpu_table_reads_it(
    capsys, monkeypatch, tmp_path
):
    """On the CPU inductor fuses the residual add with the LayerNorm (docs/performance.md); gpu_table.py turns the
    verdicts into rows of the window's table."""
    importlib.import_module("inductor_fusion").main(["--device", "cpu", "--preset", "tiny", "--mode", "eval"])
    printed = capsys.readouterr().out
    assert "eval forward residual + LayerNorm: fused" in printed
    assert re.search(r"^eval forward bias \+ GELU: (not )?fused$", printed, re.MULTILINE)
    (tmp_path / "inductor_fusion.txt").write_text(printed)
    lines = importlib.import_module("gpu_table").table(tmp_path)
    assert "| inductor, BERT layer eval: residual + LayerNorm | | fused | | | |" in lines


@pytest.mark.slow  # about 6 s on 2 busy cores
def test_bilm_cache_benchmark_times_cached_epochs_and_measures_the_cache_size(capsys, monkeypatch, tmp_path):
    """At a tiny size: both taggers' epochs are timed, and the measured cache file matches the size from the dims
    that the table for the published sizes uses."""
    from hf_ctx import configuration_elmo

    tiny = {"char_cnn": {"n_highway": 1, "filters": [[1, 4], [2, 8]], "embedding": {"dim": 4}}}
    monkeypatch.setitem(configuration_elmo.ELMO_PRESETS, "small", {**tiny, "lstm": {"dim": 16, "projection_dim": 8}})
    conll = tmp_path / "train.txt"
    conll.write_text(
        "EU N N B-ORG\nrejects V V O\nGerman J J B-MISC\ncall N N O\n\nPeter N N B-PER\nBlackburn N N I-PER\n"
    )
    bench = importlib.import_module("bilm_cache_speed")
    monkeypatch.setattr("sys.argv", ["bilm_cache_speed.py", "--conll", str(conll), "--batch_size", "1"])
    bench.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("2 sentences (6 words)")
    assert [line.split()[0] for line in lines[1:3]] == ["TagLM", "ELMo"] and all(
        "later epoch" in x for x in lines[1:3]
    )
    measured = next(line for line in lines if line.startswith("cache file"))
    measured_bytes, from_dims = re.search(r"once\): ([\d,]+) bytes .*dims: ([\d,]+)", measured).groups()
    assert int(from_dims.replace(",", "")) == 3 * 16 * 4  # (L + 1) layers x 2P floats x 4 bytes
    assert (
        "for 6 words" in measured and 6 * 192 < int(measured_bytes.replace(",", "")) < 6 * 192 + 1024
    )  # the states and a header
    assert any(line.split()[:2] == ["original", "biLM"] and "1,229 MB per 100k words" in line for line in lines)
