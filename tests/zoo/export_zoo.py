#!/usr/bin/python3
"""Exports the model zoo: real models as PyTorch users export them.

Every model is built with seeded random weights (torchvision's `weights=None`; nothing is
downloaded), put in eval mode, run once on a seeded input, and exported with
`torch.onnx.export` at opset 17 with the dynamic axes a user would name, exactly as the PyTorch
docs show. Beside each `MODEL.onnx` the zoo keeps PyTorch's input (`MODEL.inputs/NAME.npy`) and
PyTorch's outputs for it (`MODEL.expected/NAME.npy`; for a bfloat16 or float16 model also the
same module's float32 forward, `MODEL.reference_f32/NAME.npy`), and `manifest.json` says, per
model, which
dims a user binds at first try (`dims`, the export's own sizes of the named dynamic axes), the
range to plan over (`ranges`), or the exporter's error when PyTorch itself cannot export it.

Exports are cached: the cache folder is named by a hash of this file and of the torch and
torchvision versions, so a changed zoo or a new PyTorch exports again, and an unchanged one
costs nothing.

  /usr/bin/python3 tests/zoo/export_zoo.py --cache ~/.cache/memonger/zoo   # prints the folder

Debian's interpreter is /usr/bin/python3 (python3-torch, python3-torchvision, python3-onnx);
the python3 first on PATH may be another one without them.
"""

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings

from zoo_common import allocation_peak

OPSET = 17


def _torch():
    import torch  # noqa: imported late so that --help works without torch
    return torch


# ---------------------------------------------------------------------------------------------
# Hand-written models, as users write them.

