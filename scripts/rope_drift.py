#!/usr/bin/env python3
"""How far Hugging Face's float32 RoPE angles drift from double precision at long positions.

Hugging Face computes inv_freq = 1 / base^(arange(0, d, 2) / d) in float32 and the angles
positions.float() * inv_freq in float32; attn.rope computes them in double. For the 16 positions
just below each listed one, prints the largest angle error (radians) and the largest error of
cos/sin. Run: /usr/bin/python3.11 scripts/rope_drift.py (needs Debian's python3-torch).
"""
import torch

for d, base in ((64, 10000.0), (128, 500000.0)):
    for pos in (1024, 4096, 16384, 32768, 131072, 524288):
        positions = torch.arange(pos - 16, pos)
        inv_freq32 = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        angles32 = positions.float()[:, None] * inv_freq32[None, :]
        angles64 = positions.double()[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        angle_error = (angles32.double() - angles64).abs().max().item()
        trig_error = max((angles32.cos().double() - angles64.cos()).abs().max().item(),
                         (angles32.sin().double() - angles64.sin()).abs().max().item())
        print(f"head dim {d:3}, base {base:>6g}, positions below {pos:6}: "
              f"angle error {angle_error:.1e} rad, cos/sin error {trig_error:.1e}")
