//! The follower's side of [`Partition`] (Kafka's `ReplicaFetcherThread`):
//! the OffsetsForLeaderEpoch exchange that finds where to truncate, then
//! fetching, appending and taking the leader's HW.

use super::error::{Error, Result};
use super::log::StorageOp;
use super::messages::{
    ApiError, FetchRequest, FetchResponse, OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse, Output,
};
use super::partition::{Partition, Pending, Phase, Ready, RoleState};
use super::truncation::{follower_truncation, truncation_on_fetch, TruncationStep};
use super::types::TruncationMode;
use crate::storage::EpochEndOffset;

impl Partition {
    /// A follower sends its next request: an OffsetsForLeaderEpoch for the
    /// latest epoch in its log while truncating, else a fetch from its LEO.
    /// Refused when it follows no one or has a request in flight (not yet
    /// timed out).
    pub(super) fn send_request(&mut self, now: u64) -> Result<Ready> {
        let (Some(epoch), RoleState::Follower(f)) = (self.leader_epoch, &self.role) else {
            return Err(Error::not_enabled(format!(
                "replica {} follows no leader",
                self.id
            )));
        };
        if !Self::may_send(f.in_flight, now, self.request_timeout_ms) {
            return Err(Error::not_enabled(format!(
                "replica {} has a request in flight",
                self.id
            )));
        }
        let (leader, phase) = (f.leader, f.phase);
        let latest = self.log.latest_epoch();
        if phase == Phase::Truncating && latest.is_none() {
            // Never so: an empty log ends the exchange when it empties.
            return Err(Error::not_enabled("an empty log has nothing to ask"));
        }
        let correlation_id = self.next_correlation_id();
        if let RoleState::Follower(f) = &mut self.role {
            f.in_flight = Some((correlation_id, now));
        }
        let out = match (phase, latest) {
            (Phase::Truncating, Some(latest)) => Output::OffsetsForLeaderEpoch {
                to: leader,
                request: OffsetsForLeaderEpochRequest {
                    correlation_id,
                    replica_id: self.id,
                    current_leader_epoch: epoch,
                    leader_epoch: latest,
                },
            },
            _ => Output::Fetch {
                to: leader,
                request: FetchRequest {
                    correlation_id,
                    replica_id: self.id,
                    fetch_offset: self.log.log_end_offset,
                    current_leader_epoch: epoch,
                    max_bytes: self.config.replica_fetch_max_bytes,
                    // Kafka's `PartitionFetchState.lastFetchedEpoch`: the
                    // latest epoch in the log (`UnifiedLog.latestEpoch`).
                    last_fetched_epoch: latest
                        .filter(|_| self.config.truncation == TruncationMode::OnFetch),
                },
            },
        };
        Ok(Ready::Send(vec![out]))
    }

    /// Whether `correlation_id` from `leader` answers the request in flight
    /// in `phase`.
    fn answers(&self, phase: Phase, leader: u32, correlation_id: u64) -> bool {
        matches!(&self.role, RoleState::Follower(f)
            if f.phase == phase
                && f.leader == leader
                && f.in_flight.map(|(c, _)| c) == Some(correlation_id))
    }

    /// The request in flight has its answer.
    pub(super) fn fetch_answered(&mut self) {
        if let RoleState::Follower(f) = &mut self.role {
            f.in_flight = None;
        }
    }

    // --- Truncation (KIP-101, KIP-279, KIP-320) ---------------------------------

