#!/usr/bin/env python
"""Forward + backward speed of hf_ctx's ELMo biLSTM stack against a plain per-step reference, in the same run.

    python benchmarks/elmo_lstm_speed.py                 # GPU: original ELMo size, batch 128 x 20 steps
    OMP_NUM_THREADS=1 python benchmarks/elmo_lstm_speed.py --device cpu   # CPU: small ELMo, batch 32 x 20

The reference is the straightforward LSTM-with-projection cell (AllenNLP's `LstmCellWithProjection` layout):
every step runs its own input matmul, recurrent matmul, gate slices and activations, clipping, projection, one
direction after the other. Against it, on the same weights and inputs:

- `hf_ctx clipped`: `ProjectedLstm` with cell and projection clipping (ELMo's), eager: input contributions of all
  steps in one matmul, both directions of a layer in one batched matmul per step;
- `hf_ctx clipped, compiled`: the same under `torch.compile` (elementwise work of each step fused; on CUDA with
  CUDA graphs, mode "reduce-overhead"), unless `--no_compile`;
- `hf_ctx no clipping`: clipping off, which runs PyTorch's fused LSTM (`nn.LSTM(proj_size=...)`'s kernel: cuDNN on
  GPU), against the reference with clipping off.

Each line gives tokens per second (batch x steps per forward+backward pass), the speed-up over its reference,
and the largest differences of outputs and gradients from the reference. Targets on a GPU: >= 5x with clipping,
>= 10x on the cuDNN path.
"""

import argparse
import time

import torch
from torch.nn import functional as F

from hf_ctx.layers import ProjectedLstm, reverse_padded_sequences
from hf_ctx.tools import option_kinds as kinds
from hf_ctx.tools.errors import run_script


def reference_layer(cell, x):
    """The plain per-step LSTM with projection and clipping over x (B, T, I) -> (B, T, P)."""
    batch, steps, _ = x.shape
    h = x.new_zeros(batch, cell.projection_size)
    c = x.new_zeros(batch, cell.cell_size)
    size = cell.cell_size
    outputs = []
    for t in range(steps):
        projected_input = F.linear(x[:, t], cell.weight_ih)
        projected_state = F.linear(h, cell.weight_hh, cell.bias)
        input_gate = torch.sigmoid(projected_input[:, :size] + projected_state[:, :size])
        forget_gate = torch.sigmoid(projected_input[:, size : 2 * size] + projected_state[:, size : 2 * size])
        memory_init = torch.tanh(projected_input[:, 2 * size : 3 * size] + projected_state[:, 2 * size : 3 * size])
        output_gate = torch.sigmoid(projected_input[:, 3 * size :] + projected_state[:, 3 * size :])
        c = input_gate * memory_init + forget_gate * c
        if cell.cell_clip is not None:
            c = torch.clamp(c, -cell.cell_clip, cell.cell_clip)
        h = output_gate * torch.tanh(c)
        if cell.weight_hr is not None:
            h = F.linear(h, cell.weight_hr)
            if cell.proj_clip is not None:
                h = torch.clamp(h, -cell.proj_clip, cell.proj_clip)
        outputs.append(h)
    return torch.stack(outputs, dim=1)


def reference_stack(stack: ProjectedLstm, x, mask):
    """ELMo's biLSTM stack made of `reference_layer`s, with the same parameters as `stack`."""
    lengths = mask.sum(1)
    forward_input, backward_input = x, reverse_padded_sequences(x, lengths)
    outputs = []
    for index, (forward_layer, backward_layer) in enumerate(zip(stack.forward_layers, stack.backward_layers)):
        forward_output = reference_layer(forward_layer, forward_input)
        backward_output = reference_layer(backward_layer, backward_input)
        if stack.use_skip_connections and index > 0:
            forward_output, backward_output = forward_output + forward_input, backward_output + backward_input
        outputs.append(torch.cat([forward_output, reverse_padded_sequences(backward_output, lengths)], -1))
        forward_input, backward_input = forward_output, backward_output
    return outputs


def forward_backward(run, stack, x, mask, grad, keep=False):
    """One training-like pass; returns (outputs, input gradient, parameter gradients).

    With `keep`, the gradients are cloned: under CUDA graphs they live in the graph's memory pool, which the
    next replay overwrites.
    """
    x = x.detach().requires_grad_(True)
    stack.zero_grad(set_to_none=True)
    outputs = run(stack, x, mask)
    torch.autograd.backward(outputs, [grad] * len(outputs))
    gradients = [x.grad, *(p.grad for p in stack.parameters())]
    if keep:
        gradients = [g.clone() for g in gradients]
    return outputs, gradients[0], gradients[1:]


def compiled_runner(stack, mode):
    """`run(stack, inputs, mask)` calling `torch.compile(stack, mode=mode)`.

    Each call marks a new step for CUDA graphs (mode "reduce-overhead"), so a replay may reuse the memory of the
    previous step's outputs, and the outputs are cloned so that they outlive the next replay.
    """
    compiled = torch.compile(stack, mode=mode, dynamic=False)

    def run(stack, inputs, mask):
        torch.compiler.cudagraph_mark_step_begin()
        return [output.clone() for output in compiled(inputs, mask)]

    return run


