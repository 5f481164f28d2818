//! The controller's decisions, read from its metadata log
//! (`__cluster_metadata-0`) as Kafka's own `DumpLogSegments
//! --cluster-metadata-decoder` prints it: one total order of every broker
//! registration, fence, unfence and controlled shutdown, and every change
//! to the partition. Records written for one controller event share a
//! batch, which Kafka appends atomically (`QuorumController`'s
//! `ControllerWriteEvent`); a batch is the unit the validator explains.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::kafka_cluster::programs::{run_bounded, Programs};
use crate::kafka_cluster::Result;

/// A broker id, as Kafka numbers brokers.
pub type BrokerId = u32;

/// A partition's replica list, ISR or ELR, in Kafka's broker ids.
pub type Brokers = Vec<BrokerId>;

/// The leader recovery state (`LeaderRecoveryState`): 0 recovered, 1 recovering.
pub const RECOVERING: i64 = 1;

/// One metadata record the validator reads; the rest are `Other`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaRecord {
    /// `FeatureLevelRecord`: e.g. `eligible.leader.replicas.version`.
    Feature {
        name: String,
        level: i64,
    },
    /// `ConfigRecord`: a dynamic config; resource type 4 with an empty
    /// name is the cluster-wide broker default, 2 a topic's.
    Config {
        resource_type: i64,
        resource: String,
        name: String,
        value: Option<String>,
    },
    /// `RegisterBrokerRecord`: a broker (re-)registers, fenced.
    RegisterBroker {
        broker: BrokerId,
        epoch: i64,
        fenced: bool,
        in_controlled_shutdown: bool,
    },
    /// `BrokerRegistrationChangeRecord`: fenced 1 fences, -1 unfences, 0
    /// (absent) leaves it; in controlled shutdown 1 starts one.
    BrokerChange {
        broker: BrokerId,
        epoch: i64,
        fenced: i64,
        in_controlled_shutdown: i64,
    },
    UnregisterBroker {
        broker: BrokerId,
    },
    Topic {
        name: String,
        topic_id: String,
    },
    /// `PartitionRecord`: the partition as created.
    Partition {
        topic_id: String,
        partition: i64,
        replicas: Brokers,
        isr: Brokers,
        leader: i64,
        leader_epoch: i64,
        partition_epoch: i64,
        elr: Brokers,
        lke: Brokers,
        recovery_state: i64,
    },
    /// `PartitionChangeRecord`: each field absent is unchanged (leader -2,
    /// recovery state -1, the lists null).
    PartitionChange {
        topic_id: String,
        partition: i64,
        leader: Option<i64>,
        isr: Option<Brokers>,
        elr: Option<Brokers>,
        lke: Option<Brokers>,
        replicas: Option<Brokers>,
        recovery_state: Option<i64>,
    },
    Other {
        kind: String,
    },
}

/// One record and where it sits in the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub offset: u64,
    /// The batch's CreateTime: ms since the epoch, on the controller's clock.
    pub create_ms: u64,
    pub record: MetaRecord,
}

/// The records of one batch, in log order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub base_offset: u64,
    pub create_ms: u64,
    pub entries: Vec<Entry>,
}

/// Runs Kafka's `DumpLogSegments` over the controller's metadata log
/// segments in `dir` (`__cluster_metadata-0`) and returns its output.
pub fn dump(programs: &Programs, dir: &Path) -> Result<String> {
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    let Some(first) = logs.first() else {
        return Err(format!("{} holds no .log segment", dir.display()));
    };
    // A history that starts past offset 0 was cleaned into a snapshot: the
    // changes before it are gone, and nothing could be explained from the start.
    if first.file_stem().and_then(|s| s.to_str()) != Some("00000000000000000000") {
        return Err(format!(
            "the metadata log in {} starts at {}: its beginning is only in a snapshot",
            dir.display(),
            first.display()
        ));
    }
    let files: Vec<String> = logs.iter().map(|p| p.display().to_string()).collect();
    let mut cmd = programs.tool("org.apache.kafka.tools.DumpLogSegments");
    cmd.arg("--cluster-metadata-decoder")
        .arg("--files")
        .arg(files.join(","));
    run_bounded(cmd, "DumpLogSegments", Duration::from_secs(120))
}

