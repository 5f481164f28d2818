//! The search's queues of states: the level being expanded, the next
//! level, the recovery states, and the states an expansion hands to the
//! merge.
//!
//! A model that packs its states ([`Checkable::PACKS`]) has them held as
//! bytes, one state after another in a byte arena, with one length each:
//! no heap allocation per state, and a state takes its packed size (about
//! half of a whole one for highwater's model) instead of its whole size.
//! A state is unpacked once, when it is expanded. A model that does not
//! pack has its states held whole.
//!
//! A queue is a list of blocks of [`Queue::block_len`] states each, the
//! search's batch: a level is expanded block by block, and each block is
//! freed once its batch is expanded, so that the level being expanded
//! shrinks while the next one grows.

use crate::graph::NodeId;
use crate::Checkable;
use std::borrow::Cow;
use std::collections::VecDeque;

/// States in order, packed or whole.
pub(crate) struct States<S> {
    /// Packed: each state's length in `bytes`.
    lens: Vec<u16>,
    bytes: Vec<u8>,
    /// Whole (a model that does not pack).
    whole: Vec<S>,
}

impl<S> Default for States<S> {
    fn default() -> Self {
        States {
            lens: Vec::new(),
            bytes: Vec::new(),
            whole: Vec::new(),
        }
    }
}

/// One state taken out of [`States`]: its packed bytes, or itself.
pub(crate) enum Taken<'a, S> {
    Packed(&'a [u8]),
    Whole(S),
}

impl<S> States<S> {
    pub(crate) fn len(&self) -> usize {
        self.lens.len() + self.whole.len()
    }

    /// Keeps `state`'s representative and returns its fingerprint: that of
    /// its packed bytes, when the model packs (they are what its `Hash`
    /// writes, [`Checkable::pack`]), so that the state is encoded once, and
    /// packed without being built ([`Checkable::pack_representative`]).
    #[inline]
    pub(crate) fn push_representative<M: Checkable<State = S>>(
        &mut self,
        model: &M,
        state: &S,
    ) -> u64
    where
        S: std::hash::Hash,
    {
        if M::PACKS {
            let start = self.bytes.len();
            model.pack_representative(state, &mut self.bytes);
            let packed = &self.bytes[start..];
            self.lens.push(packed_len(packed.len()));
            crate::fingerprint_of_packed(packed)
        } else {
            let rep = model.representative(state);
            let fp = crate::fingerprint_of_representative(&rep);
            self.whole.push(rep);
            fp
        }
    }

    pub(crate) fn push(&mut self, state: Taken<'_, S>) {
        match state {
            Taken::Packed(bytes) => {
                self.lens.push(packed_len(bytes.len()));
                self.bytes.extend_from_slice(bytes);
            }
            Taken::Whole(s) => self.whole.push(s),
        }
    }

    /// Every state, in order, moved out (packed ones borrowed); the
    /// storage is left to be [`clear`](Self::clear)ed.
    pub(crate) fn drain(&mut self) -> Drain<'_, S> {
        Drain {
            lens: self.lens.iter(),
            bytes: &self.bytes,
            at: 0,
            whole: self.whole.drain(..),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.lens.clear();
        self.bytes.clear();
        self.whole.clear();
    }

    /// The bytes the states take (by length).
    pub(crate) fn bytes(&self) -> u64 {
        (self.lens.len() * size_of::<u16>() + self.bytes.len() + self.whole.len() * size_of::<S>())
            as u64
    }

    /// The bytes the buffers hold (by capacity: they are filled, cleared
    /// and filled again).
    pub(crate) fn capacity_bytes(&self) -> u64 {
        (self.lens.capacity() * size_of::<u16>()
            + self.bytes.capacity()
            + self.whole.capacity() * size_of::<S>()) as u64
    }
}

#[inline]
fn packed_len(len: usize) -> u16 {
    u16::try_from(len).expect("a packed state takes at most 65,535 bytes")
}

/// [`States::drain`].
pub(crate) struct Drain<'a, S> {
    lens: std::slice::Iter<'a, u16>,
    bytes: &'a [u8],
    at: usize,
    whole: std::vec::Drain<'a, S>,
}

impl<'a, S> Iterator for Drain<'a, S> {
    type Item = Taken<'a, S>;

    #[inline]
    fn next(&mut self) -> Option<Taken<'a, S>> {
        if let Some(&len) = self.lens.next() {
            let end = self.at + len as usize;
            let bytes = &self.bytes[self.at..end];
            self.at = end;
            return Some(Taken::Packed(bytes));
        }
        self.whole.next().map(Taken::Whole)
    }
}

/// A block of a queue: at most [`Queue::block_len`] states with their
/// nodes.
pub(crate) struct Block<S> {
    nodes: Vec<NodeId>,
    states: States<S>,
}

impl<S> Block<S> {
    pub(crate) fn slice(&self) -> Slice<'_, S> {
        Slice {
            nodes: &self.nodes,
            lens: &self.states.lens,
            bytes: &self.states.bytes,
            whole: &self.states.whole,
        }
    }

    fn bytes(&self) -> u64 {
        (self.nodes.len() * size_of::<NodeId>()) as u64 + self.states.bytes()
    }
}

