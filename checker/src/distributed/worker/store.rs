//! The nodes a worker owns: its share of the state graph.

use super::Index;
use crate::graph::flag;

/// The nodes a worker owns.
#[derive(Default)]
pub(super) struct Store {
    pub(super) index: Index,
    pub(super) fps: Vec<u64>,
    /// The parent's fingerprint (its own for an initial state).
    pub(super) parent: Vec<u64>,
    pub(super) depth: Vec<u8>,
    pub(super) flags: Vec<u8>,
    /// The rank in its level (states of the bounded model).
    pub(super) rank: Vec<u32>,
    pub(super) edge_start: Vec<u32>,
    pub(super) edge_len: Vec<u16>,
    /// Fault-free edges, by target fingerprint.
    pub(super) edges: Vec<u64>,
    /// The edge count and the store's bytes when the edges were given up
    /// (the progress check holds them at their targets instead).
    pub(super) dropped: Option<(u64, u64)>,
}

impl Store {
    pub(super) fn add(&mut self, fp: u64, parent: u64, depth: u8, flags: u8) -> u32 {
        let n = u32::try_from(self.fps.len()).expect("fewer than 2^32 states per worker");
        self.index.insert(fp, n);
        self.fps.push(fp);
        self.parent.push(parent);
        self.depth.push(depth);
        self.flags.push(flags);
        self.rank.push(0);
        self.edge_start.push(0);
        self.edge_len.push(0);
        n
    }
    pub(super) fn in_bounds(&self, n: u32) -> bool {
        self.flags[n as usize] & flag::IN_BOUNDS != 0
    }
    /// The fault-free edges kept.
    pub(super) fn edge_count(&self) -> u64 {
        self.dropped
            .map_or(self.edges.len() as u64, |(edges, _)| edges)
    }
    /// Frees the outgoing edges, keeping their figures.
    pub(super) fn drop_edges(&mut self) {
        self.dropped = Some((self.edge_count(), self.bytes()));
        self.edges = Vec::new();
        self.edge_start = Vec::new();
        self.edge_len = Vec::new();
    }
    pub(super) fn bytes(&self) -> u64 {
        if let Some((_, bytes)) = self.dropped {
            return bytes;
        }
        let per_node = 8 + 8 + 1 + 1 + 4 + 4 + 2;
        // The map's buckets: an entry (padded to 16 bytes) and a control
        // byte each, one in eight kept empty.
        let per_entry = (std::mem::size_of::<(u64, u32)>() + 1) * 8 / 7;
        (self.fps.capacity() * per_node
            + self.index.capacity() * per_entry
            + self.edges.capacity() * 8) as u64
    }
}
