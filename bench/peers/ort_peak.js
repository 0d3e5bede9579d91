// ONNX Runtime's peak memory for one run of a model, as the zoo's memory table reports it.
//
//   MALLOC_MMAP_THRESHOLD_=65536 node bench/peers/ort_peak.js MODEL.onnx INPUTS_DIR
//
// prints one JSON line: {"peak_bytes": N, "baseline_bytes": M}. Needs onnxruntime-node
// (`npm install --ignore-scripts onnxruntime-node`, whose package carries the CPU library)
// found by node's module resolution (NODE_PATH).
//
// How: the session runs on the CPU with one thread, its memory arena off (every tensor is its
// own malloc, freed when ORT frees it) and memory patterns on (ORT's own planner: after the
// first run each run allocates the planned blocks). glibc returns a freed block of more than
// MALLOC_MMAP_THRESHOLD_ bytes to the kernel at once, so the resident bytes follow ORT's
// allocations. After a warm-up run, the kernel's peak-RSS counter is reset
// (/proc/self/clear_refs, "5"), the run is timed against it, and the peak is VmHWM minus VmRSS
// just before the run: the bytes ORT held during the run beyond the session, its weights and
// the input, which is what eager PyTorch's profiler peak also leaves out. Page-grained (4 KiB)
// and counting what the JS runtime allocates meanwhile (small: the inputs exist before).
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
  let outputs = await session.run(feeds);  // warm-up: ORT records its memory pattern here
  outputs = null;
  if (global.gc) global.gc();
  fs.writeFileSync('/proc/self/clear_refs', '5');
  const baseline = status('VmRSS');
  outputs = await session.run(feeds);
  const peak = status('VmHWM');
  console.log(JSON.stringify({peak_bytes: peak - baseline, baseline_bytes: baseline}));
}

main().catch((e) => {
  console.error(`ort_peak: ${e.message}`);
  process.exit(1);
});
