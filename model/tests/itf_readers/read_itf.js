// Reads ITF traces with Quint's reader (`@informalsystems/quint`: `ofItf`,
// normalized through Quint's runtime values as Quint does with Apalache's
// traces) and prints, one JSON line per file, what it decoded: per state
// each replica's HW, LEO, epoch and leader view, the controller's epoch and
// the producer's count. tests/itf_readers.rs holds these against
// highwater's own reading. (Quint's reader decodes the states only; it
// does not read `loop`.)
const fs = require('fs');
const itf = require('@informalsystems/quint/dist/src/itf.js');

// A Quint expression as a plain value.
function plain(e) {
  if (e.kind === 'int') return Number(e.value);
  if (e.kind === 'bool' || e.kind === 'str') return e.value;
  if (e.kind !== 'app') throw new Error(`unexpected expression ${e.kind}`);
  switch (e.opcode) {
    case 'Rec': {
      const o = {};
      for (let i = 0; i < e.args.length; i += 2) o[plain(e.args[i])] = plain(e.args[i + 1]);
      return o;
    }
    case 'Set':
    case 'List':
      return e.args.map(plain);
    case 'Tup':
      return { tup: e.args.map(plain) };
    case 'Map':
      return new Map(e.args.map(t => [plain(t.args[0]), plain(t.args[1])]));
    case 'variant':
      return { tag: plain(e.args[0]), value: plain(e.args[1]) };
    default:
      throw new Error(`unexpected operator ${e.opcode}`);
  }
}

function option(v) {
  // highwater writes an option as a set of at most one element.
  if (!Array.isArray(v) || v.length > 1) throw new Error(`not an option: ${JSON.stringify(v)}`);
  return v;
}

function leader(v) {
  return v.tag === 'Replica' ? `Replica:${v.value}` : v.tag;
}

for (const path of process.argv.slice(2)) {
  const states = itf.ofItfNormalized(JSON.parse(fs.readFileSync(path, 'utf8'))).map(plain);
  const summary = states.map(v => {
    const replicas = {};
    for (const [name, r] of v.replicas) {
      replicas[name] = { hw: r.hw, leo: r.leo, epoch: option(r.epoch), leader: leader(r.leader) };
    }
    return {
      replicas,
      controller_epoch: option(v.controller.epoch),
      produced: v.produced,
      action: v['mbt::actionTaken'],
    };
  });
  console.log(JSON.stringify({ file: path, loop: null, states: summary }));
}
