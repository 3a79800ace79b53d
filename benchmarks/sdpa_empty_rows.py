"""What PyTorch's attention kernels give a query that may see no key.

zoo's fused attention passes PyTorch an additive -inf bias on the CPU,
whose kernels give such a query zeros (and zero gradients), and keeps its
own empty-row check elsewhere. This script asks each of PyTorch's SDPA
kernels on this machine (math, memory-efficient, cuDNN, flash) the same
question, with a boolean mask and with a -inf bias, in float32 and
bfloat16, so the check can be dropped where a kernel answers zeros:

    python benchmarks/sdpa_empty_rows.py [--json results.json]

One row per kernel, mask kind and dtype: the empty row's largest output,
whether any output or query gradient is NaN, or why the kernel refused.
PyTorch only (benchmarks may import a backend; `zoo/` may not).
"""

import argparse
import json


def probe(device, kernel, kind, dtype):
    """One kernel's answer for a (1, 2, 8, 16) attention whose query 3
    sees no key."""
    import torch
    from torch.nn.attention import sdpa_kernel

    generator = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (
        torch.randn(1, 2, 8, 16, generator=generator).to(
            device=device, dtype=dtype
        )
        for _ in range(3)
    )
    q.requires_grad_(True)
    keep = torch.ones(1, 1, 8, 8, dtype=torch.bool, device=device)
    keep[..., 3, :] = False
    mask = (
        keep
        if kind == "bool"
        else torch.where(keep, 0.0, float("-inf")).to(dtype)
    )
    try:
        with sdpa_kernel([kernel]):
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=mask
            )
            out.float().pow(2).sum().backward()
    except (RuntimeError, NotImplementedError) as error:  # refused
        return {"refused": str(error).splitlines()[0][:120]}
    row = out.detach()[..., 3, :].float()
    return {
        "empty_row_max_abs": float(row.abs().max()),
        "nan_output": bool(torch.isnan(out).any()),
        "nan_gradient": bool(torch.isnan(q.grad).any()),
        "zeros": bool((row == 0).all() and not torch.isnan(q.grad).any()),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default=None, help="write results here")
    args = parser.parse_args(argv)

    import torch
    from torch.nn.attention import SDPBackend

    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(
        f"torch {torch.__version__} on "
        f"{torch.cuda.get_device_name(0) if device == 'cuda' else 'cpu'}"
    )
    kernels = [
        SDPBackend.MATH,
        SDPBackend.EFFICIENT_ATTENTION,
        SDPBackend.FLASH_ATTENTION,
    ]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        kernels.append(SDPBackend.CUDNN_ATTENTION)
    rows = []
    for kernel in kernels:
        for kind in ("bool", "-inf bias"):
            for dtype in (torch.float32, torch.bfloat16):
                result = probe(device, kernel, kind, dtype)
                rows.append(
                    {
                        "device": device,
                        "kernel": kernel.name,
                        "mask": kind,
                        "dtype": str(dtype)[6:],
                        **result,
                    }
                )
                answer = result.get("refused") or (
                    f"empty row max |out| {result['empty_row_max_abs']:.3g}, "
                    f"NaN out {result['nan_output']}, NaN grad "
                    f"{result['nan_gradient']}"
                )
                print(
                    f"{kernel.name:<20} {kind:<10} {str(dtype)[6:]:<9} {answer}"
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