def timed(run, stack, x, mask, grad, repeats, warmup, device):
    for _ in range(warmup):
        forward_backward(run, stack, x, mask, grad)
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        forward_backward(run, stack, x, mask, grad)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


def largest_difference(a, b):
    return max((u.float() - v.float()).abs().max().item() for u, v in zip(a, b))


def main(argv=None):
    parser = kinds.CheckedArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", type=kinds.TEXT, default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch_size", type=kinds.BATCH_SIZE, default=None, help="default: 128 on GPU, 32 on CPU")
    parser.add_argument("--steps", type=kinds.LENGTH, default=20, help="time steps (words) per sequence")
    parser.add_argument(
        "--cell_size", type=kinds.COUNT, default=None, help="default: 4096 on GPU (original), 1024 on CPU"
    )
    parser.add_argument("--projection_size", type=kinds.COUNT, default=None, help="default: 512 on GPU, 128 on CPU")
    parser.add_argument("--layers", type=kinds.COUNT, default=2)
    parser.add_argument("--clip", type=kinds.POSITIVE_NUMBER, default=3.0, help="cell and projection clip (ELMo: 3)")
    parser.add_argument("--repeats", type=kinds.COUNT, default=None, help="timed passes (default 20 on GPU, 3 on CPU)")
    parser.add_argument("--no_compile", action="store_true", help="skip the torch.compile variant")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 matmuls on GPU (both sides)")
    parser.add_argument(
        "--autocast",
        type=kinds.TEXT,
        choices=["bf16", "fp16"],
        default=None,
        help="run the hf_ctx variants under torch.autocast (the reference stays fp32)",
    )
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    gpu = device.type == "cuda"
    batch = args.batch_size or (128 if gpu else 32)
    cell = args.cell_size or (4096 if gpu else 1024)
    projection = args.projection_size or (512 if gpu else 128)
    repeats = args.repeats or (20 if gpu else 3)
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
    name = torch.cuda.get_device_name(device) if gpu else f"CPU, {torch.get_num_threads()} threads"
    print(
        f"device: {name}; batch {batch} x {args.steps} steps, {args.layers} layers, cell {cell}, projection "
        f"{projection}, fp32{' (TF32 on)' if args.tf32 else ''}"
        f"{f' (hf_ctx under {args.autocast} autocast)' if args.autocast else ''}, forward + backward"
    )

    torch.manual_seed(0)
    x = torch.randn(batch, args.steps, projection, device=device)
    mask = torch.ones(batch, args.steps, dtype=torch.bool, device=device)
    grad = torch.randn(batch, args.steps, 2 * projection, device=device)
    tokens = batch * args.steps

    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, None: None}[args.autocast]

    def ours(stack, inputs, mask):
        return stack(inputs, mask)

    def under_autocast(run):
        if autocast_dtype is None:
            return run

        def run_autocast(stack, inputs, mask):
            with torch.autocast(device.type, dtype=autocast_dtype):
                return [output.float() for output in run(stack, inputs, mask)]

        return run_autocast

    def reference(stack, inputs, mask):
        return reference_stack(stack, inputs, mask)

    rows = []
    for clip in (args.clip, None):
        # training mode (no dropout here): cuDNN's fused LSTM has a backward pass only in training mode
        stack = ProjectedLstm(projection, cell, projection, args.layers, clip, clip).to(device).train()
        expected = forward_backward(reference, stack, x, mask, grad, keep=True)
        baseline = timed(reference, stack, x, mask, grad, repeats, 1, device)
        label = "clipped" if clip is not None else "no clipping"
        rows.append((f"reference, {label}", baseline, baseline, 0.0, 0.0))
        suffix = f", {args.autocast} autocast" if args.autocast else ""
        name = f"hf_ctx {label}" + (" (fused LSTM kernel)" if clip is None else "") + suffix
        variants = [(name, under_autocast(ours))]
        if clip is not None and not args.no_compile:
            mode = "reduce-overhead" if gpu else None
            variants.append(
                (
                    f"hf_ctx {label}, compiled" + (" + CUDA graphs" if gpu else "") + suffix,
                    under_autocast(compiled_runner(stack, mode)),
                )
            )
        for variant, run in variants:
            try:
                got = forward_backward(run, stack, x, mask, grad, keep=True)
                seconds = timed(run, stack, x, mask, grad, repeats, 3, device)
            except Exception as error:  # e.g. no compiler toolchain for torch.compile
                print(f"{variant}: not measured ({type(error).__name__}: {str(error).splitlines()[0][:120]})")
                continue
            output_diff = largest_difference(got[0], expected[0])
            grad_diff = largest_difference([got[1], *got[2]], [expected[1], *expected[2]])
            rows.append((variant, seconds, baseline, output_diff, grad_diff))

    print(f"{'':60s} {'tokens/s':>12s} {'speed-up':>9s} {'max |out diff|':>15s} {'max |grad diff|':>16s}")
    for variant, seconds, baseline, output_diff, grad_diff in rows:
        print(
            f"{variant:60s} {tokens / seconds:12,.0f} {baseline / seconds:8.2f}x {output_diff:15.2e} {grad_diff:16.2e}"
        )


if __name__ == "__main__":
    run_script(main)
