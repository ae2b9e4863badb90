"""Which kernels inductor generates for one hf_ctx BERT layer (post-LN, as BERT): whether bias + GELU and
residual (+ dropout) + LayerNorm run as one kernel each, in the forward graph and, in training, the backward one.

    python benchmarks/inductor_fusion.py --device cpu --preset mini
    python benchmarks/inductor_fusion.py --device cuda --dtype bf16 --preset base

Prints, per graph, the kernels inductor generated (named after the ops each fuses, e.g.
`cpp_fused_add_native_layer_norm_0`, `triton_per_fused_add_native_dropout_native_layer_norm_0`) and the library
calls (matrix products, attention), then one line per fusion: "fused" when one generated kernel computes GELU with
the bias add (`addmm` in its name) or the residual add with the LayerNorm. A GEMM that adds the bias itself
(`extern_kernels.addmm`) followed by a GELU kernel is "not fused": one more pass over the (tokens, 4H) activations.
"""

import argparse
import re
from collections import Counter

import torch
from torch._inductor.utils import run_and_get_code

from hf_ctx import CtxBertConfig
from hf_ctx.configuration_bert import BERT_PRESETS
from hf_ctx.modeling_bert import CtxBertLayer
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script

KERNEL = re.compile(r"^(\w+) = async_compile\.\w+\(", re.MULTILINE)
LIBRARY_CALL = re.compile(r"\b(extern_kernels\.\w+|torch\.ops\.[\w.]+)\(")


def fusions(kernels: list[str]) -> dict[str, bool]:
    """What the kernel names say: bias + GELU in one kernel, residual + LayerNorm in one kernel (forward names;
    the backward graph's kernels carry `gelu_backward` and `native_layer_norm_backward`)."""
    return {
        "bias + GELU": any("gelu" in k and "addmm" in k for k in kernels),
        "residual + LayerNorm": any(re.search(r"_add_.*native_layer_norm", k) for k in kernels),
    }


def generated_code(config, mode: str, device: str, dtype, tokens: int) -> list[str]:
    """Inductor's code for one `CtxBertLayer` on `tokens` real tokens: the forward graph, and in "train" mode
    (dropout on, forward + backward) the backward graph too."""
    torch._dynamo.reset()
    batch, length = tokens // 64, 64
    layer = CtxBertLayer(config).to(device).train(mode == "train")
    hidden = torch.randn(batch * length, config.hidden_size, device=device, requires_grad=mode == "train")
    compiled = torch.compile(layer)

    def step():
        with torch.autocast(device, dtype=dtype, enabled=dtype != torch.float32):
            output, _ = compiled(hidden, None, shape=(batch, length))
        if mode == "train":
            output.float().sum().backward()
        return output

    with torch.set_grad_enabled(mode == "train"):
        _, codes = run_and_get_code(step)
    torch._dynamo.reset()
    return codes


def main(argv=None):
    parser = kinds.CheckedArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", type=kinds.TEXT, default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--dtype", type=kinds.TEXT, choices=["fp32", "bf16", "fp16"], default="fp32", help="autocast dtype"
    )
    parser.add_argument("--preset", type=kinds.TEXT, choices=list(BERT_PRESETS), default="mini")
    parser.add_argument("--tokens", type=kinds.LENGTH, default=512, help="the (N, H) real tokens the layer runs on")
    parser.add_argument("--mode", type=kinds.TEXT, choices=["eval", "train", "both"], default="both")
    args = parser.parse_args(argv)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    torch.manual_seed(0)
    config = CtxBertConfig.from_preset(args.preset, vocab_size=128)
    config._attn_implementation = "sdpa"
    print(f"CtxBertLayer {args.preset}, {args.tokens} tokens, {args.device}, {args.dtype}, torch {torch.__version__}")
    for mode in ("eval", "train") if args.mode == "both" else (args.mode,):
        codes = generated_code(config, mode, args.device, dtype, max(args.tokens, 64))
        for graph, code in zip(("forward", "backward"), codes):
            kernels = KERNEL.findall(code)
            calls = Counter(LIBRARY_CALL.findall(code))
            print(f"{mode} {graph}: {len(kernels)} generated kernels, {sum(calls.values())} library calls")
            for kernel in kernels:
                print(f"    {kernel}")
            print("    " + ", ".join(f"{name} x{count}" for name, count in calls.items()))
            if graph == "forward":
                for fusion, fused in fusions(kernels).items():
                    print(f"{mode} {graph} {fusion}: {'fused' if fused else 'not fused'}")


if __name__ == "__main__":
    run_script(main)
