//! The checker's queues hold states packed (`Checkable::pack`: the
//! fingerprint's encoding, `State::encode_into`) and unpack each before it
//! is expanded (`State::decode`). A decoder that lost a field would expand
//! a different state from the one found, silently. Random walks of every
//! preset, under its recovery model so that they also go past the epoch
//! bound, pack and unpack every state they visit, its representative and
//! what recovery sees of it (the states the search packs): each comes back
//! equal, and its packed bytes hash as the state does (the search
//! fingerprints them). A decoder that drops a field (the controller's
//! epoch, behind `Decoding`) is shown to fail it.
//!
//! The search packs each successor's representative without building it
//! (`Checkable::pack_representative`, `State::encode_representative_into`).
//! Every renaming of every state the walks meet must pack to the bytes of
//! the state's representative, packed: the same bytes for the whole class.
//! A renaming that leaves the follower LEOs in their old slots (behind
//! `Renaming`) is shown to fail it.

use highwater_checker::Checkable;
use highwater_model::actions::{apply, enabled};
use highwater_model::presets::PRESETS;
use highwater_model::state::{Decoding, Renaming, ReplicaId, ENCODED_MAX, MAX_REPLICAS};
use highwater_model::{PartitionModel, State};
use proptest::prelude::*;
use std::hash::{BuildHasher, Hasher};

/// The first state of `s` that does not come back whole from its packing
/// under `decoding`, with what came back; or a packing that is not what
/// the state's `Hash` writes.
fn round_trip(s: &State, decoding: Decoding) -> Result<(), String> {
    let mut bytes = Vec::new();
    s.encode_into(&mut bytes);
    if bytes.len() > ENCODED_MAX {
        return Err(format!("{} bytes, more than {ENCODED_MAX}", bytes.len()));
    }
    let back = State::decode_as(&bytes, decoding);
    if back != *s {
        return Err(format!("packed\n{s:?}\nunpacked\n{back:?}"));
    }
    // The search hashes the packed bytes in one write: the state's own
    // Hash must come to the same.
    let hasher = std::hash::RandomState::new();
    let mut by_bytes = hasher.build_hasher();
    by_bytes.write(&bytes);
    if hasher.hash_one(s) != by_bytes.finish() {
        return Err(format!("its Hash does not write its packed bytes: {s:?}"));
    }
    Ok(())
}

/// Every order of the first `n` replica ids (the rest in place).
fn orders(n: u8) -> Vec<[ReplicaId; MAX_REPLICAS]> {
    let mut out = vec![[0, 1, 2, 3, 4]];
    for k in 1..n as usize {
        out = out
            .into_iter()
            .flat_map(|o| {
                (0..=k).map(move |i| {
                    let mut o = o;
                    o.swap(i, k);
                    o
                })
            })
            .collect();
    }
    out
}

/// Whether every renaming of `s` packs, as a representative, to the
/// packed bytes of `s`'s representative.
fn class_packs_alike(model: &PartitionModel, s: &State, how: Renaming) -> Result<(), String> {
    let mut expected = Vec::new();
    model.representative(s).encode_into(&mut expected);
    for order in orders(s.n) {
        let member = s.renamed(&order);
        let mut packed = Vec::new();
        member.encode_representative_into_as(&mut packed, how);
        if packed != expected {
            return Err(format!(
                "renamed by {order:?}, packed as a representative unlike its class's \
                 representative: {s:?}"
            ));
        }
    }
    Ok(())
}

