//! Backward reachability over the fault-free edges as a timely loop: a
//! message (state, bits) says that the state reaches the goals (and the
//! exempt states) of those bits. Its owner keeps what is new and sends it
//! on to every state with an edge to it, round after round on a feedback
//! edge, until no bit is new anywhere: timely's progress tracking says so
//! when the loop's frontier is empty.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use timely::dataflow::channels::pact::Exchange as ExchangePact;
use timely::dataflow::operators::{Concat, ConnectLoop, Feedback, Input, Operator, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};
use timely::worker::Worker;

/// Each state's predecessors (by fingerprint), for the states one worker
/// owns, by their local index.
pub(crate) struct Predecessors {
    pub start: Vec<u32>,
    pub sources: Vec<u64>,
}

/// The bits each of this worker's states reaches (its local order), from
/// `seeds` (each worker's own states and their own bits).
pub(crate) fn reach(
    worker: &mut Worker,
    index: Rc<HashMap<u64, u32, ahash::RandomState>>,
    predecessors: Predecessors,
    seeds: Vec<(u64, u8)>,
    nodes: usize,
) -> Vec<u8> {
    let reached = Rc::new(RefCell::new(vec![0u8; nodes]));
    let mut input: InputHandle<u64, timely::container::CapacityContainerBuilder<Vec<(u64, u8)>>> =
        InputHandle::new();
    let probe = ProbeHandle::new();
    {
        let reached = Rc::clone(&reached);
        worker.dataflow::<u64, _, _>(|scope| {
            let (handle, cycle) = scope.feedback::<Vec<(u64, u8)>>(1);
            scope
                .input_from(&mut input)
                .concat(cycle)
                .unary::<timely::container::CapacityContainerBuilder<Vec<(u64, u8)>>, _, _, _>(
                    ExchangePact::new(|m: &(u64, u8)| m.0),
                    "Reach",
                    move |_, _| {
                        move |input, output| {
                            input.for_each(|cap, data: &mut Vec<(u64, u8)>| {
                                let mut session = output.session(&cap);
                                let mut reached = reached.borrow_mut();
                                for (fp, bits) in data.drain(..) {
                                    let n = index[&fp] as usize;
                                    let new = bits & !reached[n];
                                    if new == 0 {
                                        continue;
                                    }
                                    reached[n] |= new;
                                    let range = predecessors.start[n] as usize
                                        ..predecessors.start[n + 1] as usize;
                                    for &source in &predecessors.sources[range] {
                                        session.give((source, new));
                                    }
                                }
                            });
                        }
                    },
                )
                .probe_with(&probe)
                .connect_loop(handle);
        });
    }
    for seed in seeds {
        input.send(seed);
    }
    drop(input);
    while !probe.done() {
        worker.step_or_park(Some(std::time::Duration::from_millis(1)));
    }
    let out = std::mem::take(&mut *reached.borrow_mut());
    out
}
