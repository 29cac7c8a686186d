//! Writes that replace or narrow memories: consolidation and refinement replacements, refinement
//! rejections, and the extraction reviewer's narrowing.

use chrono::{DateTime, Utc};
use memsift_core::text::{collapse_whitespace, dedupe_key};
use memsift_core::{MemoryId, RequestId, SegmentId, UserId};
use serde_json::json;

use super::{Replacement, StageApplied, StageOutcome};
use crate::Result;
use crate::handles::Stages;
use crate::journal::{Capture, JournalEntry, LinkRow, RowsAfter};
use crate::memory_insert::{Inserted, MemoryInsert};
use crate::tx::sql;
use crate::vectors::vector_to_le_bytes;

/// The replacement texts, whitespace collapsed, each with its normalised key; empty texts and
/// texts with a key seen before are left out.
fn distinct_texts(texts: &[String]) -> Vec<(String, String)> {
    let mut distinct: Vec<(String, String)> = Vec::new();
    for text in texts {
        let text = collapse_whitespace(text.trim());
        let key = dedupe_key(&text);
        if !text.is_empty() && !distinct.iter().any(|(_, seen)| *seen == key) {
            distinct.push((text, key));
        }
    }
    distinct
}

impl Stages<'_> {
    /// Replaces memories with new ones (consolidation: several into one; refinement: one into one
    /// or more) in one transaction: the new memories with the originals' evidence and entities,
    /// every link of an original moved to the first new memory in both directions, and the
    /// originals archived with `superseded_by` and the reason. Journaled with the exact prior rows.
    ///
    /// Nothing changes (the answer is applied with a note) when an original is no longer active,
    /// a new text would duplicate another active memory, or the run's cap would be passed.
    pub async fn apply_replacement(self, input: &Replacement) -> Result<StageOutcome> {
        let new_texts = distinct_texts(&input.new_texts);
        let original_ids: Vec<String> = input.originals.iter().map(ToString::to_string).collect();
        self.write(async |tx| {
            if let Some(problem) = tx.replacement_problem(input, &original_ids, &new_texts).await? {
                return tx
                    .settle_without_change(input.request_id, 0, Some(&problem), input.now)
                    .await;
            }
            if !tx
                .claim_answer(input.request_id, new_texts.len(), None, input.now)
                .await?
            {
                tx.unclaimed(input.request_id).await?;
                return Ok(StageOutcome::AlreadyApplied);
            }
            let before = tx
                .capture_rows(Capture {
                    memories: &original_ids,
                    links_of: &original_ids,
                    joins_of_memories: &original_ids,
                    joins_of_entities: &[],
                })
                .await?;
            // Archive first: a new text may normalise to an original's key.
            let reason = format!("{}: {}", input.kind, input.reason);
            tx.archive_originals(&original_ids, &reason, input.now).await?;
            let mut created = Vec::with_capacity(new_texts.len());
            for (position, (text, key)) in new_texts.iter().enumerate() {
                let id = tx
                    .insert_replacement(input, &original_ids[0], position, text, key)
                    .await?;
                tx.inherit_from_originals(&id, &original_ids).await?;
                if let Some(narrowed) = input.narrowed {
                    tx.execute(sql!(
                        "UPDATE memories SET confidence = $2, expires_at = $3 WHERE id = $1",
                        &id,
                        narrowed.confidence,
                        narrowed.expires_at
                    ))
                    .await?;
                }
                created.push(id);
            }
            tx.point_originals_at(&original_ids, &created[0]).await?;
            let n_links = tx.move_links(&original_ids, &created[0], &before.links).await?;
            let after = RowsAfter {
                created_memory_ids: created.clone(),
                created_links: Vec::new(),
                created_joins: Vec::new(),
                n_changed: original_ids.len() as i64,
                detail: json!({ "originals": original_ids, "new_texts": new_texts.iter().map(|(text, _)| text).collect::<Vec<_>>() }),
            };
            let entry = JournalEntry {
                kind: input.kind,
                user_id: input.user_id,
                request_id: Some(input.request_id),
                reason: &input.reason,
                now: input.now,
            };
            let operation_id = tx.journal(entry, &before, &after).await?;
            Ok(StageOutcome::Applied(StageApplied {
                n_links,
                n_memories_created: created.len() as u64,
                n_memories_archived: original_ids.len() as u64,
                n_entities_changed: 0,
                operation_id: Some(operation_id),
                note: None,
            }))
        })
        .await
    }

    /// Counts a refinement the model (or validation) turned down: one more rejection, and the
    /// cooldown restarts; journaled as `refine_reject`.
    pub async fn apply_refinement_rejection(
        self,
        request_id: RequestId,
        user_id: UserId,
        memory_id: MemoryId,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        self.write(async |tx| {
            let Some(before) = tx
                .claim_and_capture_memory(request_id, memory_id, 0, Some(reason), now)
                .await?
            else {
                return Ok(StageOutcome::AlreadyApplied);
            };
            let updated = tx
                .execute(sql!(
                    "UPDATE memories SET refinement_rejections = refinement_rejections + 1, refined_at = $3
                     WHERE id = $1 AND user_id = $2",
                    memory_id,
                    user_id,
                    now
                ))
                .await?;
            let operation_id = if updated == 1 {
                let after = RowsAfter {
                    detail: json!({ "memory_id": memory_id.to_string() }),
                    ..RowsAfter::default()
                };
                let entry = JournalEntry {
                    kind: "refine_reject",
                    user_id,
                    request_id: Some(request_id),
                    reason,
                    now,
                };
                Some(tx.journal(entry, &before, &after).await?)
            } else {
                None
            };
            Ok(StageOutcome::Applied(StageApplied {
                operation_id,
                note: Some(reason.to_owned()),
                ..StageApplied::default()
            }))
        })
        .await
    }

    /// Applies a reviewer's narrowing that keeps the text: a lower confidence and/or an earlier
    /// expiry (the caller has checked it narrows); journaled as `review_narrow`.
    pub async fn apply_narrowing(
        self,
        request_id: RequestId,
        user_id: UserId,
        memory_id: MemoryId,
        confidence: f64,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<StageOutcome> {
        self.write(async |tx| {
            let Some(before) = tx.claim_and_capture_memory(request_id, memory_id, 1, None, now).await? else {
                return Ok(StageOutcome::AlreadyApplied);
            };
            let updated = tx
                .execute(sql!(
                    "UPDATE memories SET confidence = $3, expires_at = $4, updated_at = $5
                     WHERE id = $1 AND user_id = $2 AND archived_at IS NULL",
                    memory_id,
                    user_id,
                    confidence,
                    expires_at,
                    now
                ))
                .await?;
            let operation_id = if updated == 1 {
                let after = RowsAfter {
                    detail: json!({ "memory_id": memory_id.to_string(), "confidence": confidence, "expires_at": expires_at }),
                    ..RowsAfter::default()
                };
                let entry = JournalEntry {
                    kind: "review_narrow",
                    user_id,
                    request_id: Some(request_id),
                    reason: "extraction reviewer",
                    now,
                };
                Some(tx.journal(entry, &before, &after).await?)
            } else {
                None
            };
            Ok(StageOutcome::Applied(StageApplied {
                operation_id,
                note: (updated == 0).then(|| "the memory is no longer active".to_owned()),
                ..StageApplied::default()
            }))
        })
        .await
    }
}