/// The batches in `dump`'s output, in log order. A line that looks like a
/// record but does not parse is an error naming it: a silently skipped
/// record would make the validation say less than it claims.
pub fn parse(dump: &str) -> Result<Vec<Batch>> {
    let mut batches: Vec<Batch> = Vec::new();
    for (n, line) in dump.lines().enumerate() {
        let at = |why: String| format!("metadata dump line {}: {why}: {line}", n + 1);
        if let Some(rest) = line.strip_prefix("baseOffset: ") {
            let base_offset =
                number_after(rest, "", " ").ok_or_else(|| at("no base offset".into()))?;
            let create_ms = number_after(line, "CreateTime: ", " ")
                .ok_or_else(|| at("no CreateTime".into()))?;
            batches.push(Batch {
                base_offset,
                create_ms,
                entries: Vec::new(),
            });
            continue;
        }
        let Some(rest) = line.strip_prefix("| offset: ") else {
            continue;
        };
        let offset = number_after(rest, "", " ").ok_or_else(|| at("no offset".into()))?;
        let create_ms =
            number_after(line, "CreateTime: ", " ").ok_or_else(|| at("no CreateTime".into()))?;
        // Control records (LeaderChange, KRaftVersion, KRaftVoters) have no payload.
        let record = match line.split_once(" payload: ") {
            Some((_, json)) => {
                let value: Value =
                    serde_json::from_str(json).map_err(|e| at(format!("payload: {e}")))?;
                record(&value).map_err(at)?
            }
            None => MetaRecord::Other {
                kind: "control".into(),
            },
        };
        let batch = batches
            .last_mut()
            .ok_or_else(|| at("a record before any batch header".into()))?;
        batch.entries.push(Entry {
            offset,
            create_ms,
            record,
        });
    }
    Ok(batches)
}

fn number_after(text: &str, key: &str, end: &str) -> Option<u64> {
    let start = text.find(key)? + key.len();
    let rest = &text[start..];
    let stop = rest.find(end).unwrap_or(rest.len());
    rest[..stop].trim().parse().ok()
}

