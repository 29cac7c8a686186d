//! The apply path's write: one request's processed output becomes memories, evidence, entities
//! and link hints in one transaction, exactly once.
//!
//! `apply` is the one place that writes memories from lane output. In a single transaction it
//! checks-and-sets the request's `applied` status (invariant 2), writes memories, evidence and
//! entities, and marks the segment `extracted` once every planned chunk is applied (invariant 1).
//! Replaying the same result finds the request already applied and writes nothing.
//!
//! An answer cut off before its JSON closed plans its continuation in the same transaction (the
//! rest of its chunk, as the next attempt of that chunk), so a crash can neither lose the
//! continuation nor plan it twice, and the segment stays `extracting` until every chunk's latest
//! attempt is applied.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use memsift_core::drops::DroppedItem;
use memsift_core::status::RequestStatus;
use memsift_core::text::collapse_whitespace;
use memsift_core::{EntityId, MemoryId, MessageId, OperationId, RequestId, SegmentId, UserId};
use serde_json::Value;

use crate::handles::Memories;
use crate::memory_insert::{DEFAULT_IMPORTANCE, Inserted, MemoryInsert};
use crate::requests::NewRequest;
use crate::stage::LinkHint;
use crate::tx::{Arg, WriteTx, sql};
use crate::vectors::vector_to_le_bytes;
use crate::{Result, StoreError, corrupt};

/// What the apply path writes for one request.
#[derive(Clone, Debug)]
pub struct ApplyInput {
    /// The request whose output this is.
    pub request_id: RequestId,
    /// Its user.
    pub user_id: UserId,
    /// Its segment, for extraction.
    pub segment_id: Option<SegmentId>,
    /// Recorded on each memory.
    pub prompt_version: String,
    /// Recorded on the segment.
    pub model: Option<String>,
    /// Items that survived processing.
    pub items: Vec<NewMemory>,
    /// The processor's drop records, stored with the request for people and `memsift show`, and
    /// counted by reason for the metrics.
    pub drops: Vec<DroppedItem>,
    /// Dropped duplicates of stored memories and the turns they cited, which those memories gain
    /// as evidence.
    pub duplicate_evidence: Vec<DuplicateEvidence>,
    /// How many items the processor dropped.
    pub n_dropped: i64,
    /// One embedding per item, stored with the memory it becomes (`None`: leave the vectors to
    /// `memsift reembed`).
    pub embeddings: Option<ItemEmbeddings>,
    /// What becomes of the part of the chunk a cut answer never wrote (nothing, for a replay).
    pub continuation: ContinuationPlan,
    /// `Some(reason)`: a replay of an already-applied request under today's rules. It writes the
    /// items and journals them in `operations`, leaves the request and segment as they are, and
    /// refuses a request that was never applied (that one belongs to the normal path).
    pub replay: Option<String>,
    /// The clock reading.
    pub now: DateTime<Utc>,
}

/// What becomes of the rest of a chunk whose answer was cut off.
#[derive(Clone, Debug, Default)]
pub enum ContinuationPlan {
    /// The answer's JSON closed: nothing is left to ask.
    #[default]
    Complete,
    /// The rest of the chunk is asked for by this request, the chunk's next attempt, planned with
    /// the apply. Its context may show this apply's items by their ids as known memories: an item
    /// not written (a duplicate or an erased fact at write) is shown by the duplicate it met, or
    /// not at all.
    Continue(Box<NewRequest>),
    /// The rest of the chunk is not asked for; the reason is recorded on the request.
    NotContinued(String),
}

