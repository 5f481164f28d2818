//! The controller's half of a Kafka run, validated step by step against
//! the model's controller (`highwater_model::controller::kafka_event`, the
//! rules the model's election and ISR actions take, held against
//! `PartitionChangeBuilder` in `tests/kafka_controller.rs`).
//!
//! The metadata log is read batch by batch. Each batch is one controller
//! event; the broker records in it say which (a fence, a controlled
//! shutdown, an unfence, a re-registration) and the partition change in
//! it must be what the model's controller makes of that event in the
//! state before it, field by field: leader, ISR, ELR, last known ELR,
//! recovery state, and whether the leader epoch goes up. A batch with a
//! partition change and no broker record is an AlterPartition from the
//! leader (the ISR it asked for is the record's) or an election the
//! controller made on its own (preferred, or unclean where allowed). A
//! broker event the model says changes the partition must have its change
//! in the same batch: a missing record is a misfit too. What a
//! re-registration was (after a clean shutdown or not) is not in the
//! record, so both are tried.
//!
//! Kafka's replica ids map to the model's by their place in the
//! partition's replica list (the model's replica 0 is Kafka's preferred
//! leader, the head of that list).

use std::collections::BTreeMap;
use std::fmt;

use highwater_model::controller::{kafka_event, Event, EventResult, Outcome, Rules};
use highwater_model::presets::SAFE;
use highwater_model::state::{Controller, ReplicaSet, Unbounded};

use super::metadata::{Batch, BrokerId, Brokers, Entry, MetaRecord, RECOVERING};

/// The rules the cluster runs under, read from its metadata log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterRules {
    pub min_isr: u8,
    /// `eligible.leader.replicas.version` at 1 or more.
    pub elr: bool,
    pub unclean: bool,
}

impl ClusterRules {
    /// The model's controller rules for this cluster: today's (`safe`'s)
    /// with the cluster's min.insync.replicas, ELR and unclean election.
    pub fn model(self) -> Rules {
        Rules::of(&highwater_model::Config {
            min_isr: self.min_isr,
            elr: self.elr,
            unclean_election: self.unclean,
            ..SAFE
        })
    }
}

impl ClusterRules {
    /// The controller's static configuration (its `server.properties`):
    /// `min.insync.replicas` and `unclean.leader.election.enable` there are
    /// the defaults that dynamic config records in the metadata log
    /// override (Kafka's `KafkaConfig` under `DynamicBrokerConfig`). The
    /// ELR feature is only in the log.
    pub fn from_properties(text: &str) -> Result<ClusterRules, String> {
        let mut rules = ClusterRules::default();
        for line in text.lines().map(str::trim) {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            rules.set(key.trim(), value.trim())?;
        }
        Ok(rules)
    }

    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "min.insync.replicas" => {
                self.min_isr = value
                    .parse()
                    .map_err(|_| format!("min.insync.replicas is {value:?}"))?
            }
            "unclean.leader.election.enable" => self.unclean = value.eq_ignore_ascii_case("true"),
            _ => {}
        }
        Ok(())
    }
}

impl Default for ClusterRules {
    /// Kafka's defaults: min.insync.replicas=1, ELR off until its feature
    /// is set, no unclean election.
    fn default() -> Self {
        ClusterRules {
            min_isr: 1,
            elr: false,
            unclean: false,
        }
    }
}

/// The partition as the controller's records leave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub leader: Option<BrokerId>,
    pub leader_epoch: i64,
    pub partition_epoch: i64,
    pub isr: Brokers,
    pub elr: Brokers,
    pub lke: Brokers,
    pub recovering: bool,
    /// The metadata record that made it, and its batch's CreateTime.
    pub offset: u64,
    pub create_ms: u64,
}

impl fmt::Display for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let leader = self.leader.map_or("none".to_string(), |l| l.to_string());
        write!(
            f,
            "leader {leader} epoch {} (partition epoch {}) ISR {:?} ELR {:?} last known ELR {:?}{}",
            self.leader_epoch,
            self.partition_epoch,
            self.isr,
            self.elr,
            self.lke,
            if self.recovering { " RECOVERING" } else { "" }
        )
    }
}

/// A broker as the controller has it registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Broker {
    fenced: bool,
    shutting_down: bool,
}

