//! The read side's store queries: what the in-memory indexes are built from stays exactly the
//! active memories and stored turns of each user through insert, archive and delete, and every
//! query is scoped by user.

use memsift_core::UserId;
use memsift_core::status::Role;
use memsift_store::{MemoryTexts, NewMessage, Store};

use crate::helpers::{idle, ingest_now, memory_texts_since, message, no_progress, t0};

async fn user_id(store: &Store, user: &str) -> UserId {
    store.listing().user_id(user).await.unwrap().expect("the user exists")
}

/// What a memory lexicon is built from follows every memory write and stays within its user,
/// and a card is shown only to its own user.
pub async fn memory_texts_follow_every_memory_write_and_stay_within_their_user(store: &Store) {
    let (ana, in_lisbon) = store
        .insert_test_memory("ana", "Ana moved to Lisbon in spring.")
        .await
        .unwrap();
    let (_, painting) = store
        .insert_test_memory("ana", "Ana paints sunrises on weekends.")
        .await
        .unwrap();
    let (bo, bo_lisbon) = store
        .insert_test_memory("bo", "Bo visited Lisbon twice.")
        .await
        .unwrap();
    // Every real write moves the version with its rows; these fixtures leave that to the test.
    store.bump_memory_version(ana).await.unwrap();
    let active = |texts: &MemoryTexts| {
        let mut ids: Vec<_> = texts.changed.iter().map(|(id, _, _)| *id).collect();
        ids.sort();
        ids
    };
    let (built, texts) = memory_texts_since(store, ana, None).await;
    let mut both = vec![in_lisbon, painting];
    both.sort();
    assert_eq!(active(&texts), both, "every active memory of ana's, and none of bo's");
    assert_eq!(active(&memory_texts_since(store, bo, None).await.1), vec![bo_lisbon]);
    // Archived: gone from a whole read, and named as gone to an index built before.
    store.archive_test_memory(ana, in_lisbon).await.unwrap();
    assert_eq!(active(&memory_texts_since(store, ana, None).await.1), vec![painting]);
    let (_, since) = memory_texts_since(store, ana, Some(built.version)).await;
    assert_eq!((since.changed.len(), since.gone.clone()), (0, vec![in_lisbon]));
    // Deleted: gone, and the floor refuses to bring an older index forward.
    store.delete_test_memory(ana, painting).await.unwrap();
    let (state, texts) = memory_texts_since(store, ana, None).await;
    assert!(texts.changed.is_empty());
    assert!(
        !state.can_extend(built.version),
        "a deleted row leaves no stamp: rebuild"
    );
    let (_, porto) = store
        .insert_test_memory("ana", "Ana now lives in Porto.")
        .await
        .unwrap();
    let (_, since) = memory_texts_since(store, ana, Some(state.version)).await;
    assert_eq!(
        since
            .changed
            .iter()
            .map(|(id, text, _)| (*id, text.as_str()))
            .collect::<Vec<_>>(),
        [(porto, "Ana now lives in Porto.")]
    );
    let cards = store.search().memory_cards(ana, &[porto, bo_lisbon]).await.unwrap();
    assert_eq!(cards.len(), 1, "a card of another user's memory is not shown");
    assert_eq!(cards[0].text, "Ana now lives in Porto.");
}

/// A turn's card is shown only to its own user.
pub async fn a_turn_card_is_shown_only_to_its_own_user(store: &Store) {
    let mut last = message(
        "ana",
        "c1",
        1,
        Role::User,
        "We adopted a puppy named Coco from the shelter.",
    );
    last.boundary_after = true;
    store
        .messages()
        .ingest(
            &[
                message("ana", "c1", 0, Role::User, "My sister Lia teaches chemistry."),
                last,
            ],
            idle(),
            t0(),
            &no_progress,
        )
        .await
        .unwrap();
    store
        .messages()
        .ingest(
            &[message("bo", "c1", 0, Role::User, "Coco is my favourite singer.")],
            idle(),
            t0(),
            &no_progress,
        )
        .await
        .unwrap();
    let ana = user_id(store, "ana").await;
    let (_, turns) = store.search().user_turn_texts(ana).await.unwrap();
    let coco = turns
        .iter()
        .find(|turn| turn.text.contains("Coco"))
        .expect("ana's turn is read")
        .id;
    let cards = store
        .search()
        .turn_cards(ana, std::slice::from_ref(&coco))
        .await
        .unwrap();
    assert_eq!(cards[0].text, "We adopted a puppy named Coco from the shelter.");
    assert_eq!(cards[0].role, "user");
    let bo = user_id(store, "bo").await;
    assert!(store.search().turn_cards(bo, &[coco]).await.unwrap().is_empty());
}