    /// The follower takes the leader's answer: truncates, and either asks
    /// again (KIP-279) or starts fetching. A late or unexpected answer is
    /// ignored; an error leaves it truncating, to ask again later.
    pub(super) fn on_offsets_for_leader_epoch_response(
        &mut self,
        resp: &OffsetsForLeaderEpochResponse,
    ) -> Ready {
        if !self.answers(Phase::Truncating, resp.leader_id, resp.correlation_id) {
            return Ready::none();
        }
        if resp.error.is_some() {
            self.fetch_answered();
            return Ready::none();
        }
        let answer = match (resp.leader_epoch, resp.end_offset) {
            (Some(epoch), Some(end_offset)) => Some(EpochEndOffset { epoch, end_offset }),
            _ => None,
        };
        let leo = self.log.log_end_offset;
        let step = follower_truncation(
            self.config.truncation,
            &self.log.epochs,
            leo,
            self.log.high_watermark,
            answer,
        );
        let (offset, done) = match step {
            TruncationStep::Done(o) => (o, true),
            // Each round cuts the follower's latest epoch away; one that
            // would not (a malformed answer) ends the exchange rather than
            // asking the same question forever.
            TruncationStep::Continue(o) => (o, o >= leo),
        };
        if offset < leo {
            return self.persist(
                StorageOp::Truncate {
                    offset,
                    checkpoint: self.checkpoint_every_hw(),
                },
                Pending::ExchangeTruncation { done },
            );
        }
        self.exchange_step_done(done);
        Ready::none()
    }

    /// One round of the exchange is done (its truncation, if any, complete).
    pub(super) fn exchange_step_done(&mut self, done: bool) {
        self.fetch_answered();
        if done {
            if let RoleState::Follower(f) = &mut self.role {
                f.phase = Phase::Fetching;
            }
        }
        self.maybe_finish_truncation();
    }

    /// An empty log has nothing to ask about: fetch at once.
    pub(super) fn maybe_finish_truncation(&mut self) {
        if self.log.latest_epoch().is_none() {
            if let RoleState::Follower(f) = &mut self.role {
                if f.phase == Phase::Truncating {
                    f.phase = Phase::Fetching;
                    f.in_flight = None;
                }
            }
        }
    }

    // --- Fetch --------------------------------------------------------------

    /// The follower takes a fetch response (the follower's half of the
    /// model's FollowerFetch; `ReplicaFetcherThread.processPartitionData`):
    /// appends the records, then sets its HW to min(leader's HW, own LEO).
    /// OffsetOutOfRange with a leader behind it cuts its log back to the
    /// leader's LEO; a diverging epoch cuts it where the model's
    /// `fetch_divergence` says (`AbstractFetcherThread.truncateOnFetchResponse`),
    /// and the next fetch carries its new latest epoch. Late responses are
    /// ignored.
    pub(super) fn on_fetch_response(&mut self, resp: FetchResponse) -> Ready {
        if !self.answers(Phase::Fetching, resp.leader_id, resp.correlation_id) {
            return Ready::none();
        }
        let leo = self.log.log_end_offset;
        if resp.fetch_offset != leo {
            self.fetch_answered();
            return Ready::none();
        }
        match resp.error {
            None => {}
            Some(ApiError::OffsetOutOfRange) if leo > resp.log_end_offset => {
                return self.persist(
                    StorageOp::Truncate {
                        offset: resp.log_end_offset,
                        checkpoint: self.checkpoint_every_hw(),
                    },
                    Pending::OutOfRangeTruncation,
                );
            }
            Some(_) => {
                self.fetch_answered();
                return Ready::none();
            }
        }
        if let Some(d) = resp.diverging_epoch {
            let offset = truncation_on_fetch(&self.log.epochs, leo, d);
            if offset < leo {
                return self.persist(
                    StorageOp::Truncate {
                        offset,
                        checkpoint: self.checkpoint_every_hw(),
                    },
                    Pending::DivergingTruncation,
                );
            }
            self.fetch_answered();
            return Ready::none();
        }
        let checkpoint = self.checkpoint_every_hw();
        if !resp.records.is_empty() {
            return self.persist(
                StorageOp::AppendAsFollower {
                    batches: resp.records,
                    high_watermark: resp.high_watermark,
                    checkpoint,
                },
                Pending::FetchApplied,
            );
        }
        // Nothing to append: the HW, capped at the LEO, if it moves.
        let hw = resp.high_watermark.min(self.log.log_end_offset);
        if hw == self.log.high_watermark {
            self.fetch_answered();
            return Ready::none();
        }
        self.persist(
            StorageOp::SetHighWatermark { hw, checkpoint },
            Pending::FetchApplied,
        )
    }
}