/// What the controller's half of a run showed.
#[derive(Clone, Debug, Default)]
pub struct ControllerValidation {
    pub rules: ClusterRules,
    pub batches: usize,
    /// Broker events (fence, shutdown, unfence, registration) explained.
    pub broker_events: usize,
    /// Partition changes explained as a model step.
    pub partition_changes: usize,
    /// Of them, those that named a new leader (or none).
    pub elections: usize,
    /// The partition after its creation and after each change, in order
    /// (index = partition epoch).
    pub registrations: Vec<Registration>,
    /// The partition's replicas, in Kafka's order (the model's replica `i`
    /// is `replicas[i]`); empty until the partition is created.
    pub replicas: Brokers,
    pub misfit: Option<String>,
    /// The misfit batch's CreateTime (to place it on a picture's time axis).
    pub misfit_ms: Option<u64>,
}

/// Validates the metadata log's batches for `topic`'s partition 0, under
/// the controller's static rules `rules` and what the log changes of them.
pub fn validate(batches: &[Batch], topic: &str, rules: ClusterRules) -> ControllerValidation {
    let mut v = ControllerValidation {
        rules,
        ..ControllerValidation::default()
    };
    let mut walk = Walk {
        topic: topic.to_string(),
        topic_id: None,
        replicas: Vec::new(),
        brokers: BTreeMap::new(),
        topic_configs: Vec::new(),
    };
    for batch in batches {
        v.batches += 1;
        if let Err(why) = walk.batch(batch, &mut v) {
            v.misfit = Some(format!(
                "metadata batch at offset {} does not fit the model's controller: {why}\n  records of the batch:\n{}  partition before it: {}\n  rules: {:?}",
                batch.base_offset,
                batch
                    .entries
                    .iter()
                    .map(|e| format!("    {}: {:?}\n", e.offset, e.record))
                    .collect::<String>(),
                v.registrations
                    .last()
                    .map_or("not created".to_string(), |r| r.to_string()),
                v.rules,
            ));
            v.misfit_ms = Some(batch.create_ms);
            v.replicas = walk.replicas;
            return v;
        }
    }
    v.replicas = walk.replicas;
    v
}

struct Walk {
    topic: String,
    topic_id: Option<String>,
    replicas: Brokers,
    brokers: BTreeMap<BrokerId, Broker>,
    /// Configs the topic sets itself: a cluster-wide value of the same
    /// name no longer applies to it (Kafka's topic config overrides the
    /// broker default).
    topic_configs: Vec<String>,
}

/// A broker event and the model events it may be.
struct BrokerEvent {
    entry: usize,
    broker: BrokerId,
    events: Vec<Event>,
    after: Broker,
}

impl Walk {
    fn ours(&self, topic_id: &str, partition: i64) -> bool {
        partition == 0 && self.topic_id.as_deref() == Some(topic_id)
    }