/// The turn lexicon reads every turn of one user, in conversation order with its speaker, and
/// is rebuilt when the turn version moves: a new turn moves it, a re-sent one does not, and
/// another user's turn never touches it.
pub async fn every_turn_is_read_in_order_and_a_new_turn_moves_the_turn_version(store: &Store) {
    let mut answer = message("ana", "c1", 1, Role::User, "Coco came from the shelter.");
    answer.speaker = Some("Ana".to_owned());
    let first = [message("ana", "c1", 0, Role::Assistant, "Where is Coco from?"), answer];
    store
        .messages()
        .ingest(&first, idle(), t0(), &no_progress)
        .await
        .unwrap();
    let ana = user_id(store, "ana").await;
    let (version, turns) = store.search().user_turn_texts(ana).await.unwrap();
    let said: Vec<(&str, Option<&str>)> = turns
        .iter()
        .map(|turn| (turn.text.as_str(), turn.speaker.as_deref()))
        .collect();
    assert_eq!(
        said,
        [
            ("Where is Coco from?", None),
            ("Coco came from the shelter.", Some("Ana"))
        ]
    );
    assert_eq!(turns[0].segment_id, turns[1].segment_id);
    assert!(version > 0, "ingest moved the turn version");

    store
        .messages()
        .ingest(&first, idle(), t0(), &no_progress)
        .await
        .unwrap();
    let bo = [message("bo", "c1", 0, Role::User, "Coco is my favourite singer.")];
    store.messages().ingest(&bo, idle(), t0(), &no_progress).await.unwrap();
    let (unchanged, again) = store.search().user_turn_texts(ana).await.unwrap();
    assert_eq!(
        (unchanged, again.len()),
        (version, 2),
        "a re-sent turn and bo's turn leave ana's alone"
    );

    let later = [message("ana", "c1", 2, Role::User, "She sleeps a lot.")];
    store
        .messages()
        .ingest(&later, idle(), t0(), &no_progress)
        .await
        .unwrap();
    let (moved, turns) = store.search().user_turn_texts(ana).await.unwrap();
    assert!(moved > version);
    assert_eq!(turns.last().map(|turn| turn.text.as_str()), Some("She sleeps a lot."));
}

