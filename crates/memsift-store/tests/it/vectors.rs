//! Store cases for memory embeddings and the exact vector index; each runs once per backend.

use memsift_core::{MemoryId, UserId};
use memsift_store::{Store, StoreError, VectorCache, VectorIndex};

const MODEL: &str = "test-model-v1";

/// A deterministic unit-ish vector: no two seeds point the same way.
fn vector(seed: u64, dimension: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..dimension)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn normalized(mut values: Vec<f32>) -> Vec<f32> {
    let norm = values.iter().map(|x| x * x).sum::<f32>().sqrt();
    values.iter_mut().for_each(|x| *x /= norm);
    values
}

async fn memories(store: &Store, user: &str, count: usize) -> (UserId, Vec<MemoryId>) {
    let mut ids = Vec::new();
    let mut user_id = None;
    for n in 0..count {
        let (user, memory) = store.insert_test_memory(user, &format!("memory {n}")).await.unwrap();
        user_id = Some(user);
        ids.push(memory);
    }
    (user_id.expect("count > 0"), ids)
}

pub async fn an_embedding_round_trips_as_little_endian_f32(store: &Store) {
    let (user, ids) = memories(store, "ana", 1).await;
    let stored = vec![0.25_f32, -0.5, 1.0e-7, 3.5, f32::MIN_POSITIVE, -0.0];
    assert_eq!(store.vectors().memory_version(user).await.unwrap(), 0);
    let version = store.set_memory_embedding(user, ids[0], MODEL, &stored).await.unwrap();
    assert_eq!(version, 1, "the write bumps the user's memory version");

    let read = store.vectors().user_memory_vectors(user).await.unwrap();
    assert_eq!(read.version, 1);
    assert_eq!(read.rows.len(), 1);
    let row = &read.rows[0];
    assert_eq!(row.memory_id, ids[0]);
    assert_eq!(row.model_id.as_deref(), Some(MODEL));
    assert_eq!(row.dimension, Some(6));
    // Bit-exact, including the sign of zero: nothing went through a text or float column.
    let bits = |values: &[f32]| values.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(row.vector.as_deref().unwrap()), bits(&stored));
}

pub async fn embeddings_are_written_only_within_their_user(store: &Store) {
    let (ana, ana_ids) = memories(store, "ana", 1).await;
    let (bob, _) = memories(store, "bob", 1).await;
    let error = store
        .set_memory_embedding(bob, ana_ids[0], MODEL, &[1.0, 0.0])
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::NotFound(_)), "{error}");
    assert_eq!(
        store.vectors().memory_version(bob).await.unwrap(),
        0,
        "a refused write bumps nothing"
    );
    assert_eq!(
        store.vectors().user_memory_vectors(ana).await.unwrap().rows[0].vector,
        None
    );
    let error = store
        .set_memory_embedding(ana, ana_ids[0], MODEL, &[f32::NAN])
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
}

