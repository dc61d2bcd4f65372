#!/usr/bin/env python3
"""Trains the demo page's model and writes it to web/model/.

A two-layer, character-level decoder in the Llama layout (RMSNorm, grouped-query attention with
rotate-half RoPE, SwiGLU MLP, tied embeddings), whose attention blocks are exactly what the
package's GroupedQueryAttention computes: 4 query heads sharing 2 key/value heads of 32 dimensions,
width 128. It learns from the King James Bible (1611, public domain) as Debian's bible-kjv-text
package ships it, read through that package's `bible` program: no download.

    apt-get install python3-torch bible-kjv bible-kjv-text libopenblas0-pthread
    /usr/bin/python3.11 scripts/train_demo_model.py        # 25-28 minutes on 2 cores (2500 steps)

Two layers because that is the smallest model with induction heads (Olsson et al. 2022): a
layer-0 head that attends to the previous character lets a layer-1 head find "the character after
the last time this one appeared", which the demo's "repeat this text" button shows. Natural text
alone did not form them in this budget (3000 steps of plain windows: every head's induction score
0.00 on repeated random letters; nor did windows where one copy of a passage followed it), so
three quarters of the training windows are a passage of the text (8 to 128 characters) repeated to
fill the window, so that predicting each copy pays for looking up the one before. The period
varies, so what is learned is "the character after the earlier occurrence", not a fixed offset.
(With half of them, the induction head scored 0.44 and had its previous-token head in layer 2;
with three quarters, a layer-1 previous-token head (0.63) feeds two layer-2 induction heads
(0.53 and 0.38), for 0.02 nats a character more held-out loss.)

Writes web/model/model.safetensors (float16, Hugging Face Llama state-dict names) and
web/model/config.json (Hugging Face LlamaConfig field names plus the vocabulary).
"""
import argparse
import json
import math
import os
import re
import struct
import subprocess
import time

# One BLAS thread: torch already runs its ops on every core, and OpenBLAS's own threads on top of
# them made a step 1.35x slower on 2 cores.
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import torch  # noqa: E402 (after the environment it reads)
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, 'web', 'model')

# Printable ASCII and the newline that ends each verse: the whole of the KJV text, and what a
# keyboard types. The page maps anything else to '?'.
VOCAB = ''.join(chr(c) for c in range(32, 127)) + '\n'
UNKNOWN = '?'
MIN_PERIOD = 8  # the shortest repeated passage in a training window

CONFIG = {
    'architectures': ['LlamaForCausalLM'],
    'model_type': 'llama',
    'vocab_size': len(VOCAB),
    'hidden_size': 128,
    'intermediate_size': 384,
    'num_hidden_layers': 2,
    'num_attention_heads': 4,
    'num_key_value_heads': 2,
    'head_dim': 32,
    'hidden_act': 'silu',
    'rms_norm_eps': 1e-5,
    'rope_theta': 10000.0,
    'max_position_embeddings': 4096,
    'tie_word_embeddings': True,
    'attention_bias': False,
    'torch_dtype': 'float16',
    'vocab': VOCAB,
    'training': {},
}


def read_corpus():
    """One verse a line, without its reference ("Ge1:1 In the beginning..." -> "In the beginning...")."""
    out = subprocess.run(['bible', '-f', 'gen1:1-rev22:21'], check=True, capture_output=True, text=True).stdout
    verses = [re.sub(r'^\S+?\d+:\d+ ', '', line) for line in out.splitlines() if line.strip()]
    if len(verses) != 31102:
        raise SystemExit(f'expected the 31102 verses of the KJV from `bible`, got {len(verses)}')
    return '\n'.join(verses) + '\n'


def encode(text):
    index = {c: i for i, c in enumerate(VOCAB)}
    return torch.tensor([index.get(c, index[UNKNOWN]) for c in text], dtype=torch.long)


class RMSNorm(nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c['num_attention_heads'], c['num_key_value_heads'], c['head_dim']
        width = c['hidden_size']
        self.q_proj = nn.Linear(width, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(width, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(width, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, width, bias=False)

    def forward(self, x, cos, sin, causal):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        weights = scores.masked_fill(causal, float('-inf')).softmax(-1)
        return self.o_proj((weights @ v).transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        width, inner = c['hidden_size'], c['intermediate_size']
        self.gate_proj = nn.Linear(width, inner, bias=False)
        self.up_proj = nn.Linear(width, inner, bias=False)
        self.down_proj = nn.Linear(inner, width, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c['hidden_size'], c['rms_norm_eps'])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c['hidden_size'], c['rms_norm_eps'])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, causal):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, causal)
        return x + self.mlp(self.post_attention_layernorm(x))


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.embed_tokens = nn.Embedding(c['vocab_size'], c['hidden_size'])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c['num_hidden_layers']))
        self.norm = RMSNorm(c['hidden_size'], c['rms_norm_eps'])
        nn.init.normal_(self.embed_tokens.weight, std=0.02)

    def forward(self, ids):
        t = ids.shape[1]
        d = self.config['head_dim']
        inv_freq = 1.0 / (self.config['rope_theta'] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        angles = torch.arange(t, dtype=torch.float64)[:, None] * inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos().float(), angles.sin().float()
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, causal)
        return self.norm(x) @ self.embed_tokens.weight.T


