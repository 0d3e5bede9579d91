"""memonger: plans the memory of a neural-network graph before it runs, and runs that plan.

    import memonger
    model = memonger.load("model.onnx", dims={"batch": 2})
    plan = memonger.plan(model)                  # planner="auto", time_limit=2.0, ...
    print(plan.arena_bytes, plan.lower_bound_bytes, plan.proven_optimal)
    outputs = memonger.execute(model, plan, inputs={"x": array})

Every call is the command line's (optimize-net) with the same flags: the keyword arguments
become flags (docs/python.md lists them), the library parses and runs them, and a plan here
equals the command line's plan. Errors raise memonger.Error (a ValueError) carrying the command
line's one-line message. Long calls release the GIL; a Ctrl-C stops a search and raises
KeyboardInterrupt. The package holds no planning logic: it turns arguments into flags and the
library's answers into Python values.
"""
import json as _json

from . import _memonger
from ._memonger import Error, Model, Plan, SymbolicPlan

__all__ = ["Error", "Model", "Plan", "SymbolicPlan", "load", "plan", "fit", "execute"]

# Formats a bytes model may be given in, as the command line knows them by extension.
_FORMATS = ("onnx", "pb", "pbtxt", "prototxt", "json", "csv")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_int64(value):
    return _is_int(value) and -2**63 <= value < 2**63


def _text(what, value):
    """A string that reaches the command line's parser: no NUL (C strings would end there)."""
    if not isinstance(value, str):
        raise Error(f"{what}: expected a string, got {type(value).__name__}")
    if "\0" in value:
        raise Error(f"{what}: holds a NUL character")
    return value


