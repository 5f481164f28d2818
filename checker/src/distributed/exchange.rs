//! One all-to-all exchange between the workers, as a timely dataflow: what
//! each worker sends in a round goes to the worker it names, and the round
//! ends when timely's progress tracking says that no message of it is
//! still on its way (a probe behind the operator that receives them). The
//! search runs its levels as rounds of these.

use std::cell::RefCell;
use std::rc::Rc;
use timely::dataflow::channels::pact::Exchange as ExchangePact;
use timely::dataflow::operators::{Input, Operator, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};
use timely::worker::Worker;
use timely::ExchangeData;

/// Messages of type `T`, each to one worker, delivered round by round.
pub(crate) struct Rounds<T: ExchangeData + Clone> {
    input: InputHandle<u64, timely::container::CapacityContainerBuilder<Vec<(u64, T)>>>,
    probe: ProbeHandle<u64>,
    /// What has arrived, by round: a worker a round ahead may already
    /// be sending the next round's messages.
    inbox: Rc<RefCell<std::collections::BTreeMap<u64, Vec<T>>>>,
    round: u64,
}

impl<T: ExchangeData + Clone> Rounds<T> {
    /// Builds the dataflow (every worker builds its dataflows in the same
    /// order).
    pub(crate) fn new(worker: &mut Worker) -> Self {
        let mut input = InputHandle::new();
        let probe = ProbeHandle::new();
        let inbox = Rc::new(RefCell::new(
            std::collections::BTreeMap::<u64, Vec<T>>::new(),
        ));
        let sink = Rc::clone(&inbox);
        worker.dataflow::<u64, _, _>(|scope| {
            scope
                .input_from(&mut input)
                .unary::<timely::container::CapacityContainerBuilder<Vec<()>>, _, _, _>(
                    ExchangePact::new(|m: &(u64, T)| m.0),
                    "Deliver",
                    move |_, _| {
                        move |input, _output| {
                            input.for_each(|cap, data: &mut Vec<(u64, T)>| {
                                sink.borrow_mut()
                                    .entry(*cap.least().expect("a message has a time"))
                                    .or_default()
                                    .extend(data.drain(..).map(|(_, m)| m));
                            });
                        }
                    },
                )
                .probe_with(&probe);
        });
        Rounds {
            input,
            probe,
            inbox,
            round: 0,
        }
    }

    /// Sends `message` to worker `to` in this round.
    pub(crate) fn send(&mut self, to: usize, message: T) {
        self.input.send((to as u64, message));
    }

    /// Ends the round: every worker's messages of it, delivered here.
    pub(crate) fn finish(&mut self, worker: &mut Worker) -> Vec<T> {
        self.round += 1;
        self.input.advance_to(self.round);
        while self.probe.less_than(&self.round) {
            worker.step_or_park(Some(std::time::Duration::from_millis(1)));
        }
        self.inbox
            .borrow_mut()
            .remove(&(self.round - 1))
            .unwrap_or_default()
    }
}