    fn batch(&mut self, batch: &Batch, v: &mut ControllerValidation) -> Result<(), String> {
        let mut broker_events = Vec::new();
        let mut changes: Vec<&Entry> = Vec::new();
        // Brokers as this batch's records leave them so far (one event may
        // write several records about the same broker).
        let mut status = self.brokers.clone();
        for (i, entry) in batch.entries.iter().enumerate() {
            match &entry.record {
                MetaRecord::Feature { name, level }
                    if name == "eligible.leader.replicas.version" =>
                {
                    v.rules.elr = *level >= 1
                }
                // Cluster-wide (broker resource, empty name) or this topic's.
                MetaRecord::Config {
                    resource_type,
                    resource,
                    name,
                    value,
                } if (*resource_type == 4 && resource.is_empty())
                    || (*resource_type == 2 && *resource == self.topic) =>
                {
                    let topic_level = *resource_type == 2;
                    if topic_level && !self.topic_configs.contains(name) {
                        self.topic_configs.push(name.clone());
                    }
                    // A deleted config (no value) falls back to the static
                    // one, which this does not track: refuse rather than guess.
                    match value {
                        Some(_) if !topic_level && self.topic_configs.contains(name) => {}
                        Some(value) => v.rules.set(name, value)?,
                        None if name == "min.insync.replicas"
                            || name == "unclean.leader.election.enable" =>
                        {
                            return Err(format!("{name} deleted: its fallback is not tracked"))
                        }
                        None => {}
                    }
                }
                MetaRecord::Topic { name, topic_id } if *name == self.topic => {
                    self.topic_id = Some(topic_id.clone())
                }
                MetaRecord::Partition {
                    topic_id,
                    partition,
                    replicas,
                    isr,
                    leader,
                    leader_epoch,
                    partition_epoch,
                    elr,
                    lke,
                    recovery_state,
                } if self.ours(topic_id, *partition) => {
                    if !v.registrations.is_empty() {
                        return Err("the partition is created twice".into());
                    }
                    if replicas.len() > 8 {
                        return Err(format!(
                            "{} replicas: the model has at most 8",
                            replicas.len()
                        ));
                    }
                    self.replicas = replicas.clone();
                    v.registrations.push(Registration {
                        leader: u32::try_from(*leader).ok(),
                        leader_epoch: *leader_epoch,
                        partition_epoch: *partition_epoch,
                        isr: isr.clone(),
                        elr: elr.clone(),
                        lke: lke.clone(),
                        recovering: *recovery_state == RECOVERING,
                        offset: entry.offset,
                        create_ms: entry.create_ms,
                    });
                }
                MetaRecord::PartitionChange {
                    topic_id,
                    partition,
                    ..
                } if self.ours(topic_id, *partition) => changes.push(entry),
                MetaRecord::RegisterBroker {
                    broker,
                    fenced,
                    in_controlled_shutdown,
                    ..
                } => {
                    let after = Broker {
                        fenced: *fenced,
                        shutting_down: *in_controlled_shutdown,
                    };
                    // A re-registration ends the old incarnation: cleanly
                    // (`handleBrokerShutdown`) or not
                    // (`handleBrokerUncleanShutdown`); the record does not say.
                    let events = match status.get(broker) {
                        Some(_) => self
                            .replica(*broker)
                            .map(|r| vec![Event::Fence(r), Event::UncleanShutdown(r)])
                            .unwrap_or_default(),
                        None => Vec::new(),
                    };
                    broker_events.push(BrokerEvent {
                        entry: i,
                        broker: *broker,
                        events,
                        after,
                    });
                }
                MetaRecord::BrokerChange {
                    broker,
                    fenced,
                    in_controlled_shutdown,
                    ..
                } => {
                    let before = status.get(broker).copied().ok_or_else(|| {
                        format!("a registration change for broker {broker}, never registered")
                    })?;
                    let mut after = before;
                    let mut events = Vec::new();
                    let r = self.replica(*broker);
                    // `handleBrokerFenced` and `handleBrokerInControlledShutdown`
                    // take the broker out of the ISR alike.
                    if *fenced == 1 || *in_controlled_shutdown == 1 {
                        after.fenced |= *fenced == 1;
                        after.shutting_down |= *in_controlled_shutdown == 1;
                        events.extend(r.map(Event::Fence));
                    } else if *fenced == -1 {
                        after.fenced = false;
                        events.extend(r.map(Event::Unfence));
                    }
                    broker_events.push(BrokerEvent {
                        entry: i,
                        broker: *broker,
                        events,
                        after,
                    });
                }
                MetaRecord::UnregisterBroker { broker } => {
                    broker_events.push(BrokerEvent {
                        entry: i,
                        broker: *broker,
                        events: self
                            .replica(*broker)
                            .map(Event::Fence)
                            .into_iter()
                            .collect(),
                        after: Broker {
                            fenced: true,
                            shutting_down: true,
                        },
                    });
                }
                _ => {}
            }
            if let Some(e) = broker_events.last().filter(|e| e.entry == i) {
                status.insert(e.broker, e.after);
            }
        }
        if v.registrations.is_empty() {
            // Before the partition exists only the brokers' status matters.
            for e in &broker_events {
                self.brokers.insert(e.broker, e.after);
            }
            return if changes.is_empty() {
                Ok(())
            } else {
                Err("a partition change before the partition's creation".into())
            };
        }
        v.broker_events += broker_events.len();
        let mut pending = changes.as_slice();
        for e in &broker_events {
            self.broker_event(batch, e, &mut pending, v)?;
            self.brokers.insert(e.broker, e.after);
        }
        // Changes no broker event made: the leader's AlterPartition or an
        // election the controller made on its own.
        for entry in pending {
            let current = v.registrations.last().expect("created");
            let mut candidates = vec![Event::ElectPreferred, Event::ElectUnclean];
            if let (Some(leader), MetaRecord::PartitionChange { isr: Some(isr), .. }) =
                (current.leader.and_then(|l| self.replica(l)), &entry.record)
            {
                candidates.insert(
                    0,
                    Event::AlterPartition {
                        leader,
                        isr: self.set(isr)?,
                    },
                );
            }
            let unfenced = self.unfenced();
            let wanted = self.apply(current, entry)?;
            let model = self.model(current)?;
            let fits = candidates.iter().any(|&event| {
                matches!(kafka_event(&v.rules.model(), &model, unfenced, event),
                    EventResult::Changed(o) if self.same(current, &o, &wanted))
            });
            if !fits {
                return Err(format!(
                    "partition change at offset {} ({:?}) is no AlterPartition from the leader and no election the model's controller makes: it would give {}",
                    entry.offset,
                    entry.record,
                    self.answers(current, &candidates, unfenced, v.rules.model())
                ));
            }
            self.record(v, wanted);
        }
        Ok(())
    }