pub async fn vectors_of_another_model_or_dimension_are_reported_not_mixed(store: &Store) {
    let (user, ids) = memories(store, "ana", 4).await;
    store
        .set_memory_embedding(user, ids[0], MODEL, &vector(1, 8))
        .await
        .unwrap();
    store
        .set_memory_embedding(user, ids[1], "other-model", &vector(2, 8))
        .await
        .unwrap();
    store
        .set_memory_embedding(user, ids[2], MODEL, &vector(3, 4))
        .await
        .unwrap();
    // ids[3] has no vector at all.

    let loaded = VectorIndex::load(store, user, MODEL, 8).await.unwrap();
    assert_eq!(loaded.index.len(), 1);
    assert!(loaded.index.contains(ids[0]));
    let mut expected = vec![ids[1], ids[2], ids[3]];
    expected.sort_by_key(|id| id.to_string());
    let mut reported = loaded.needs_embedding.clone();
    reported.sort_by_key(|id| id.to_string());
    assert_eq!(reported, expected);

    // The reembed listing finds the same three, pages by cursor, and drops each once fixed.
    let first = store
        .vectors()
        .memories_needing_embedding(MODEL, 8, None, 2)
        .await
        .unwrap();
    assert_eq!(first.len(), 2);
    assert!(first.iter().all(|row| row.user_id == user));
    let rest = store
        .vectors()
        .memories_needing_embedding(MODEL, 8, Some(first[1].memory_id), 10)
        .await
        .unwrap();
    let listed: Vec<MemoryId> = first.iter().chain(&rest).map(|row| row.memory_id).collect();
    assert_eq!(listed, expected);
    assert_eq!(
        first[0].text,
        format!("memory {}", expected_index(&ids, first[0].memory_id))
    );
    for row in first.iter().chain(&rest) {
        store
            .set_memory_embedding(row.user_id, row.memory_id, MODEL, &vector(9, 8))
            .await
            .unwrap();
    }
    assert!(
        store
            .vectors()
            .memories_needing_embedding(MODEL, 8, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(VectorIndex::load(store, user, MODEL, 8).await.unwrap().index.len(), 4);
}

fn expected_index(ids: &[MemoryId], id: MemoryId) -> usize {
    ids.iter()
        .position(|candidate| *candidate == id)
        .expect("a listed id is one of ours")
}

pub async fn a_write_elsewhere_bumps_the_version_and_the_cache_reloads(store: &Store) {
    let (user, ids) = memories(store, "ana", 3).await;
    store
        .set_memory_embedding(user, ids[0], MODEL, &vector(1, 8))
        .await
        .unwrap();
    let cache = VectorCache::new(MODEL, 8);
    let (index, _) = cache.fresh(store, user).await.unwrap();
    assert_eq!(index.len(), 1);
    assert!(index.is_current(store).await.unwrap());

    // Our own write, applied in place: no reload needed, and the version keeps step.
    let version = store
        .set_memory_embedding(user, ids[1], MODEL, &vector(2, 8))
        .await
        .unwrap();
    cache.record_embedding(user, ids[1], &vector(2, 8), version);
    let (index, _) = cache.fresh(store, user).await.unwrap();
    assert_eq!(index.len(), 2);
    assert_eq!(index.version(), version);

    // Another daemon's write: only the database knows. The cached index is now stale…
    store
        .set_memory_embedding(user, ids[2], MODEL, &vector(3, 8))
        .await
        .unwrap();
    assert!(!index.is_current(store).await.unwrap());
    // …and the next use reloads it with the new memory.
    let (reloaded, _) = cache.fresh(store, user).await.unwrap();
    assert_eq!(reloaded.len(), 3);
    assert!(reloaded.contains(ids[2]));

    // Archiving (any write that bumps the version) drops the memory on the next use.
    store.archive_test_memory(user, ids[0]).await.unwrap();
    let (after_archive, _) = cache.fresh(store, user).await.unwrap();
    assert_eq!(after_archive.len(), 2);
    assert!(!after_archive.contains(ids[0]));

    // An interleaved foreign write makes our in-place update refuse to claim currency.
    let mine = store
        .set_memory_embedding(user, ids[1], MODEL, &vector(4, 8))
        .await
        .unwrap();
    store.bump_memory_version(user).await.unwrap();
    cache.record_embedding(user, ids[1], &vector(4, 8), mine);
    let (index, _) = cache.fresh(store, user).await.unwrap();
    assert_eq!(index.version(), store.vectors().memory_version(user).await.unwrap());
}

pub async fn top_k_matches_a_brute_force_reference(store: &Store) {
    const DIMENSION: usize = 40; // not a multiple of 16: exercises the loop's tail
    let (user, ids) = memories(store, "ana", 60).await;
    for (seed, id) in ids.iter().enumerate() {
        store
            .set_memory_embedding(user, *id, MODEL, &vector(seed as u64 + 100, DIMENSION))
            .await
            .unwrap();
    }
    let loaded = VectorIndex::load(store, user, MODEL, DIMENSION).await.unwrap();
    assert!(loaded.needs_embedding.is_empty());
    let mut index = loaded.index;
    index.remove(ids[7]);

    for query_seed in 0..5 {
        let query = normalized(vector(query_seed, DIMENSION));
        let mut reference: Vec<(MemoryId, f32)> = ids
            .iter()
            .enumerate()
            .filter(|(_, id)| **id != ids[7])
            .map(|(seed, id)| {
                let row = normalized(vector(seed as u64 + 100, DIMENSION));
                (*id, row.iter().zip(&query).map(|(a, b)| a * b).sum::<f32>())
            })
            .collect();
        reference.sort_by(|a, b| b.1.total_cmp(&a.1));
        for k in [1, 5, 59, 100] {
            let hits = index.search(&query, k).unwrap();
            assert_eq!(hits.len(), k.min(59));
            for (hit, (id, score)) in hits.iter().zip(&reference) {
                assert_eq!(hit.memory_id, *id, "k={k}");
                assert!((hit.score - score).abs() < 1e-5);
            }
        }
    }
}