def _transformer_models():
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional

    class TextEncoder(nn.Module):
        """nn.TransformerEncoder over token embeddings, with a padding mask input."""

        def __init__(self, vocab=1000, d=64, heads=4, layers=2, max_len=512):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(1, max_len, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0,
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers)
            self.head = nn.Linear(d, 2)

        def forward(self, tokens, padding):
            x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
            x = self.encoder(x, src_key_padding_mask=padding)
            return self.head(x.mean(dim=1))

    class Block(nn.Module):
        """A pre-norm GPT block with hand-written causal attention."""

        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, mask):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
            k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
            v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
            att = att.masked_fill(mask[:, :, :t, :t] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
            x = x + self.proj(y)
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        """A GPT-style decoder with tied input and output embeddings."""

        def __init__(self, vocab=512, d=64, heads=4, layers=2, max_len=256):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(max_len, d)
            self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied
            self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len))
                                 .view(1, 1, max_len, max_len))

        def forward(self, idx):
            t = idx.shape[1]
            pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.blocks:
                x = block(x, self.mask)
            return self.lm_head(self.ln_f(x))

    def alibi_slopes(heads):
        start = 2.0 ** (-8.0 / heads)
        return torch.tensor([start ** (i + 1) for i in range(heads)])

    class AlibiEncoder(nn.Module):
        """An encoder whose attention adds an ALiBi bias (distance times a slope per head)."""

        def __init__(self, d=64, heads=4, layers=2):
            super().__init__()
            self.heads = heads
            self.register_buffer("slopes", alibi_slopes(heads).view(1, heads, 1, 1))
            self.layers = nn.ModuleList()
            for _ in range(layers):
                self.layers.append(nn.ModuleDict({
                    "ln": nn.LayerNorm(d), "q": nn.Linear(d, d), "k": nn.Linear(d, d),
                    "v": nn.Linear(d, d), "o": nn.Linear(d, d), "ln2": nn.LayerNorm(d),
                    "ff1": nn.Linear(d, 2 * d), "ff2": nn.Linear(2 * d, d)}))

        def forward(self, x):
            b, n, d = x.shape
            h = self.heads
            pos = torch.arange(n, dtype=x.dtype)
            distance = (pos.view(1, n) - pos.view(n, 1)).abs().view(1, 1, n, n)
            bias = -self.slopes * distance
            for layer in self.layers:
                y = layer["ln"](x)
                q = layer["q"](y).view(b, n, h, d // h).permute(0, 2, 1, 3)
                k = layer["k"](y).view(b, n, h, d // h).permute(0, 2, 3, 1)
                v = layer["v"](y).view(b, n, h, d // h).permute(0, 2, 1, 3)
                scores = torch.matmul(q, k) * (1.0 / math.sqrt(d // h)) + bias
                y = torch.matmul(scores.softmax(dim=-1), v).permute(0, 2, 1, 3).reshape(b, n, d)
                x = x + layer["o"](y)
                x = x + layer["ff2"](F.relu(layer["ff1"](layer["ln2"](x))))
            return x

    class Seq2Seq(nn.Module):
        """nn.Transformer (encoder and decoder) with a causal target mask."""

        def __init__(self, d=32, heads=4):
            super().__init__()
            self.model = nn.Transformer(d, heads, num_encoder_layers=1, num_decoder_layers=1,
                                        dim_feedforward=64, dropout=0.0, batch_first=True)

        def forward(self, src, tgt):
            t = tgt.shape[1]
            mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
            return self.model(src, tgt, tgt_mask=mask)

    class BertLike(nn.Module):
        """Token, segment and position embeddings, attention mask as an additive bias."""

        def __init__(self, vocab=800, d=64, heads=4, layers=2, max_len=256):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.seg = nn.Embedding(2, d)
            self.pos = nn.Embedding(max_len, d)
            self.norm = nn.LayerNorm(d)
            layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers)
            self.pool = nn.Linear(d, d)

        def forward(self, input_ids, token_type_ids, attention_mask):
            n = input_ids.shape[1]
            positions = torch.arange(n).unsqueeze(0).expand_as(input_ids)
            x = self.norm(self.tok(input_ids) + self.seg(token_type_ids) + self.pos(positions))
            x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
            return x, torch.tanh(self.pool(x[:, 0]))

    return TextEncoder, GPT, AlibiEncoder, Seq2Seq, BertLike


def _other_models():
    torch = _torch()
    nn = torch.nn

    class LstmClassifier(nn.Module):
        def __init__(self, vocab=500, d=32, hidden=48):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.lstm = nn.LSTM(d, hidden, num_layers=2, batch_first=True, bidirectional=True)
            self.out = nn.Linear(2 * hidden, 5)

        def forward(self, tokens):
            y, _ = self.lstm(self.embed(tokens))
            return self.out(y[:, -1])

    class GruTagger(nn.Module):
        def __init__(self, features=16, hidden=32):
            super().__init__()
            self.gru = nn.GRU(features, hidden, batch_first=False)
            self.out = nn.Linear(hidden, 4)

        def forward(self, x):
            y, h = self.gru(x)
            return self.out(y), h

    class Down(nn.Sequential):
        def __init__(self, cin, cout):
            super().__init__(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1),
                             nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        """A small UNet: max-pool down, bilinear upsampling and transposed convolutions up."""

        def __init__(self, c=8):
            super().__init__()
            self.d1, self.d2, self.d3 = Down(3, c), Down(c, 2 * c), Down(2 * c, 4 * c)
            self.pool = nn.MaxPool2d(2)
            self.up2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
            self.u2 = Down(4 * c, 2 * c)
            self.up1 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.u1 = Down(3 * c, c)
            self.out = nn.Conv2d(c, 2, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(self.pool(a))
            c = self.d3(self.pool(b))
            y = self.u2(torch.cat([self.up2(c), b], dim=1))
            y = self.u1(torch.cat([self.up1(y), a], dim=1))
            return self.out(y)

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 128), nn.ReLU(),
                                     nn.Dropout(0.1), nn.Linear(128, 64), nn.ReLU(),
                                     nn.Linear(64, 10))

        def forward(self, x):
            return self.net(x).log_softmax(dim=1)

    class SsdHead(nn.Module):
        """SSDlite's network without its post-processing: raw box regressions and logits."""

        def __init__(self):
            super().__init__()
            import torchvision
            ssd = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
                weights=None, weights_backbone=None)
            self.backbone, self.head = ssd.backbone, ssd.head

        def forward(self, images):
            features = list(self.backbone(images).values())
            out = self.head(features)
            return out["bbox_regression"], out["cls_logits"]

    class RaftSmall(nn.Module):
        """RAFT (small) optical flow with 4 refinement steps; the last flow estimate."""

        def __init__(self):
            super().__init__()
            from torchvision.models.optical_flow import raft_small
            self.raft = raft_small(weights=None)

        def forward(self, image1, image2):
            return self.raft(image1, image2, num_flow_updates=4)[-1]

    class ScriptedRnn(nn.Module):
        """An Elman RNN written as a Python loop over time, scripted: the exporter writes a
        Loop over x.size(1) whose body appends each state to a list, stacked after it."""

        def __init__(self, features=16, hidden=32):
            super().__init__()
            self.hidden = hidden
            self.inp = nn.Linear(features, hidden)
            self.rec = nn.Linear(hidden, hidden, bias=False)
            self.out = nn.Linear(hidden, 3)

        def forward(self, x):
            h = torch.zeros(x.size(0), self.hidden)
            states = []
            for t in range(x.size(1)):
                h = torch.tanh(self.inp(x[:, t]) + self.rec(h))
                states.append(h)
            return self.out(torch.stack(states, 1))

    class AdaptiveRefiner(nn.Module):
        """Control flow the data decides, scripted: a branch on the features' mean, one on
        their size that is not taken, a refinement loop that runs until its update is small
        (a `while`), and a loop counted by a number the data gives."""

        def __init__(self, d=16):
            super().__init__()
            self.inp = nn.Linear(d, d)
            self.step = nn.Linear(d, d)
            self.out = nn.Linear(d, 4)

        def forward(self, x):
            h = self.inp(x)
            if bool(h.mean() > 0):
                h = torch.relu(h)
            else:
                h = torch.sigmoid(h) - 0.5
            if bool(h.abs().max() > 1e6):
                h = h / 1e6
            delta = torch.ones_like(h)
            i = 0
            while bool(delta.abs().max() > 1e-3) and i < 50:
                delta = 0.5 * torch.tanh(self.step(h)) * delta
                h = h + delta
                i += 1
            for _ in range(int((x > 0).sum()) % 5):
                h = h * 0.9 + 0.1 * torch.tanh(h)
            return self.out(h)

    class GreedyDecoder(nn.Module):
        """Greedy decoding of one token per memory position, scripted: each step embeds the
        last token, updates the state and appends the argmax to the tokens so far (carried
        values that grow by a column per iteration)."""

        def __init__(self, vocab=50, d=24):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.cell = nn.Linear(3 * d, d)
            self.head = nn.Linear(d, vocab)

        def forward(self, memory):
            h = memory.mean(1)
            tokens = torch.zeros(memory.size(0), 1, dtype=torch.long)
            scores = torch.zeros(memory.size(0), 0)
            for t in range(memory.size(1)):
                e = self.embed(tokens[:, -1])
                h = torch.tanh(self.cell(torch.cat([e, h, memory[:, t]], 1)))
                logits = self.head(h)
                tokens = torch.cat([tokens, logits.argmax(1, keepdim=True)], 1)
                scores = torch.cat([scores, logits.max(1, keepdim=True)[0]], 1)
            return tokens, scores

    class TokenHistogram(nn.Module):
        """A bag of tokens pooled over its distinct tokens (torch.unique with counts): sizes
        that depend on the data, planned at their bound and measured by the run."""

        def __init__(self, vocab=100, d=16):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.out = nn.Linear(d, 4)

        def forward(self, tokens):
            distinct, counts = torch.unique(tokens, sorted=True, return_counts=True)
            weights = counts.unsqueeze(1).to(torch.float32) / tokens.numel()
            return self.out((self.embed(distinct) * weights).sum(0)), distinct

    return (LstmClassifier, GruTagger, UNet, Mlp, SsdHead, RaftSmall, ScriptedRnn, GreedyDecoder,
            TokenHistogram, AdaptiveRefiner)


# ---------------------------------------------------------------------------------------------
# The zoo.

def _image(batch, size=224, channels=3):
    torch = _torch()
    return torch.randn(batch, channels, size, size)


def _decisive_detector(model, class_layers, std):
    """`model` with signal through its backbone and class scores spread as a trained
    detector's are. torchvision's random init leaves the backbone's outputs near zero (batch
    norm's running statistics are the unit defaults), so every anchor gets the same scores and
    the detections (top-k, NMS, score thresholds) are decided by ties, that is by float
    rounding. The batch norms are calibrated on four seeded images (their running statistics
    set to that batch's, as after training) and `class_layers` redrawn (seeded, weights of
    standard deviation `std`), so that the scores the output keeps differ by more than 1e-6."""
    torch = _torch()
    norms = [m for m in model.backbone.modules()
             if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average: one batch sets the statistics
    images = model.transform([torch.randn(3, 320, 320) for _ in range(4)])[0].tensors
    model.backbone.train()
    with torch.no_grad():
        model.backbone(images)
        for layer in class_layers:
            layer.weight.normal_(0.0, std)
    return model.eval()


def _ssdlite(model):
    heads = [block[-1] for block in model.head.classification_head.module_list]
    return _decisive_detector(model, heads, 1.0)


def _fasterrcnn(model):
    return _decisive_detector(
        model, [model.roi_heads.box_predictor.cls_score, model.rpn.head.cls_logits], 0.2)


def zoo_entries():
    """(name, build, inputs, input names, output names, dynamic axes, what the entry shows).

    `build` returns the module; `inputs` returns the example inputs (seeded by the caller)."""
    torch = _torch()
    import torchvision.models as tvm
    import torchvision.models.segmentation as seg
    import torchvision.models.video as video
    import torchvision.models.detection as det
    TextEncoder, GPT, AlibiEncoder, Seq2Seq, BertLike = _transformer_models()
    (LstmClassifier, GruTagger, UNet, Mlp, SsdHead, RaftSmall, ScriptedRnn, GreedyDecoder,
     TokenHistogram, AdaptiveRefiner) = _other_models()

    batch_in_out = {"input": {0: "batch"}, "output": {0: "batch"}}
    batch_in = {"input": {0: "batch"}}  # outputs left to the exporter to name

    def cls(fn, **kw):
        return lambda: fn(weights=None, **kw)

    entries = [
        # torchvision classification, dynamic batch as the PyTorch docs write it.
        ("resnet18", cls(tvm.resnet18), lambda: (_image(2),), ["input"], ["output"], batch_in_out),
        ("resnet50", cls(tvm.resnet50), lambda: (_image(1),), ["input"], ["output"], batch_in),
        ("mobilenet_v2", cls(tvm.mobilenet_v2), lambda: (_image(2),), ["input"], ["output"],
         batch_in_out),
        ("mobilenet_v3_small", cls(tvm.mobilenet_v3_small), lambda: (_image(2),), ["input"],
         ["output"], batch_in),
        ("efficientnet_b0", cls(tvm.efficientnet_b0), lambda: (_image(1),), ["input"],
         ["output"], batch_in_out),
        ("squeezenet1_1", cls(tvm.squeezenet1_1), lambda: (_image(2),), ["input"], ["output"],
         batch_in),
        ("shufflenet_v2_x0_5", cls(tvm.shufflenet_v2_x0_5), lambda: (_image(2),), ["input"],
         ["output"], batch_in_out),
        ("mnasnet0_5", cls(tvm.mnasnet0_5), lambda: (_image(2),), ["input"], ["output"],
         batch_in),
        ("densenet121", cls(tvm.densenet121), lambda: (_image(1),), ["input"], ["output"],
         batch_in),
        ("googlenet", cls(tvm.googlenet, aux_logits=False, init_weights=True),
         lambda: (_image(1),), ["input"], ["output"], batch_in),
        ("regnet_y_400mf", cls(tvm.regnet_y_400mf), lambda: (_image(1),), ["input"],
         ["output"], batch_in_out),
        ("convnext_tiny", cls(tvm.convnext_tiny), lambda: (_image(1),), ["input"], ["output"],
         batch_in),
        ("alexnet", cls(tvm.alexnet), lambda: (_image(1),), ["input"], ["output"], batch_in),
        # No dynamic axes at all: every dim is a number in the file, yet the exporter names
        # some intermediate dims itself.
        ("swin_t", cls(tvm.swin_t), lambda: (_image(1),), ["input"], ["output"], None),
        # Einsum (its attention's relative positions).
        ("maxvit_t", cls(tvm.maxvit_t), lambda: (_image(1),), ["input"], ["output"], batch_in),
        ("vit_small", lambda: tvm.VisionTransformer(image_size=96, patch_size=16, num_layers=4,
                                                    num_heads=4, hidden_dim=128, mlp_dim=256),
         lambda: (_image(2, 96),), ["input"], ["output"], batch_in),
        # Segmentation and detection.
        ("lraspp_mobilenet_v3_large",
         lambda: seg.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None),
         lambda: (_image(1, 256),), ["input"], ["out"], {"input": {0: "batch"}}),
        ("deeplabv3_mobilenet_v3_large",
         lambda: seg.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                  aux_loss=False),
         lambda: (_image(1, 224),), ["input"], ["out"], {"input": {0: "batch"},
                                                          "out": {0: "batch"}}),
        ("fcn_resnet50", lambda: seg.fcn_resnet50(weights=None, weights_backbone=None,
                                                  aux_loss=False),
         lambda: (_image(1, 160),), ["input"], ["out"], {"input": {0: "batch"}}),
        ("ssdlite320_head", SsdHead, lambda: (_image(1, 320),), ["images"],
         ["bbox_regression", "cls_logits"], {"images": {0: "batch"}}),
        ("ssdlite320_mobilenet_v3_large",
         lambda: _ssdlite(det.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)),
         lambda: ([_image(1, 320)[0]],), ["images"], ["boxes", "scores", "labels"], None),
        ("fasterrcnn_mobilenet_v3_large_320_fpn",
         lambda: _fasterrcnn(det.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None,
                                                                        weights_backbone=None)),
         lambda: ([_image(1, 320)[0]],), ["images"], ["boxes", "labels", "scores"], None),
        # Video and optical flow.
        ("r3d_18", lambda: video.r3d_18(weights=None),
         lambda: (torch.randn(1, 3, 8, 112, 112),), ["clip"], ["output"], {"clip": {0: "batch"}}),
        ("raft_small", RaftSmall,
         lambda: (_image(1, 128), _image(1, 128)), ["image1", "image2"], ["flow"], None),
        # Transformers, written as users write them.
        ("text_encoder", TextEncoder,
         lambda: (torch.randint(0, 1000, (2, 64)), torch.zeros(2, 64, dtype=torch.bool)),
         ["tokens", "padding"], ["logits"],
         {"tokens": {0: "batch", 1: "seq"}, "padding": {0: "batch", 1: "seq"}}),
        ("gpt_decoder", GPT, lambda: (torch.randint(0, 512, (1, 64)),), ["idx"], ["logits"],
         {"idx": {1: "seq"}, "logits": {1: "seq"}}),
        ("alibi_encoder", AlibiEncoder, lambda: (torch.randn(1, 128, 64),), ["x"], ["y"],
         {"x": {1: "n"}}),
        ("seq2seq_transformer", Seq2Seq, lambda: (torch.randn(2, 20, 32), torch.randn(2, 12, 32)),
         ["src", "tgt"], ["out"], {"src": {1: "src_len"}, "tgt": {1: "tgt_len"}}),
        ("bert_like", BertLike,
         lambda: (torch.randint(0, 800, (2, 48)), torch.randint(0, 2, (2, 48)),
                  torch.ones(2, 48, dtype=torch.long)),
         ["input_ids", "token_type_ids", "attention_mask"], ["hidden", "pooled"],
         {"input_ids": {0: "batch", 1: "seq"}, "token_type_ids": {0: "batch", 1: "seq"},
          "attention_mask": {0: "batch", 1: "seq"}}),
        # Recurrent nets, a UNet, an MLP.
        ("lstm_classifier", LstmClassifier, lambda: (torch.randint(0, 500, (2, 30)),),
         ["tokens"], ["logits"], {"tokens": {0: "batch"}}),
        ("gru_tagger", GruTagger, lambda: (torch.randn(25, 2, 16),), ["x"], ["tags", "h"],
         {"x": {0: "time"}}),
        ("unet", UNet, lambda: (_image(1, 64),), ["input"], ["mask"], {"input": {0: "batch"}}),
        ("mlp", Mlp, lambda: (torch.randn(4, 3, 16, 16),), ["x"], ["log_probs"],
         {"x": {0: "batch"}, "log_probs": {0: "batch"}}),
        # Scripted loops (torch.jit.script): Loops over a size, one with a list, one whose
        # carried values grow.
        ("scripted_rnn", lambda: torch.jit.script(ScriptedRnn()),
         lambda: (torch.randn(2, 12, 16),), ["x"], ["y"], {"x": {0: "batch"}}),
        ("greedy_decoder", lambda: torch.jit.script(GreedyDecoder()),
         lambda: (torch.randn(2, 7, 24),), ["memory"], ["tokens", "scores"],
         {"memory": {0: "batch"}}),
        # Control flow the data decides: Ifs on values, a while loop, a loop counted by data.
        ("adaptive_refiner", lambda: torch.jit.script(AdaptiveRefiner()),
         lambda: (torch.randn(3, 16),), ["x"], ["y"], {"x": {0: "batch"}}),
        # Sizes the data decides: Unique's.
        ("token_histogram", TokenHistogram, lambda: (torch.randint(0, 100, (2, 40)),),
         ["tokens"], ["logits", "distinct"], {"tokens": {0: "batch"}}),
        # float16 storage, where PyTorch can export it (tracing runs the model on the CPU).
        ("mlp_fp16", lambda: Mlp().half(), lambda: (torch.randn(4, 3, 16, 16).half(),), ["x"],
         ["log_probs"], {"x": {0: "batch"}}),
        ("text_encoder_fp16", lambda: TextEncoder().half(),
         lambda: (torch.randint(0, 1000, (2, 64)), torch.zeros(2, 64, dtype=torch.bool)),
         ["tokens", "padding"], ["logits"], {"tokens": {1: "seq"}, "padding": {1: "seq"}}),
        ("resnet18_fp16", lambda: tvm.resnet18(weights=None).half(),
         lambda: (_image(1).half(),), ["input"], ["output"], batch_in),
        # bfloat16 runs on PyTorch's CPU kernels, so it traces.
        ("mlp_bf16", lambda: Mlp().bfloat16(), lambda: (torch.randn(4, 3, 16, 16).bfloat16(),),
         ["x"], ["log_probs"], {"x": {0: "batch"}}),
        ("resnet18_bf16", lambda: tvm.resnet18(weights=None).bfloat16(),
         lambda: (_image(1).bfloat16(),), ["input"], ["output"], batch_in),
    ]
    return entries