/// A memory the apply path writes: an item that survived processing, in the store's terms.
#[derive(Clone, Debug, PartialEq)]
pub struct NewMemory {
    /// The id it is written under, chosen by the caller (see [`ContinuationPlan::Continue`]).
    pub id: MemoryId,
    /// Trimmed, whitespace-collapsed text.
    pub text: String,
    /// The normalised exact key (`memsift_core::text::dedupe_key` of the text).
    pub dedupe_key: String,
    /// 0.0–1.0.
    pub confidence: f64,
    /// When the event happens.
    pub happens_at: Option<DateTime<Utc>>,
    /// When it stops being true.
    pub expires_at: Option<DateTime<Utc>>,
    /// A private fact.
    pub sensitive: bool,
    /// How long it holds.
    pub temporal: memsift_core::status::Temporal,
    /// Known memories the extractor said it merges: link hints without a kind.
    pub hinted_memory_ids: Vec<MemoryId>,
    /// Known memories the extractor said it relates to: link hints of `relationship_type`.
    pub related_memory_ids: Vec<MemoryId>,
    /// Positions of other items of the same apply it relates to: link hints of
    /// `relationship_type` once written.
    pub linking_hints: Vec<usize>,
    /// How it relates to the memories and items it points at ("<it> <type> <them>"), when said.
    pub relationship_type: Option<String>,
    /// (name, kind) pairs.
    pub entities: Vec<(String, String)>,
    /// The messages it came from.
    pub evidence: Vec<MessageId>,
}

/// A dropped duplicate of a stored memory: the memory it duplicates and the turns it cited.
#[derive(Clone, Debug, PartialEq)]
pub struct DuplicateEvidence {
    /// The stored memory it duplicates.
    pub of: DuplicateOf,
    /// The turns the dropped item cited.
    pub evidence: Vec<MessageId>,
}

/// Which stored memory a dropped item duplicates.
#[derive(Clone, Debug, PartialEq)]
pub enum DuplicateOf {
    /// A memory known by id (near duplicates and vector duplicates).
    Memory(MemoryId),
    /// The user's active memory with this normalised key (exact duplicates).
    Key(String),
}

/// The embeddings of an apply's items, in item order, all made by one model.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemEmbeddings {
    /// The model that made them (recorded with each vector).
    pub model_id: String,
    /// One unit vector per item.
    pub vectors: Vec<Vec<f32>>,
}

/// What `apply` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Written now.
    Applied {
        /// The memories created, in item order (duplicates omitted).
        memory_ids: Vec<MemoryId>,
        /// For each created memory, the position of its item in `ApplyInput::items`.
        item_positions: Vec<usize>,
        /// The user's memory version after this write (unchanged when nothing was created), so a
        /// vector cache can follow its own write without a reload.
        memory_version: i64,
        /// Items that matched an active memory written since processing (a concurrent writer).
        n_duplicates_at_write: u64,
        /// Items whose fact the user had erased (a tombstone holds its fingerprint); never stored.
        n_erased_at_write: u64,
        /// The segment became `extracted` in this transaction.
        segment_extracted: bool,
        /// The journal row of a replay.
        operation_id: Option<OperationId>,
    },
    /// Applied before; nothing written (invariant 2).
    AlreadyApplied,
}

