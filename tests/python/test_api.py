"""memonger's Python API on real PyTorch exports: every call of docs/python.md, plans equal to
the command line's, execution equal to PyTorch's, errors, symbolic plans, --fit, the GIL."""
import json
import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import memonger
from conftest import onnx_bytes, optimize_net, torch


def cli_json(*args):
    """optimize-net's plan document for `args` (--format json)."""
    run = subprocess.run([optimize_net(), *args, "--format", "json"], capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def without_time(document):
    """The plan document without the seconds it took (the order search's too)."""
    document = dict(document)
    document.pop("planning_seconds", None)
    if "order_search" in document:
        document["order_search"] = {k: v for k, v in document["order_search"].items()
                                    if k != "seconds"}
    return document


def test_load_path_and_bytes_plan_alike(cnn):
    _, _, path = cnn
    from_path = memonger.load(path, dims={"batch": 2})
    with open(path, "rb") as f:
        from_bytes = memonger.load(f.read(), dims={"batch": 2})
    assert from_path.num_ops == from_bytes.num_ops > 0
    a, b = memonger.plan(from_path), memonger.plan(from_bytes)
    assert (a.arena_bytes, a.lower_bound_bytes) == (b.arena_bytes, b.lower_bound_bytes)
    assert [v["offset"] for v in a.values] == [v["offset"] for v in b.values]


def test_plan_fields(cnn):
    _, _, path = cnn
    plan = memonger.plan(memonger.load(path, dims={"batch": 2}))
    assert isinstance(plan.arena_bytes, int) and isinstance(plan.lower_bound_bytes, int)
    assert isinstance(plan.proven_optimal, bool)
    assert plan.lower_bound_bytes <= plan.arena_bytes
    assert plan.proven_optimal == (plan.arena_bytes == plan.lower_bound_bytes)
    values = plan.values
    assert values and {"name", "offset", "size", "first_step", "last_step", "dtype",
                       "shape"} <= set(values[0])
    statics = [v for v in values if v["role"] in ("param", "constant")]
    assert statics and all(v["offset"] == -1 for v in statics)
    placed = [v for v in values if v["offset"] >= 0]
    # No two values live at once share a byte, unless one took the other's bytes in place.
    for i, a in enumerate(placed):
        assert a["offset"] + a["size"] <= plan.arena_bytes
        for b in placed[i + 1:]:
            overlap_time = a["first_step"] <= b["last_step"] and b["first_step"] <= a["last_step"]
            overlap_bytes = (a["offset"] < b["offset"] + b["size"]
                             and b["offset"] < a["offset"] + a["size"])
            if overlap_time and overlap_bytes:
                assert a["buffer"] == b["buffer"] and (a["alias_of"] or b["alias_of"]), (a, b)
    assert "memonger" in repr(plan)


@pytest.mark.parametrize("flags", [
    {},
    {"planner": "best-fit", "order": "memory-aware"},
    {"planner": "greedy-by-size", "alignment": 64, "in_place": False},
    {"planner": "exact", "time_limit": 5.0, "views": False},
])
def test_plan_equals_the_command_line(cnn, flags):
    _, _, path = cnn
    plan = memonger.plan(memonger.load(path, dims={"batch": 2}), **flags)
    args = [path, "--dim", "batch=2"]
    for key, value in flags.items():
        flag = "--" + key.replace("_", "-")
        if value is False:
            args.append("--no-" + key.replace("_", "-"))
        else:
            args += [flag, str(value)]
    assert without_time(json.loads(plan.to_json())) == without_time(cli_json(*args))


def test_html_is_the_command_lines_page(cnn, tmp_path):
    _, _, path = cnn
    page = memonger.plan(memonger.load(path, dims={"batch": 2}), planner="best-fit").html()
    out = tmp_path / "plan.html"
    subprocess.run([optimize_net(), path, "--dim", "batch=2", "--planner", "best-fit",
                    "--html", str(out)], check=True, capture_output=True)
    assert page.startswith("<!DOCTYPE html>") and page == out.read_text()


def test_execute_equals_pytorch(cnn):
    module, x, path = cnn
    model = memonger.load(path, dims={"batch": 2})
    plan = memonger.plan(model)
    outputs = memonger.execute(model, plan, inputs={"x": x.numpy()})
    with torch.no_grad():
        expected = module(x).numpy()
    assert list(outputs) == ["y"]
    assert outputs["y"].dtype == np.float32 and outputs["y"].shape == expected.shape
    np.testing.assert_allclose(outputs["y"], expected, rtol=1e-4, atol=1e-5)


def test_inputs_in_any_byte_order_and_layout(cnn):
    module, x, path = cnn
    model = memonger.load(path, dims={"batch": 2})
    plan = memonger.plan(model)
    native = memonger.execute(model, plan, inputs={"x": x.numpy()})["y"]
    swapped = x.numpy().astype(">f4")
    fortran = np.asfortranarray(x.numpy())
    for given in (swapped, fortran):
        np.testing.assert_array_equal(memonger.execute(model, plan, inputs={"x": given})["y"],
                                      native)


def test_input_shapes_instead_of_dims(cnn):
    module, _, path = cnn
    x = torch.randn(3, 3, 16, 16)
    model = memonger.load(path, input_shapes={"x": (3, 3, 16, 16)})
    out = memonger.execute(model, memonger.plan(model), inputs={"x": x.numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(out["y"], module(x).numpy(), rtol=1e-4, atol=1e-5)


def test_symbolic_plan_binds_to_fresh_plans(encoder):
    module, _, path = encoder
    ranged = memonger.load(path, dims={"seq": (8, 256)})
    assert ranged.ranged
    splan = memonger.plan(ranged)
    assert isinstance(splan, memonger.SymbolicPlan)
    assert "seq" in splan.arena_formula and splan.box == {"seq": (8, 256)}
    assert splan.max_arena_bytes >= splan.bind(seq=256).arena_bytes
    for seq in (8, 37, 100, 256):
        bound = splan.bind(seq=seq)
        fresh = memonger.plan(memonger.load(path, dims={"seq": seq}))
        # The same net at the same sizes: the same values, sizes, lifetimes and lower bound;
        # the bound plan's placement is the symbolic plan's, valid (checked in bind) and
        # never below the bound.
        assert bound.lower_bound_bytes == fresh.lower_bound_bytes
        assert ([(v["name"], v["size"], v["first_step"], v["last_step"]) for v in bound.values]
                == [(v["name"], v["size"], v["first_step"], v["last_step"])
                    for v in fresh.values])
        assert bound.arena_bytes >= bound.lower_bound_bytes
        # The bound plan runs: PyTorch's output at this length.
        x = torch.randn(1, seq, 32)
        out = memonger.execute(ranged, bound, inputs={"x": x.numpy()})
        with torch.no_grad():
            np.testing.assert_allclose(out["y"], module(x).numpy(), rtol=1e-4, atol=1e-4)
    with pytest.raises(memonger.Error):
        splan.bind(seq=257)
    with pytest.raises(memonger.Error):
        memonger.execute(ranged, splan)
    assert json.loads(splan.to_json())["schema"] == "memonger.plan/v2"


def test_fit_equals_the_command_line(cnn):
    _, _, path = cnn
    model = memonger.load(path)
    fit = memonger.fit(model, symbol="batch", budget="2MiB")
    assert fit["largest"]["given"] is not None and fit["largest"]["given"] > 1
    run = subprocess.run([optimize_net(), path, "--fit", "batch", "--budget", "2MiB",
                          "--format", "json"], capture_output=True, text=True, check=True)
    assert fit == json.loads(run.stdout)["fit"]


def test_budget_is_reported(cnn):
    _, _, path = cnn
    plan = memonger.plan(memonger.load(path, dims={"batch": 2}), budget="1KiB")
    assert plan.budget_bytes == 1024 and plan.arena_bytes > 1024
    assert plan.device_bytes == plan.arena_bytes + plan.static_bytes


def test_device_bytes_count_the_optimizer(cnn):
    _, _, path = cnn
    model = memonger.load(path, dims={"batch": 2})
    plain = memonger.plan(model, mode="training", loss=["y"])
    adam = memonger.plan(model, mode="training", loss=["y"], optimizer="adam")
    assert plain.trainable_bytes > 0 and plain.optimizer_state_bytes == 0
    assert adam.optimizer_state_bytes == 2 * adam.trainable_bytes
    assert adam.device_bytes == plain.device_bytes + 2 * plain.trainable_bytes
    assert json.loads(adam.to_json())["optimizer_state_bytes"] == adam.optimizer_state_bytes


def test_records_load_and_plan(hard_trace):
    plan = memonger.plan(memonger.load(hard_trace), planner="best-fit")
    assert plan.arena_bytes >= plan.lower_bound_bytes > 0


def test_gil_is_released_while_planning(hard_trace):
    model = memonger.load(hard_trace)
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    thread = threading.Thread(target=tick)
    thread.start()
    start = time.monotonic()
    plan = memonger.plan(model, planner="exact", time_limit=1.0, alignment=1)
    end = time.monotonic()
    done.set()
    thread.join()
    assert end - start >= 0.5 and plan.arena_bytes > 0
    during = [t for t in ticks if start < t < end]
    # The other thread ran throughout: ticks every 10 ms, far more than a held GIL allows.
    assert len(during) >= 0.3 * (end - start) / 0.01


def test_ctrl_c_stops_a_search(hard_trace):
    model = memonger.load(hard_trace)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        memonger.plan(model, planner="exact", time_limit=120.0, alignment=1)
    assert time.monotonic() - start < 30


def test_errors_raise_memonger_error(cnn, tmp_path):
    _, x, path = cnn
    data = b"id,lower,upper,size\n0,0,2,64\n1,1,3,128\n"
    assert issubclass(memonger.Error, ValueError)
    cases = [
        lambda: memonger.load(str(tmp_path / "missing.onnx")),
        lambda: memonger.load(str(tmp_path)),
        lambda: memonger.load(path + ".txt"),
        lambda: memonger.load(b"not an onnx model"),
        lambda: memonger.load(b""),
        lambda: memonger.load(12),
        lambda: memonger.load(path, dims={"batch": "two"}),
        lambda: memonger.load(path, dims={"batch": -1}),
        lambda: memonger.load(path, dims={"batch": 2, "nosuch": 3}),
        lambda: memonger.load(path, input_shapes={"x": "abc"}),
        lambda: memonger.load(path, input_shapes={"nosuch": (1, 2)}),
        lambda: memonger.load(path, dims={"batch": 10**15}),
        lambda: memonger.load(path, format="onnx"),
        lambda: memonger.load(b"x", format="docx"),
        lambda: memonger.load(b"x", format="csv", name="trace.onnx"),
        lambda: memonger.load(path, planner="best-fit"),
        lambda: memonger.load(path, name="other.onnx"),
        lambda: memonger.plan(memonger.load(path, dims={"batch": 2}), planner="best-fit\0x"),
        lambda: memonger.plan(memonger.load(path, dims={"batch": 2}), cuda_graphs=True),
        lambda: memonger.execute(memonger.load(path, dims={"batch": 2}),
                                 memonger.plan(memonger.load(path, dims={"batch": 2})),
                                 inputs={"x": x.numpy()}, threads=2**40),
        lambda: memonger.plan(memonger.load(path, dims={"batch": 2}), planner="nosuch"),
        lambda: memonger.plan(memonger.load(path, dims={"batch": 2}), order="sideways"),
        lambda: memonger.plan(memonger.load(path, dims={"batch": 2}), alignment=3),
        lambda: memonger.plan(memonger.load(path, dims={"batch": 2}), time_limit=-1),
        lambda: memonger.plan(memonger.load(path, dims={"batch": 2}), budget="lots"),
        lambda: memonger.plan(memonger.load(path, dims={"batch": 2}), plan_json="p.json"),
        lambda: memonger.plan("not a model"),
        lambda: memonger.fit(memonger.load(path), symbol="nosuch", budget=10**6),
        lambda: memonger.execute(memonger.load(path, dims={"batch": 2}),
                                 memonger.plan(memonger.load(path, dims={"batch": 2}))),
        lambda: memonger.execute(memonger.load(path, dims={"batch": 2}),
                                 memonger.plan(memonger.load(path, dims={"batch": 2})),
                                 inputs={"x": np.zeros((2, 3, 8, 8), np.float32)}),
        lambda: memonger.execute(memonger.load(path, dims={"batch": 2}),
                                 memonger.plan(memonger.load(path, dims={"batch": 2})),
                                 inputs={"x": x.numpy().astype(np.complex64)}),
        lambda: memonger.execute(memonger.load(path, dims={"batch": 2}),
                                 memonger.plan(memonger.load(path, dims={"batch": 2})),
                                 inputs={"x": x.numpy()}, device="tpu"),
        lambda: memonger.execute(memonger.load(path, dims={"batch": 3}),
                                 memonger.plan(memonger.load(path, dims={"batch": 2})),
                                 inputs={"x": np.zeros((3, 3, 16, 16), np.float32)}),
        lambda: memonger.execute(memonger.load(path, dims={"batch": 2}),
                                 memonger.plan(memonger.load(data, format="csv")),
                                 inputs={"x": x.numpy()}),
        lambda: memonger.plan(memonger.load(path)),
        lambda: memonger.load(path).num_ops,
    ]
    for i, case in enumerate(cases):
        with pytest.raises(memonger.Error) as error:
            case()
        message = str(error.value)
        assert message and "\n" not in message, (i, message)


def test_hostile_bytes_never_crash(cnn):
    _, _, path = cnn
    with open(path, "rb") as f:
        data = f.read()
    rng = np.random.default_rng(3)
    for cut in (1, 7, len(data) // 3, len(data) // 2, len(data) - 1):
        with pytest.raises(memonger.Error):
            memonger.load(data[:cut], dims={"batch": 2})
    for _ in range(20):
        garbled = bytearray(data)
        for i in rng.integers(0, len(data), 40):
            garbled[i] = int(rng.integers(0, 256))
        try:
            memonger.plan(memonger.load(bytes(garbled), dims={"batch": 2}))
        except memonger.Error:
            pass
    for text in (b"\x00" * 64, b'{"schema": "memonger.records/v1"', b"id,lower\n1,2"):
        for fmt in ("json", "csv", "pbtxt"):
            with pytest.raises(memonger.Error):
                memonger.load(text, format=fmt)