def _as_numpy(t):
    torch = _torch()
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:  # numpy has none: its bit patterns, as kernels/npy.h writes
        import numpy as np
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _float32_reference(model, inputs, outputs):
    """For a model with half-precision outputs: the same module in float32 (its weights are the
    half-precision values exactly) on the same inputs. PyTorch's own half-precision CPU kernels
    round inside their sums, by how much depending on the CPU (without native bfloat16 its
    convolution is far less exact); our kernels keep float32 inside and round where values are
    stored, so the float32 forward is what they are held to. None for other models."""
    torch = _torch()
    half = (torch.bfloat16, torch.float16)
    if not any(t.dtype in half for t in outputs) or not all(
            isinstance(t, torch.Tensor) for t in inputs):
        return None
    import copy
    model32 = copy.deepcopy(model).float()
    inputs32 = tuple(t.float() if t.dtype in half else t for t in inputs)
    with torch.no_grad():
        return [t.float() for t in _flatten(model32(*inputs32))]


class ExportError(Exception):
    """PyTorch could not build, run or export the model: a row of the zoo."""


def _flatten(outputs):
    torch = _torch()
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    if isinstance(outputs, dict):
        return [t for v in outputs.values() for t in _flatten(v)]
    if isinstance(outputs, (list, tuple)):
        return [t for v in outputs for t in _flatten(v)]
    return []


