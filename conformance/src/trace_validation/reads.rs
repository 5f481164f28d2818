//! Consumer reads, validated against the model's visibility.
//!
//! A consumer's read changes no replica, so it is no model action: it is
//! checked against the model's state where the trace places it. Each record
//! read must be, in that state, the record at the offset read, and visible
//! (`RecordHistory::visible`: below some presumed leader's HW at some
//! epoch, the model's `publish_visible`). The model's visibility only
//! grows, and the driver traces a read after the event that set the HW it
//! read below (`ReplicaNode::publish_hw`), so a read traced late is still
//! judged right; a read of a record no leader had yet committed (a read
//! above the HW) is a misfit. The bound the consumer read below must also
//! be at most the HW its leader holds, while that leader still leads in
//! the epoch it was read in (an HW only grows within an epoch).

use highwater::cluster::{Event, TraceEntry};
use highwater::replication::{LeaderEpoch, RecordId, ReplicaId};
use highwater_model::state::{Num, Shape};
use highwater_model::State;

use super::rebuild::Rebuild;
use super::window::Window;
use super::Unsound;

/// One traced read.
#[derive(Debug, Clone, Copy)]
pub struct Read<'a> {
    pub leader: ReplicaId,
    pub epoch: LeaderEpoch,
    pub high_watermark: u64,
    pub from: u64,
    pub records: &'a [Option<RecordId>],
}

/// The read an entry traces, if it is one.
pub fn read_of(entry: &TraceEntry) -> Option<Read<'_>> {
    match &entry.event {
        Event::ConsumerRead {
            leader,
            epoch,
            high_watermark,
            from,
            records,
        } => Some(Read {
            leader: *leader,
            epoch: *epoch,
            high_watermark: *high_watermark,
            from: *from,
            records,
        }),
        _ => None,
    }
}

/// What a read's check looked at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadChecked {
    /// Records found visible in the model, at the offset read.
    pub visible: u64,
    /// Records the window had dropped: settled, so committed on every
    /// replica when they were dropped (`window::settled`).
    pub settled: u64,
}

/// Checks `read` against the model's state `model`, the implementation's
/// records named through the window as the model names them.
pub fn check_read<S: Shape>(
    model: &State<S>,
    window: &Window,
    rebuild: &Rebuild,
    read: &Read,
) -> Result<ReadChecked, String> {
    let end = read.from + read.records.len() as u64;
    if end > read.high_watermark {
        return Err(format!(
            "a consumer read offsets {}..{end} from replica {}, past the HW {} it read below",
            read.from, read.leader, read.high_watermark
        ));
    }
    let bound_checked = rebuild.unsound != Some(Unsound::ReadBoundUnchecked);
    if let Some(hw) = rebuild
        .hw_leading_in(read.leader, read.epoch)
        .filter(|_| bound_checked)
    {
        if read.high_watermark > hw {
            return Err(format!(
                "a consumer read below HW {} from replica {}, which leads in epoch {} with HW {hw}",
                read.high_watermark, read.leader, read.epoch
            ));
        }
    }
    let mut checked = ReadChecked::default();
    for (i, id) in read.records.iter().enumerate() {
        let offset = read.from + i as u64;
        let Some(id) = *id else {
            continue;
        };
        let Some(ours) = rebuild.record_number(id) else {
            return Err(format!(
                "a consumer read record {id} at offset {offset}, which no leader appended"
            ));
        };
        let Some(theirs) = window.model_id(ours) else {
            checked.settled += 1;
            continue;
        };
        let history = usize::try_from(theirs)
            .ok()
            .and_then(|i| model.produced_records().get(i));
        let Some(h) = history else {
            return Err(format!(
                "a consumer read record {id} at offset {offset}, which the model has not produced"
            ));
        };
        let at = h.offset.idx() as u64 + window.base;
        if at != offset {
            return Err(format!(
                "a consumer read record {id} at offset {offset}, which the model appended at {at}"
            ));
        }
        if h.visible.is_none() {
            return Err(format!(
                "a consumer read record {id} at offset {offset} from replica {} (below HW {} of \
                 epoch {}), and in the model no leader has had it below its HW: not visible",
                read.leader, read.high_watermark, read.epoch
            ));
        }
        checked.visible += 1;
    }
    Ok(checked)
}