impl Memories<'_> {
    /// Writes one request's processed output, exactly once (invariants 1 and 2).
    pub async fn apply(self, input: &ApplyInput) -> Result<ApplyOutcome> {
        self.write(async |tx| {
            // The user's lock first (see `users.rs`): an erased user's answer writes nothing.
            if !tx.lock_live_user(input.user_id).await? || !tx.claim_request(input).await? {
                return tx.not_claimed(input).await;
            }
            let mut written = tx.write_items(input).await?;
            written.n_evidence_passed += tx.pass_on_dropped_evidence(input).await?;
            tx.write_link_hints(input, &written).await?;
            // Evidence passed to a stored memory changes it too: what its turns said is part of
            // its document in the memory lexicon, which reads it again when the version moves.
            let changed = !written.memory_ids.is_empty() || written.n_evidence_passed > 0;
            let memory_version = tx.advance_memory_version(input.user_id, changed).await?;
            let mut segment_extracted = false;
            let mut operation_id = None;
            if let Some(reason) = &input.replay {
                operation_id = Some(tx.journal_replay(input, reason, &written).await?);
            } else {
                tx.plan_continuation(input, &written).await?;
                if let Some(segment_id) = input.segment_id {
                    segment_extracted = tx.finish_segment(input, segment_id).await?;
                }
            }
            Ok(ApplyOutcome::Applied {
                memory_ids: written.memory_ids,
                item_positions: written.item_positions,
                memory_version,
                n_duplicates_at_write: written.n_duplicates_at_write,
                n_erased_at_write: written.n_erased_at_write,
                segment_extracted,
                operation_id,
            })
        })
        .await
    }

    /// Which of `keys` the user's active memories hold (the exact dedupe stage against the store),
    /// or with `archived_too` any of their memories (a replay must not bring back a fact that
    /// consolidation or an admin retired). One lookup per key through the per-user key index: the
    /// cost follows the answer's items, not the memories the user has.
    pub async fn dedupe_keys_among(
        self,
        user_id: UserId,
        keys: &std::collections::BTreeSet<String>,
        archived_too: bool,
    ) -> Result<HashSet<String>> {
        if keys.is_empty() {
            return Ok(HashSet::new());
        }
        let active = if archived_too { "" } else { " AND m.archived_at IS NULL" };
        // The keys drive the lookup, one probe of the unique (user_id, dedupe_key) index each.
        // Written as `dedupe_key IN (…)`, SQLite chose the user's index (user_id, archived_at)
        // and PostgreSQL, before its statistics knew the user's rows, a hash join over them:
        // every active memory of the user read, 59 ms (SQLite) and 113 ms (PostgreSQL) an apply
        // at 50,000 memories. SQLite's CROSS JOIN fixes the loop order; PostgreSQL's LATERAL
        // with LIMIT keeps each key a lookup of its own whatever the statistics say.
        let sql = match self.kind() {
            crate::BackendKind::Sqlite => format!(
                "SELECT m.dedupe_key FROM json_each($2) AS k CROSS JOIN memories AS m
                 WHERE m.user_id = $1{active} AND m.dedupe_key = k.value"
            ),
            crate::BackendKind::Postgres => format!(
                "SELECT found.dedupe_key FROM jsonb_array_elements_text($2) AS k(value)
                 CROSS JOIN LATERAL (SELECT m.dedupe_key FROM memories AS m
                                     WHERE m.user_id = $1{active} AND m.dedupe_key = k.value LIMIT 1) AS found"
            ),
        };
        let keys: Vec<String> = self
            .read_scalar_all(crate::tx::Statement {
                sql: &sql,
                args: vec![crate::tx::Arg::from(user_id), crate::search::ids_arg(keys)],
            })
            .await?;
        Ok(keys.into_iter().collect())
    }
}

/// The memories one apply wrote, and the items it did not write.
struct Written {
    /// The memories created, in item order.
    memory_ids: Vec<MemoryId>,
    /// For each created memory, the position of its item in `ApplyInput::items`.
    item_positions: Vec<usize>,
    /// Items that matched an active memory written since processing.
    n_duplicates_at_write: u64,
    /// Items whose fact the user had erased.
    n_erased_at_write: u64,
    /// Evidence rows added to memories already stored (a duplicate's turns).
    n_evidence_passed: u64,
}

/// The row one item becomes, with its embedding when the input carries one.
fn memory_insert<'a>(input: &'a ApplyInput, position: usize, model: Option<&'a str>) -> MemoryInsert<'a> {
    let item = &input.items[position];
    let embedding = input.embeddings.as_ref().and_then(|embeddings| {
        let vector = embeddings.vectors.get(position)?;
        Some((
            vector_to_le_bytes(vector),
            embeddings.model_id.as_str(),
            vector.len() as i64,
        ))
    });
    MemoryInsert {
        id: item.id,
        user_id: input.user_id,
        text: &item.text,
        dedupe_key: &item.dedupe_key,
        importance: DEFAULT_IMPORTANCE,
        confidence: item.confidence,
        happens_at: item.happens_at,
        expires_at: item.expires_at,
        sensitive: item.sensitive,
        temporal: item.temporal.as_str(),
        source_segment_id: input.segment_id,
        source_request_id: Some(input.request_id),
        prompt_version: &input.prompt_version,
        model,
        refined_at: None,
        embedding,
        now: input.now,
    }
}

