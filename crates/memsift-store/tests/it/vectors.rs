//! Store cases for memory embeddings as the engine's exact index reads them; each runs once per
//! backend.

use memsift_core::{MemoryId, UserId};
use memsift_store::{Store, StoreError};

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

    // Read back with what made each: the index takes only the model's own at its dimension.
    let read = store.vectors().user_memory_vectors(user).await.unwrap();
    let usable: Vec<MemoryId> = read
        .rows
        .iter()
        .filter(|row| row.model_id.as_deref() == Some(MODEL) && row.dimension == Some(8) && row.vector.is_some())
        .map(|row| row.memory_id)
        .collect();
    assert_eq!((read.rows.len(), usable), (4, vec![ids[0]]));
    let mut expected = vec![ids[1], ids[2], ids[3]];
    expected.sort_by_key(|id| id.to_string());

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
    let read = store.vectors().user_memory_vectors(user).await.unwrap();
    assert!(
        read.rows
            .iter()
            .all(|row| row.model_id.as_deref() == Some(MODEL) && row.dimension == Some(8))
    );
}

fn expected_index(ids: &[MemoryId], id: MemoryId) -> usize {
    ids.iter()
        .position(|candidate| *candidate == id)
        .expect("a listed id is one of ours")
}

/// Every vector write moves the user's memory version, and what was written since a version is
/// read back: the rows another daemon's index needs to be brought forward.
pub async fn a_write_elsewhere_bumps_the_version_and_is_read_back_since(store: &Store) {
    let (user, ids) = memories(store, "ana", 3).await;
    let built = store
        .set_memory_embedding(user, ids[0], MODEL, &vector(1, 8))
        .await
        .unwrap();
    assert_eq!(store.vectors().memory_version(user).await.unwrap(), built);
    let later = store
        .set_memory_embedding(user, ids[2], MODEL, &vector(3, 8))
        .await
        .unwrap();
    assert!(later > built);
    let since = store.vectors().memory_vectors_since(user, built).await.unwrap();
    assert_eq!(since.state.version, later);
    let changed: Vec<(MemoryId, Option<Vec<f32>>)> = since
        .changed
        .iter()
        .map(|row| (row.memory_id, row.vector.clone()))
        .collect();
    assert_eq!(changed, [(ids[2], Some(vector(3, 8)))], "only what was written since");
    store.archive_test_memory(user, ids[0]).await.unwrap();
    let since = store.vectors().memory_vectors_since(user, later).await.unwrap();
    assert_eq!((since.changed.len(), since.gone), (0, vec![ids[0]]));
}
