// ONNX Runtime reference for tmgraph's model latency (bench/vs-ort.sh).
//
//   NODE_PATH=DIR/node_modules node bench/ort_latency.cjs MODEL.onnx INPUT.npy \
//       [--threads N] [--repeat N] [--warmup N] [--profile]
//
// ONNX Runtime 1.20's CPU build comes in the npm package onnxruntime-node
// (`npm install --ignore-scripts onnxruntime-node@1.20.1` in DIR). The
// InferenceSession uses all graph optimisations and N intra-op threads, sequential
// execution; the input is bound to the model's first input. Prints one line:
//   ort load=<ms> ms min=<ms> ms median=<ms> ms
// With --repeat 0 it only creates the session (bench/vs-ort-load.sh):
//   ort load=<ms> ms rss=<peak RSS of the process> MiB
// With --profile it also prints ONNX Runtime's own per-node profile, as
// `tm-run --profile` prints tmgraph's: time per op type and the slowest
// nodes with their input shapes, medians over the runs (warm-up included). The npm binding has no
// profiling option; ORT reads session options from the model's
// `ort_config` metadata entry when ORT_LOAD_CONFIG_FROM_MODEL=1, so the
// entry is appended to the model's bytes (a repeated protobuf field may
// be appended to a serialized message) and the session is made from them
// (a model with external data cannot be profiled so). Profiling adds a
// cost per node: compare shares of the total, not times.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
if (process.argv.includes('--profile'))
  process.env.ORT_LOAD_CONFIG_FROM_MODEL = '1'; // read at session creation
const ort = require('onnxruntime-node');

/// A length-delimited protobuf field: its tag byte, the payload's length
/// as a varint, the payload.
function lengthDelimited(tag, payload) {
  const len = [];
  for (let n = payload.length; ; n >>>= 7) {
    if (n < 0x80) { len.push(n); break; }
    len.push((n & 0x7f) | 0x80);
  }
  return Buffer.concat([Buffer.from([tag, ...len]), payload]);
}

/// The model's bytes with metadata_props entry ort_config enabling
/// profiling (ModelProto field 14; StringStringEntryProto key = 1,
/// value = 2).
function withProfiling(model) {
  // (ORT names the file itself, in the working directory.)
  const config = JSON.stringify({ session_options: { enable_profiling: 1 } });
  const entry = Buffer.concat([lengthDelimited(0x0a, Buffer.from('ort_config')),
                               lengthDelimited(0x12, Buffer.from(config))]);
  return Buffer.concat([fs.readFileSync(model), lengthDelimited(0x72, entry)]);
}

/// Prints the per-op-type and slowest-node tables of ORT's profile file,
/// medians over the runs.
function printProfile(file, runs) {
  const events = JSON.parse(fs.readFileSync(file, 'utf8'));
  const perNode = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const n = perNode.get(e.name) || { op: e.args.op_name, shapes: e.args.input_type_shape, t: [] };
    n.t.push(e.dur);
    perNode.set(e.name, n);
  }
  const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
  const byOp = new Map();
  let total = 0;
  for (const n of perNode.values()) {
    n.med = median(n.t) / 1000;
    const o = byOp.get(n.op) || { count: 0, ms: 0 };
    o.count += 1; o.ms += n.med; total += n.med;
    byOp.set(n.op, o);
  }
  console.log(`=== ORT profile: ${runs} run(s), ${total.toFixed(3)} ms per run in nodes (medians) ===`);
  console.log('op type                   nodes  ms per run   share');
  for (const [op, o] of [...byOp].sort((a, b) => b[1].ms - a[1].ms))
    console.log(`${op.padEnd(25)} ${String(o.count).padStart(5)} ${o.ms.toFixed(3).padStart(11)} ` +
                `${(100 * o.ms / total).toFixed(1).padStart(6)}%`);
  console.log('slowest nodes (ms per run):');
  const shape = (s) => (s || []).map((x) => JSON.stringify(Object.values(x)[0])).join(' ');
  for (const [name, n] of [...perNode].sort((a, b) => b[1].med - a[1].med).slice(0, 10))
    console.log(`${n.med.toFixed(3).padStart(10)}  ${n.op} ${name.replace(/_kernel_time$/, '')} ${shape(n.shapes)}`);
}

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
  const profile = args.includes('--profile');
  // Profiling: the model's bytes, read before moving to a fresh working
  // directory, where ORT writes the profile.
  const bytes = profile ? withProfiling(model) : null;
  const feedInput = path.resolve(input);
  const dir = profile ? fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-')) : null;
  if (profile)
    process.chdir(dir);
  const t0 = process.hrtime.bigint();
  const runner = await ort.InferenceSession.create(profile ? bytes : model, {
    graphOptimizationLevel: 'all', intraOpNumThreads: threads, interOpNumThreads: 1,
    executionMode: 'sequential' });
  const load = Number(process.hrtime.bigint() - t0) / 1e6;
  if (repeat === 0) { // load only: the session's creation time and the peak RSS so far
    const rss = process.resourceUsage().maxRSS / 1024;
    console.log(`ort load=${load.toFixed(1)} ms rss=${rss.toFixed(1)} MiB`);
    if (dir)
      fs.rmSync(dir, { recursive: true });
    return;
  }
  const feeds = { [runner.inputNames[0]]: readNpy(feedInput) };
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
  if (profile) {
    await runner.release(); // writes the profile
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
    if (files.length !== 1)
      throw new Error('ONNX Runtime wrote no profile (does this build read ort_config?)');
    printProfile(path.join(dir, files[0]), warmup + repeat);
    fs.rmSync(dir, { recursive: true });
  }
}

main().catch((e) => { console.error(`ort_latency: ${e.message}`); process.exit(2); });