/// Walks `preset`'s recovery model from its initial state, taking the
/// action `choices` picks at each step, and round-trips every state met,
/// its representative and its recovery view's; the first failure.
fn walk(
    preset: usize,
    choices: &[u32],
    decoding: Decoding,
    renaming: Renaming,
) -> Result<usize, String> {
    let model = PartitionModel::new(PRESETS[preset].config);
    let recovery = model.recovery_model();
    let mut s = model.init_state();
    let mut actions = Vec::new();
    let mut checked = 0;
    for &choice in choices {
        for t in [
            s,
            model.representative(&s),
            model.representative(&model.recovery_view(s)),
        ] {
            round_trip(&t, decoding).map_err(|e| format!("{}: {e}", PRESETS[preset].name))?;
            checked += 1;
        }
        for t in [s, model.recovery_view(s)] {
            class_packs_alike(&model, &t, renaming)
                .map_err(|e| format!("{}: {e}", PRESETS[preset].name))?;
        }
        actions.clear();
        enabled(&recovery.cfg, &s, &mut actions);
        if actions.is_empty() {
            break;
        }
        let a = actions[choice as usize % actions.len()];
        s = apply(&recovery.cfg, &s, a).expect("enabled actions change the state");
    }
    Ok(checked)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_state_of_a_walk_unpacks_to_itself(
        preset in 0..PRESETS.len(),
        choices in prop::collection::vec(any::<u32>(), 1..200),
    ) {
        if let Err(why) = walk(preset, &choices, Decoding::Exact, Renaming::Exact) {
            prop_assert!(false, "{}", why);
        }
    }
}

/// Every preset, a few long walks each: spread over the choices, and
/// deterministic.
fn long_walks(decoding: Decoding, renaming: Renaming) -> Vec<Result<usize, String>> {
    (0..PRESETS.len())
        .flat_map(|p| {
            (0..8u32).map(move |seed| {
                let choices: Vec<u32> = (0..300u32)
                    .map(|i| i.wrapping_mul(2_654_435_761).wrapping_add(seed * 7919) >> 7)
                    .collect();
                walk(p, &choices, decoding, renaming)
            })
        })
        .collect()
}

#[test]
fn long_walks_of_every_preset_unpack_to_themselves() {
    let walks = long_walks(Decoding::Exact, Renaming::Exact);
    let states: usize = walks
        .iter()
        .map(|w| *w.as_ref().unwrap_or_else(|e| panic!("{e}")))
        .sum();
    assert!(states > 1000, "the walks stayed short: {states} states");
}

/// A decoder that drops the controller's epoch: the walks catch it.
#[test]
fn a_decoder_that_drops_a_field_is_caught() {
    let failed = long_walks(Decoding::DropsControllerEpoch, Renaming::Exact)
        .iter()
        .filter(|w| w.is_err())
        .count();
    assert!(failed > 0, "no walk noticed the dropped field");
}

/// A renaming that leaves each leader's follower LEOs in their old slots:
/// the walks catch it.
#[test]
fn a_representative_packed_with_a_flawed_renaming_is_caught() {
    let failed = long_walks(Decoding::Exact, Renaming::KeepsFollowerSlots)
        .iter()
        .filter(|w| w.is_err())
        .count();
    assert!(failed > 0, "no walk noticed the flawed renaming");
}

/// Every request holding the longest chain of ISRs still to apply, on the
/// most replicas: the largest encoding there is, within `ENCODED_MAX`, and
/// it comes back whole (as do the shorter chains).
#[test]
fn the_longest_isr_chains_pack_and_unpack() {
    use highwater_model::state::{IsrChain, ReplicaSet, Request, MAX_REPLICAS};
    let cfg = highwater_model::Config {
        replicas: MAX_REPLICAS as u8,
        ..PRESETS[0].config
    };
    let init = PartitionModel::new(cfg).init_state();
    // {A..E} less one member at a time: four ISRs, each naming A.
    let sets: Vec<ReplicaSet> = (1..MAX_REPLICAS as u8).rev().map(ReplicaSet::all).collect();
    for len in 0..=sets.len() {
        let mut s = init;
        for req in s.requests.iter_mut() {
            *req = Some(Request {
                leader: Some(0),
                isr: ReplicaSet::all(MAX_REPLICAS as u8),
                later_isrs: IsrChain::of(&sets[..len]).expect("within the bound"),
            });
        }
        round_trip(&s, Decoding::Exact).unwrap();
    }
    assert_eq!(IsrChain::of(&[ReplicaSet::all(1); MAX_REPLICAS]), None);
}