def _range_for(size):
    """The range a user would plan a dynamic axis over: from 1 to 64, or twice the exported
    size where that is more."""
    return [1, max(64, 2 * size)]


def _forward_seconds(model, inputs):
    """PyTorch's own CPU time for one forward pass, the best of two after the warm-up run, with
    its default threads and with one (the host executor runs one thread): what the zoo's table
    compares the host executor with."""
    torch = _torch()
    threads = torch.get_num_threads()
    best = {}
    try:
        for n in (threads, 1):
            torch.set_num_threads(n)
            times = []
            with torch.no_grad():
                for _ in range(2):
                    start = time.perf_counter()
                    model(*inputs)
                    times.append(time.perf_counter() - start)
            best[n] = min(times)
    finally:
        torch.set_num_threads(threads)
    return {"threads": threads, "seconds": best[threads], "seconds_1thread": best[1]}


def _eager_peak_bytes(model, inputs):
    """The most bytes eager PyTorch holds allocated during one forward pass (no_grad, CPU): the
    profiler's allocation and free events of the pass (profile_memory=True), summed in the order
    they happened; what was allocated before the pass (weights, the input) is not counted.
    What the zoo's memory table compares our arena with."""
    torch = _torch()
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad():
        model(*inputs)  # warm-up: lazily made buffers are not the pass's
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            outputs = model(*inputs)
        del outputs
    return allocation_peak(prof)