impl WriteTx {
    /// Checks-and-sets the request's `applied` status and counts its drops (invariant 2); a
    /// replay instead only checks that the request was applied before. Returns whether this
    /// transaction may write.
    async fn claim_request(&mut self, input: &ApplyInput) -> Result<bool> {
        let claimed = if input.replay.is_some() {
            let applied: Option<String> = self
                .scalar_optional(sql!(
                    "SELECT id FROM llm_requests WHERE id = $1 AND status = 'applied'",
                    input.request_id
                ))
                .await?;
            applied.is_some()
        } else {
            self.execute(sql!(
                "UPDATE llm_requests SET status = 'applied', applied_at = $2, n_items = $3, n_dropped = $4, drops = $5
                 WHERE id = $1 AND status = 'succeeded'",
                input.request_id,
                input.now,
                input.items.len(),
                input.n_dropped,
                Arg::json(&input.drops)
            ))
            .await?
                == 1
        };
        if claimed && input.replay.is_none() {
            self.count_drops(input.request_id, &input.drops).await?;
        }
        Ok(claimed)
    }

    /// What an unclaimed request means: applied before (nothing to do), or an error saying why
    /// there is nothing to apply or replay.
    async fn not_claimed(&mut self, input: &ApplyInput) -> Result<ApplyOutcome> {
        let status: Option<String> = self
            .scalar_optional(sql!("SELECT status FROM llm_requests WHERE id = $1", input.request_id))
            .await?;
        match status.as_deref().map(RequestStatus::parse) {
            Some(Ok(other)) if input.replay.is_some() => Err(StoreError::NotFound(format!(
                "request {} is `{other}`: only applied requests are replayed; `memsift run` applies the rest",
                input.request_id
            ))),
            Some(Ok(RequestStatus::Applied)) => Ok(ApplyOutcome::AlreadyApplied),
            Some(Ok(other)) => Err(StoreError::NotFound(format!(
                "request {} is `{other}`, not `succeeded`: there is no output to apply",
                input.request_id
            ))),
            Some(Err(error)) => Err(corrupt("llm_requests", error)),
            None => Err(StoreError::NotFound(format!("no request {}", input.request_id))),
        }
    }

    /// Inserts each item as a memory with its evidence and entities; an erased fact is skipped,
    /// and a duplicate's turns go to the memory already stored.
    async fn write_items(&mut self, input: &ApplyInput) -> Result<Written> {
        let model = self.model_of_request(input.request_id).await?;
        let mut written = Written {
            memory_ids: Vec::with_capacity(input.items.len()),
            item_positions: Vec::with_capacity(input.items.len()),
            n_duplicates_at_write: 0,
            n_erased_at_write: 0,
            n_evidence_passed: 0,
        };
        for (position, item) in input.items.iter().enumerate() {
            let memory_id = match self
                .insert_memory(&memory_insert(input, position, model.as_deref()))
                .await?
            {
                Inserted::Written(memory_id) => memory_id,
                Inserted::Erased => {
                    written.n_erased_at_write += 1;
                    continue;
                }
                Inserted::Duplicate => {
                    written.n_duplicates_at_write += 1;
                    written.n_evidence_passed += self.cite_in_stored_duplicate(input.user_id, item).await?;
                    continue;
                }
            };
            self.write_evidence(memory_id, &item.evidence).await?;
            self.join_entities(input, memory_id, &item.entities).await?;
            written.memory_ids.push(memory_id);
            written.item_positions.push(position);
        }
        Ok(written)
    }

    /// The same fact read again: its turns support the memory already stored. Returns the rows added.
    async fn cite_in_stored_duplicate(&mut self, user_id: UserId, item: &NewMemory) -> Result<u64> {
        let mut added = 0;
        for message_id in &item.evidence {
            added += self
                .execute(sql!(
                    "INSERT INTO memory_evidence (memory_id, message_id)
                 SELECT id, $3 FROM memories WHERE user_id = $1 AND dedupe_key = $2 AND archived_at IS NULL
                 ON CONFLICT DO NOTHING",
                    user_id,
                    &item.dedupe_key,
                    message_id
                ))
                .await?;
        }
        Ok(added)
    }

    /// The turns a new memory came from.
    async fn write_evidence(&mut self, memory_id: MemoryId, evidence: &[MessageId]) -> Result<()> {
        for message_id in evidence {
            self.execute(sql!(
                "INSERT INTO memory_evidence (memory_id, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                memory_id,
                message_id
            ))
            .await?;
        }
        Ok(())
    }

