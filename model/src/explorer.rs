//! The model as stateright's web explorer shows it, after a check: the
//! same states and actions (so any path can be browsed), each state drawn
//! as a picture (`picture.rs`), and the check's verdicts on the page.
//!
//! The explorer's own checker would search again, without symmetry, for
//! minutes. Instead its search is bounded to the states on the paths the
//! check found (each counterexample, each stuck state's path, each
//! sometimes-property's example): searching them takes milliseconds and
//! discovers exactly those paths, so a printed link opens with its broken
//! property marked. Properties the check decided are shown with their real
//! conditions; a property it did not decide (a run stopped early) is left
//! out rather than shown as holding. A progress property is shown as an
//! always-property of the states the check found stuck.

use crate::actions::Action;
use crate::model::PartitionModel;
use crate::picture;
use crate::properties;
use crate::run::{Report, Verdict};
use crate::state::State;
use stateright::{Expectation, Model, Path, Property};
use std::collections::HashSet;

/// A property as the explorer shows it.
#[derive(Clone, Debug)]
struct Shown {
    name: &'static str,
    expectation: Expectation,
    rule: Rule,
    /// The last state of the path the check found for it, where the
    /// explorer's search is to discover it (and nowhere else, so that the
    /// discovered path is the printed one).
    target: Option<State>,
}

#[derive(Clone, Debug)]
enum Rule {
    /// One of the model's properties, by index.
    Model(usize),
    /// A progress property: holds except in the states found stuck.
    NotStuck(HashSet<State>),
}

/// The model, the check's verdicts, and the paths it found.
#[derive(Clone, Debug)]
pub struct ExplorerModel {
    pub inner: PartitionModel,
    shown: Vec<Shown>,
    boundary: HashSet<State>,
}

impl ExplorerModel {
    /// The explorer's view of `report`, a run of `inner`.
    pub fn new(inner: PartitionModel, report: &Report) -> ExplorerModel {
        let mut shown = Vec::new();
        let mut boundary: HashSet<State> = HashSet::from([inner.init_state()]);
        let model_properties = inner.properties();
        for p in &report.properties {
            let decided = !matches!(p.verdict, Verdict::NotChecked | Verdict::NoneFound);
            if !decided {
                continue;
            }
            for path in [&p.counterexample, &p.example].into_iter().flatten() {
                boundary.extend(path.iter().map(|s| s.raw.0));
            }
            let target = p
                .counterexample
                .as_ref()
                .or(p.example.as_ref())
                .and_then(|path| path.last())
                .map(|s| s.raw.0);
            if p.kind == "progress" {
                let stuck: HashSet<State> = p
                    .counterexample
                    .iter()
                    .filter_map(|c| c.last())
                    .map(|s| s.raw.0)
                    .collect();
                shown.push(Shown {
                    name: p.name,
                    expectation: Expectation::Always,
                    rule: Rule::NotStuck(stuck),
                    target,
                });
            } else if let Some(i) = model_properties.iter().position(|q| q.name == p.name) {
                shown.push(Shown {
                    name: p.name,
                    expectation: model_properties[i].expectation.clone(),
                    rule: Rule::Model(i),
                    target,
                });
            }
        }
        shown.truncate(CONDITIONS.len());
        ExplorerModel {
            inner,
            shown,
            boundary,
        }
    }

    /// What the explorer's search evaluates: the property itself, except
    /// that a discovery is made only at the check's own target state.
    /// The explorer's view of one saved trace (`explore --trace`): its path,
    /// and the property it breaks (if the model has it) discovered at its
    /// last state.
    pub fn of_trace(
        inner: PartitionModel,
        property: Option<&str>,
        path: &[State],
    ) -> ExplorerModel {
        let mut boundary: HashSet<State> = path.iter().copied().collect();
        boundary.insert(inner.init_state());
        let model_properties = inner.properties();
        let shown = property
            .and_then(|name| model_properties.iter().position(|q| q.name == name))
            .map(|i| Shown {
                name: model_properties[i].name,
                expectation: model_properties[i].expectation.clone(),
                rule: Rule::Model(i),
                target: path.last().copied(),
            })
            .into_iter()
            .collect();
        ExplorerModel {
            inner,
            shown,
            boundary,
        }
    }

    fn holds(&self, i: usize, s: &State) -> bool {
        let p = &self.shown[i];
        let real = self.really_holds(i, s);
        match (&p.target, p.expectation == Expectation::Always) {
            (Some(t), true) => real || s != t,
            (Some(t), false) => real && s == t,
            (None, _) => real,
        }
    }

    fn really_holds(&self, i: usize, s: &State) -> bool {
        match &self.shown[i].rule {
            Rule::Model(j) => (self.inner.properties()[*j].condition)(&self.inner, s),
            Rule::NotStuck(stuck) => !stuck.contains(s),
        }
    }

    /// The always-properties (and progress properties) `s` breaks.
    fn broken(&self, s: &State) -> Vec<&'static str> {
        (0..self.shown.len())
            .filter(|&i| {
                self.shown[i].expectation == Expectation::Always && !self.really_holds(i, s)
            })
            .map(|i| self.shown[i].name)
            .collect()
    }
}

/// Property conditions are plain function pointers: one per slot.
macro_rules! conditions {
    ($($i:literal),*) => {
        const CONDITIONS: &[fn(&ExplorerModel, &State) -> bool] = &[$(|m, s| m.holds($i, s)),*];
    };
}
conditions!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19);

impl Model for ExplorerModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        self.inner.init_states()
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        self.inner.actions(state, actions);
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        self.inner.next_state(state, action)
    }

    fn format_action(&self, action: &Action) -> String {
        action.to_string()
    }

    fn format_step(&self, last: &State, action: Action) -> Option<String> {
        self.inner.format_step(last, action)
    }

    fn as_svg(&self, path: Path<State, Action>) -> Option<String> {
        let steps = path.into_vec();
        let n = steps.len();
        let (state, _) = steps.last()?;
        // The action that led here is stored with the state before it.
        let action = n.checked_sub(2).and_then(|i| steps[i].1);
        let broken: Vec<&str> = self
            .broken(state)
            .into_iter()
            .filter(|name| properties::explain(name, state).is_some())
            .collect();
        Some(picture::svg(state, action.as_ref(), &broken))
    }

    fn properties(&self) -> Vec<Property<Self>> {
        self.shown
            .iter()
            .zip(CONDITIONS)
            .map(|(p, &condition)| Property {
                expectation: p.expectation.clone(),
                name: p.name,
                condition,
            })
            .collect()
    }

    fn within_boundary(&self, state: &State) -> bool {
        self.boundary.contains(state)
    }
}