def export_one(entry, folder):
    torch = _torch()
    import numpy as np
    name, build, make_inputs, input_names, output_names, dynamic_axes = entry
    path = os.path.join(folder, name + ".onnx")
    try:
        torch.manual_seed(0)
        model = build().eval()
        # Parameters a module initialises to zero (ViT's and GoogLeNet's classifier heads) would
        # make the output a constant that no computation before it can change: small random
        # values make every layer count in the comparison.
        with torch.no_grad():
            for p in model.parameters():
                if p.numel() > 1 and not p.any():
                    p.normal_(0.0, 0.02)
        torch.manual_seed(1)
        inputs = make_inputs()
        with torch.no_grad():
            outputs = _flatten(model(*inputs))
        reference_f32 = _float32_reference(model, inputs, outputs)
        seconds = _forward_seconds(model, inputs)
        eager_peak = _eager_peak_bytes(model, inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, inputs, path, opset_version=OPSET, input_names=input_names,
                              output_names=output_names, dynamic_axes=dynamic_axes,
                              do_constant_folding=True)
    except Exception as e:
        raise ExportError(f"{type(e).__name__}: {e}") from e
    import onnx
    proto = onnx.load(path, load_external_data=False)
    graph_inputs = [i.name for i in proto.graph.input
                    if i.name not in {t.name for t in proto.graph.initializer}]
    graph_outputs = [o.name for o in proto.graph.output]
    flat_inputs = _flatten(list(inputs))
    os.makedirs(os.path.join(folder, name + ".inputs"))
    os.makedirs(os.path.join(folder, name + ".expected"))
    # The exporter drops inputs the traced graph does not read; the rest keep their order.
    by_name = dict(zip(input_names, flat_inputs))
    for n in graph_inputs:
        np.save(os.path.join(folder, name + ".inputs", n + ".npy"), _as_numpy(by_name[n]))
    if len(graph_outputs) != len(outputs):
        raise RuntimeError(f"{len(graph_outputs)} graph outputs for {len(outputs)} of PyTorch's")
    for n, t in zip(graph_outputs, outputs):
        np.save(os.path.join(folder, name + ".expected", n + ".npy"), _as_numpy(t))
    if reference_f32 is not None:
        os.makedirs(os.path.join(folder, name + ".reference_f32"))
        for n, t in zip(graph_outputs, reference_f32):
            np.save(os.path.join(folder, name + ".reference_f32", n + ".npy"), _as_numpy(t))
    dims, ranges = {}, {}
    for input_name, axes in (dynamic_axes or {}).items():
        if input_name not in by_name:
            continue
        for axis, symbol in axes.items():
            size = int(by_name[input_name].shape[axis])
            dims[symbol] = size
            ranges[symbol] = _range_for(size)
    ops = sorted({n.op_type for n in proto.graph.node})
    return {"file": name + ".onnx", "inputs": graph_inputs, "outputs": graph_outputs,
            "output_dtypes": {n: str(t.dtype).replace("torch.", "")
                              for n, t in zip(graph_outputs, outputs)},
            "dims": dims, "ranges": ranges, "onnx_ops": ops, "nodes": len(proto.graph.node),
            "torch_forward": seconds,
            "torch_eager_peak_bytes": eager_peak,
            "weights_bytes": sum(int(np.prod(t.dims)) * np.dtype(
                onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type]).itemsize
                for t in proto.graph.initializer)}