    /// Upserts each (name, kind) entity of the user and joins it to the new memory.
    async fn join_entities(
        &mut self,
        input: &ApplyInput,
        memory_id: MemoryId,
        entities: &[(String, String)],
    ) -> Result<()> {
        for (name, kind) in entities {
            let normalized_name = collapse_whitespace(name).to_lowercase();
            // Re-linking un-archives: an entity named again is alive again (the
            // reference kept linking new memories to archived entities).
            let entity_id: String = self
                .scalar_one(sql!(
                    "INSERT INTO entities (id, user_id, name, normalized_name, kind, link_count, last_linked_at, created_at)
                     VALUES ($1, $2, $3, $4, $5, 1, $6, $6)
                     ON CONFLICT (user_id, normalized_name, kind)
                     DO UPDATE SET link_count = entities.link_count + 1, last_linked_at = $6, archived_at = NULL
                     RETURNING id",
                    EntityId::new_v7(),
                    input.user_id,
                    name,
                    &normalized_name,
                    kind,
                    input.now
                ))
                .await?;
            self.execute(sql!(
                "INSERT INTO memory_entities (memory_id, entity_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                memory_id,
                &entity_id
            ))
            .await?;
        }
        Ok(())
    }

    /// The extractor's pointers (known memories it relates to or merges, and other items of this
    /// response) become link hints: relationship classification's first candidates. Hinted items
    /// that were not written have no memory to point at.
    async fn write_link_hints(&mut self, input: &ApplyInput, written: &Written) -> Result<()> {
        for (memory_id, &position) in written.memory_ids.iter().zip(&written.item_positions) {
            let item = &input.items[position];
            let typed = |memory_id: MemoryId| LinkHint {
                memory_id,
                kind: item.relationship_type.clone(),
            };
            let mut hints: Vec<LinkHint> = item.related_memory_ids.iter().copied().map(typed).collect();
            for &hinted in &item.linking_hints {
                if let Some(slot) = written.item_positions.iter().position(|&at| at == hinted) {
                    hints.push(typed(written.memory_ids[slot]));
                }
            }
            hints.extend(
                item.hinted_memory_ids
                    .iter()
                    .map(|&memory_id| LinkHint { memory_id, kind: None }),
            );
            // One hint per memory pointed at, the first (typed) one kept.
            let mut seen = HashSet::new();
            hints.retain(|hint| hint.memory_id != *memory_id && seen.insert(hint.memory_id));
            if !hints.is_empty() {
                self.execute(sql!(
                    "UPDATE memories SET link_hints = $2 WHERE id = $1",
                    memory_id,
                    Arg::json(&hints)
                ))
                .await?;
            }
        }
        Ok(())
    }

    /// Moves the user's memory version on when `changed`, and returns it either way. Cached
    /// vector indexes compare this version with their own, so a write by any process makes every
    /// other process reload this user's vectors.
    async fn advance_memory_version(&mut self, user_id: UserId, changed: bool) -> Result<i64> {
        self.scalar_one(sql!(
            "UPDATE users SET memory_version = memory_version + $2 WHERE id = $1 RETURNING memory_version",
            user_id,
            i64::from(changed)
        ))
        .await
    }

    /// Journals a replay in `operations` with the memories it wrote (a replay leaves the request
    /// and the segment as they are).
    async fn journal_replay(&mut self, input: &ApplyInput, reason: &str, written: &Written) -> Result<OperationId> {
        let id = OperationId::new_v7();
        let memories: Vec<Value> = written
            .memory_ids
            .iter()
            .zip(&written.item_positions)
            .map(|(memory_id, &position)| serde_json::json!({ "memory_id": memory_id, "text": input.items[position].text }))
            .collect();
        self.execute(sql!(
            "INSERT INTO operations (id, kind, user_id, request_id, reason, before, after, applied_at)
             VALUES ($1, 'replay', $2, $3, $4, $5, $6, $7)",
            id,
            input.user_id,
            input.request_id,
            reason,
            Arg::json(&serde_json::json!({ "memories": [] })),
            Arg::json(&serde_json::json!({ "memories": memories, "drops": input.drops })),
            input.now
        ))
        .await?;
        Ok(id)
    }