impl crate::tx::WriteTx {
    /// Claims an answer about one memory and copies that memory's state for the journal; `None`
    /// when an earlier apply already wrote the answer.
    async fn claim_and_capture_memory(
        &mut self,
        request_id: RequestId,
        memory_id: MemoryId,
        n_items: usize,
        note: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<crate::journal::RowsBefore>> {
        if !self.claim_answer(request_id, n_items, note, now).await? {
            self.unclaimed(request_id).await?;
            return Ok(None);
        }
        let ids = [memory_id.to_string()];
        let before = self
            .capture_rows(Capture {
                memories: &ids,
                ..Capture::default()
            })
            .await?;
        Ok(Some(before))
    }

    /// Why a replacement cannot be written, if it cannot: nothing to write, an original no longer
    /// active, a new text another active memory already says or the user erased, or the run's cap.
    /// Every check runs; the first problem found is the one reported.
    async fn replacement_problem(
        &mut self,
        input: &Replacement,
        original_ids: &[String],
        new_texts: &[(String, String)],
    ) -> Result<Option<String>> {
        let mut problem = None;
        if new_texts.is_empty() || original_ids.is_empty() {
            problem = Some("nothing to write".to_owned());
        }
        for id in original_ids {
            let active: Option<String> = self
                .scalar_optional(sql!(
                    "SELECT id FROM memories WHERE id = $1 AND user_id = $2 AND archived_at IS NULL",
                    id,
                    input.user_id
                ))
                .await?;
            if active.is_none() {
                problem.get_or_insert_with(|| format!("memory {id} is no longer active"));
            }
        }
        for (text, key) in new_texts {
            let taken: Option<String> = self
                .scalar_optional(sql!(
                    "SELECT id FROM memories WHERE user_id = $1 AND dedupe_key = $2 AND archived_at IS NULL",
                    input.user_id,
                    key
                ))
                .await?;
            if let Some(taken) = taken.filter(|id| !original_ids.contains(id)) {
                problem.get_or_insert_with(|| format!("memory {taken} already says `{text}`"));
            }
            if self.is_tombstoned(input.user_id, key).await? {
                problem.get_or_insert_with(|| "a new text is a fact this user had erased".to_owned());
            }
        }
        let used = self.run_changes(&input.cap.run).await?;
        if used + original_ids.len() as i64 > input.cap.cap {
            problem.get_or_insert_with(|| {
                format!(
                    "the run's cap is reached ({used} of {} memories changed)",
                    input.cap.cap
                )
            });
        }
        Ok(problem)
    }

    /// Archives the replaced memories with the replacement's reason.
    async fn archive_originals(&mut self, original_ids: &[String], reason: &str, now: DateTime<Utc>) -> Result<()> {
        for id in original_ids {
            self.execute(sql!(
                "UPDATE memories SET archived_at = $2, archive_reason = $3, updated_at = $2 WHERE id = $1",
                id,
                now,
                reason
            ))
            .await?;
        }
        Ok(())
    }

    /// Inserts the new memory at `position` of the replacement, starting from the first
    /// original's fields; returns its id.
    async fn insert_replacement(
        &mut self,
        input: &Replacement,
        first_original: &str,
        position: usize,
        text: &str,
        key: &str,
    ) -> Result<String> {
        let vector = input
            .embeddings
            .as_ref()
            .and_then(|(model, vectors)| Some((model.as_str(), vectors.get(position)?)));
        // The new memory starts from the first original's fields; the strongest
        // original's confidence and importance, and any sensitivity, are taken after.
        type Fields = (
            f64,
            f64,
            Option<DateTime<Utc>>,
            Option<DateTime<Utc>>,
            bool,
            String,
            Option<String>,
        );
        let (importance, confidence, happens_at, expires_at, sensitive, temporal, source_segment): Fields = self
            .fetch_one(sql!(
                "SELECT importance, confidence, happens_at, expires_at, sensitive, temporal, source_segment_id
                 FROM memories WHERE id = $1",
                first_original
            ))
            .await?;
        let prompt_version: Option<String> = self
            .scalar_optional(sql!(
                "SELECT prompt_version FROM llm_requests WHERE id = $1",
                input.request_id
            ))
            .await?;
        let model = self.model_of_request(input.request_id).await?;
        let memory = MemoryInsert {
            id: MemoryId::new_v7(),
            user_id: input.user_id,
            text,
            dedupe_key: key,
            importance,
            confidence,
            happens_at,
            expires_at,
            sensitive,
            temporal: &temporal,
            source_segment_id: source_segment.as_deref().and_then(|id| SegmentId::parse(id).ok()),
            source_request_id: Some(input.request_id),
            prompt_version: prompt_version.as_deref().unwrap_or(input.kind),
            model: model.as_deref(),
            refined_at: (input.kind == "refine").then_some(input.now),
            embedding: vector.map(|(model, vector)| (vector_to_le_bytes(vector), model, vector.len() as i64)),
            now: input.now,
        };
        // Checked before inside this transaction, so anything but a write is a race lost to
        // another writer: the error rolls the archiving back, and the answer is tried again.
        match self.insert_memory(&memory).await? {
            Inserted::Written(id) => Ok(id.to_string()),
            other => Err(crate::StoreError::Invalid(format!(
                "the new memory `{text}` could not be written ({other:?}); nothing changed"
            ))),
        }
    }

    /// Gives the new memory the strongest original's confidence and importance, any
    /// sensitivity, and every original's evidence and entities.
    async fn inherit_from_originals(&mut self, id: &str, original_ids: &[String]) -> Result<()> {
        for original in original_ids {
            for column in ["confidence", "importance"] {
                let statement = format!(
                    "UPDATE memories SET {column} = (SELECT o.{column} FROM memories o WHERE o.id = $2)
                     WHERE id = $1 AND {column} < (SELECT o.{column} FROM memories o WHERE o.id = $2)"
                );
                self.execute(sql!(&statement, id, original)).await?;
            }
            self.execute(sql!(
                "UPDATE memories SET sensitive = TRUE
                 WHERE id = $1 AND EXISTS (SELECT 1 FROM memories o WHERE o.id = $2 AND o.sensitive = TRUE)",
                id,
                original
            ))
            .await?;
            self.execute(sql!(
                "INSERT INTO memory_evidence (memory_id, message_id)
                 SELECT $1, message_id FROM memory_evidence WHERE memory_id = $2 ON CONFLICT DO NOTHING",
                id,
                original
            ))
            .await?;
            self.execute(sql!(
                "INSERT INTO memory_entities (memory_id, entity_id)
                 SELECT $1, entity_id FROM memory_entities WHERE memory_id = $2 ON CONFLICT DO NOTHING",
                id,
                original
            ))
            .await?;
        }
        Ok(())
    }

    /// Points each original at the first new memory (`superseded_by`).
    async fn point_originals_at(&mut self, original_ids: &[String], replacement: &str) -> Result<()> {
        for id in original_ids {
            self.execute(sql!(
                "UPDATE memories SET superseded_by = $2 WHERE id = $1",
                id,
                replacement
            ))
            .await?;
        }
        Ok(())
    }

    /// Links move to the first new memory in both directions; a link between two originals would
    /// become a self-link and is dropped. Returns how many links were written.
    async fn move_links(&mut self, original_ids: &[String], replacement: &str, links: &[LinkRow]) -> Result<u64> {
        let moved = |id: &String| {
            if original_ids.contains(id) {
                replacement.to_owned()
            } else {
                id.clone()
            }
        };
        let mut n_links = 0;
        for link in links {
            let moved_link = LinkRow {
                source_id: moved(&link.source_id),
                target_id: moved(&link.target_id),
                ..link.clone()
            };
            if moved_link.source_id != moved_link.target_id && self.insert_link(&moved_link, false).await? {
                n_links += 1;
            }
        }
        for id in original_ids {
            self.execute(sql!(
                "DELETE FROM memory_links WHERE source_id = $1 OR target_id = $1",
                id
            ))
            .await?;
        }
        Ok(n_links)
    }
}