def _flag_value(key, value):
    """The text of a flag's value: ints, floats and strings as they are, nothing else."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise Error(f"{key}: expected a number or a string, got {type(value).__name__}")
    return _text(key, value) if isinstance(value, str) else repr(value)


def _dims_flags(dims):
    args = []
    for symbol, value in (dims or {}).items():
        _text("dims: a symbol", symbol)
        if _is_int(value):
            args += ["--dim", f"{symbol}={value}"]
        elif (isinstance(value, (tuple, list)) and len(value) == 2
              and all(_is_int(v) for v in value)):
            args += ["--dim", f"{symbol}={value[0]}..{value[1]}"]
        else:
            raise Error(f"dims {symbol!r}: expected an int or a (low, high) pair of ints, "
                        f"got {value!r}")
    return args


def _shape_flags(input_shapes):
    args = []
    for name, shape in (input_shapes or {}).items():
        _text("input_shapes: an input name", name)
        try:
            dims = [int(d) for d in shape]
        except (TypeError, ValueError):
            raise Error(f"input_shapes {name!r}: expected a sequence of ints, got {shape!r}") from None
        if any(isinstance(d, bool) for d in shape):
            raise Error(f"input_shapes {name!r}: expected a sequence of ints, got {shape!r}")
        args += ["--input-shape", f"{name}=" + ",".join(str(d) for d in dims)]
    return args


def _type_flags(input_types):
    args = []
    for name, dtype in (input_types or {}).items():
        _text("input_types: a name", name)
        _text("input_types: a dtype", dtype)
        args += ["--input-type", f"{name}={dtype}"]
    return args


def _extra_flags(flags):
    """More of the command line's flags: key=value -> --key value (underscores as dashes); True
    gives the flag alone, False its --no- form, a list or tuple the flag once per item."""
    args = []
    for key, value in flags.items():
        _text("a flag", key)
        flag = "--" + key.replace("_", "-")
        if value is None:
            continue
        if value is True:
            args.append(flag)
        elif value is False:
            args.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, (list, tuple)):
            for item in value:
                args += [flag, _flag_value(key, item)]
        else:
            args += [flag, _flag_value(key, value)]
    return args


# What load() takes of the command line's flags beyond its own arguments: the input limits.
# (Planning flags belong to memonger.plan: given at load, every plan would repeat them.)
_LOAD_FLAGS = {"max_input_bytes"}


def load(model, dims=None, input_shapes=None, input_types=None, *, format=None, name=None,
         **flags):
    """Loads a model: a path (.onnx, .pb, .pbtxt, .json records, .csv trace) or its bytes
    (ONNX unless `format` says otherwise; `name` is what messages call them), typed at `dims`
    ({"batch": 2}; a (low, high) pair is a range: memonger.plan then makes one symbolic plan
    for it) and `input_shapes` ({"x": (1, 3, 224, 224)}); max_input_bytes= raises the size
    limit. Read once: later calls plan from the bytes held here."""
    import os
    unknown = sorted(set(flags) - _LOAD_FLAGS)
    if unknown:
        raise Error(f"load takes no {unknown[0]!r}: planning flags are memonger.plan's")
    data = None
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
        fmt = format or "onnx"
        if fmt not in _FORMATS:
            raise Error(f"format {fmt!r}: expected one of {', '.join(_FORMATS)}")
        if name is None:
            path = f"<bytes>.{fmt}"
        else:
            stem, ext = os.path.splitext(_text("name", name))
            if ext.lower().lstrip(".") in _FORMATS and format is None:
                path = name  # the name's extension says the format
            elif ext.lower().lstrip(".") in _FORMATS and ext.lower().lstrip(".") != fmt:
                raise Error(f"name {name!r} and format {fmt!r} disagree")
            else:
                path = name if ext.lower().lstrip(".") == fmt else f"{name}.{fmt}"
    elif isinstance(model, str) or hasattr(model, "__fspath__"):
        if format is not None or name is not None:
            raise Error("format and name are for a model given as bytes; a path names itself")
        path = os.fspath(model)
        if not isinstance(path, str):
            raise Error("a model path is a string")
    else:
        raise Error(f"a model is a path or bytes, got {type(model).__name__}")
    _text("a model path", path)
    if path.startswith("-"):
        path = "./" + path  # a file name, not a flag
    args = [path] + _dims_flags(dims) + _shape_flags(input_shapes) + _type_flags(input_types)
    args += _extra_flags(flags)
    return _memonger.load(args, data)


def _plan_flags(planner, time_limit, order, mode, budget, recompute, alignment, flags):
    args = ["--planner", _flag_value("planner", planner),
            "--time-limit", _flag_value("time_limit", float(time_limit)
                                        if _is_int(time_limit) else time_limit),
            "--order", _flag_value("order", order),
            "--mode", _flag_value("mode", mode),
            "--recompute", _flag_value("recompute", recompute),
            "--alignment", _flag_value("alignment", alignment)]
    if budget is not None:
        args += ["--budget", _flag_value("budget", budget)]
    return args + _extra_flags(flags)


def plan(model, planner="auto", time_limit=2.0, order="given", mode="inference", budget=None,
         recompute="none", alignment=256, **flags):
    """The memory plan of `model` (memonger.load's), verified: a Plan, or a SymbolicPlan for a
    model loaded with a range. More flags of the command line as keywords (views=False,
    in_place=False, execution="parallel", loss=["loss"], threads=4, ...)."""
    if not isinstance(model, Model):
        raise Error(f"memonger.plan takes a model from memonger.load, got {type(model).__name__}")
    return _memonger.plan(model, _plan_flags(planner, time_limit, order, mode, budget, recompute,
                                             alignment, flags))


def fit(model, symbol, budget, planner="auto", time_limit=2.0, order="given", mode="inference",
        alignment=256, **flags):
    """The largest value of `symbol` (a dim of the model) whose plan fits `budget` (bytes, or
    text such as "24GB"): the "fit" object of the command line's --fit JSON, as a dict
    (fit["largest"]["given"], fit["cures"], ...)."""
    if not isinstance(model, Model):
        raise Error(f"memonger.fit takes a model from memonger.load, got {type(model).__name__}")
    if not isinstance(symbol, str):
        raise Error("fit: the symbol is a string")
    args = _plan_flags(planner, time_limit, order, mode, budget, "none", alignment, flags)
    args += ["--fit", symbol]
    return _json.loads(_memonger.fit(model, args))["fit"]


# numpy's dtype names that are memonger's too.
_NUMPY_TYPES = {"float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8",
                "bool"}


def execute(model, plan, inputs=None, *, device="host", seed=0, seed_missing=False, threads=1):
    """Runs `plan` in one arena of plan.arena_bytes with the library's kernels (device "host",
    or "cuda" where built with CUDA) on `inputs` ({name: numpy array}; weights come from the
    model; inputs not given are refused, as the command line's --inputs) and returns every graph
    output as {name: numpy array}."""
    import numpy as np
    if not isinstance(model, Model):
        raise Error(f"memonger.execute takes a model from memonger.load, got {type(model).__name__}")
    if isinstance(plan, SymbolicPlan):
        raise Error("a symbolic plan runs bound to sizes: memonger.execute(model, splan.bind(...))")
    if not isinstance(plan, Plan):
        raise Error(f"memonger.execute takes a plan from memonger.plan, got {type(plan).__name__}")
    if not _is_int(seed) or not 0 <= seed < 2**64:
        raise Error("seed: an int in [0, 2^64)")
    if not _is_int(threads) or not 1 <= threads <= 256:
        raise Error("threads: an int from 1 to 256")
    _text("device", device)
    tensors = []
    for name, value in (inputs or {}).items():
        _text("inputs: a name", name)
        array = np.ascontiguousarray(value)
        if not array.dtype.isnative:
            array = array.astype(array.dtype.newbyteorder("="))  # memonger's bytes: this host's
        dtype = array.dtype.name
        if dtype not in _NUMPY_TYPES:
            raise Error(f"input {name!r}: numpy dtype {dtype} has no memonger type")
        tensors.append((name, dtype, list(array.shape), array.tobytes()))
    outputs = _memonger.execute(model, plan, tensors, device, seed, bool(seed_missing), threads)
    result = {}
    for name, dtype, dims, data in outputs:
        if dtype not in _NUMPY_TYPES:
            raise Error(f"output {name!r}: {dtype} has no numpy type")
        result[name] = np.frombuffer(data, dtype=np.dtype(dtype)).reshape(dims).copy()
    return result


def _values(self):
    """One dict per value of the plan, in the plan's JSON order: name, offset (-1 for values
    outside the arena), size (bytes), first_step, last_step, dtype, shape, role, buffer,
    alias_of."""
    cached = getattr(self, "_values_cache", None)
    if cached is None:
        cached = []
        for v in _json.loads(self.to_json())["values"]:
            entry = dict(v)
            entry["size"] = v["bytes"]
            if entry.get("offset") is None:
                entry["offset"] = -1
            cached.append(entry)
        self._values_cache = cached
    return cached


def _steps(self):
    """One dict per step: op, type, live_bytes."""
    return _json.loads(self.to_json())["steps"]


def _plan_html(self, budget=None, measured=None):
    """The --html page: the map, the live-bytes curve with the lower bound and the budget (this
    plan's unless `budget` is given, in device bytes; drawn as what the params, constants and
    optimizer state leave of it for the arena), and `measured` curves beside it: a list of
    (name, [(fraction of the pass, bytes held), ...])."""
    if budget is not None and (not _is_int64(budget) or budget < 0):
        raise Error("budget: bytes, a non-negative int of 64 bits")
    curves = []
    for item in measured or []:
        try:
            name, points = item
            points = [(float(x), int(b)) for x, b in points]
        except (TypeError, ValueError):
            raise Error("measured: a list of (name, [(fraction, bytes), ...])") from None
        curves.append((str(name), points))
    return self._html(budget, curves)


def _plan_repr(self):
    return (f"<memonger.Plan {self.planner}, arena {self.arena_bytes} B, lower bound "
            f"{self.lower_bound_bytes} B{', proven optimal' if self.proven_optimal else ''}>")


def _symbolic_repr(self):
    box = ", ".join(f"{s}={lo}..{hi}" for s, (lo, hi) in self.box.items())
    return f"<memonger.SymbolicPlan {box}: arena {self.arena_formula}>"


def _bind(self, **dims):
    for symbol, value in dims.items():
        if not _is_int64(value):
            raise Error(f"bind {symbol}: expected an int of 64 bits, got {value!r}")
    return _memonger.SymbolicPlan._bind(self, dims)


Plan.html = _plan_html
Plan.values = property(_values)
Plan.steps = property(_steps)
Plan.__repr__ = _plan_repr
SymbolicPlan.__repr__ = _symbolic_repr
SymbolicPlan._bind = SymbolicPlan.bind
SymbolicPlan.bind = _bind