/// One payload (`{"type": ..., "version": ..., "data": {...}}`) as a record.
fn record(v: &Value) -> std::result::Result<MetaRecord, String> {
    let kind = v["type"].as_str().ok_or("no type")?;
    let d = &v["data"];
    let int = |k: &str| d[k].as_i64().ok_or(format!("{kind} without {k}"));
    let int_or = |k: &str, default: i64| d.get(k).and_then(Value::as_i64).unwrap_or(default);
    let text = |k: &str| {
        d[k].as_str()
            .map(str::to_string)
            .ok_or(format!("{kind} without {k}"))
    };
    let brokers = |k: &str| -> std::result::Result<Option<Brokers>, String> {
        match d.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|b| {
                    b.as_u64()
                        .and_then(|b| BrokerId::try_from(b).ok())
                        .ok_or(format!("{kind}: {k} holds {b}"))
                })
                .collect::<std::result::Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(format!("{kind}: {k} is {other}")),
        }
    };
    let broker = |k: &str| -> std::result::Result<BrokerId, String> {
        BrokerId::try_from(int(k)?).map_err(|_| format!("{kind}: {k} out of range"))
    };
    Ok(match kind {
        "FEATURE_LEVEL_RECORD" => MetaRecord::Feature {
            name: text("name")?,
            level: int("featureLevel")?,
        },
        "CONFIG_RECORD" => MetaRecord::Config {
            resource_type: int("resourceType")?,
            resource: text("resourceName")?,
            name: text("name")?,
            value: d["value"].as_str().map(str::to_string),
        },
        "REGISTER_BROKER_RECORD" => MetaRecord::RegisterBroker {
            broker: broker("brokerId")?,
            epoch: int("brokerEpoch")?,
            fenced: d["fenced"].as_bool().unwrap_or(true),
            in_controlled_shutdown: d["inControlledShutdown"].as_bool().unwrap_or(false),
        },
        "BROKER_REGISTRATION_CHANGE_RECORD" => MetaRecord::BrokerChange {
            broker: broker("brokerId")?,
            epoch: int("brokerEpoch")?,
            fenced: int_or("fenced", 0),
            in_controlled_shutdown: int_or("inControlledShutdown", 0),
        },
        "UNREGISTER_BROKER_RECORD" => MetaRecord::UnregisterBroker {
            broker: broker("brokerId")?,
        },
        "TOPIC_RECORD" => MetaRecord::Topic {
            name: text("name")?,
            topic_id: text("topicId")?,
        },
        "PARTITION_RECORD" => MetaRecord::Partition {
            topic_id: text("topicId")?,
            partition: int("partitionId")?,
            replicas: brokers("replicas")?.ok_or("PARTITION_RECORD without replicas")?,
            isr: brokers("isr")?.ok_or("PARTITION_RECORD without isr")?,
            leader: int("leader")?,
            leader_epoch: int("leaderEpoch")?,
            partition_epoch: int("partitionEpoch")?,
            elr: brokers("eligibleLeaderReplicas")?.unwrap_or_default(),
            lke: brokers("lastKnownElr")?.unwrap_or_default(),
            recovery_state: int_or("leaderRecoveryState", 0),
        },
        "PARTITION_CHANGE_RECORD" => MetaRecord::PartitionChange {
            topic_id: text("topicId")?,
            partition: int("partitionId")?,
            leader: Some(int_or("leader", -2)).filter(|&l| l != -2),
            isr: brokers("isr")?,
            elr: brokers("eligibleLeaderReplicas")?,
            lke: brokers("lastKnownElr")?,
            replicas: brokers("replicas")?,
            recovery_state: Some(int_or("leaderRecoveryState", -1)).filter(|&r| r != -1),
        },
        other => MetaRecord::Other {
            kind: other.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = r#"Dumping x/00000000000000000000.log
baseOffset: 39 lastOffset: 40 count: 2 baseSequence: -1 CreateTime: 1796307807916 size: 1 magic: 2
| offset: 39 CreateTime: 1796307807916 keySize: -1 valueSize: 19 sequence: -1 headerKeys: [] payload: {"type":"BROKER_REGISTRATION_CHANGE_RECORD","version":1,"data":{"brokerId":2,"brokerEpoch":15,"inControlledShutdown":1}}
| offset: 40 CreateTime: 1796307807916 keySize: -1 valueSize: 41 sequence: -1 headerKeys: [] payload: {"type":"PARTITION_CHANGE_RECORD","version":2,"data":{"partitionId":0,"topicId":"T","isr":[3,1],"leader":3}}
"#;

    #[test]
    fn a_batch_and_its_records_are_read() {
        let batches = parse(DUMP).unwrap();
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].base_offset, 39);
        assert_eq!(batches[0].create_ms, 1796307807916);
        assert_eq!(
            batches[0].entries[0].record,
            MetaRecord::BrokerChange {
                broker: 2,
                epoch: 15,
                fenced: 0,
                in_controlled_shutdown: 1
            }
        );
        assert_eq!(
            batches[0].entries[1].record,
            MetaRecord::PartitionChange {
                topic_id: "T".into(),
                partition: 0,
                leader: Some(3),
                isr: Some(vec![3, 1]),
                elr: None,
                lke: None,
                replicas: None,
                recovery_state: None,
            }
        );
    }

    #[test]
    fn a_record_that_does_not_parse_is_named() {
        let broken = DUMP.replace(r#""isr":[3,1]"#, r#""isr":"x""#);
        let err = parse(&broken).unwrap_err();
        assert!(err.contains("line 4") && err.contains("isr"), "{err}");
        let orphan = DUMP.lines().skip(2).collect::<Vec<_>>().join("\n");
        assert!(parse(&orphan).unwrap_err().contains("before any batch"));
    }
}
