// ONNX Runtime's peak memory for one run of a model, as the zoo's memory table reports it.
//
//   cc -O2 -shared -fPIC -o alloc_peak.so bench/peers/alloc_peak.c
//   ALLOC_PEAK_OUT=$(mktemp) LD_PRELOAD=./alloc_peak.so MALLOC_MMAP_THRESHOLD_=65536 \
//       node --expose-gc bench/peers/ort_peak.js MODEL.onnx INPUTS_DIR
//
// prints one JSON line: {"peak_bytes": N, "rss_peak_bytes": M}. Needs onnxruntime-node
// (`npm install --ignore-scripts onnxruntime-node`, whose package carries the CPU library)
// found by node's module resolution (NODE_PATH).
//
// The session runs on the CPU with one thread, its memory arena off (every tensor is its own
// allocation, freed when ORT frees it) and memory patterns on (ORT's own planner: after the
// first run each run allocates the planned blocks). After a warm-up run:
// - peak_bytes (with alloc_peak.so): the most bytes ORT held allocated during the run beyond
//   what it held before it (the session, its weights, the input): what eager PyTorch's
//   profiler peak also leaves out. Exact to the allocator's usable sizes.
// - rss_peak_bytes: the kernel's peak resident set during the run (reset through
//   /proc/self/clear_refs) minus the resident set before it; glibc returns blocks above
//   MALLOC_MMAP_THRESHOLD_ at once, but smaller ones come from pages already resident, so
//   this misses bytes (by a third and more on small models) and moves between runs.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',')
      .map((s) => s.trim()).filter((s) => s.length > 0).map(Number);
  const data = buf.subarray(10 + headerLen);
  const copy = (Ctor) => {
    const out = new Ctor(data.length / Ctor.BYTES_PER_ELEMENT);
    new Uint8Array(out.buffer).set(data);
    return out;
  };
  const types = {
    '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array],
    '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array],
    '|b1': ['bool', Uint8Array], '|u1': ['uint8', Uint8Array], '<f2': ['float16', Uint16Array],
  };
  if (!(descr in types)) throw new Error(`${file}: dtype ${descr} not handled`);
  const [type, Ctor] = types[descr];
  return new ort.Tensor(type, copy(Ctor), shape);
}

function status(field) {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return Number(m[1]) * 1024;
}

async function main() {
  const [model, inputsDir] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'], enableCpuMemArena: false, enableMemPattern: true,
    executionMode: 'sequential', intraOpNumThreads: 1, interOpNumThreads: 1,
  });
  const feeds = {};
  for (const name of session.inputNames) {
    feeds[name] = readNpy(path.join(inputsDir, name + '.npy'));
  }
  // Warm-up runs: ORT records its memory pattern in the first. What a run leaves (its outputs,
  // tensors a finalizer frees) is let go before the measured run starts, so that it is
  // neither counted in the bytes held before the run nor freed during it.
  const settle = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  let outputs = null;
  for (let i = 0; i < 2; ++i) {
    outputs = await session.run(feeds);
    outputs = null;
    if (global.gc) global.gc();
    await settle(200);
  }
  if (global.gc) global.gc();
  const counted = process.env.ALLOC_PEAK_OUT;
  if (counted) {
    process.kill(process.pid, 'SIGUSR2');  // alloc_peak.so: a new peak from here
    await settle(50);
  }
  fs.writeFileSync('/proc/self/clear_refs', '5');
  const baseline = status('VmRSS');
  outputs = await session.run(feeds);
  const rssPeak = status('VmHWM') - baseline;
  const result = {rss_peak_bytes: rssPeak};
  if (counted) {
    process.kill(process.pid, 'SIGUSR2');
    await settle(50);
    const lines = fs.readFileSync(counted, 'utf8').trim().split('\n');
    const [peak, held] = lines[lines.length - 1].split(' ').map(Number);
    const [, before] = lines[lines.length - 2].split(' ').map(Number);
    result.peak_bytes = peak - before;
  }
  console.log(JSON.stringify(result));
}

main().catch((e) => {
  console.error(`ort_peak: ${e.message}`);
  process.exit(1);
});
