"""Reads ITF traces with itf-py (PyPI `itf-py`) and prints, one JSON line per
file, what it decoded: the loop, and per state each replica's HW, LEO,
epoch and leader view, the controller's epoch and the producer's count.
tests/itf_readers.rs holds these against highwater's own reading."""

import json
import sys

from itf_py import trace_from_json


def option(v):
    # highwater writes an option as a set of at most one element.
    assert isinstance(v, frozenset) and len(v) <= 1, v
    return sorted(v)


def leader(v):
    tag = type(v).__name__
    return f"{tag}:{v.value}" if tag == "Replica" else tag


def summary(path):
    with open(path) as f:
        trace = trace_from_json(json.load(f))
    states = []
    for s in trace.states:
        v = s.values
        states.append(
            {
                "replicas": {
                    name: {
                        "hw": r.hw,
                        "leo": r.leo,
                        "epoch": option(r.epoch),
                        "leader": leader(r.leader),
                    }
                    for name, r in v["replicas"].items()
                },
                "controller_epoch": option(v["controller"].epoch),
                "produced": v["produced"],
                "action": v["mbt::actionTaken"],
            }
        )
    return {"file": path, "loop": trace.loop, "states": states}


for path in sys.argv[1:]:
    print(json.dumps(summary(path)))