def write_safetensors(path, tensors):
    """The format: 8-byte little-endian header length, JSON header, then the raw bytes."""
    header, blobs, offset = {}, [], 0
    for name, tensor in tensors.items():
        data = tensor.detach().to(torch.float16).contiguous().numpy().tobytes()
        header[name] = {'dtype': 'F16', 'shape': list(tensor.shape), 'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(',', ':')).encode()
    text += b' ' * (-len(text) % 8)  # tensors 8-byte aligned, as the reference writer does
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--steps', type=int, default=2500)
    parser.add_argument('--repeats', type=float, default=0.75, help='share of training windows that repeat a passage')
    parser.add_argument('--batch', type=int, default=32)
    parser.add_argument('--context', type=int, default=256)
    parser.add_argument('--lr', type=float, default=3e-3)
    parser.add_argument('--seed', type=int, default=1611)
    parser.add_argument('--out', default=OUT_DIR)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(os.cpu_count() or 1)
    data = encode(read_corpus())
    split = int(len(data) * 0.95)  # the last 5 % (most of Revelation's neighbours) held out
    train, held_out = data[:split], data[split:]

    model = Model(CONFIG)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.1}, {'params': no_decay, 'weight_decay': 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95))
    warmup = max(1, args.steps // 20)

    def lr_at(step):  # linear warm-up, then cosine decay to a tenth
        if step < warmup:
            return args.lr * (step + 1) / warmup
        progress = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))

    def batch_from(source, size, repeats=0.0):
        windows = []
        for s in torch.randint(0, len(source) - args.context - 1, (size,)).tolist():
            if torch.rand(()) < repeats:
                period = int(torch.randint(MIN_PERIOD, args.context // 2 + 1, ()))
                windows.append(source[s:s + period].repeat(args.context // period + 2)[:args.context + 1])
            else:
                windows.append(source[s:s + args.context + 1])
        batch = torch.stack(windows)
        return batch[:, :-1], batch[:, 1:]

    def held_out_loss(repeats=0.0):
        model.eval()
        generator_state = torch.get_rng_state()
        torch.manual_seed(0)
        with torch.no_grad():
            x, y = batch_from(held_out, 64, repeats)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
        torch.set_rng_state(generator_state)
        model.train()
        return loss

    began = time.time()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group['lr'] = lr_at(step)
        x, y = batch_from(train, args.batch, args.repeats)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 250 == 0 or step == args.steps - 1:
            # Held-out loss on plain text, and on repeated passages (low once the model copies).
            print(f'step {step:5d}  train {loss.item():.3f}  held-out {held_out_loss():.3f}  '
                  f'repeated {held_out_loss(1.0):.3f}  {time.time() - began:6.0f} s', flush=True)

    final = held_out_loss()
    CONFIG['training'] = {
        'corpus': 'King James Bible (1611), Debian package bible-kjv-text, one verse a line',
        'windows': f'{args.context} characters; a share ({args.repeats}) a passage of {MIN_PERIOD} to {args.context // 2} repeated',
        'script': 'scripts/train_demo_model.py',
        'steps': args.steps, 'batch': args.batch, 'context': args.context, 'lr': args.lr, 'seed': args.seed,
        'repeats': args.repeats,
        'held_out_loss': round(final, 4), 'seconds': round(time.time() - began),
        'torch': torch.__version__,
    }
    os.makedirs(args.out, exist_ok=True)
    state = {'model.' + name: tensor for name, tensor in model.state_dict().items()}
    write_safetensors(os.path.join(args.out, 'model.safetensors'), state)
    with open(os.path.join(args.out, 'config.json'), 'w') as f:
        json.dump(CONFIG, f, indent=2)
        f.write('\n')
    print(f'held-out loss {final:.3f} nats/char; wrote {args.out}/model.safetensors and config.json')


if __name__ == '__main__':
    main()