/// A queue of states, each with its node, in blocks.
pub(crate) struct Queue<S> {
    blocks: VecDeque<Block<S>>,
    block_len: usize,
    len: usize,
    /// What the blocks take, by length ([`Queue::bytes`]).
    bytes: u64,
}

impl<S> Queue<S> {
    /// An empty queue of blocks of `block_len` states.
    pub(crate) fn new(block_len: usize) -> Queue<S> {
        Queue {
            blocks: VecDeque::new(),
            block_len: block_len.max(1),
            len: 0,
            bytes: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes the queue's states and nodes take, by length (room a
    /// vector reserves and has not written takes no memory, `memory.rs`).
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The bytes `states` would take in a queue.
    pub(crate) fn bytes_for(states: &States<S>) -> u64 {
        (states.len() * size_of::<NodeId>()) as u64 + states.bytes()
    }

    /// The first state's node.
    pub(crate) fn first_node(&self) -> Option<NodeId> {
        self.blocks.front().and_then(|b| b.nodes.first().copied())
    }

    pub(crate) fn front(&self) -> Option<&Block<S>> {
        self.blocks.front()
    }

    /// Frees the first block.
    pub(crate) fn pop_front(&mut self) {
        if let Some(b) = self.blocks.pop_front() {
            self.len -= b.nodes.len();
            self.bytes -= b.bytes();
        }
    }

    pub(crate) fn push(&mut self, node: NodeId, state: Taken<'_, S>) {
        if self
            .blocks
            .back()
            .is_none_or(|b| b.nodes.len() == self.block_len)
        {
            // A block as large as the last, so that its arena is not
            // reallocated as it fills.
            let bytes = self.blocks.back().map_or(0, |b| b.states.bytes.len());
            self.blocks.push_back(Block {
                nodes: Vec::with_capacity(self.block_len),
                states: States {
                    lens: Vec::new(),
                    bytes: Vec::with_capacity(bytes),
                    whole: Vec::new(),
                },
            });
        }
        let block = self.blocks.back_mut().expect("a block to push to");
        let before = block.bytes();
        block.nodes.push(node);
        block.states.push(state);
        self.bytes += block.bytes() - before;
        self.len += 1;
    }

    /// The queue, in blocks of `block_len`, of those states whose node
    /// `keep` keeps, in order; each block is freed once copied.
    pub(crate) fn retain(mut self, block_len: usize, keep: impl Fn(NodeId) -> bool) -> Queue<S> {
        let mut out = Queue::new(block_len);
        while let Some(mut b) = self.blocks.pop_front() {
            let nodes = std::mem::take(&mut b.nodes);
            for (n, s) in nodes.into_iter().zip(b.states.drain()) {
                if keep(n) {
                    out.push(n, s);
                }
            }
        }
        out
    }
}

/// Gives the memory of freed blocks back to the system. A level's blocks
/// are freed as it is expanded and reused by the next level's; what the
/// next level does not reuse (levels shrink towards the end of a search)
/// would otherwise stay with the allocator, uncounted, until the process
/// ends: on `safe`, half a GB of the peak resident set. Called once a
/// level is done (glibc's `malloc_trim`; elsewhere nothing).
pub(crate) fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// States of a queue's block with their nodes, borrowed.
#[derive(Clone, Copy)]
pub(crate) struct Slice<'a, S> {
    nodes: &'a [NodeId],
    lens: &'a [u16],
    bytes: &'a [u8],
    whole: &'a [S],
}

impl<'a, S: Clone> Slice<'a, S> {
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// In slices of `size` states (the last may be shorter).
    pub(crate) fn chunks(self, size: usize) -> Vec<Slice<'a, S>> {
        let size = size.max(1);
        let mut out = Vec::new();
        let mut at = 0;
        let mut byte = 0;
        while at < self.nodes.len() {
            let end = (at + size).min(self.nodes.len());
            let (lens, whole) = if self.lens.is_empty() {
                (&self.lens[..0], &self.whole[at..end])
            } else {
                (&self.lens[at..end], &self.whole[..0])
            };
            let bytes: usize = lens.iter().map(|&l| l as usize).sum();
            out.push(Slice {
                nodes: &self.nodes[at..end],
                lens,
                bytes: &self.bytes[byte..byte + bytes],
                whole,
            });
            at = end;
            byte += bytes;
        }
        out
    }

    /// Each state with its node, unpacked.
    pub(crate) fn iter<M: Checkable<State = S>>(
        self,
        model: &'a M,
    ) -> impl Iterator<Item = (NodeId, Cow<'a, S>)> + 'a {
        let mut at = 0;
        self.nodes.iter().enumerate().map(move |(i, &n)| {
            if M::PACKS {
                let end = at + self.lens[i] as usize;
                let s = model.unpack(&self.bytes[at..end]);
                at = end;
                (n, Cow::Owned(s))
            } else {
                (n, Cow::Borrowed(&self.whole[i]))
            }
        })
    }
}
