//! What post-processing stages plan from: the memories, entities and segments each stage looks
//! at, and recording a stage's requests together with the memories they cover.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use memsift_core::request::RequestSubject;
use memsift_core::status::Purpose;
use memsift_core::{MemoryId, RequestId, SegmentId, UserId};
use serde_json::Value;
use sqlx::types::Json;

use super::{Covered, EntityRow, ProposalToReview, RefinementRules, ReviewMemory, StageMemory};
use crate::handles::Stages;
use crate::requests::NewRequest;
use crate::tx::sql;
use crate::{Result, corrupt};

impl Stages<'_> {
    /// Records post-processing requests and marks the memories they cover (`related_at` for
    /// relationship classification, `reviewed_at` for the extraction reviewer) in one transaction,
    /// so a crash plans all of them or none and nothing is planned twice.
    pub async fn plan_stage_requests(
        self,
        requests: &[NewRequest],
        covered: &Covered<'_>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.write(async |tx| {
            for request in requests {
                // An erased user's request is not inserted, and their memories are gone.
                tx.insert_planned_request(request, now).await?;
            }
            for (ids, statement) in [
                (covered.related, "UPDATE memories SET related_at = $2 WHERE id = $1"),
                (covered.reviewed, "UPDATE memories SET reviewed_at = $2 WHERE id = $1"),
            ] {
                for id in ids {
                    tx.execute(sql!(statement, id, now)).await?;
                }
            }
            Ok(())
        })
        .await
    }

    /// Active memories written by extraction at or after `since` that the reviewer has not looked
    /// at, oldest first.
    pub async fn memories_to_review(self, since: DateTime<Utc>, limit: i64) -> Result<Vec<ReviewMemory>> {
        self.read_all(sql!(
            "SELECT m.id, m.user_id, m.text, m.confidence, m.happens_at, m.expires_at, m.temporal FROM memories m
                 JOIN llm_requests r ON r.id = m.source_request_id
                 WHERE m.archived_at IS NULL AND m.reviewed_at IS NULL AND r.purpose = 'extraction'
                   AND m.created_at >= $1
                 ORDER BY m.created_at, m.id LIMIT $2",
            since,
            limit
        ))
        .await
    }

    /// The reviewer's backlog: active memories written by extraction, whenever, that it has not
    /// looked at, oldest first; `user_id` only, when given.
    pub async fn review_backlog(self, user_id: Option<UserId>, limit: i64) -> Result<Vec<ReviewMemory>> {
        match user_id {
            Some(user_id) => {
                self.read_all(sql!(
                    "SELECT m.id, m.user_id, m.text, m.confidence, m.happens_at, m.expires_at, m.temporal
                     FROM memories m JOIN llm_requests r ON r.id = m.source_request_id
                     WHERE m.user_id = $1 AND m.archived_at IS NULL AND m.reviewed_at IS NULL
                       AND r.purpose = 'extraction'
                     ORDER BY m.created_at, m.id LIMIT $2",
                    user_id,
                    limit
                ))
                .await
            }
            None => {
                self.read_all(sql!(
                    "SELECT m.id, m.user_id, m.text, m.confidence, m.happens_at, m.expires_at, m.temporal
                     FROM memories m JOIN llm_requests r ON r.id = m.source_request_id
                     WHERE m.archived_at IS NULL AND m.reviewed_at IS NULL AND r.purpose = 'extraction'
                     ORDER BY m.created_at, m.id LIMIT $1",
                    limit
                ))
                .await
            }
        }
    }

    /// Records whether the switch `name` is on and returns since when (`None` when off): the
    /// first call that finds it on records `now`, a call that finds it off forgets it, so
    /// switching off and on again starts afresh. Writes only when the state changes.
    pub async fn switch_on_since(self, name: &str, on: bool, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
        let since: Option<DateTime<Utc>> = self
            .read_scalar_optional(sql!("SELECT on_since FROM switches WHERE name = $1", name))
            .await?;
        match (on, since) {
            (true, Some(since)) => Ok(Some(since)),
            (false, None) => Ok(None),
            (true, None) => {
                self.write(async |tx| {
                    tx.execute(sql!(
                        "INSERT INTO switches (name, on_since) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
                        name,
                        now
                    ))
                    .await?;
                    Ok(())
                })
                .await?;
                let since: Option<DateTime<Utc>> = self
                    .read_scalar_optional(sql!("SELECT on_since FROM switches WHERE name = $1", name))
                    .await?;
                Ok(since.or(Some(now)))
            }
            (false, Some(_)) => {
                self.write(async |tx| {
                    tx.execute(sql!("DELETE FROM switches WHERE name = $1", name)).await?;
                    Ok(())
                })
                .await?;
                Ok(None)
            }
        }
    }

    /// One active memory as the reviewer sees it.
    pub async fn review_memory(self, user_id: UserId, memory_id: MemoryId) -> Result<Option<ReviewMemory>> {
        self.read_optional(sql!(
            "SELECT id, user_id, text, confidence, happens_at, expires_at, temporal FROM memories
                 WHERE id = $1 AND user_id = $2 AND archived_at IS NULL",
            memory_id,
            user_id
        ))
        .await
    }

    /// Users with at least one active memory: (id, external id), in id order.
    pub async fn users_with_memories(self) -> Result<Vec<(UserId, String)>> {
        let rows: Vec<(String, String)> = self
            .read_all(sql!(
                "SELECT u.id, u.external_id FROM users u
                 WHERE EXISTS (SELECT 1 FROM memories m WHERE m.user_id = u.id AND m.archived_at IS NULL)
                 ORDER BY u.id"
            ))
            .await?;
        rows.into_iter()
            .map(|(id, external)| Ok((UserId::parse(&id).map_err(|error| corrupt("users", error))?, external)))
            .collect()
    }

    /// How many active memories a user has (the base of every stage's cap).
    pub async fn active_memory_count(self, user_id: UserId) -> Result<i64> {
        self.read_scalar_one::<i64>(sql!(
            "SELECT COUNT(*) FROM memories WHERE user_id = $1 AND archived_at IS NULL",
            user_id
        ))
        .await
    }

    /// Active memories relationship classification has not covered yet, oldest first.
    pub async fn memories_to_relate(self, user_id: UserId, limit: i64) -> Result<Vec<StageMemory>> {
        let rows: Vec<(String, String, Json<Value>)> = self
            .read_all(sql!(
                "SELECT id, text, link_hints FROM memories
                 WHERE user_id = $1 AND archived_at IS NULL AND related_at IS NULL
                 ORDER BY created_at, id LIMIT $2",
                user_id,
                limit
            ))
            .await?;
        rows.into_iter()
            .map(|(id, text, Json(hints))| {
                Ok(StageMemory {
                    id: MemoryId::parse(&id).map_err(|error| corrupt("memories", error))?,
                    text,
                    link_hints: super::read_link_hints(hints),
                })
            })
            .collect()
    }

    /// When each of `ids` (`user_id`'s memories) was said: the latest time of the turns it cites
    /// as evidence, or when it was written when it cites none. Relationship pairs are judged
    /// newer against older by this, not by when a memory row happened to be written (an import
    /// of old conversations writes old facts last). Ids of other users' memories are skipped.
    pub async fn memory_said_at(
        self,
        user_id: UserId,
        ids: &[MemoryId],
    ) -> Result<std::collections::HashMap<MemoryId, DateTime<Utc>>> {
        let mut said = std::collections::HashMap::with_capacity(ids.len());
        for &id in ids {
            let evidence: Option<Option<DateTime<Utc>>> = self
                .read_scalar_optional(sql!(
                    "SELECT MAX(g.created_at) FROM memories m
                     JOIN memory_evidence e ON e.memory_id = m.id
                     JOIN messages g ON g.id = e.message_id
                     WHERE m.id = $1 AND m.user_id = $2",
                    id,
                    user_id
                ))
                .await?;
            let at = match evidence.flatten() {
                Some(at) => Some(at),
                None => {
                    self.read_scalar_optional(sql!(
                        "SELECT created_at FROM memories WHERE id = $1 AND user_id = $2",
                        id,
                        user_id
                    ))
                    .await?
                }
            };
            if let Some(at) = at {
                said.insert(id, at);
            }
        }
        Ok(said)
    }

    /// A user's active memories in hub order: most important, then most linked, then oldest.
    pub async fn memory_hubs(self, user_id: UserId) -> Result<Vec<MemoryId>> {
        let ids: Vec<String> = self
            .read_scalar_all(sql!(
                "SELECT m.id FROM memories m
                 WHERE m.user_id = $1 AND m.archived_at IS NULL
                 ORDER BY m.importance DESC,
                          (SELECT COUNT(*) FROM memory_links l WHERE l.source_id = m.id OR l.target_id = m.id) DESC,
                          m.created_at, m.id",
                user_id
            ))
            .await?;
        ids.iter()
            .map(|id| MemoryId::parse(id).map_err(|error| corrupt("memories", error)))
            .collect()
    }

    /// Pairs of a user's memories linked with one of `kinds` (either direction).
    pub async fn linked_pairs(self, user_id: UserId, kinds: &[&str]) -> Result<Vec<(MemoryId, MemoryId)>> {
        let mut pairs = Vec::new();
        for kind in kinds {
            let rows: Vec<(String, String)> = self
                .read_all(sql!(
                    "SELECT l.source_id, l.target_id FROM memory_links l JOIN memories m ON m.id = l.source_id
                     WHERE m.user_id = $1 AND l.kind = $2",
                    user_id,
                    *kind
                ))
                .await?;
            for (source, target) in rows {
                let parse = |id: &str| MemoryId::parse(id).map_err(|error| corrupt("memory_links", error));
                pairs.push((parse(&source)?, parse(&target)?));
            }
        }
        Ok(pairs)
    }

    /// Memories named by a user's requests of `purposes` that are still in flight (planned,
    /// submitted, answered but unapplied, or failed and waiting for a retry): a stage never plans
    /// a memory twice at once.
    pub async fn memories_in_flight(self, user_id: UserId, purposes: &[Purpose]) -> Result<HashSet<MemoryId>> {
        let mut ids = HashSet::new();
        for purpose in purposes {
            let subjects: Vec<Json<Value>> = self.read_scalar_all(sql!("SELECT subject FROM llm_requests
                     WHERE user_id = $1 AND purpose = $2 AND status IN ('planned', 'submitted', 'succeeded', 'errored', 'expired', 'canceled')", user_id, purpose.as_str())).await?;
            for Json(subject) in subjects {
                // A subject that does not read is no reason to stop planning; it names nothing.
                let subject: RequestSubject = crate::from_json("llm_requests", subject).unwrap_or_default();
                ids.extend(subject.memory_ids());
            }
        }
        Ok(ids)
    }

    /// The sets of memories a consolidation answer or its review kept as they were
    /// ([`Stages::apply_kept`]), each sorted. A set whose members all stay active is the same
    /// question with the same answer; one that changed has new ids and is asked again.
    pub async fn kept_clusters(self, user_id: UserId) -> Result<HashSet<Vec<MemoryId>>> {
        let subjects: Vec<Json<Value>> = self
            .read_scalar_all(sql!(
                "SELECT subject FROM llm_requests
                 WHERE user_id = $1 AND purpose IN ('consolidation', 'consolidation_review') AND verdict = $2",
                user_id,
                super::KEPT_VERDICT
            ))
            .await?;
        Ok(subjects
            .into_iter()
            .filter_map(|Json(subject)| crate::from_json::<RequestSubject>("llm_requests", subject).ok())
            .map(|subject| {
                let mut members = subject.members;
                members.sort();
                members
            })
            .filter(|members| !members.is_empty())
            .collect())
    }

    /// Memories refinement may look at: active, longer than `min_chars`, written at least
    /// `min_age_days` ago, read at least `min_reads` times, not refined within `cooldown_days`,
    /// and rejected fewer than `max_rejections` times; oldest first.
    pub async fn refinement_candidates(
        self,
        user_id: UserId,
        now: DateTime<Utc>,
        rules: &RefinementRules,
    ) -> Result<Vec<StageMemory>> {
        let rows: Vec<(String, String)> = self
            .read_all(sql!(
                "SELECT id, text FROM memories
                 WHERE user_id = $1 AND archived_at IS NULL AND LENGTH(text) > $2 AND created_at <= $3
                   AND access_count >= $4 AND (refined_at IS NULL OR refined_at <= $5) AND refinement_rejections < $6
                 ORDER BY created_at, id",
                user_id,
                rules.min_chars,
                now - chrono::Duration::days(rules.min_age_days),
                rules.min_reads,
                now - chrono::Duration::days(rules.cooldown_days),
                rules.max_rejections
            ))
            .await?;
        rows.into_iter()
            .map(|(id, text)| {
                Ok(StageMemory {
                    id: MemoryId::parse(&id).map_err(|error| corrupt("memories", error))?,
                    text,
                    link_hints: Vec::new(),
                })
            })
            .collect()
    }

    /// A user's active entities.
    pub async fn user_entities(self, user_id: UserId) -> Result<Vec<EntityRow>> {
        self.read_all(sql!(
            "SELECT id, name, kind, link_count FROM entities WHERE user_id = $1 AND archived_at IS NULL
                 ORDER BY normalized_name, id",
            user_id
        ))
        .await
    }

    /// Entities entity GC reviews: active, linked from `min_links..=max_links` memories, and not
    /// linked for `dormant_days`; none with a review in flight.
    pub async fn dormant_entities(
        self,
        user_id: UserId,
        now: DateTime<Utc>,
        dormant_days: i64,
        min_links: i64,
        max_links: i64,
    ) -> Result<Vec<EntityRow>> {
        self.read_all(sql!("SELECT e.id, e.name, e.kind, e.link_count FROM entities e
                 WHERE e.user_id = $1 AND e.archived_at IS NULL AND e.link_count BETWEEN $2 AND $3
                   AND COALESCE(e.last_linked_at, e.created_at) <= $4
                   AND NOT EXISTS (SELECT 1 FROM llm_requests r
                                   WHERE r.user_id = e.user_id AND r.purpose = 'entity_gc'
                                     AND r.status IN ('planned', 'submitted', 'succeeded', 'errored', 'expired', 'canceled')
                                     AND r.subject_entity_id = e.id)
                 ORDER BY e.normalized_name, e.id", user_id, min_links, max_links, now - chrono::Duration::days(dormant_days))).await
    }

    /// Texts of up to `limit` active memories joined to an entity.
    pub async fn entity_memory_texts(self, entity_id: &str, limit: i64) -> Result<Vec<String>> {
        self.read_scalar_all(sql!(
            "SELECT m.text FROM memories m JOIN memory_entities j ON j.memory_id = m.id
                 WHERE j.entity_id = $1 AND m.archived_at IS NULL ORDER BY m.created_at, m.id LIMIT $2",
            entity_id,
            limit
        ))
        .await
    }

    /// Extracted segments with no live summary and no summary request in flight: (segment, user).
    pub async fn segments_to_summarize(self, limit: i64) -> Result<Vec<(SegmentId, UserId)>> {
        let rows: Vec<(String, String)> = self.read_all(sql!("SELECT s.id, s.user_id FROM segments s
                 WHERE s.status = 'extracted'
                   AND NOT EXISTS (SELECT 1 FROM segment_summaries x WHERE x.segment_id = s.id AND x.superseded_at IS NULL)
                   AND NOT EXISTS (SELECT 1 FROM llm_requests r WHERE r.segment_id = s.id AND r.purpose = 'summary'
                                     AND r.status IN ('planned', 'submitted', 'succeeded', 'errored', 'expired', 'canceled', 'applied'))
                 ORDER BY s.id LIMIT $1", limit)).await?;
        rows.into_iter()
            .map(|(segment, user)| {
                Ok((
                    SegmentId::parse(&segment).map_err(|error| corrupt("segments", error))?,
                    UserId::parse(&user).map_err(|error| corrupt("segments", error))?,
                ))
            })
            .collect()
    }

    /// What post-processing shapes, store-wide: (active memories, archived memories, links by
    /// kind, active entities, live segment summaries).
    pub async fn postprocess_shape(self) -> Result<(i64, i64, std::collections::BTreeMap<String, i64>, i64, i64)> {
        Ok({
            let (active, archived): (i64, i64) = self
                .read_one(sql!(
                    "SELECT CAST(COALESCE(SUM(CASE WHEN archived_at IS NULL THEN 1 ELSE 0 END), 0) AS BIGINT),
                        CAST(COALESCE(SUM(CASE WHEN archived_at IS NULL THEN 0 ELSE 1 END), 0) AS BIGINT)
                 FROM memories"
                ))
                .await?;
            let links: Vec<(String, i64)> = self
                .read_all(sql!(
                    "SELECT kind, COUNT(*) FROM memory_links GROUP BY kind ORDER BY kind"
                ))
                .await?;
            let entities: i64 = self
                .read_scalar_one(sql!("SELECT COUNT(*) FROM entities WHERE archived_at IS NULL"))
                .await?;
            let summaries: i64 = self
                .read_scalar_one(sql!(
                    "SELECT COUNT(*) FROM segment_summaries WHERE superseded_at IS NULL"
                ))
                .await?;
            (active, archived, links.into_iter().collect(), entities, summaries)
        })
    }

    /// Applied consolidation proposals whose review is not planned yet.
    pub async fn proposals_to_review(self, limit: i64) -> Result<Vec<ProposalToReview>> {
        let rows: Vec<(String, String, Json<Value>, Option<String>)> = self
            .read_all(sql!(
                "SELECT r.id, r.user_id, r.subject, r.raw_output FROM llm_requests r
                 WHERE r.purpose = 'consolidation' AND r.status = 'applied' AND r.n_items = 1
                   AND NOT EXISTS (SELECT 1 FROM llm_requests v WHERE v.parent_request_id = r.id)
                 ORDER BY r.applied_at, r.id LIMIT $1",
                limit
            ))
            .await?;
        rows.into_iter()
            .filter_map(|(id, user, Json(subject), raw)| raw.map(|raw| (id, user, subject, raw)))
            .map(|(id, user, subject, raw_output)| {
                Ok(ProposalToReview {
                    request_id: RequestId::parse(&id).map_err(|error| corrupt("llm_requests", error))?,
                    user_id: UserId::parse(&user).map_err(|error| corrupt("llm_requests", error))?,
                    subject: crate::from_json("llm_requests", subject)?,
                    raw_output,
                })
            })
            .collect()
    }
}
