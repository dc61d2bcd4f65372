"""Export a torch.nn.MultiheadAttention's state_dict() and a sample input/output to JSON.

The JSON is what attention-wasm loads (see README, "From PyTorch"):
    {"module": "MultiheadAttention",
     "config": {"embedDim", "numHeads", "bias", "addBiasKV", "addZeroAttn", "kdim", "vdim", "batchFirst"},
     "stateDict": {name: {"shape": [...], "data": [flat row-major floats]}},
     "example": {"query", "key", "value", "keyPaddingMask" (bool, 1 = padding), "output", "weights"}}

Usage: python3 examples/export_pytorch.py [out.json]   (default: examples/mha_export.json)
"""
import json
import sys

import torch


def tensor(t):
    t = t.detach().to(torch.float32).contiguous()
    return {"shape": list(t.shape), "data": [float(x) for x in t.flatten().tolist()]}


def export(module, config, path, seed=0):
    generator = torch.Generator().manual_seed(seed)
    L, S, N, E = 5, 7, 2, config["embedDim"]
    query = torch.randn(L, N, E, generator=generator)
    key = torch.randn(S, N, config["kdim"], generator=generator)
    value = torch.randn(S, N, config["vdim"], generator=generator)
    padding = torch.zeros(N, S, dtype=torch.bool)
    padding[1, 5:] = True  # the second sequence has 5 real keys
    module.eval()
    with torch.no_grad():
        output, weights = module(query, key, value, key_padding_mask=padding)
    document = {
        "module": "MultiheadAttention",
        "config": config,
        "stateDict": {name: tensor(value) for name, value in module.state_dict().items()},
        "example": {
            "query": tensor(query),
            "key": tensor(key),
            "value": tensor(value),
            "keyPaddingMask": {"shape": list(padding.shape), "data": [int(x) for x in padding.flatten().tolist()]},
            "output": tensor(output),
            "weights": tensor(weights),
        },
    }
    with open(path, "w") as f:
        json.dump(document, f, separators=(",", ":"))


def main():
    torch.manual_seed(0)
    config = {"embedDim": 16, "numHeads": 4, "bias": True, "addBiasKV": False, "addZeroAttn": False,
              "kdim": 16, "vdim": 16, "batchFirst": False}
    module = torch.nn.MultiheadAttention(config["embedDim"], config["numHeads"])
    export(module, config, sys.argv[1] if len(sys.argv) > 1 else "examples/mha_export.json")


if __name__ == "__main__":
    main()
