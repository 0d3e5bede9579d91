"""Shared fixtures of the Python tests: real models exported by Debian's python3-torch, and the
command line built beside the package (MEMONGER_OPTIMIZE_NET, set by the ctest entry)."""
import io
import os
import warnings

import pytest

torch = pytest.importorskip("torch")


def optimize_net():
    path = os.environ.get("MEMONGER_OPTIMIZE_NET")
    if not path or not os.path.exists(path):
        pytest.skip("MEMONGER_OPTIMIZE_NET does not name optimize-net (run through ctest)")
    return path


class SmallCnn(torch.nn.Module):
    """Conv, BatchNorm, ReLU, pooling and a classifier, as torchvision's nets are made."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.BatchNorm2d(32),
            torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1))
        self.classifier = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class SmallEncoder(torch.nn.Module):
    """One pre-norm transformer block over a sequence of any length (dynamic axis "seq")."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(d)
        self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
                                       torch.nn.Linear(4 * d, d))

    def forward(self, tokens):
        h = self.norm1(tokens)
        tokens = tokens + self.attn(h, h, h, need_weights=False)[0]
        return tokens + self.mlp(self.norm2(tokens))


def _export(module, inputs, path, dynamic_axes=None, names=("x",)):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, path, opset_version=17, input_names=list(names),
                          output_names=["y"], dynamic_axes=dynamic_axes,
                          do_constant_folding=True)


@pytest.fixture(scope="session")
def cnn(tmp_path_factory):
    """(module, example input, path of its ONNX export with a dynamic batch axis)."""
    torch.manual_seed(0)
    module = SmallCnn().eval()
    x = torch.randn(2, 3, 16, 16)
    path = str(tmp_path_factory.mktemp("cnn") / "cnn.onnx")
    _export(module, (x,), path, dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return module, x, path


@pytest.fixture(scope="session")
def encoder(tmp_path_factory):
    """(module, example input, path of its ONNX export with a dynamic sequence axis)."""
    torch.manual_seed(0)
    module = SmallEncoder().eval()
    x = torch.randn(1, 24, 32)
    path = str(tmp_path_factory.mktemp("encoder") / "encoder.onnx")
    _export(module, (x,), path, dynamic_axes={"x": {1: "seq"}, "y": {1: "seq"}})
    return module, x, path


@pytest.fixture(scope="session")
def hard_trace(tmp_path_factory):
    """A MiniMalloc trace (500 buffers over 30 steps, sizes from bytes to megabytes) whose
    exact placement the branch and bound does not prove in minutes at alignment 1: the arena
    stays 0.13% above the lower bound. Should a planner one day settle it, the tests that need
    a long search (Ctrl-C) fail and need a harder one."""
    import random
    rng = random.Random(35)
    n, span, life = rng.choice([30, 60, 120, 250, 500]), rng.choice([5, 10, 30, 100]), \
        rng.choice([2, 3, 5, 10])
    lines = ["id,lower,upper,size"]
    for i in range(n):
        start = rng.randrange(0, span)
        end = start + rng.randrange(1, life + 1)
        size = rng.choice([rng.randrange(1, 50), rng.randrange(1000, 100000),
                           rng.randrange(10**6, 10**7)])
        lines.append(f"{i},{start},{end},{size}")
    path = tmp_path_factory.mktemp("trace") / "hard.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def onnx_bytes(module, inputs, dynamic_axes=None):
    buffer = io.BytesIO()
    _export(module, inputs, buffer, dynamic_axes)
    return buffer.getvalue()