    /// One broker event: the model's answer to it must be the next partition
    /// change of the batch (or none, when it leaves the partition as it is).
    fn broker_event(
        &self,
        batch: &Batch,
        e: &BrokerEvent,
        pending: &mut &[&Entry],
        v: &mut ControllerValidation,
    ) -> Result<(), String> {
        let current = v.registrations.last().expect("created").clone();
        let unfenced = self.unfenced();
        let rules = v.rules.model();
        let mut unchanged = false;
        for &event in &e.events {
            match kafka_event(&rules, &self.model(&current)?, unfenced, event) {
                EventResult::Changed(o) => {
                    if let Some((first, rest)) = pending.split_first() {
                        let wanted = self.apply(&current, first)?;
                        if self.same(&current, &o, &wanted) {
                            *pending = rest;
                            self.record(v, wanted);
                            return Ok(());
                        }
                    }
                }
                EventResult::Unchanged | EventResult::Refused(_) => unchanged = true,
            }
        }
        if e.events.is_empty() || unchanged {
            return Ok(());
        }
        let what = &batch.entries[e.entry];
        Err(match pending.first() {
            Some(next) => format!(
                "broker record at offset {} ({:?}) is followed by partition change {:?}, but the model's controller makes of it {}",
                what.offset,
                what.record,
                next.record,
                self.answers(&current, &e.events, unfenced, rules)
            ),
            None => format!(
                "broker record at offset {} ({:?}) changes nothing in the batch, but the model's controller makes of it {}",
                what.offset,
                what.record,
                self.answers(&current, &e.events, unfenced, rules)
            ),
        })
    }

    fn record(&self, v: &mut ControllerValidation, r: Registration) {
        v.partition_changes += 1;
        let before = v.registrations.last().expect("created");
        if r.leader_epoch != before.leader_epoch {
            v.elections += 1;
        }
        v.registrations.push(r);
    }