/// What a cached turn index needs to be brought forward: the segments with a turn written since
/// it was built (whole, since a new turn changes its neighbour's context), the vectors written
/// since, nothing of another user, and after erasure a floor that refuses every older index.
pub async fn a_turn_index_reads_only_what_changed_since_it_was_built_until_turns_go_away(store: &Store) {
    let first = [
        message("ana", "c1", 0, Role::User, "Coco came from the shelter."),
        message("ana", "c1", 1, Role::Assistant, "How old is Coco?"),
    ];
    store
        .messages()
        .ingest(&first, idle(), t0(), &no_progress)
        .await
        .unwrap();
    let ana = user_id(store, "ana").await;
    let built = store.vectors().turn_state(ana).await.unwrap();
    let (state, nothing) = store.search().turn_texts_since(ana, Some(built.version)).await.unwrap();
    assert_eq!((state, nothing.len()), (built, 0), "nothing was written since");

    let other = [message("ana", "c2", 5, Role::User, "I start a new job on Monday.")];
    store
        .messages()
        .ingest(&other, idle(), t0(), &no_progress)
        .await
        .unwrap();
    let bo = [message("bo", "c1", 0, Role::User, "Coco is my favourite singer.")];
    store.messages().ingest(&bo, idle(), t0(), &no_progress).await.unwrap();
    let (state, changed) = store.search().turn_texts_since(ana, Some(built.version)).await.unwrap();
    let texts: Vec<&str> = changed.iter().map(|turn| turn.text.as_str()).collect();
    assert_eq!(
        texts,
        ["I start a new job on Monday."],
        "only the segment written to, only ana's"
    );
    assert!(state.version > built.version && state.can_extend(built.version));

    let later = [message("ana", "c1", 2, Role::User, "She is two.")];
    store
        .messages()
        .ingest(&later, idle(), t0(), &no_progress)
        .await
        .unwrap();
    let (_, changed) = store.search().turn_texts_since(ana, Some(state.version)).await.unwrap();
    let texts: Vec<&str> = changed.iter().map(|turn| turn.text.as_str()).collect();
    assert_eq!(
        texts,
        ["Coco came from the shelter.", "How old is Coco?", "She is two."],
        "the segment a turn joined is read whole, in order"
    );

    let before_vectors = store.vectors().turn_state(ana).await.unwrap();
    let to_embed = store.vectors().turns_needing_embedding(100).await.unwrap();
    let one: Vec<_> = to_embed
        .into_iter()
        .filter(|turn| turn.content == "She is two.")
        .map(|turn| (turn, vec![0.0, 2.0]))
        .collect();
    store.vectors().set_turn_embeddings("m", &one).await.unwrap();
    let read = store
        .vectors()
        .user_turn_vectors(ana, "m", Some(before_vectors.version))
        .await
        .unwrap();
    assert_eq!(read.rows.len(), 1);
    assert_eq!(read.rows[0].1, [0.0, 1.0], "normalised");
    assert!(read.state.version > before_vectors.version);
    let none = store
        .vectors()
        .user_turn_vectors(ana, "m", Some(read.state.version))
        .await
        .unwrap();
    assert!(none.rows.is_empty());
    assert_eq!(
        store
            .vectors()
            .user_turn_vectors(ana, "m", None)
            .await
            .unwrap()
            .rows
            .len(),
        1
    );

    let last = store.vectors().turn_state(ana).await.unwrap();
    store
        .erasure()
        .erase_user("ana", t0(), &crate::races::json_fact_keys)
        .await
        .unwrap();
    let erased = store.vectors().turn_state(ana).await.unwrap();
    assert!(erased.version > last.version);
    assert_eq!(erased.floor, erased.version);
    assert!(
        !erased.can_extend(last.version),
        "an index built before the erasure is read again whole"
    );
    assert!(erased.can_extend(erased.version));
}

