//! Topic-partition names and the `<topic>-<partition>` directory name.

use std::fmt;

use super::error::Error;

/// A topic and partition number; ordered by topic, then partition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    topic: String,
    partition: u32,
}

/// Kafka's limit on topic name length.
pub const MAX_TOPIC_LENGTH: usize = 249;

impl TopicPartition {
    /// Checks the topic name as Kafka does (`Topic.validate`): 1 to 249
    /// characters from `[a-zA-Z0-9._-]`, and not `.` or `..`.
    pub fn new(topic: &str, partition: u32) -> Result<TopicPartition, Error> {
        let bad = |reason: &str| Error::BadTopicPartition {
            name: format!("{topic}-{partition}"),
            reason: reason.to_owned(),
        };
        if topic.is_empty() || topic.len() > MAX_TOPIC_LENGTH {
            return Err(bad("a topic name has 1 to 249 characters"));
        }
        if topic == "." || topic == ".." {
            return Err(bad("a topic cannot be named \".\" or \"..\""));
        }
        if !topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        {
            return Err(bad("a topic name uses only [a-zA-Z0-9._-]"));
        }
        if partition > i32::MAX as u32 {
            return Err(bad("partition numbers are non-negative 32-bit integers"));
        }
        Ok(TopicPartition {
            topic: topic.to_owned(),
            partition,
        })
    }

    /// Parses a partition directory name `<topic>-<partition>`; the topic
    /// may itself contain `-`, so the partition follows the last one.
    pub fn parse_dir_name(name: &str) -> Result<TopicPartition, Error> {
        let bad = |reason: &str| Error::BadTopicPartition {
            name: name.to_owned(),
            reason: reason.to_owned(),
        };
        let (topic, partition) = name
            .rsplit_once('-')
            .ok_or_else(|| bad("expected <topic>-<partition>"))?;
        if partition.is_empty() || !partition.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("the partition after the last '-' is not a number"));
        }
        let partition: u32 = partition
            .parse()
            .map_err(|_| bad("partition number out of range"))?;
        TopicPartition::new(topic, partition)
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }
    pub fn partition(&self) -> u32 {
        self.partition
    }
    /// `<topic>-<partition>`, the partition directory's name.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_names() {
        let tp = TopicPartition::parse_dir_name("my-topic-12").unwrap();
        assert_eq!((tp.topic(), tp.partition()), ("my-topic", 12));
        assert_eq!(tp.dir_name(), "my-topic-12");
        for bad in [
            "topic",
            "topic-",
            "-3",
            "t-x",
            "t-+1",
            "bad topic-0",
            "t-99999999999",
        ] {
            assert!(TopicPartition::parse_dir_name(bad).is_err(), "{bad}");
        }
    }
}
