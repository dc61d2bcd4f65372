"""Export a Llama-style attention block from PyTorch to .safetensors, with a sample to check against.

The block is Hugging Face's LlamaAttention written out (transformers is not needed): q/k/v/o
projections named as in a Llama checkpoint under `model.layers.0.self_attn.`, rotate-half RoPE,
8 query heads sharing 2 key/value heads, causal attention over a KV cache. The script runs a
prefill of 8 tokens and 32 decode steps through PyTorch's own cache (concatenating past keys and
values, as transformers' DynamicCache does) and stores the input and every step's output beside
the weights, so `llama_attention.mjs` can load the file, run the same steps with
GroupedQueryAttention and a KVCache, and compare.

The .safetensors format is written with the standard library: 8 bytes of little-endian header
size, a JSON header {name: {dtype, shape, data_offsets}} (plus `__metadata__`, strings only),
then the raw little-endian data.

Usage: python3 examples/export_llama_attention.py [out.safetensors]
       (default: examples/llama_attention.safetensors)
"""
import json
import math
import struct
import sys

import torch
from torch import nn

HIDDEN, HEADS, KV_HEADS, ROPE_THETA = 64, 8, 2, 500000.0
PREFILL, DECODE_STEPS = 8, 32
PREFIX = "model.layers.0.self_attn."


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = HIDDEN // HEADS
        self.q_proj = nn.Linear(HIDDEN, HEADS * self.head_dim, bias=False)
        self.k_proj = nn.Linear(HIDDEN, KV_HEADS * self.head_dim, bias=False)
        self.v_proj = nn.Linear(HIDDEN, KV_HEADS * self.head_dim, bias=False)
        self.o_proj = nn.Linear(HEADS * self.head_dim, HIDDEN, bias=False)

    def rope(self, positions):
        # Angles in float64, then cos/sin in float32: what attn.rope computes (transformers' float32
        # angles differ from these by ~1e-6 at these positions).
        inv_freq = ROPE_THETA ** -(torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim)
        angles = positions.double()[:, None] * inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos().float(), angles.sin().float()

    def forward(self, x, past=None):
        n, t, _ = x.shape
        start = 0 if past is None else past[0].shape[-2]
        q = self.q_proj(x).view(n, t, HEADS, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(n, t, KV_HEADS, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(n, t, KV_HEADS, self.head_dim).transpose(1, 2)
        cos, sin = self.rope(torch.arange(start, start + t))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past is not None:
            k = torch.cat((past[0], k), dim=-2)
            v = torch.cat((past[1], v), dim=-2)
        m = k.shape[-2]
        groups = HEADS // KV_HEADS
        scores = q @ k.repeat_interleave(groups, dim=1).transpose(2, 3) / math.sqrt(self.head_dim)
        # The t new queries are the last t of the m positions (lower-right causal).
        hidden = torch.arange(m)[None, :] > torch.arange(start, start + t)[:, None]
        scores = scores.masked_fill(hidden, float("-inf"))
        attended = torch.softmax(scores, dim=-1) @ v.repeat_interleave(groups, dim=1)
        return self.o_proj(attended.transpose(1, 2).reshape(n, t, HIDDEN)), (k, v)


def write_safetensors(path, tensors, metadata):
    header, chunks, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        raw = t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def main():
    torch.manual_seed(0)
    block = LlamaAttention().eval()
    x = torch.randn(1, PREFILL + DECODE_STEPS, HIDDEN)
    with torch.no_grad():
        output, past = block(x[:, :PREFILL])
        outputs = [output]
        for step in range(PREFILL, PREFILL + DECODE_STEPS):
            output, past = block(x[:, step:step + 1], past)
            outputs.append(output)
    tensors = {PREFIX + name: value for name, value in block.state_dict().items()}
    tensors["example.x"] = x
    tensors["example.output"] = torch.cat(outputs, dim=1)
    config = {"hiddenSize": HIDDEN, "numHeads": HEADS, "numKeyValueHeads": KV_HEADS, "ropeBase": ROPE_THETA,
              "prefill": PREFILL, "decodeSteps": DECODE_STEPS, "prefix": PREFIX}
    path = sys.argv[1] if len(sys.argv) > 1 else "examples/llama_attention.safetensors"
    write_safetensors(path, tensors, {"config": json.dumps(config)})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