/// A turn's neighbours are the turns within the span in its own segment, with their offsets and
/// whether the same speaker said them (by name, or by role when neither has a name), never
/// itself, another conversation's turns or another user's.
pub async fn a_turns_neighbours_are_read_within_its_segment_and_its_user(store: &Store) {
    let speakers = [Some("Ana"), Some("Noor"), Some("Ana"), Some("Noor"), None];
    let said: Vec<_> = (0..5)
        .map(|minute| NewMessage {
            speaker: speakers[minute as usize].map(str::to_owned),
            ..message("ana", "c1", minute, Role::User, &format!("turn {minute}"))
        })
        .chain([message("ana", "c2", 9, Role::User, "elsewhere")])
        .chain([
            message("ana", "c3", 20, Role::User, "plain 0"),
            message("ana", "c3", 21, Role::Assistant, "plain 1"),
            message("ana", "c3", 22, Role::User, "plain 2"),
        ])
        .collect();
    store
        .messages()
        .ingest(&said, idle(), t0(), &no_progress)
        .await
        .unwrap();
    let bo = [
        message("bo", "c1", 0, Role::User, "bo zero"),
        message("bo", "c1", 1, Role::User, "bo one"),
    ];
    store.messages().ingest(&bo, idle(), t0(), &no_progress).await.unwrap();
    let ana = user_id(store, "ana").await;
    let (_, turns) = store.search().user_turn_texts(ana).await.unwrap();
    let id_of = |text: &str| turns.iter().find(|turn| turn.text == text).unwrap().id;
    let text_of = |id: &memsift_core::MessageId| turns.iter().find(|turn| turn.id == *id).unwrap().text.clone();
    let middle = id_of("turn 2");
    let found = store
        .search()
        .turn_neighbours(ana, std::slice::from_ref(&middle), 2)
        .await
        .unwrap();
    let read: Vec<(String, String, i64, bool)> = found
        .into_iter()
        .map(|(turn, neighbour, offset, same)| (text_of(&turn), text_of(&neighbour), offset, same))
        .collect();
    let expected: Vec<(String, String, i64, bool)> = [
        ("turn 0", -2, true),
        ("turn 1", -1, false),
        ("turn 3", 1, false),
        ("turn 4", 2, false),
    ]
    .into_iter()
    .map(|(text, offset, same)| ("turn 2".to_owned(), text.to_owned(), offset, same))
    .collect();
    assert_eq!(read, expected);
    let by_role: Vec<(String, bool)> = store
        .search()
        .turn_neighbours(ana, &[id_of("plain 0")], 2)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, neighbour, _, same)| (text_of(&neighbour), same))
        .collect();
    assert_eq!(
        by_role,
        [("plain 1".to_owned(), false), ("plain 2".to_owned(), true)],
        "without names, the same role is the same speaker"
    );
    let edge = store
        .search()
        .turn_neighbours(ana, &[id_of("turn 4"), id_of("elsewhere")], 1)
        .await
        .unwrap();
    assert_eq!(
        edge.len(),
        1,
        "the last turn has one neighbour within 1, the lone one none"
    );
    assert_eq!(text_of(&edge[0].1), "turn 3");
    let bo_id = user_id(store, "bo").await;
    let (_, bo_turns) = store.search().user_turn_texts(bo_id).await.unwrap();
    assert!(
        store
            .search()
            .turn_neighbours(ana, &[bo_turns[0].id], 2)
            .await
            .unwrap()
            .is_empty(),
        "bo's turn is not read as ana's"
    );
    assert!(
        store
            .search()
            .turn_neighbours(ana, &[middle], 0)
            .await
            .unwrap()
            .is_empty()
    );
}

/// What a cached memory index (words, or vectors) needs to be brought forward: the memories
/// stamped since it was built (written, archived, re-embedded), nothing of another user, and after
/// a memory row is deleted a floor that refuses every older index. The vector cache brought
/// forward this way holds what reading it whole would.
pub async fn a_memory_index_reads_only_what_changed_since_it_was_built_until_a_memory_is_deleted(store: &Store) {
    let (ana, lisbon) = store.insert_test_memory("ana", "Ana moved to Lisbon.").await.unwrap();
    store.bump_memory_version(ana).await.unwrap();
    let built = store.vectors().memory_state(ana).await.unwrap();
    let (state, nothing) = memory_texts_since(store, ana, Some(built.version)).await;
    assert_eq!(
        (state, nothing),
        (built, MemoryTexts::default()),
        "nothing was written since"
    );

    let (_, painting) = store.insert_test_memory("ana", "Ana paints sunrises.").await.unwrap();
    store.bump_memory_version(ana).await.unwrap();
    let (bo, _) = store.insert_test_memory("bo", "Bo paints too.").await.unwrap();
    store.bump_memory_version(bo).await.unwrap();
    let (state, texts) = memory_texts_since(store, ana, Some(built.version)).await;
    assert_eq!(
        texts
            .changed
            .iter()
            .map(|(id, text, _)| (*id, text.as_str()))
            .collect::<Vec<_>>(),
        [(painting, "Ana paints sunrises.")],
        "only the memory written since, only ana's"
    );
    assert!(texts.gone.is_empty());
    assert!(state.version > built.version && state.can_extend(built.version));
    let (whole_state, whole) = memory_texts_since(store, ana, None).await;
    assert_eq!(
        (whole_state, whole.changed.len()),
        (state, 2),
        "without a version: every active memory"
    );

    store.archive_test_memory(ana, lisbon).await.unwrap();
    let (archived, texts) = memory_texts_since(store, ana, Some(state.version)).await;
    assert_eq!(
        (texts.changed.len(), texts.gone),
        (0, vec![lisbon]),
        "archived: read as gone"
    );

    // The vectors: read whole once, then only what changed; a memory with no vector of the
    // model is read too (the engine embeds it), and an archived one is read as gone.
    store
        .set_memory_embedding(ana, painting, "m", &[1.0, 0.0])
        .await
        .unwrap();
    let whole = store.vectors().user_memory_vectors(ana).await.unwrap();
    assert_eq!(whole.rows.len(), 1);
    let (_, swims) = store.insert_test_memory("ana", "Ana swims.").await.unwrap();
    let since = store.vectors().memory_vectors_since(ana, whole.version).await.unwrap();
    assert_eq!(
        since
            .changed
            .iter()
            .map(|row| (row.memory_id, row.vector.is_some()))
            .collect::<Vec<_>>(),
        [(swims, false)]
    );
    store.set_memory_embedding(ana, swims, "m", &[0.0, 2.0]).await.unwrap();
    store.archive_test_memory(ana, painting).await.unwrap();
    let forward = store
        .vectors()
        .memory_vectors_since(ana, since.state.version)
        .await
        .unwrap();
    assert_eq!(
        forward
            .changed
            .iter()
            .map(|row| (row.memory_id, row.vector.clone()))
            .collect::<Vec<_>>(),
        [(swims, Some(vec![0.0, 2.0]))]
    );
    assert_eq!(forward.gone, vec![painting]);
    assert!(forward.state.can_extend(since.state.version));
    let index_version = forward.state.version;

    // A deleted row leaves no stamp to read: the floor refuses every index built before it.
    store.delete_test_memory(ana, swims).await.unwrap();
    let after_delete = store.vectors().memory_state(ana).await.unwrap();
    assert!(!after_delete.can_extend(archived.version) && !after_delete.can_extend(index_version));
    assert!(
        store.vectors().user_memory_vectors(ana).await.unwrap().rows.is_empty(),
        "read whole past the deletion: nothing is left"
    );
    assert!(after_delete.can_extend(after_delete.version));
}