    /// Plans the continuation of a cut answer (its chunk's next attempt), or records why there is
    /// none; the continuation's known memories follow what this transaction wrote.
    async fn plan_continuation(&mut self, input: &ApplyInput, written: &Written) -> Result<()> {
        match &input.continuation {
            ContinuationPlan::Complete => Ok(()),
            ContinuationPlan::NotContinued(reason) => {
                self.execute(sql!(
                    "UPDATE llm_requests SET error = $2 WHERE id = $1",
                    input.request_id,
                    reason
                ))
                .await?;
                Ok(())
            }
            ContinuationPlan::Continue(request) => {
                let mut request = request.as_ref().clone();
                for (position, item) in input.items.iter().enumerate() {
                    if written.item_positions.contains(&position) {
                        continue;
                    }
                    let stored: Option<String> = self
                        .scalar_optional(sql!(
                            "SELECT id FROM memories WHERE user_id = $1 AND dedupe_key = $2 AND archived_at IS NULL",
                            input.user_id,
                            &item.dedupe_key
                        ))
                        .await?;
                    let stored = stored
                        .map(|id| MemoryId::parse(&id))
                        .transpose()
                        .map_err(|error| corrupt("memories", error))?;
                    let memories = &mut request.context.memories;
                    memories.retain(|_, (id, _)| *id != item.id || stored.is_some());
                    for (id, _) in memories.values_mut() {
                        if *id == item.id
                            && let Some(stored) = stored
                        {
                            *id = stored;
                        }
                    }
                }
                self.insert_planned_request(&request, input.now).await?;
                Ok(())
            }
        }
    }

    /// Marks the segment `extracted` once the latest attempt of every planned chunk is applied
    /// (invariant 1): a chunk whose cut answer planned a continuation, or whose continuation
    /// failed and waits for its next attempt, is not done. Returns whether this transaction did.
    async fn finish_segment(&mut self, input: &ApplyInput, segment_id: SegmentId) -> Result<bool> {
        Ok(self
            .execute(sql!(
                "UPDATE segments SET status = 'extracted', extracted_at = $2, prompt_version = $3, model = $4,
                                     claimed_by = NULL, claimed_until = NULL, last_error = NULL
                 WHERE id = $1 AND status <> 'extracted'
                   AND planned_chunks IS NOT NULL
                   AND planned_chunks <= (SELECT COUNT(DISTINCT r.chunk_index) FROM llm_requests r
                                          WHERE r.segment_id = $1 AND r.purpose = 'extraction' AND r.status = 'applied'
                                            AND NOT EXISTS (SELECT 1 FROM llm_requests later
                                                            WHERE later.segment_id = r.segment_id
                                                              AND later.purpose = r.purpose
                                                              AND later.chunk_index = r.chunk_index
                                                              AND later.attempt > r.attempt))",
                segment_id,
                input.now,
                &input.prompt_version,
                &input.model
            ))
            .await?
            == 1)
    }

    /// A dropped duplicate of a stored memory passes its turns on as that memory's evidence, so
    /// the facts a question needs stay cited after dedupe. Only this user's memories and messages
    /// qualify. Returns the rows added.
    async fn pass_on_dropped_evidence(&mut self, input: &ApplyInput) -> Result<u64> {
        let mut added = 0;
        for duplicate in &input.duplicate_evidence {
            let (statement, target) = match &duplicate.of {
                DuplicateOf::Key(key) => (
                    "INSERT INTO memory_evidence (memory_id, message_id)
                     SELECT m.id, $2 FROM memories m
                     WHERE m.user_id = $3 AND m.dedupe_key = $1 AND m.archived_at IS NULL
                       AND EXISTS (SELECT 1 FROM messages WHERE id = $2 AND user_id = $3)
                     ON CONFLICT DO NOTHING",
                    key.clone(),
                ),
                DuplicateOf::Memory(memory_id) => (
                    "INSERT INTO memory_evidence (memory_id, message_id)
                     SELECT m.id, $2 FROM memories m
                     WHERE m.id = $1 AND m.user_id = $3
                       AND EXISTS (SELECT 1 FROM messages WHERE id = $2 AND user_id = $3)
                     ON CONFLICT DO NOTHING",
                    memory_id.to_string(),
                ),
            };
            for message_id in &duplicate.evidence {
                added += self
                    .execute(sql!(statement, &target, message_id, input.user_id))
                    .await?;
            }
        }
        Ok(added)
    }
}
