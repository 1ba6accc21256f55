// ONNX Runtime reference for tmgraph's model latency (bench/vs-ort.sh).
//
//   NODE_PATH=DIR/node_modules node bench/ort_latency.cjs MODEL.onnx INPUT.npy \
//       [--threads N] [--repeat N] [--warmup N]
//
// ONNX Runtime 1.20's CPU build comes in the npm package onnxruntime-node
// (`npm install --ignore-scripts onnxruntime-node@1.20.1` in DIR). The
// InferenceSession uses all graph optimisations and N intra-op threads, sequential
// execution; the input is bound to the model's first input. Prints one line:
//   ort load=<ms> ms min=<ms> ms median=<ms> ms
// With --repeat 0 it only creates the session (bench/vs-ort-load.sh):
//   ort load=<ms> ms rss=<peak RSS of the process> MiB
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

function readNpy(path) {
  const b = fs.readFileSync(path);
  if (b.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${path}: not a .npy file`);
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = b.toString('latin1', start, start + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim())
    .filter((s) => s.length).map(Number);
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${path}: Fortran order`);
  const data = b.subarray(start + hlen);
  const types = { '<f4': [Float32Array, 'float32'], '<i8': [BigInt64Array, 'int64'],
                  '<i4': [Int32Array, 'int32'], '<f8': [Float64Array, 'float64'] };
  if (!types[descr]) throw new Error(`${path}: dtype ${descr} is not supported here`);
  const [T, name] = types[descr];
  const copy = new T(data.byteLength / T.BYTES_PER_ELEMENT);
  new Uint8Array(copy.buffer).set(data);
  return new ort.Tensor(name, copy, shape);
}

async function main() {
  const args = process.argv.slice(2);
  const opt = (name, def) => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : def;
  };
  const [model, input] = args;
  const threads = opt('--threads', 2), repeat = opt('--repeat', 20), warmup = opt('--warmup', 1);
  const t0 = process.hrtime.bigint();
  const runner = await ort.InferenceSession.create(model, {
    graphOptimizationLevel: 'all', intraOpNumThreads: threads, interOpNumThreads: 1,
    executionMode: 'sequential' });
  const load = Number(process.hrtime.bigint() - t0) / 1e6;
  if (repeat === 0) { // load only: the session's creation time and the peak RSS so far
    const rss = process.resourceUsage().maxRSS / 1024;
    console.log(`ort load=${load.toFixed(1)} ms rss=${rss.toFixed(1)} MiB`);
    return;
  }
  const feeds = { [runner.inputNames[0]]: readNpy(input) };
  for (let i = 0; i < warmup; ++i) await runner.run(feeds);
  const ms = [];
  for (let i = 0; i < repeat; ++i) {
    const s = process.hrtime.bigint();
    await runner.run(feeds);
    ms.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  ms.sort((a, b) => a - b);
  console.log(`ort load=${load.toFixed(1)} ms min=${ms[0].toFixed(3)} ms ` +
              `median=${ms[Math.floor(ms.length / 2)].toFixed(3)} ms`);
}

main().catch((e) => { console.error(`ort_latency: ${e.message}`); process.exit(2); });