    /// What the model's controller makes of each of `events`, said.
    fn answers(
        &self,
        current: &Registration,
        events: &[Event],
        unfenced: ReplicaSet,
        rules: Rules,
    ) -> String {
        events
            .iter()
            .map(|&event| {
                let answer = match self.model(current) {
                    Ok(c) => match kafka_event(&rules, &c, unfenced, event) {
                        EventResult::Changed(o) => self.outcome_text(&o, current),
                        other => format!("{other:?}"),
                    },
                    Err(e) => e,
                };
                format!("{event:?} -> {answer}")
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn outcome_text(&self, o: &Outcome, current: &Registration) -> String {
        let names = |s: ReplicaSet| self.brokers_of(s);
        let leader = if o.epoch_bump {
            o.leader.map(|r| self.replicas[r as usize])
        } else {
            current.leader
        };
        format!(
            "leader {leader:?}{} ISR {:?} ELR {:?} last known ELR {:?}{}",
            if o.epoch_bump { " (new epoch)" } else { "" },
            names(o.isr),
            names(o.elr),
            names(o.lke),
            if o.recovering { " RECOVERING" } else { "" }
        )
    }

    /// `current` with a partition change record merged in, as Kafka's
    /// `PartitionRegistration.merge` does: a leader field (a new leader or
    /// none) bumps the leader epoch; every change bumps the partition epoch.
    fn apply(&self, current: &Registration, entry: &Entry) -> Result<Registration, String> {
        let MetaRecord::PartitionChange {
            leader,
            isr,
            elr,
            lke,
            replicas,
            recovery_state,
            ..
        } = &entry.record
        else {
            unreachable!("only partition changes are merged")
        };
        if replicas.as_ref().is_some_and(|r| *r != self.replicas) {
            return Err(format!(
                "partition change at offset {} reassigns the replicas to {replicas:?}: the model has a fixed replica set",
                entry.offset
            ));
        }
        let mut next = current.clone();
        if let Some(l) = leader {
            next.leader = u32::try_from(*l).ok();
            next.leader_epoch += 1;
        }
        if let Some(isr) = isr {
            next.isr = isr.clone();
        }
        if let Some(elr) = elr {
            next.elr = elr.clone();
        }
        if let Some(lke) = lke {
            next.lke = lke.clone();
        }
        if let Some(state) = recovery_state {
            next.recovering = *state == RECOVERING;
        }
        next.partition_epoch += 1;
        next.offset = entry.offset;
        next.create_ms = entry.create_ms;
        Ok(next)
    }

    /// Whether the model's outcome is Kafka's registration `wanted`.
    fn same(&self, current: &Registration, o: &Outcome, wanted: &Registration) -> bool {
        let set = |b: &Brokers| self.set(b).ok();
        let leader = if o.epoch_bump {
            o.leader.map(|r| self.replicas[r as usize])
        } else {
            current.leader
        };
        leader == wanted.leader
            && o.epoch_bump == (wanted.leader_epoch != current.leader_epoch)
            && Some(o.isr) == set(&wanted.isr)
            && Some(o.elr) == set(&wanted.elr)
            && Some(o.lke) == set(&wanted.lke)
            && o.recovering == wanted.recovering
    }

    fn replica(&self, broker: BrokerId) -> Option<u8> {
        self.replicas
            .iter()
            .position(|&b| b == broker)
            .map(|i| i as u8)
    }

    fn set(&self, brokers: &Brokers) -> Result<ReplicaSet, String> {
        brokers.iter().try_fold(ReplicaSet::EMPTY, |s, &b| {
            self.replica(b)
                .map(|r| s.with(r))
                .ok_or_else(|| format!("broker {b} is not a replica of the partition"))
        })
    }

    fn brokers_of(&self, s: ReplicaSet) -> Brokers {
        s.iter().map(|r| self.replicas[r as usize]).collect()
    }

    /// Kafka's acceptable leaders: registered, unfenced, not shutting down.
    fn unfenced(&self) -> ReplicaSet {
        self.brokers
            .iter()
            .filter(|(_, b)| !b.fenced && !b.shutting_down)
            .filter_map(|(&id, _)| self.replica(id))
            .fold(ReplicaSet::EMPTY, ReplicaSet::with)
    }

    /// The model's controller in Kafka's state (fencing is the `unfenced`
    /// argument of `kafka_event`, as in the differential test).
    fn model(&self, r: &Registration) -> Result<Controller<Unbounded>, String> {
        Ok(Controller {
            leader: r
                .leader
                .map(|l| {
                    self.replica(l)
                        .ok_or_else(|| format!("leader {l} is not a replica of the partition"))
                })
                .transpose()?,
            epoch: Some(0),
            isr: self.set(&r.isr)?,
            elr: self.set(&r.elr)?,
            lke: self.set(&r.lke)?,
            recovering: r.recovering,
            fenced: ReplicaSet::EMPTY,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(resource_type: i64, resource: &str, value: &str) -> Entry {
        Entry {
            offset: 0,
            create_ms: 0,
            record: MetaRecord::Config {
                resource_type,
                resource: resource.into(),
                name: "min.insync.replicas".into(),
                value: Some(value.into()),
            },
        }
    }

    #[test]
    fn a_topics_own_config_overrides_the_cluster_default_whatever_the_order() {
        let batch = |entries| Batch {
            base_offset: 0,
            create_ms: 0,
            entries,
        };
        let topic_first = [
            batch(vec![config(2, "soak", "3")]),
            batch(vec![config(4, "", "1")]),
        ];
        let v = validate(&topic_first, "soak", ClusterRules::default());
        assert_eq!((v.rules.min_isr, v.misfit), (3, None));
        let cluster_first = [
            batch(vec![config(4, "", "1")]),
            batch(vec![config(2, "soak", "3")]),
        ];
        assert_eq!(
            validate(&cluster_first, "soak", ClusterRules::default())
                .rules
                .min_isr,
            3
        );
        // Another topic's config is not this one's.
        let other = [batch(vec![config(2, "other", "3")])];
        assert_eq!(
            validate(&other, "soak", ClusterRules::default())
                .rules
                .min_isr,
            1
        );
    }

    #[test]
    fn the_controllers_static_rules_are_read() {
        let rules = ClusterRules::from_properties(
            "# comment\nmin.insync.replicas = 3\nunclean.leader.election.enable=TRUE\nother=x\n",
        )
        .unwrap();
        assert_eq!(
            rules,
            ClusterRules {
                min_isr: 3,
                elr: false,
                unclean: true
            }
        );
        assert_eq!(
            ClusterRules::from_properties("").unwrap(),
            ClusterRules::default()
        );
        let err = ClusterRules::from_properties("min.insync.replicas=two").unwrap_err();
        assert!(err.contains("two"), "{err}");
    }
}