/// What planning reads to pick a segment's similar memories without embedding: the segment's
/// stored turn vectors, each with its model, normalised; a blank turn's empty vector, a turn not
/// embedded yet and another segment's turns are left out.
pub async fn a_segments_stored_turn_vectors_are_read_with_their_model(store: &Store) {
    let turns = [
        message("ana", "c1", 0, Role::User, "Coco came from the shelter."),
        message("ana", "c1", 1, Role::Assistant, "How old is Coco?"),
        message("ana", "c1", 2, Role::User, "She is two."),
        message("ana", "c1", 3, Role::User, "And she sleeps all day."),
    ];
    ingest_now(store, &turns).await;
    ingest_now(
        store,
        &[message("bo", "c1", 0, Role::User, "Coco is my favourite singer.")],
    )
    .await;
    let segments = store.listing().list_segments(Some("ana"), None, None).await.unwrap();
    assert_eq!(segments.len(), 1);
    let segment: memsift_core::SegmentId = segments[0].id.parse().unwrap();
    assert!(store.vectors().segment_turn_vectors(segment).await.unwrap().is_empty());

    let vector_of = |content: &str| match content {
        "Coco came from the shelter." => Some(("m", vec![3.0, 4.0])),
        "How old is Coco?" => Some(("m", Vec::new())),
        "She is two." => Some(("other", vec![0.0, 2.0])),
        "Coco is my favourite singer." => Some(("m", vec![1.0, 0.0])),
        _ => None,
    };
    for model in ["m", "other"] {
        let written: Vec<_> = store
            .vectors()
            .turns_needing_embedding(100)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|turn| {
                let (made_by, vector) = vector_of(&turn.content)?;
                (made_by == model).then_some((turn, vector))
            })
            .collect();
        store.vectors().set_turn_embeddings(model, &written).await.unwrap();
    }
    let mut read: Vec<(String, Vec<f32>)> = store
        .vectors()
        .segment_turn_vectors(segment)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, model, vector)| (model, vector))
        .collect();
    read.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        read,
        [("m".to_owned(), vec![0.6, 0.8]), ("other".to_owned(), vec![0.0, 1.0])]
    );
}