def cache_key():
    torch = _torch()
    import torchvision
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (__file__, os.path.join(here, "export_training.py"),
                 os.path.join(here, "zoo_common.py")):
        with open(path, "rb") as f:
            h.update(f.read())
    h.update(torch.__version__.encode())
    h.update(torchvision.__version__.encode())
    return h.hexdigest()[:16]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", required=True, help="folder holding one folder per zoo hash")
    parser.add_argument("--only", nargs="*", help="export only these models (no caching)")
    args = parser.parse_args()
    torch = _torch()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    entries = zoo_entries()
    if args.only:
        entries = [e for e in entries if e[0] in args.only]
    key = cache_key() if not args.only else "only-" + "-".join(sorted(args.only))
    folder = os.path.join(args.cache, key)
    if not args.only and os.path.exists(os.path.join(folder, "manifest.json")):
        print(folder)
        return 0
    os.makedirs(args.cache, exist_ok=True)
    work = tempfile.mkdtemp(prefix=key + ".", dir=args.cache)
    manifest = {"opset": OPSET, "torch": torch.__version__, "models": {}}
    for entry in entries:
        name = entry[0]
        start = time.time()
        try:
            info = export_one(entry, work)
            info["export_seconds"] = round(time.time() - start, 2)
            manifest["models"][name] = info
            print(f"export: {name}: {info['nodes']} nodes, {time.time() - start:.1f} s",
                  file=sys.stderr)
        except ExportError as e:  # the exporter's own failure is a row of the zoo, not a crash
            message = str(e).strip().splitlines()
            manifest["models"][name] = {"export_error": message[0][:500] if message else "?"}
            for p in (name + ".onnx", name + ".inputs", name + ".expected"):
                full = os.path.join(work, p)
                if os.path.isdir(full):
                    shutil.rmtree(full)
                elif os.path.exists(full):
                    os.remove(full)
            print(f"export: {name}: PyTorch cannot export it: {message[0][:300]}",
                  file=sys.stderr)
            if os.environ.get("MEMONGER_ZOO_TRACEBACK"):
                traceback.print_exc()
    # The training models (export_training.py): the same modules with a loss, for training.
    from export_training import export_training, training_entries
    manifest["training"] = {}
    for entry in training_entries(entries):
        name = entry[0]
        try:
            info = export_training(entry, work, _flatten, OPSET)
            manifest["training"][name] = info
            print(f"export: {name} (training): {info['export_seconds']:.1f} s", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - PyTorch's own failure is a row, not a crash
            message = (str(e).strip().splitlines() or ["?"])[0][:500]
            manifest["training"][name] = {"export_error": f"{type(e).__name__}: {message}"}
            print(f"export: {name} (training): PyTorch cannot export it: {message}",
                  file=sys.stderr)
            if os.environ.get("MEMONGER_ZOO_TRACEBACK"):
                traceback.print_exc()
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    if os.path.exists(folder):
        shutil.rmtree(folder)
    os.rename(work, folder)
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
